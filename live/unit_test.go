package live

import (
	"container/heap"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/roce"
)

// block builds a V3 block holding frames, laid out as the kernel does.
func block(size int, frames ...[]byte) []byte {
	b := make([]byte, size)
	ne.PutUint32(b[bdNumPkts:], uint32(len(frames)))
	ne.PutUint32(b[bdFirst:], bdHdrLen)
	off := bdHdrLen
	for i, f := range frames {
		h := b[off:]
		ne.PutUint32(h[v3Sec:], 10)
		ne.PutUint32(h[v3Nsec:], uint32(i))
		ne.PutUint32(h[v3Snap:], uint32(len(f)))
		ne.PutUint32(h[v3Len:], uint32(len(f)+100))
		ne.PutUint16(h[v3Mac:], v3HdrLen+2)
		copy(h[v3HdrLen+2:], f)
		next := (v3HdrLen + 2 + len(f) + 15) &^ 15
		if i < len(frames)-1 {
			ne.PutUint32(h[v3Next:], uint32(next))
		}
		off += next
	}
	return b
}

func TestWalkBlockV3(t *testing.T) {
	b := block(4096, []byte("first frame"), []byte("second"), []byte("third!"))
	var got []string
	var ts []int64
	var wire []int
	n, err := walkBlockV3(b, func(f []byte, t int64, w int) {
		got = append(got, string(f))
		ts = append(ts, t)
		wire = append(wire, w)
	})
	if err != nil || n != 3 {
		t.Fatalf("walk: %d frames, %v; want 3, nil", n, err)
	}
	if strings.Join(got, ",") != "first frame,second,third!" || ts[2] != 10e9+2 || wire[1] != 106 {
		t.Fatalf("frames %q ts %v wire %v", got, ts, wire)
	}
}

func TestWalkBlockV3RejectsBadOffsets(t *testing.T) {
	cases := map[string]func(b []byte){
		"first offset outside":               func(b []byte) { ne.PutUint32(b[bdFirst:], 1<<20) },
		"first offset inside the descriptor": func(b []byte) { ne.PutUint32(b[bdFirst:], 8) },
		"snaplen overruns":                   func(b []byte) { ne.PutUint32(b[bdHdrLen+v3Snap:], 5000) },
		"next offset outside":                func(b []byte) { ne.PutUint32(b[bdHdrLen+v3Next:], 1<<30) },
		"missing next":                       func(b []byte) { ne.PutUint32(b[bdHdrLen+v3Next:], 0) },
		"more packets claimed":               func(b []byte) { ne.PutUint32(b[bdNumPkts:], 9) },
	}
	for name, mangle := range cases {
		t.Run(name, func(t *testing.T) {
			b := block(1024, []byte("aaaa"), []byte("bbbb"))
			mangle(b)
			calls := 0
			_, err := walkBlockV3(b, func([]byte, int64, int) { calls++ })
			if err == nil {
				t.Fatalf("walk accepted a bad block (%d frames handed over)", calls)
			}
			if !strings.Contains(err.Error(), "byte") {
				t.Errorf("error %q does not say where", err)
			}
		})
	}
	if _, err := walkBlockV3(make([]byte, 10), nil); err == nil {
		t.Fatal("walk accepted a 10-byte block")
	}
}

func TestParseV2(t *testing.T) {
	slot := make([]byte, 256)
	ne.PutUint32(slot[v2Len:], 1500)
	ne.PutUint32(slot[v2Snap:], 20)
	ne.PutUint16(slot[v2Mac:], 66)
	ne.PutUint32(slot[v2Sec:], 3)
	ne.PutUint32(slot[v2Nsec:], 4)
	copy(slot[66:], "0123456789abcdefghij")
	f, ts, wire, err := parseV2(slot)
	if err != nil || string(f) != "0123456789abcdefghij" || ts != 3e9+4 || wire != 1500 {
		t.Fatalf("parseV2 = %q %d %d %v", f, ts, wire, err)
	}
	ne.PutUint32(slot[v2Snap:], 250)
	if _, _, _, err := parseV2(slot); err == nil {
		t.Fatal("parseV2 accepted a frame overrunning its slot")
	}
	if _, _, _, err := parseV2(slot[:16]); err == nil {
		t.Fatal("parseV2 accepted a 16-byte slot")
	}
}

func TestRingConfigValidation(t *testing.T) {
	bad := []RingConfig{{Version: 4}, {BlockSize: 1000}, {FrameSize: 100}, {FrameSize: 3000}, {NumBlocks: -1}}
	for _, c := range bad {
		if err := c.normalize(); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
	c := RingConfig{}
	if err := c.normalize(); err != nil || c.Version != RingV2 || c.FrameSize != 2048 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

func frameFor(t *testing.T, src, dst string, op roce.Opcode, qpn uint32, psn roce.PSN) []byte {
	t.Helper()
	p := roce.Packet{Version: roce.RoCEv2, TTL: 64, SrcIP: mustAddr(src), DstIP: mustAddr(dst), UDPSrc: 0xc000,
		BTH: roce.BTH{Opcode: op, PKey: 0xffff, DestQP: qpn, PSN: psn}, PayloadLen: 32}
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLearnerLearnsFirstPSNAndKeepsGlobalMirrorOrder(t *testing.T) {
	l, err := NewLearner(LearnConfig{DumperWeights: []int{1, 1}, RewritePort: 9741, Intents: []inject.Intent{
		{Conn: 0, Kind: inject.KindData, PSN: 1, Iter: 1, Action: roce.EventDrop},
		{Conn: 1, Kind: inject.KindData, PSN: 0, Iter: 2, Action: roce.EventECN},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var v inject.Verdict
	type step struct {
		f       []byte
		forward bool
		conn    int
		event   roce.EventType
	}
	steps := []step{
		{frameFor(t, "10.0.0.1", "10.0.0.2", roce.RCWriteMiddle, 5, 100), true, 0, 0}, // learned: IPSN 100
		{frameFor(t, "10.0.0.1", "10.0.0.2", roce.RCAcknowledge, 5, 100), true, 0, 0}, // not data
		{frameFor(t, "10.0.0.1", "10.0.0.2", roce.RCWriteMiddle, 5, 101), false, 0, roce.EventDrop},
		{frameFor(t, "10.0.0.3", "10.0.0.2", roce.RCSendOnly, 9, 7), true, 1, 0},             // second connection
		{frameFor(t, "10.0.0.3", "10.0.0.2", roce.RCSendOnly, 9, 7), true, 1, roce.EventECN}, // round 2
		{frameFor(t, "10.0.0.2", "10.0.0.1", roce.RCAcknowledge, 77, 7), true, -1, 0},        // unknown: not learned
	}
	for i, s := range steps {
		l.Process(int64(i*1000), 0, s.f, &v)
		if (len(v.Forward) > 0) != s.forward || v.Event != s.event || v.Conn != s.conn {
			t.Fatalf("step %d: forward %d, event %v, conn %d; want forward %v, event %v, conn %d", i, len(v.Forward), v.Event, v.Conn, s.forward, s.event, s.conn)
		}
		if v.Seq != uint64(i+1) || v.Dumper != i%2 {
			t.Fatalf("step %d: mirror seq %d dumper %d; want %d and %d (one global sequence, round robin)", i, v.Seq, v.Dumper, i+1, i%2)
		}
		m := append([]byte(nil), v.Mirror...)
		if !roce.UndoRSS(m, 9741) {
			t.Fatalf("step %d: mirrored copy is not RSS-rewritten", i)
		}
		md, ok := roce.DecodeMirror(m)
		if !ok || md.Seq != v.Seq || md.TimestampNs != uint64(i*1000) || md.Event != roce.EventType(s.event) {
			t.Fatalf("step %d: metadata %+v; want seq %d ts %d event %v", i, md, v.Seq, i*1000, s.event)
		}
	}
	ls := l.Learned()
	if len(ls) != 2 || ls[0].ReqIPSN != 100 || ls[1].ReqIPSN != 7 || ls[1].Verb != "send" {
		t.Fatalf("learned %+v", ls)
	}
	c := l.Counters()
	if c.Mirrored != 6 || c.Dropped != 1 || c.Events["ecn"] != 1 || c.MirroredPerDumper[1] != 3 {
		t.Fatalf("counters %+v", c)
	}
	if es := l.Entries(); len(es) != 2 || es[1].Conn != 1 || es[1].Hits != 1 {
		t.Fatalf("entries %+v", es)
	}
}

func TestLearnerRejectsNonDataIntents(t *testing.T) {
	_, err := NewLearner(LearnConfig{Intents: []inject.Intent{{Conn: 0, Kind: inject.KindNAK, Action: roce.EventDrop, Source: "scn.yaml:12"}}})
	if err == nil || !strings.Contains(err.Error(), "scn.yaml:12") || !strings.Contains(err.Error(), "nak") {
		t.Fatalf("error %v; want one naming the intent and the kind", err)
	}
}

func TestControlPlane(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var installed []inject.Logic
	go ServeControl(ctx, ln, func(cs []inject.ConnMeta) (inject.Logic, error) {
		return inject.New(inject.Config{Conns: cs, Intents: []inject.Intent{{Conn: 0, Kind: inject.KindData, PSN: 2, Action: roce.EventDrop}}})
	}, func(_ context.Context, l inject.Logic) error { installed = append(installed, l); return nil })
	meta := []inject.ConnMeta{{Index: 0, Verb: "write", ReqIP: mustAddr("10.0.0.1"), RespIP: mustAddr("10.0.0.2"), ReqQPN: 3, RespQPN: 4, ReqIPSN: 77}}
	rep, err := SendMetadata(ctx, ln.Addr().String(), meta)
	if err != nil || !rep.Ready || rep.Entries != 1 || len(installed) != 1 {
		t.Fatalf("reply %+v, %v, %d installed; want ready, 1 entry", rep, err, len(installed))
	}
	es := installed[0].(*inject.Switch).Entries()
	if es[0].PSN != 79 {
		t.Fatalf("entry PSN %d; want 79 (initial PSN 77 + 2)", es[0].PSN)
	}
	// A bad message is answered with an error saying what was wrong, and installs nothing.
	bad := meta
	bad[0].Verb = "atomic"
	_, err = SendMetadata(ctx, ln.Addr().String(), bad)
	if err == nil || !strings.Contains(err.Error(), "atomic") || !strings.Contains(err.Error(), "line 1") || len(installed) != 1 {
		t.Fatalf("bad metadata: %v (%d installed)", err, len(installed))
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("{\"conns\": 5}\n"))
	var r ControlReply
	if err := json.NewDecoder(c).Decode(&r); err != nil || r.Ready || !strings.Contains(r.Error, "decoding") {
		t.Fatalf("garbage reply %+v %v", r, err)
	}
}

func TestDelayQueueOrder(t *testing.T) {
	s := &Switch{}
	s.delay(300, 1, []byte("c"))
	s.delay(100, 0, []byte("a"))
	s.delay(100, 1, []byte("b"))
	var order []string
	for s.dq.Len() > 0 {
		d := s.dq[0]
		order = append(order, string(d.buf))
		popDelayed(s)
	}
	if strings.Join(order, "") != "abc" {
		t.Fatalf("release order %v; want by due time, then FIFO", order)
	}
}

func TestIsRoCEv2(t *testing.T) {
	f := frameFor(t, "10.0.0.1", "10.0.0.2", roce.RCSendOnly, 1, 1)
	if !isRoCEv2(f) || isRoCEv2(f[:30]) {
		t.Fatal("isRoCEv2 misjudged a RoCE frame or accepted a cut one")
	}
	f[14+20+3]++ // UDP destination port 4792
	if isRoCEv2(f) {
		t.Fatal("isRoCEv2 accepted port 4792")
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func popDelayed(s *Switch) { heap.Pop(&s.dq) }
