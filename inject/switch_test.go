package inject

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// TestFigure3Iter replays the paper's Figure 3 with a minimal go-back-N sender and receiver: one connection,
// IPSN 1, four packets; drop PSN 2 in round 1 and PSN 3 in round 2. The switch must drop exactly those two
// transmissions and report the ITER of every packet as the figure shows.
func TestFigure3Iter(t *testing.T) {
	conn := fig2("write")
	conn.ReqIPSN = 1
	s := newSwitch(t, Config{Conns: []ConnMeta{conn}, Intents: []Intent{
		{PSN: 1, Iter: 1, Action: roce.EventDrop, Source: "psn 2 iter 1"},
		{PSN: 2, Iter: 2, Action: roce.EventDrop, Source: "psn 3 iter 2"},
	}})
	type tx struct {
		psn     roce.PSN
		iter    int
		dropped bool
	}
	var got []tx
	var v Verdict
	expected, start := roce.PSN(1), roce.PSN(1)
	for round := 0; expected <= 4 && round < 10; round++ {
		for psn := start; psn <= 4; psn++ {
			s.Process(int64(len(got)), 0, build(t, wr(psn)), &v)
			dropped := len(v.Forward) == 0
			if dropped != (v.Event == roce.EventDrop) {
				t.Fatalf("psn %d: %d frames forwarded but event %v", psn, len(v.Forward), v.Event)
			}
			got = append(got, tx{psn, v.Iter, dropped})
			if !dropped && psn == expected {
				expected++
			}
		}
		start = expected // go-back-N: the NAK makes the sender resend from the first missing PSN
	}
	want := []tx{{1, 1, false}, {2, 1, true}, {3, 1, false}, {4, 1, false},
		{2, 2, false}, {3, 2, true}, {4, 2, false},
		{3, 3, false}, {4, 3, false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("transmissions (psn, iter, dropped):\n got %v\nwant %v", got, want)
	}
	if c := s.Counters(); c.Dropped != 2 || c.Events["drop"] != 2 || c.Mirrored != uint64(len(want)) {
		t.Errorf("counters: dropped %d, drop events %d, mirrored %d; want 2, 2, %d", c.Dropped, c.Events["drop"], c.Mirrored, len(want))
	}
}

// TestIterAcrossPSNWrap checks that PSN comparisons are modulo 2^24: going from 0xffffff to 0 is progress, not
// a new round, and entry PSNs wrap the same way.
func TestIterAcrossPSNWrap(t *testing.T) {
	conn := fig2("write")
	conn.ReqIPSN = 0xfffffe
	s := newSwitch(t, Config{Conns: []ConnMeta{conn}, Intents: []Intent{
		{PSN: 2, Iter: 2, Action: roce.EventDrop, Source: "psn 0 in round 2"}}})
	seq := []struct {
		psn     roce.PSN
		iter    int
		dropped bool
	}{
		{0xfffffe, 1, false}, {0xffffff, 1, false}, {0, 1, false}, {1, 1, false},
		{0xffffff, 2, false}, {0, 2, true}, {1, 2, false}, {2, 2, false},
		{2, 3, false}, // the same PSN again is "not larger": a new round
		{0, 4, false},
	}
	var v Verdict
	for i, x := range seq {
		s.Process(int64(i), 0, build(t, wr(x.psn)), &v)
		if v.Iter != x.iter || (len(v.Forward) == 0) != x.dropped {
			t.Errorf("packet %d (psn %#x): iter %d, dropped %v; want iter %d, dropped %v", i, x.psn, v.Iter, len(v.Forward) == 0, x.iter, x.dropped)
		}
	}
}

// TestReadConnection: a READ connection's data packets are the READ responses (responder to requester, in the
// requester's PSN space); READ requests have their own rounds, and a re-issued request starts a new one.
func TestReadConnection(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("read")}, Intents: []Intent{
		{Kind: KindData, PSN: 2, Iter: 1, Action: roce.EventDrop, Source: "resp 1003 round 1"},
		{Kind: KindReadReq, PSN: 2, Iter: 2, Action: roce.EventDrop, Source: "re-request 1003"},
		{Kind: KindData, PSN: 2, Iter: 2, Action: roce.EventECN, Source: "resp 1003 round 2"},
	}})
	steps := []struct {
		port    int
		p       pkt
		iter    int
		event   roce.EventType
		matched string
	}{
		{0, rreq(1001), 1, roce.EventNone, ""},
		{1, rresp(1001), 1, roce.EventNone, ""},
		{1, rresp(1002), 1, roce.EventNone, ""},
		{1, rresp(1003), 1, roce.EventDrop, "resp 1003 round 1"},
		{0, wr(1003), 0, roce.EventNone, ""}, // a WRITE on a read connection is not its data
		{1, rresp(1004), 1, roce.EventNone, ""},
		{0, rreq(1003), 2, roce.EventDrop, "re-request 1003"}, // 1003 <= last response 1004: new request round
		{0, rreq(1003), 3, roce.EventNone, ""},                // timeout: re-issued again
		{1, rresp(1003), 2, roce.EventECN, "resp 1003 round 2"},
		{1, rresp(1004), 2, roce.EventNone, ""},
		{0, rreq(1005), 3, roce.EventNone, ""}, // the next READ: beyond every PSN seen, same round
	}
	var v Verdict
	for i, st := range steps {
		s.Process(int64(i), st.port, build(t, st.p), &v)
		if v.Conn != 0 || v.Iter != st.iter || v.Event != st.event || v.Matched != st.matched {
			t.Errorf("step %d (%v psn %d): conn %d iter %d event %v matched %q; want conn 0 iter %d event %v matched %q",
				i, st.p.op, st.p.psn, v.Conn, v.Iter, v.Event, v.Matched, st.iter, st.event, st.matched)
		}
	}
	if h := s.Hits(); !reflect.DeepEqual(h, []uint64{1, 1, 1}) {
		t.Errorf("hits = %v, want [1 1 1]", h)
	}
}

// TestNthEvents: ack, nak and cnp intents hit the Nth such packet of the connection from the side that sends
// them; RNR NAKs are not NAKs; an Iter on them matches the connection's data round.
func TestNthEvents(t *testing.T) {
	rnr := nak(1001)
	rnr.syndrome = 0x20 | 14 // RNR NAK
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, Intents: []Intent{
		{Kind: KindAck, Nth: 1, Action: roce.EventDrop, Source: "2nd ack"},
		{Kind: KindNAK, Nth: 0, Action: roce.EventECN, Source: "1st nak"},
		{Kind: KindCNP, Nth: 1, Action: roce.EventDrop, Source: "2nd cnp"},
		{Kind: KindAck, Nth: 3, Iter: 2, Action: roce.EventDrop, Source: "4th ack in round 2"},
		{Kind: KindAck, Nth: 4, Iter: 1, Action: roce.EventDrop, Source: "5th ack in round 1"},
	}})
	steps := []struct {
		port    int
		p       pkt
		matched string
	}{
		{1, ack(1001), ""},
		{1, ack(1002), "2nd ack"},
		{1, rnr, ""},
		{1, nak(1003), "1st nak"},
		{1, nak(1003), ""},
		{0, cnpFrom(ipReq, ipResp, 0xea), ""}, // from the data sender: not this connection's CNP stream
		{1, cnpFrom(ipResp, ipReq, 0xfe), ""},
		{1, cnpFrom(ipResp, ipReq, 0xfe), "2nd cnp"},
		{1, ack(1003), ""},
		{0, wr(1001), ""},
		{0, wr(1001), ""}, // round 2
		{1, ack(1004), "4th ack in round 2"},
		{1, ack(1005), ""}, // 5th ack, but the data round is 2
	}
	var v Verdict
	for i, st := range steps {
		s.Process(int64(i), st.port, build(t, st.p), &v)
		if v.Matched != st.matched {
			t.Errorf("step %d (%v): matched %q, want %q", i, st.p.op, v.Matched, st.matched)
		}
		if v.Matched == "" && len(v.Forward) != 1 {
			t.Errorf("step %d: unmatched packet forwarded as %d frames", i, len(v.Forward))
		}
		if st.matched == "1st nak" && decode(t, v.Forward[0]).ECN() != 3 {
			t.Errorf("step %d: NAK not CE-marked", i)
		}
	}

	// On a READ connection the data receiver (the requester) sends the CNPs.
	r := newSwitch(t, Config{Conns: []ConnMeta{fig2("read")}, Intents: []Intent{{Kind: KindCNP, Nth: 0, Action: roce.EventDrop, Source: "cnp"}}})
	r.Process(0, 1, build(t, cnpFrom(ipResp, ipReq, 0xfe)), &v)
	if v.Matched != "" {
		t.Errorf("read connection: responder's CNP matched %q", v.Matched)
	}
	r.Process(1, 0, build(t, cnpFrom(ipReq, ipResp, 0xea)), &v)
	if v.Matched != "cnp" || len(v.Forward) != 0 {
		t.Errorf("read connection: requester's CNP matched %q, forwarded %d", v.Matched, len(v.Forward))
	}
}

// TestActions checks every action's effect on the bytes that leave the switch and on the mirrored copy, over
// IPv4 and IPv6.
func TestActions(t *testing.T) {
	v6req, v6resp := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	type check func(t *testing.T, orig []byte, v *Verdict)
	one := func(t *testing.T, v *Verdict) *roce.Packet {
		t.Helper()
		if len(v.Forward) != 1 {
			t.Fatalf("%d frames forwarded, want 1", len(v.Forward))
		}
		return decode(t, v.Forward[0])
	}
	ipOK := func(t *testing.T, p *roce.Packet) {
		t.Helper()
		if !p.IPv6 && !ipv4ChecksumOK(p.Data(), p.L3Offset) {
			t.Error("IPv4 header checksum is invalid")
		}
	}
	tests := []struct {
		name   string
		v6     bool
		intent Intent
		check  check
	}{
		{"drop", false, Intent{Action: roce.EventDrop}, func(t *testing.T, orig []byte, v *Verdict) {
			if len(v.Forward) != 0 {
				t.Errorf("%d frames forwarded", len(v.Forward))
			}
		}},
		{"ecn", false, Intent{Action: roce.EventECN}, func(t *testing.T, orig []byte, v *Verdict) {
			p := one(t, v)
			ipOK(t, p)
			if p.ECN() != 3 || p.DSCP() != 0 || p.CheckICRC() != roce.ICRCGood {
				t.Errorf("ecn %d dscp %d icrc %v; want CE, DSCP unchanged, ICRC good", p.ECN(), p.DSCP(), p.CheckICRC())
			}
			if m := decode(t, v.Mirror); m.ECN() != 3 {
				t.Errorf("mirror shows ECN %d, want CE", m.ECN())
			}
		}},
		{"ecn v6", true, Intent{Action: roce.EventECN}, func(t *testing.T, orig []byte, v *Verdict) {
			p := one(t, v)
			if p.ECN() != 3 || p.CheckICRC() != roce.ICRCGood || p.FlowLabel != decode(t, orig).FlowLabel {
				t.Errorf("ecn %d icrc %v flow %#x; want CE, ICRC good, flow label unchanged", p.ECN(), p.CheckICRC(), p.FlowLabel)
			}
		}},
		{"corrupt", false, Intent{Action: roce.EventCorrupt}, func(t *testing.T, orig []byte, v *Verdict) {
			p := one(t, v)
			ipOK(t, p)
			if p.CheckICRC() != roce.ICRCBad || p.IPID != 0x1234^0xffff {
				t.Errorf("icrc %v ip id %#x; want bad ICRC and the IP ID inverted", p.CheckICRC(), p.IPID)
			}
			m := decode(t, v.Mirror)
			if m.CheckICRC() != roce.ICRCGood || m.IPID != 0x1234 || !ipv4ChecksumOK(v.Mirror, m.L3Offset) {
				t.Errorf("mirror: icrc %v ip id %#x; want the original valid packet", m.CheckICRC(), m.IPID)
			}
		}},
		{"corrupt v6", true, Intent{Action: roce.EventCorrupt}, func(t *testing.T, orig []byte, v *Verdict) {
			if p := one(t, v); p.CheckICRC() != roce.ICRCBad {
				t.Errorf("icrc %v, want bad", p.CheckICRC())
			}
			if m := decode(t, v.Mirror); m.CheckICRC() != roce.ICRCGood {
				t.Errorf("mirror icrc %v, want good", m.CheckICRC())
			}
		}},
		{"delay", false, Intent{Action: roce.EventDelay, DelayNs: 25000}, func(t *testing.T, orig []byte, v *Verdict) {
			one(t, v)
			if v.DelayNs != 25000 || !bytes.Equal(v.Forward[0], orig) {
				t.Errorf("delay %d ns, bytes changed %v; want 25000 and unchanged", v.DelayNs, !bytes.Equal(v.Forward[0], orig))
			}
		}},
		{"duplicate", false, Intent{Action: roce.EventDuplicate, Copies: 2}, func(t *testing.T, orig []byte, v *Verdict) {
			if len(v.Forward) != 3 {
				t.Fatalf("%d frames forwarded, want 3", len(v.Forward))
			}
			for i, f := range v.Forward {
				if !bytes.Equal(f, orig) {
					t.Errorf("copy %d differs from the original", i)
				}
			}
			v.Forward[1][0] ^= 1
			if v.Forward[0][0] == v.Forward[1][0] || v.Forward[2][0] == v.Forward[1][0] {
				t.Error("copies share a buffer")
			}
		}},
		{"rewrite migreq", false, Intent{Action: roce.EventRewrite, Field: "migreq", Value: 1}, func(t *testing.T, orig []byte, v *Verdict) {
			p := one(t, v)
			if !p.BTH.MigReq || p.CheckICRC() != roce.ICRCGood || p.BTH.SE {
				t.Errorf("migreq %v se %v icrc %v; want MigReq set, SE unchanged, ICRC recomputed", p.BTH.MigReq, p.BTH.SE, p.CheckICRC())
			}
			if m := decode(t, v.Mirror); !m.BTH.MigReq || m.CheckICRC() != roce.ICRCGood {
				t.Errorf("mirror: migreq %v icrc %v; want the rewritten packet", m.BTH.MigReq, m.CheckICRC())
			}
		}},
		{"rewrite migreq v6", true, Intent{Action: roce.EventRewrite, Field: "migreq", Value: 1}, func(t *testing.T, orig []byte, v *Verdict) {
			if p := one(t, v); !p.BTH.MigReq || p.CheckICRC() != roce.ICRCGood {
				t.Errorf("migreq %v icrc %v", p.BTH.MigReq, p.CheckICRC())
			}
		}},
		{"rewrite se", false, Intent{Action: roce.EventRewrite, Field: "se", Value: 1}, func(t *testing.T, orig []byte, v *Verdict) {
			if p := one(t, v); !p.BTH.SE || p.BTH.MigReq || p.CheckICRC() != roce.ICRCGood {
				t.Errorf("se %v migreq %v icrc %v", p.BTH.SE, p.BTH.MigReq, p.CheckICRC())
			}
		}},
		{"rewrite pad", false, Intent{Action: roce.EventRewrite, Field: "pad", Value: 3}, func(t *testing.T, orig []byte, v *Verdict) {
			if p := one(t, v); p.BTH.PadCount != 3 || p.PayloadLen != 61 || p.CheckICRC() != roce.ICRCGood {
				t.Errorf("pad %d payload %d icrc %v; want 3, 61, good", p.BTH.PadCount, p.PayloadLen, p.CheckICRC())
			}
		}},
		{"rewrite dscp", false, Intent{Action: roce.EventRewrite, Field: "dscp", Value: 26}, func(t *testing.T, orig []byte, v *Verdict) {
			p := one(t, v)
			ipOK(t, p)
			if p.DSCP() != 26 || p.ECN() != 2 || p.CheckICRC() != roce.ICRCGood {
				t.Errorf("dscp %d ecn %d icrc %v; want 26, ECT(0) kept, good", p.DSCP(), p.ECN(), p.CheckICRC())
			}
		}},
		{"rewrite dscp v6", true, Intent{Action: roce.EventRewrite, Field: "dscp", Value: 46}, func(t *testing.T, orig []byte, v *Verdict) {
			if p := one(t, v); p.DSCP() != 46 || p.ECN() != 2 || p.CheckICRC() != roce.ICRCGood {
				t.Errorf("dscp %d ecn %d icrc %v", p.DSCP(), p.ECN(), p.CheckICRC())
			}
		}},
		{"rewrite ecn", false, Intent{Action: roce.EventRewrite, Field: "ecn", Value: 0}, func(t *testing.T, orig []byte, v *Verdict) {
			p := one(t, v)
			ipOK(t, p)
			if p.ECN() != 0 || p.CheckICRC() != roce.ICRCGood {
				t.Errorf("ecn %d icrc %v; want Not-ECT, good", p.ECN(), p.CheckICRC())
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, p := fig2("write"), wr(1001)
			if tc.v6 {
				conn.ReqIP, conn.RespIP = v6req, v6resp
				p.src, p.dst = v6req, v6resp
			}
			in := tc.intent
			in.Source = "the event"
			s := newSwitch(t, Config{Conns: []ConnMeta{conn}, Intents: []Intent{in}})
			frame := build(t, p)
			orig := append([]byte(nil), frame...)
			var v Verdict
			s.Process(5000, 0, frame, &v)
			if v.Event != in.Action || v.Matched != "the event" || v.OutPort != 1 {
				t.Fatalf("event %v matched %q out %d; want %v, the event, 1", v.Event, v.Matched, v.OutPort, in.Action)
			}
			tc.check(t, orig, &v)
			// The mirror always carries the event type: IPv4 TTL or IPv6 hop limit.
			m := decode(t, v.Mirror)
			if m.TTL != uint8(in.Action) || get48(v.Mirror[6:]) != 1 || get48(v.Mirror[0:]) != 5000 {
				t.Errorf("mirror: ttl %d seq %d ts %d; want %d, 1, 5000", m.TTL, get48(v.Mirror[6:]), get48(v.Mirror[0:]), in.Action)
			}
			if !tc.v6 && !ipv4ChecksumOK(v.Mirror, m.L3Offset) {
				t.Error("mirror's IPv4 checksum is invalid")
			}
		})
	}
}

// TestRewriteKeepsBadICRC: a packet that arrives corrupted stays corrupted after a BTH rewrite.
func TestRewriteKeepsBadICRC(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, Intents: []Intent{{Action: roce.EventRewrite, Field: "migreq", Value: 1}}})
	f := build(t, wr(1001))
	f[len(f)-1] ^= 0x55
	var v Verdict
	s.Process(0, 0, f, &v)
	if p := decode(t, v.Forward[0]); !p.BTH.MigReq || p.CheckICRC() != roce.ICRCBad {
		t.Errorf("migreq %v icrc %v; want MigReq set and the ICRC still bad", p.BTH.MigReq, p.CheckICRC())
	}
}

func TestReorder(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, Intents: []Intent{
		{PSN: 0, Action: roce.EventReorder, Behind: 2, Source: "r"},
		{PSN: 5, Action: roce.EventReorder, Behind: 9, Source: "never released"}}})
	var v Verdict
	frames := map[roce.PSN][]byte{}
	var wire []roce.PSN // PSNs in the order they leave on port 1
	send := func(port int, p pkt) {
		f := build(t, p)
		frames[p.psn] = append([]byte(nil), f...)
		s.Process(0, port, f, &v)
		if len(v.Mirror) == 0 {
			t.Errorf("psn %d not mirrored", p.psn)
		}
		for _, out := range v.Forward {
			if v.OutPort == 1 {
				wire = append(wire, decode(t, out).BTH.PSN)
			}
		}
	}
	send(0, wr(1001)) // held
	if len(v.Forward) != 0 || v.Event != roce.EventReorder || s.Counters().Held != 1 {
		t.Fatalf("reordered frame: forwarded %d, event %v, held %d", len(v.Forward), v.Event, s.Counters().Held)
	}
	send(0, wr(1002))
	send(1, ack(1002)) // the other direction does not count
	send(0, wr(1003))
	if len(v.Forward) != 2 || !bytes.Equal(v.Forward[1], frames[1001]) {
		t.Fatalf("after 2 followers: forwarded %d frames, want the follower then the held frame unchanged", len(v.Forward))
	}
	send(0, wr(1004))
	send(0, wr(1006)) // psn 1006 is offset 5: held behind 9 that never come
	send(0, wr(1007))
	if want := []roce.PSN{1002, 1003, 1001, 1004, 1007}; !reflect.DeepEqual(wire, want) {
		t.Errorf("wire order %v, want %v", wire, want)
	}
	out := s.Flush(12345)
	if len(out) != 1 || out[0].OutPort != 1 || !bytes.Equal(out[0].Frame, frames[1006]) || out[0].HeldNs != 12345 {
		t.Fatalf("flush = %+v; want the held psn 1006 frame for port 1, held 12345 ns", out)
	}
	c := s.Counters()
	if c.Held != 0 || c.TxRoCE[1] != 6 || c.RxRoCE[0] != 6 || c.TxRoCE[0] != 1 {
		t.Errorf("counters: held %d, tx %v, rx %v; want 0 held, tx [1 6], rx [6 1]", c.Held, c.TxRoCE, c.RxRoCE)
	}
	if s.Flush(0) != nil {
		t.Error("second flush returned frames")
	}
}

// TestMirrorMetadataAndDumpers: every RoCE frame in both directions is mirrored with consecutive sequence
// numbers from 1, its ingress time and event, and weights 2:1 spread the copies 0,1,0,0,1,0,...
func TestMirrorMetadataAndDumpers(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, DumperWeights: []int{2, 1},
		Intents: []Intent{{PSN: 10, Iter: 1, Action: roce.EventDrop}}})
	var v Verdict
	per := [2]int{}
	for i := range 300 {
		now := int64(1_000_000 + 7*i)
		port, p := 0, wr(1001+roce.PSN(i/2))
		if i%2 == 1 {
			port, p = 1, ack(1001+roce.PSN(i/2))
		}
		s.Process(now, port, build(t, p), &v)
		m, ok := roce.DecodeMirror(v.Mirror)
		if !ok {
			t.Fatalf("packet %d: mirror has no metadata", i)
		}
		wantEv := roce.EventNone
		if port == 0 && i/2 == 10 {
			wantEv = roce.EventDrop
		}
		if m.Seq != uint64(i+1) || v.Seq != m.Seq || m.TimestampNs != uint64(now) || m.Event != wantEv {
			t.Errorf("packet %d: seq %d (verdict %d), ts %d, event %v; want %d, %d, %v", i, m.Seq, v.Seq, m.TimestampNs, m.Event, i+1, now, wantEv)
		}
		if want := map[bool]int{true: 1}[i%3 == 1]; v.Dumper != want {
			t.Errorf("packet %d went to dumper %d, want %d", i, v.Dumper, want)
		}
		per[v.Dumper]++
	}
	c := s.Counters()
	if per != [2]int{200, 100} || !reflect.DeepEqual(c.MirroredPerDumper, []uint64{200, 100}) || c.Mirrored != 300 {
		t.Errorf("dumpers got %v (counters %v, total %d), want [200 100]", per, c.MirroredPerDumper, c.Mirrored)
	}
	if !reflect.DeepEqual(c.RxRoCE, []uint64{150, 150}) || !reflect.DeepEqual(c.TxRoCE, []uint64{150, 149}) {
		t.Errorf("rx %v tx %v; want rx [150 150], tx [150 149] (one drop toward the responder)", c.RxRoCE, c.TxRoCE)
	}
}

// TestWRRSmooth checks the weighted round robin's shares and that no dumper waits longer than its fair gap.
func TestWRRSmooth(t *testing.T) {
	w := NewWRR([]int{5, 1, 1})
	count := make([]int, 3)
	last := []int{-1, -1, -1}
	for i := range 700 {
		d := w.Next()
		count[d]++
		if d > 0 && last[d] >= 0 && i-last[d] != 7 {
			t.Fatalf("dumper %d picked at %d and %d; want every 7th pick", d, last[d], i)
		}
		last[d] = i
	}
	if !reflect.DeepEqual(count, []int{500, 100, 100}) {
		t.Errorf("shares %v, want [500 100 100]", count)
	}
}

// TestRSSRewriteUndo: the rewritten mirror copy has the rewrite port, a pseudo-random source port and the
// original source port in the checksum field; the dumper's undo gives back exactly the copy without rewrite.
func TestRSSRewriteUndo(t *testing.T) {
	conns := []ConnMeta{fig2("write")}
	plain := newSwitch(t, Config{Conns: conns})
	rss := newSwitch(t, Config{Conns: conns, RewritePort: 9741, Seed: 7})
	same := newSwitch(t, Config{Conns: conns, RewritePort: 9741, Seed: 7})
	other := newSwitch(t, Config{Conns: conns, RewritePort: 9741, Seed: 8})
	var v0, v1, v2, v3 Verdict
	ports := map[uint16]bool{}
	differs := false
	for i := range 64 {
		p := wr(1001 + roce.PSN(i))
		plain.Process(int64(i), 0, build(t, p), &v0)
		rss.Process(int64(i), 0, build(t, p), &v1)
		same.Process(int64(i), 0, build(t, p), &v2)
		other.Process(int64(i), 0, build(t, p), &v3)
		if !bytes.Equal(v1.Mirror, v2.Mirror) {
			t.Fatalf("packet %d: same seed, different rewrite", i)
		}
		differs = differs || !bytes.Equal(v1.Mirror, v3.Mirror)
		m := v1.Mirror
		u := 14 + 20
		if dport := binary.BigEndian.Uint16(m[u+2:]); dport != 9741 {
			t.Fatalf("packet %d: mirror dport %d, want 9741", i, dport)
		}
		if ck := binary.BigEndian.Uint16(m[u+6:]); ck != p.psnSport() {
			t.Errorf("packet %d: checksum field %#x, want the original source port %#x", i, ck, p.psnSport())
		}
		ports[binary.BigEndian.Uint16(m[u:])] = true
		if !roce.UndoRSS(m, 9741) || !bytes.Equal(m, v0.Mirror) {
			t.Fatalf("packet %d: undo does not restore the unrewritten copy", i)
		}
		if !bytes.Equal(v1.Forward[0], v0.Forward[0]) {
			t.Errorf("packet %d: the forwarded frame was rewritten too", i)
		}
	}
	if len(ports) < 32 {
		t.Errorf("only %d distinct source ports over 64 copies; RSS would not spread them", len(ports))
	}
	if !differs {
		t.Error("seeds 7 and 8 gave the same source ports")
	}
}

func (p pkt) psnSport() uint16 { return 0xc000 | uint16(p.psn&0x3fff) }

func TestNonRoCEAndBadPort(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}})
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	var v Verdict
	s.Process(0, 1, arp, &v)
	if v.RoCE || len(v.Forward) != 1 || &v.Forward[0][0] != &arp[0] || len(v.Mirror) != 0 || v.Dumper != -1 || v.OutPort != 0 || v.Conn != -1 {
		t.Errorf("ARP: roce %v forward %d mirror %d dumper %d out %d conn %d", v.RoCE, len(v.Forward), len(v.Mirror), v.Dumper, v.OutPort, v.Conn)
	}
	s.Process(0, 2, build(t, wr(1001)), &v)
	if len(v.Forward) != 0 || v.OutPort != -1 || len(v.Mirror) != 0 {
		t.Errorf("port 2: forward %d out %d mirror %d; want nothing", len(v.Forward), v.OutPort, len(v.Mirror))
	}
	// A RoCE packet of no known connection is still mirrored and forwarded.
	stranger := wr(1)
	stranger.qpn = 0x77
	s.Process(0, 0, build(t, stranger), &v)
	if v.Conn != -1 || len(v.Mirror) == 0 || len(v.Forward) != 1 || v.Iter != 0 {
		t.Errorf("unknown QP: conn %d mirror %d forward %d iter %d", v.Conn, len(v.Mirror), len(v.Forward), v.Iter)
	}
	c := s.Counters()
	if c.RxNonRoCE[1] != 1 || c.BadPort != 1 || c.Mirrored != 1 || c.RxRoCE[0] != 1 {
		t.Errorf("counters %+v", c)
	}
	b, _ := json.Marshal(c)
	for _, k := range []string{`"rx_roce":[1,0]`, `"tx_roce":[0,1]`, `"rx_non_roce":[0,1]`, `"mirrored":1`,
		`"mirrored_per_dumper":[1]`, `"dropped":0`, `"events":{`, `"drop":0`, `"bad_port":1`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("counters JSON %s lacks %s", b, k)
		}
	}
}

// TestNoAllocs: the common path allocates nothing when the caller reuses its Verdict, with and without a
// matching ECN entry, with RSS rewrite and several dumpers.
func TestNoAllocs(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, DumperWeights: []int{2, 1}, RewritePort: 9741,
		Intents: []Intent{{PSN: 1, Action: roce.EventECN}, {PSN: 50, Iter: 3, Action: roce.EventDrop}}})
	data, marked, a := build(t, wr(1001)), build(t, wr(1002)), build(t, ack(1001))
	var v Verdict
	s.Process(0, 0, data, &v) // grows v's buffers once
	for name, f := range map[string]func(){
		"data":   func() { s.Process(1, 0, data, &v) },
		"marked": func() { s.Process(1, 0, marked, &v) },
		"ack":    func() { s.Process(1, 1, a, &v) },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %.1f allocations per packet, want 0", name, n)
		}
	}
	if s.Hits()[0] == 0 {
		t.Error("the ECN entry never matched: the marked path was not measured")
	}
}

// script runs a fixed mixed workload through a fresh switch and returns a transcript of everything it produced.
func script(t *testing.T, seed uint64) ([]byte, Counters) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, DumperWeights: []int{3, 2}, RewritePort: 9741, Seed: seed,
		Intents: []Intent{
			{PSN: 2, Iter: 1, Action: roce.EventDrop}, {PSN: 4, Action: roce.EventReorder, Behind: 2},
			{PSN: 5, Iter: 2, Action: roce.EventDuplicate, Copies: 1}, {PSN: 6, Action: roce.EventCorrupt},
			{Kind: KindNAK, Nth: 0, Action: roce.EventDelay, DelayNs: 3000}, {PSN: 1, Iter: 2, Action: roce.EventRewrite, Field: "se", Value: 1},
		}})
	var out bytes.Buffer
	var v Verdict
	now := int64(0)
	for round := range 3 {
		for psn := 1001 + roce.PSN(round); psn <= 1010; psn++ {
			now += 100
			s.Process(now, 0, build(t, wr(psn)), &v)
			out.Write(v.Mirror)
			for _, f := range v.Forward {
				out.Write(f)
			}
			out.WriteString(string(rune('a'+v.Dumper)) + string(rune('0'+v.Iter)) + string(rune('0'+v.Event)))
			binary.Write(&out, binary.BigEndian, v.DelayNs)
		}
		now += 50
		s.Process(now, 1, build(t, nak(1001+roce.PSN(round))), &v)
		out.Write(v.Mirror)
		binary.Write(&out, binary.BigEndian, v.DelayNs)
	}
	for _, h := range s.Flush(now) {
		out.Write(h.Frame)
	}
	return out.Bytes(), s.Counters()
}

func TestDeterminism(t *testing.T) {
	a, ca := script(t, 42)
	b, cb := script(t, 42)
	if !bytes.Equal(a, b) || !reflect.DeepEqual(ca, cb) {
		t.Fatal("same inputs and seed gave different outputs")
	}
	c, _ := script(t, 43)
	if bytes.Equal(a, c) {
		t.Error("a different seed changed nothing (the RSS source ports should differ)")
	}
	if ca.Events["drop"] != 1 || ca.Events["reorder"] != 3 || ca.Events["duplicate"] != 1 || ca.Events["delay"] != 1 || ca.Events["rewrite"] != 1 {
		t.Errorf("events %v; the script should exercise each action", ca.Events)
	}
}

// TestMalformedNeverPanics feeds every truncation and random corruptions of valid frames through a switch with
// every action installed; it must not panic, and it must mirror exactly the frames it counts as RoCE.
func TestMalformedNeverPanics(t *testing.T) {
	var in []Intent
	acts := []Intent{{Action: roce.EventDrop}, {Action: roce.EventECN}, {Action: roce.EventCorrupt}, {Action: roce.EventDelay, DelayNs: 1},
		{Action: roce.EventReorder, Behind: 1}, {Action: roce.EventDuplicate, Copies: 1}, {Action: roce.EventRewrite, Field: "pad", Value: 2}}
	for i, a := range acts {
		a.PSN, a.Iter = i, 0
		in = append(in, a)
	}
	in = append(in, Intent{Kind: KindAck, Nth: 0, Action: roce.EventRewrite, Field: "migreq", Value: 1})
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, Intents: in, RewritePort: 9741})
	v6 := wr(1003)
	v6.src, v6.dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	seeds := [][]byte{build(t, wr(1001)), build(t, wr(1002)), build(t, ack(1001)), build(t, rreq(1004)), build(t, v6),
		build(t, cnpFrom(ipResp, ipReq, 0xfe))}
	rng := rand.New(rand.NewPCG(1, 2))
	var v Verdict
	n := 0
	for _, base := range seeds {
		for cut := 0; cut <= len(base); cut++ {
			s.Process(int64(n), n%2, append([]byte(nil), base[:cut]...), &v)
			n++
		}
		for range 300 {
			f := append([]byte(nil), base...)
			for range 1 + rng.IntN(4) {
				f[rng.IntN(len(f))] ^= byte(1 + rng.IntN(255))
			}
			s.Process(int64(n), n%2, f[:rng.IntN(len(f)+1)], &v)
			n++
		}
	}
	s.Flush(int64(n))
	c := s.Counters()
	if c.Mirrored+c.MirrorErrors != c.RxRoCE[0]+c.RxRoCE[1] || c.RxRoCE[0]+c.RxRoCE[1]+c.RxNonRoCE[0]+c.RxNonRoCE[1] != uint64(n) {
		t.Errorf("after %d frames: rx roce %v non-roce %v, mirrored %d, mirror errors %d", n, c.RxRoCE, c.RxNonRoCE, c.Mirrored, c.MirrorErrors)
	}
}

// BenchmarkProcess measures the common path: data packets in sequence against a table of 1000 entries, mirrored
// with RSS rewrite to two dumpers, plus the ACKs coming back.
func BenchmarkProcess(b *testing.B) {
	conn := fig2("write")
	var in []Intent
	for i := range 1000 {
		in = append(in, Intent{PSN: 1_000_000 + i, Iter: 1, Action: roce.EventDrop})
	}
	s := newSwitch(b, Config{Conns: []ConnMeta{conn}, Intents: in, DumperWeights: []int{1, 1}, RewritePort: 9741})
	const n = 256
	frames := make([][]byte, n)
	ports := make([]int, n)
	for i := range frames {
		if i%8 == 7 {
			frames[i], ports[i] = build(b, ack(1001+roce.PSN(i))), 1
		} else {
			p := wr(1001 + roce.PSN(i))
			p.payload = 1024
			frames[i] = build(b, p)
		}
	}
	var v Verdict
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for ; b.Loop(); i++ {
		s.Process(int64(i), ports[i%n], frames[i%n], &v)
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "packets/s")
}

// TestRealCaptures runs real NIC traffic through the switch (no events): every RoCE frame (v1 and v2) is
// forwarded byte for byte and mirrored with consecutive sequence numbers, and since the metadata lives in
// fields the ICRC masks (TTL/hop limit) or does not cover (MACs), the copies' ICRCs still verify, with the RSS
// rewrite undone.
func TestRealCaptures(t *testing.T) {
	for _, tc := range []struct {
		file        string
		frames, rce int
	}{
		{"oferby-proxy_roce.pcap", 123, 105},
		{"magnate3_cx_rocev1_plus_v2_mixed.pcap", -1, 624},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := trace.Open("../testdata/real-captures/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s := newSwitch(t, Config{RewritePort: 9741, DumperWeights: []int{1, 1}})
			var v Verdict
			frames, rce := 0, 0
			for {
				p, err := f.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				frame := append([]byte(nil), p.Data...)
				s.Process(p.Timestamp, frames%2, frame, &v)
				frames++
				if len(v.Forward) != 1 || !bytes.Equal(v.Forward[0], p.Data) {
					t.Fatalf("frame %d was not forwarded unchanged", p.Index)
				}
				if !v.RoCE {
					continue
				}
				rce++
				if v.Seq != uint64(rce) {
					t.Fatalf("frame %d: mirror seq %d, want %d", p.Index, v.Seq, rce)
				}
				roce.UndoRSS(v.Mirror, 9741)
				var m roce.Packet
				if !m.Decode(v.Mirror, len(v.Mirror)) {
					t.Fatalf("frame %d: mirror copy does not decode: %v", p.Index, m.Reason)
				}
				if m.CheckICRC() != roce.ICRCGood { // both captures have good ICRCs throughout
					t.Errorf("frame %d: mirror ICRC %v, want good", p.Index, m.CheckICRC())
				}
			}
			if (tc.frames >= 0 && frames != tc.frames) || rce != tc.rce {
				t.Errorf("%d frames, %d RoCE; want %d, %d", frames, rce, tc.frames, tc.rce)
			}
			if c := s.Counters(); c.Mirrored != uint64(rce) || c.RxRoCE[0]+c.RxRoCE[1] != uint64(rce) {
				t.Errorf("counters: mirrored %d rx %v; want %d", c.Mirrored, c.RxRoCE, rce)
			}
		})
	}
}

// TestMessageRelativeIter: an every-message event ("drop the 3rd packet of each message in round 1, and its
// first retransmission") hits every message although the connection's round has moved on after the first
// message's losses, because MsgIter counts rounds from the one in which the message started.
func TestMessageRelativeIter(t *testing.T) {
	conn := fig2("write")
	conn.ReqIPSN = 1
	conn.PacketsPerMsg, conn.NumMsgs = 4, 3
	var intents []Intent
	for m := 0; m < 3; m++ {
		intents = append(intents,
			Intent{PSN: m*4 + 2, Iter: 1, MsgIter: true, Action: roce.EventDrop, Source: "first"},
			Intent{PSN: m*4 + 2, Iter: 2, MsgIter: true, Action: roce.EventDrop, Source: "second"})
	}
	s := newSwitch(t, Config{Conns: []ConnMeta{conn}, Intents: intents})
	var v Verdict
	dropped := map[roce.PSN]int{}
	sent := 0
	// One message in flight at a time; go-back-N within it.
	for m := 0; m < 3; m++ {
		first, last := roce.PSN(1+4*m), roce.PSN(4+4*m)
		expected := first
		for round := 0; expected <= last; round++ {
			if round > 5 {
				t.Fatalf("message %d never completes", m)
			}
			for psn := expected; psn <= last; psn++ {
				s.Process(int64(sent), 0, build(t, wr(psn)), &v)
				sent++
				if len(v.Forward) == 0 {
					dropped[psn]++
					continue
				}
				if psn == expected {
					expected++
				}
			}
		}
	}
	for m := 0; m < 3; m++ {
		if psn := roce.PSN(3 + 4*m); dropped[psn] != 2 {
			t.Errorf("message %d: PSN %d dropped %d times, want 2 (round 1 and its retransmission)", m, psn, dropped[psn])
		}
	}
	if len(dropped) != 3 {
		t.Errorf("dropped %v, want only the third packet of each message", dropped)
	}
	// Without MsgIter the same events only fire in the first message: the rounds go on from there.
	for i := range intents {
		intents[i].MsgIter = false
	}
	s = newSwitch(t, Config{Conns: []ConnMeta{conn}, Intents: intents})
	n := 0
	for _, psn := range []roce.PSN{1, 2, 3, 4, 3, 4, 3, 4, 5, 6, 7, 8} {
		s.Process(0, 0, build(t, wr(psn)), &v)
		if len(v.Forward) == 0 {
			n++
		}
	}
	if n != 2 {
		t.Errorf("connection-round events dropped %d packets, want 2 (message 1 only)", n)
	}
}
