package analyze

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
)

var wc = mkConn("10.0.0.2", "10.0.0.3", 0x11, 0x22, 1001)

func gbnOpts(ppm, msgs int) Options {
	return Options{IndexBase: 1, Conns: []Conn{wc.conn(0, VerbWrite, ppm, msgs, 1024)}}
}

// sendMsg sends packets [from, to) of a 4-packet message m (0-based) starting at tUs, 1 us apart.
func (b *builder) sendRange(c tconn, from, to, ppm int, ev map[int]roce.EventType, tUs float64) float64 {
	for r := from; r < to; r++ {
		b.data(c, r, writeOp(r%ppm, ppm), ev[r], tUs)
		tUs++
	}
	return tUs
}

func TestGBNCleanTracePasses(t *testing.T) {
	b := &builder{t: t}
	tm := b.sendRange(wc, 0, 4, 4, nil, 0)
	b.ack(wc, 3, tm+1)
	tm = b.sendRange(wc, 4, 8, 4, nil, tm+2)
	b.ack(wc, 7, tm+1)
	res := b.run(gbnOpts(4, 2))
	wantOK(t, check(t, res, "gbn", 1))
	if len(res.Checks) != 1 || len(res.Retransmissions) != 0 || res.Metadata != "mirror" {
		t.Fatalf("checks %+v retransmissions %+v metadata %s", res.Checks, res.Retransmissions, res.Metadata)
	}
	if len(res.Traffic) != 1 || len(res.Traffic[0].MCTUs) != 2 || res.Traffic[0].MCTUs[0] != 5 || res.Traffic[0].MCTUs[1] != 5 {
		t.Fatalf("traffic %+v, want two 5 us messages", res.Traffic)
	}
	// 8 KB delivered between t=0 and t=11 us.
	if g := res.Traffic[0].GoodputGbps; g < 5.957 || g > 5.958 {
		t.Errorf("goodput %v, want 8192*8/11000 = 5.9578", g)
	}
}

// A drop recovered by exactly one NAK and a go-back-N retransmission passes, with an exact latency breakdown.
func TestGBNDropNAKRecoveryAndLatency(t *testing.T) {
	b := &builder{t: t}
	b.data(wc, 0, roce.RCWriteFirst, 0, 0)
	b.data(wc, 1, roce.RCWriteMiddle, 0, 1)
	lost := b.data(wc, 2, roce.RCWriteMiddle, roce.EventDrop, 2)
	b.data(wc, 3, roce.RCWriteLast, 0, 3) // first out-of-order arrival at 3 us
	b.nak(wc, 2, 4.5)                     // NACK generation 1.5 us
	retx := b.data(wc, 2, roce.RCWriteMiddle, 0, 8.5)
	b.data(wc, 3, roce.RCWriteLast, 0, 9.5)
	b.ack(wc, 3, 10.5)
	res := b.run(gbnOpts(4, 1))
	wantOK(t, check(t, res, "gbn", 1))
	if len(res.Retransmissions) != 1 {
		t.Fatalf("retransmissions %+v", res.Retransmissions)
	}
	r := res.Retransmissions[0]
	if r.QP != 1 || r.PSN != 3 || r.PSNAbs != 1003 || r.Msg != 1 || r.Position != 3 || r.Iter != 1 ||
		r.Event != "drop" || r.Packet != lost || r.RetxPacket == nil || *r.RetxPacket != retx ||
		sv(r.Trigger) != "nack" || fv(r.NACKGenerationUs) != 1.5 || fv(r.NACKReactionUs) != 4 || fv(r.LatencyUs) != 6.5 {
		t.Fatalf("retransmission %+v trigger %s gen %v react %v lat %v", r, sv(r.Trigger), fv(r.NACKGenerationUs),
			fv(r.NACKReactionUs), fv(r.LatencyUs))
	}
	if len(res.Tables) != 1 || res.Tables[0].Position != 3 || res.Tables[0].Count != 1 || fv(res.Tables[0].LatencyUsMean) != 6.5 {
		t.Fatalf("tables %+v", res.Tables)
	}
	if len(res.Timeouts) != 1 || res.Timeouts[0].Retries != 1 || res.Timeouts[0].Timeouts != 0 {
		t.Fatalf("message retries %+v", res.Timeouts)
	}
}

// gbnFault builds the standard drop-of-PSN-1003 scenario with one deviation and returns the check.
func TestGBNFaults(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *builder)
		want  []Violation
	}{
		{"two NAKs for one gap", func(b *builder) {
			b.sendRange(wc, 0, 2, 4, nil, 0)
			b.data(wc, 2, roce.RCWriteMiddle, roce.EventDrop, 2)
			b.data(wc, 3, roce.RCWriteLast, 0, 3)
			b.nak(wc, 2, 4)
			b.nak(wc, 2, 5) // packet 5
			b.data(wc, 2, roce.RCWriteMiddle, 0, 8)
			b.data(wc, 3, roce.RCWriteLast, 0, 9)
			b.ack(wc, 3, 10)
		}, []Violation{{5, "second NAK for the same sequence error (expected PSN 1003, first NAK at packet 4)"}}},
		{"NAK carries the wrong PSN", func(b *builder) {
			b.sendRange(wc, 0, 2, 4, nil, 0)
			b.data(wc, 2, roce.RCWriteMiddle, roce.EventDrop, 2)
			b.data(wc, 3, roce.RCWriteLast, 0, 3)
			b.nak(wc, 3, 4) // packet 4
			b.data(wc, 3, roce.RCWriteLast, 0, 8)
			b.data(wc, 2, roce.RCWriteMiddle, 0, 90) // the requester recovers by timeout
			b.data(wc, 3, roce.RCWriteLast, 0, 91)
			b.ack(wc, 3, 92)
		}, []Violation{
			{4, "NAK for PSN 1004 but expected PSN is 1003"},
			{6, "timeout retransmission from PSN 1003 but the oldest unacknowledged PSN is 1004"},
		}},
		{"retransmission from the wrong PSN", func(b *builder) {
			b.sendRange(wc, 0, 2, 4, nil, 0)
			b.data(wc, 2, roce.RCWriteMiddle, roce.EventDrop, 2)
			b.data(wc, 3, roce.RCWriteLast, 0, 3)
			b.nak(wc, 2, 4)
			b.data(wc, 1, roce.RCWriteMiddle, 0, 8) // packet 5: goes back too far
			b.data(wc, 2, roce.RCWriteMiddle, 0, 9)
			b.data(wc, 3, roce.RCWriteLast, 0, 10)
			b.ack(wc, 3, 11)
		}, []Violation{{5, "retransmission from PSN 1002 but the NAK (packet 4) asked for PSN 1003"}}},
		{"missing NAK", func(b *builder) {
			b.sendRange(wc, 0, 2, 4, nil, 0)
			b.ack(wc, 1, 1.5)
			b.data(wc, 2, roce.RCWriteMiddle, roce.EventDrop, 2)
			b.data(wc, 3, roce.RCWriteLast, 0, 3) // packet 4: out of order, never NAKed
			b.data(wc, 2, roce.RCWriteMiddle, 0, 500)
			b.data(wc, 3, roce.RCWriteLast, 0, 501)
			b.ack(wc, 3, 502)
		}, []Violation{{4, "missing NAK: PSN 1004 arrived while PSN 1003 was expected; the responder must send one NAK carrying PSN 1003"}}},
		{"selective retransmission is not go-back-N", func(b *builder) {
			b.sendRange(wc, 0, 2, 4, nil, 0)
			b.data(wc, 2, roce.RCWriteMiddle, roce.EventDrop, 2)
			b.data(wc, 3, roce.RCWriteLast, 0, 3)
			b.nak(wc, 2, 4)
			b.data(wc, 2, roce.RCWriteMiddle, 0, 8) // PSN 1004 is never resent
			b.ack(wc, 3, 9)                         // packet 6: acknowledges what the responder discarded
		}, []Violation{
			{6, "ACK for PSN 1004 but the responder had received in order only up to PSN 1003"},
			{6, "incomplete: the responder received in order up to PSN 1003; expected every packet up to PSN 1004"},
		}},
		{"ACK goes backwards and NAK without sequence error", func(b *builder) {
			b.sendRange(wc, 0, 4, 4, nil, 0)
			b.ack(wc, 3, 5)
			b.ack(wc, 1, 6) // packet 5
			b.nak(wc, 4, 7) // packet 6
		}, []Violation{
			{5, "ACK for PSN 1002 goes backwards: the previous ACK covered PSN 1004"},
			{6, "NAK for PSN 1005 without a sequence error: every packet up to PSN 1004 arrived in order"},
			{6, "NAK for PSN 1005 was never acted on: no retransmission from it followed"},
		}},
		{"incomplete connection", func(b *builder) {
			b.sendRange(wc, 0, 3, 4, nil, 0)
			b.ack(wc, 2, 4) // packet 3; the 4th packet is never sent
		}, []Violation{
			{3, "incomplete: the requester sent 3 packets (up to PSN 1003); the connection has 4 (up to PSN 1004)"},
			{3, "incomplete: the responder received in order up to PSN 1003; expected every packet up to PSN 1004"},
			{3, "incomplete: the last ACK is for PSN 1003; expected a final ACK for PSN 1004"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{t: t}
			tc.build(b)
			res := b.run(gbnOpts(4, 1))
			wantViolations(t, check(t, res, "gbn", 1), tc.want...)
		})
	}
}

// Repeated tail drops are recovered by timeouts: the intervals, retry counts and per-loss iterations are exact.
func TestGBNTimeoutSequence(t *testing.T) {
	b := &builder{t: t}
	b.sendRange(wc, 0, 3, 4, nil, 0)
	b.data(wc, 3, roce.RCWriteLast, roce.EventDrop, 3)
	b.ack(wc, 2, 4)
	b.data(wc, 3, roce.RCWriteLast, roce.EventDrop, 1003) // +1000 us
	b.data(wc, 3, roce.RCWriteLast, roce.EventDrop, 3003) // +2000 us
	b.data(wc, 3, roce.RCWriteLast, 0, 7003)              // +4000 us
	b.ack(wc, 3, 7004)
	res := b.run(gbnOpts(4, 1))
	wantOK(t, check(t, res, "gbn", 1))
	if len(res.Timeouts) != 1 {
		t.Fatalf("timeouts %+v", res.Timeouts)
	}
	mr := res.Timeouts[0]
	if mr.QP != 1 || mr.Msg != 1 || mr.Retries != 3 || mr.Timeouts != 3 || len(mr.TimeoutIntervalsUs) != 3 ||
		mr.TimeoutIntervalsUs[0] != 1000 || mr.TimeoutIntervalsUs[1] != 2000 || mr.TimeoutIntervalsUs[2] != 4000 {
		t.Fatalf("message retries %+v", mr)
	}
	if len(res.Retransmissions) != 3 {
		t.Fatalf("retransmissions %+v", res.Retransmissions)
	}
	for i, want := range []float64{1000, 2000, 4000} {
		r := res.Retransmissions[i]
		if r.Iter != i+1 || sv(r.Trigger) != "timeout" || fv(r.LatencyUs) != want || r.NACKReactionUs != nil || r.PSN != 4 {
			t.Errorf("loss %d: %+v trigger %s latency %v", i, r, sv(r.Trigger), fv(r.LatencyUs))
		}
	}
	if row := res.Tables[0]; row.Timeouts != 3 || fv(row.LatencyUsMin) != 1000 || fv(row.LatencyUsMax) != 4000 {
		t.Errorf("table row %+v", row)
	}
}

// In a plain capture (no metadata) losses are inferred from the go-back-N restart.
func TestGBNPlainCaptureInfersLoss(t *testing.T) {
	b := &builder{t: t, plain: true}
	b.sendRange(wc, 0, 4, 4, nil, 0) // PSN 1003 was lost after the capture point: it looks delivered
	b.nak(wc, 2, 4.5)
	b.data(wc, 2, roce.RCWriteMiddle, 0, 8.5)
	b.data(wc, 3, roce.RCWriteLast, 0, 9.5)
	b.ack(wc, 3, 10.5)
	res := b.run(gbnOpts(4, 1))
	if res.Metadata != "none" || len(res.Retransmissions) != 1 {
		t.Fatalf("metadata %s retransmissions %+v", res.Metadata, res.Retransmissions)
	}
	r := res.Retransmissions[0]
	if r.Event != "inferred" || r.PSNAbs != 1003 || sv(r.Trigger) != "nack" || fv(r.LatencyUs) != 6.5 ||
		fv(r.NACKReactionUs) != 4 || fv(r.NACKGenerationUs) != 1.5 {
		t.Fatalf("inferred loss %+v trigger %s", r, sv(r.Trigger))
	}
	// The plain capture cannot know 1003 was not delivered, so the NAK looks unjustified: documented limit.
	c := check(t, res, "gbn", 1)
	if c.OK {
		t.Fatalf("plain capture with an invisible loss: want the NAK flagged, got ok")
	}
}

// PSN arithmetic wraps at 2^24 without any effect on the verdicts.
func TestGBNPSNWrap(t *testing.T) {
	c := mkConn("10.0.0.2", "10.0.0.3", 0x11, 0x22, roce.PSN(1<<24-2))
	b := &builder{t: t}
	b.data(c, 0, roce.RCWriteFirst, 0, 0)
	b.data(c, 1, roce.RCWriteMiddle, 0, 1)
	b.data(c, 2, roce.RCWriteMiddle, roce.EventDrop, 2) // PSN 0
	b.data(c, 3, roce.RCWriteLast, 0, 3)
	b.nak(c, 2, 4)
	b.data(c, 2, roce.RCWriteMiddle, 0, 8)
	b.data(c, 3, roce.RCWriteLast, 0, 9)
	b.ack(c, 3, 10)
	res := b.run(Options{IndexBase: 0, Conns: []Conn{c.conn(0, VerbWrite, 4, 1, 1024)}})
	wantOK(t, check(t, res, "gbn", 0))
	if len(res.Retransmissions) != 1 || res.Retransmissions[0].PSNAbs != 0 || res.Retransmissions[0].PSN != 2 {
		t.Fatalf("retransmissions %+v", res.Retransmissions)
	}
}

// A connection the generator reports as failed (retries exceeded) ends where the NIC gave up: its trace is not
// incomplete; the same trace of a connection reported ok is.
func TestStoppedOnErrorIsNotIncomplete(t *testing.T) {
	build := func() *builder {
		b := &builder{t: t}
		b.data(wc, 0, roce.RCWriteFirst, 0, 0)
		b.data(wc, 1, roce.RCWriteLast, roce.EventDrop, 1)
		b.ack(wc, 0, 2)
		b.data(wc, 1, roce.RCWriteLast, roce.EventDrop, 1000)
		return b
	}
	for _, c := range []struct {
		status string
		ok     bool
	}{{"retry-exceeded", true}, {"ok", false}} {
		opts := gbnOpts(2, 1)
		opts.Traffic = []TrafficIn{{Conn: 0, Status: c.status}}
		res := build().run(opts)
		if got := check(t, res, "gbn", 1); got.OK != c.ok {
			t.Errorf("status %s: gbn ok=%v, want %v (%+v)", c.status, got.OK, c.ok, got.Violations)
		}
		if res.Traffic[0].Status != c.status {
			t.Errorf("traffic status %q, want %q", res.Traffic[0].Status, c.status)
		}
	}
}

// A NAK for a packet the trace shows delivered is a violation, unless the receiving NIC's discard counters
// moved: then the packet was lost inside the NIC, after the switch, and the NAK is right.
func TestNAKForPacketLostInsideTheNIC(t *testing.T) {
	build := func() *builder {
		b := &builder{t: t}
		b.data(wc, 0, roce.RCWriteFirst, 0, 0)
		b.data(wc, 1, roce.RCWriteMiddle, 0, 1) // passes the switch, discarded by the responder's NIC
		b.data(wc, 2, roce.RCWriteMiddle, 0, 2)
		b.nak(wc, 1, 3)
		b.data(wc, 1, roce.RCWriteMiddle, 0, 10)
		b.data(wc, 2, roce.RCWriteMiddle, 0, 11)
		b.data(wc, 3, roce.RCWriteLast, 0, 12)
		b.ack(wc, 3, 13)
		return b
	}
	opts := gbnOpts(4, 1)
	res := build().run(opts)
	if check(t, res, "gbn", 1).OK {
		t.Fatal("a NAK for a delivered packet passed without any NIC discard to explain it")
	}
	for _, d := range []uint64{0, 1} {
		ps, pf := snap(map[string]uint64{"rx_discards_phy": d, "duplicate_request": 0})
		opts.Counters = []HostCounters{{Host: "responder", Vendor: "nvidia", Start: ps, Finish: pf}}
		res = build().run(opts)
		if got := check(t, res, "gbn", 1).OK; got != (d > 0) {
			t.Errorf("rx_discards_phy +%d: gbn ok=%v", d, got)
		}
		if d > 0 && res.NICLosses != 1 {
			t.Errorf("nic_losses = %d, want 1", res.NICLosses)
		}
		m := counterMap(res.Counters)
		if c := m["responder/rx_discards_phy"]; c.OK != (d == 0) {
			t.Errorf("rx_discards_phy +%d: %+v", d, c)
		}
		if c := m["responder/duplicate_request"]; d > 0 && (!c.OK || c.Note == "") {
			t.Errorf("duplicate_request with NIC discards should be undetermined: %+v", c)
		}
	}
}
