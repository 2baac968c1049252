package testbed

import (
	"testing"

	"github.com/lumina-go/lumina/live"
)

// The netns testbed: the same scenario as the simulator's Listing 2 test, run through real veth pairs, the
// real-time switch and dumpers, and two software RNICs. Timing differs from the simulator; the structure of
// the trace must not: the injected drops happen, go-back-N recovers the first by a NAK and the second by a
// timeout, and the trace is complete.
func TestNetnsListing2(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("the netns testbed needs root and network namespaces: %v", err)
	}
	sc := load(t, "testbed: netns\n"+listing2)
	o := run(t, sc, t.TempDir())
	d := o.Doc
	if !d.Integrity.OK {
		t.Fatalf("integrity %+v", d.Integrity)
	}
	for _, c := range d.Checks {
		if c.Analyzer == "gbn" && !c.OK {
			t.Errorf("gbn qp %d: %+v", c.QP, c.Violations)
		}
	}
	if len(d.Retransmissions) != 2 {
		t.Fatalf("retransmissions %+v, want the two drops of qp 2 psn 5", d.Retransmissions)
	}
	for i, want := range []string{"nack", "timeout"} {
		r := d.Retransmissions[i]
		if r.QP != 2 || r.PSN != 5 || r.Iter != i+1 || r.Trigger == nil || *r.Trigger != want {
			t.Errorf("retransmission %d: qp %d psn %d iter %d trigger %v, want %s", i, r.QP, r.PSN, r.Iter, r.Trigger, want)
		}
	}
	for _, tr := range o.Traffic {
		if tr.Status != "ok" || tr.Completed != 10 {
			t.Errorf("qp %d: %s, %d of 10 messages", tr.QP, tr.Status, tr.Completed)
		}
	}
}
