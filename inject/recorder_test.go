package inject

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// A Recorder that keeps every packet and one that keeps the latest only answer the same for the packet just
// mirrored; the latter forgets the earlier ones and holds no history.
func TestRecorderLatest(t *testing.T) {
	conn := fig2("write")
	conn.ReqIPSN = 1
	cfg := Config{Conns: []ConnMeta{conn}, Intents: []Intent{{PSN: 1, Iter: 1, Action: roce.EventDrop, Source: "x"}}}
	all := &Recorder{Switch: newSwitch(t, cfg)}
	latest := &Recorder{Switch: newSwitch(t, cfg), Latest: true}
	var va, vl Verdict
	for i, psn := range []roce.PSN{1, 2, 3, 2, 3} {
		all.Process(int64(i), 0, build(t, wr(psn)), &va)
		latest.Process(int64(i), 0, build(t, wr(psn)), &vl)
		if va.Seq != vl.Seq || va.Seq == 0 {
			t.Fatalf("packet %d: seq %d and %d", i, va.Seq, vl.Seq)
		}
		c1, i1, ok1 := all.Annotation(va.Seq)
		c2, i2, ok2 := latest.Annotation(vl.Seq)
		if !ok1 || !ok2 || c1 != c2 || i1 != i2 {
			t.Errorf("packet %d: all (%d, %d, %v), latest (%d, %d, %v)", i, c1, i1, ok1, c2, i2, ok2)
		}
		if _, _, ok := latest.Annotation(vl.Seq - 1); vl.Seq > 1 && ok {
			t.Errorf("packet %d: the latest-only recorder still answers for seq %d", i, vl.Seq-1)
		}
	}
	if _, iter, _ := all.Annotation(4); iter != 2 {
		t.Errorf("the retransmitted PSN 2 has ITER %d, want 2", iter)
	}
	if len(latest.Iter) != 0 || len(latest.Conn) != 0 || len(all.Iter) != 5 {
		t.Errorf("history: latest %d entries, all %d; want 0 and 5", len(latest.Iter), len(all.Iter))
	}
}
