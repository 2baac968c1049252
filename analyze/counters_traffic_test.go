package analyze

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// counterTrace: a corrupted packet recovered by NAK, then a CE-marked packet answered by a CNP.
func counterTrace(t *testing.T) *builder {
	b := &builder{t: t}
	b.data(wc, 0, roce.RCWriteFirst, 0, 0)
	b.data(wc, 1, roce.RCWriteMiddle, roce.EventCorrupt, 1)
	b.data(wc, 2, roce.RCWriteMiddle, 0, 2)
	b.nak(wc, 1, 3)
	b.data(wc, 1, roce.RCWriteMiddle, 0, 6)
	b.data(wc, 2, roce.RCWriteMiddle, 0, 7)
	b.data(wc, 3, roce.RCWriteLast, roce.EventECN, 8)
	b.cnpTo(wc, true, 9)
	b.ack(wc, 3, 10)
	return b
}

func snap(diff map[string]uint64) (map[string]uint64, map[string]uint64) {
	start, finish := map[string]uint64{}, map[string]uint64{}
	for k, v := range diff {
		start[k] = 100
		finish[k] = 100 + v
	}
	return start, finish
}

func counterMap(cc []CounterCheck) map[string]CounterCheck {
	m := map[string]CounterCheck{}
	for _, c := range cc {
		m[c.Host+"/"+c.Name] = c
	}
	return m
}

func TestCountersNVIDIAMatchAndNotExposed(t *testing.T) {
	rs, rf := snap(map[string]uint64{"packet_seq_err": 1, "local_ack_timeout_err": 0, "rx_icrc_encapsulated": 0,
		"np_ecn_marked_roce_packets": 0, "np_cnp_sent": 0}) // implied_nak_seq_err is missing: not exposed
	ps, pf := snap(map[string]uint64{"out_of_sequence": 1, "duplicate_request": 0, "rx_icrc_encapsulated": 1,
		"np_ecn_marked_roce_packets": 1, "np_cnp_sent": 1})
	opts := gbnOpts(4, 1)
	opts.Counters = []HostCounters{{Host: "requester", Vendor: "nvidia", Start: rs, Finish: rf},
		{Host: "responder", Vendor: "nvidia", Start: ps, Finish: pf}}
	res := counterTrace(t).run(opts)
	wantOK(t, check(t, res, "gbn", 1))
	if len(res.Counters) != 15 {
		t.Fatalf("counters %+v", res.Counters)
	}
	for _, c := range res.Counters {
		if !c.OK {
			t.Errorf("counter %+v failed", c)
		}
	}
	m := counterMap(res.Counters)
	if c := m["requester/implied_nak_seq_err"]; c.Actual != nil || c.Note != "not exposed by this NIC" {
		t.Errorf("missing counter: %+v", c)
	}
	if c := m["responder/rx_icrc_encapsulated"]; c.Expected != 1 || c.Actual == nil || *c.Actual != 1 {
		t.Errorf("rx_icrc_encapsulated: %+v", c)
	}
	if !res.OK() {
		t.Errorf("analysis not OK")
	}
}

// E810: cnpSent never increases although a CNP is on the wire (Lumina table 2): a failed counter check.
func TestCountersE810CNPSentBug(t *testing.T) {
	ps, pf := snap(map[string]uint64{"cnpSent": 0, "RxECNMrkd": 1, "cnpHandled": 0})
	opts := gbnOpts(4, 1)
	opts.Responder.Vendor = "intel"
	opts.Counters = []HostCounters{{Host: "responder", Start: ps, Finish: pf}}
	res := counterTrace(t).run(opts)
	m := counterMap(res.Counters)
	if c := m["responder/cnpSent"]; c.OK || c.Expected != 1 || c.Actual == nil || *c.Actual != 0 ||
		c.Note != "the trace shows 1 CNPs this host sent in the trace" {
		t.Errorf("cnpSent: %+v", c)
	}
	if c := m["responder/RxECNMrkd"]; !c.OK {
		t.Errorf("RxECNMrkd: %+v", c)
	}
	if len(res.Counters) != 4 || res.OK() {
		t.Errorf("counters %+v ok=%v", res.Counters, res.OK())
	}
}

// The reaction point handles the CNPs delivered to its host when DCQCN's RP is on, and ignores them when off.
func TestCountersCNPHandledOrIgnored(t *testing.T) {
	for _, rpOn := range []bool{true, false} {
		var handled, ignored uint64
		if rpOn {
			handled = 1
		} else {
			ignored = 1
		}
		rs, rf := snap(map[string]uint64{"cnpHandled": handled, "cnpIgnored": ignored})
		opts := gbnOpts(4, 1)
		opts.Requester.Vendor, opts.Requester.RPEnabled = "intel", rpOn
		opts.Counters = []HostCounters{{Host: "requester", Start: rs, Finish: rf}}
		res := counterTrace(t).run(opts)
		m := counterMap(res.Counters)
		for _, name := range []string{"requester/cnpHandled", "requester/cnpIgnored"} {
			if c := m[name]; !c.OK {
				t.Errorf("rp on=%v: %+v", rpOn, c)
			}
		}
		// The other way round is a failed check.
		rs, rf = snap(map[string]uint64{"cnpHandled": ignored, "cnpIgnored": handled})
		opts.Counters = []HostCounters{{Host: "requester", Start: rs, Finish: rf}}
		res = counterTrace(t).run(opts)
		if m := counterMap(res.Counters); m["requester/cnpHandled"].OK || m["requester/cnpIgnored"].OK {
			t.Errorf("rp on=%v: swapped handled/ignored counters passed: %+v", rpOn, res.Counters)
		}
	}
}

// CX4 Lx: implied_nak_seq_err stays 0 when READ responses are dropped and re-requested; CX5 counts it.
func TestCountersCX4ImpliedNAKBug(t *testing.T) {
	for _, tc := range []struct {
		actual uint64
		ok     bool
	}{{0, false}, {1, true}} {
		b := &builder{t: t}
		b.readMsg(rc, 0, map[int]bool{1: true}, 0)
		b.readReq(rc, 1, 3072, 0, 5)
		b.readResp(rc, 1, roce.RCReadResponseFirst, 0, 7)
		b.readResp(rc, 2, roce.RCReadResponseMiddle, 0, 8)
		b.readResp(rc, 3, roce.RCReadResponseLast, 0, 9)
		s, f := snap(map[string]uint64{"implied_nak_seq_err": tc.actual})
		opts := readOpts(4, 1)
		opts.Counters = []HostCounters{{Host: "requester", Vendor: "nvidia", Start: s, Finish: f}}
		res := b.run(opts)
		if c := counterMap(res.Counters)["requester/implied_nak_seq_err"]; c.OK != tc.ok || c.Expected != 1 {
			t.Errorf("actual %d: %+v", tc.actual, c)
		}
	}
}

// Innocent connections 20x slower than the ideal are flagged; at 2x they are not.
func TestNoisyNeighbor(t *testing.T) {
	for _, tc := range []struct {
		ideal   float64
		flagged bool
	}{{0.25, true}, {2.5, false}} {
		b := &builder{t: t}
		c2 := mkConn("10.0.0.4", "10.0.0.3", 0x12, 0x23, 7000)
		b.data(wc, 0, roce.RCWriteOnly, roce.EventDrop, 0) // the victim
		b.data(c2, 0, roce.RCWriteOnly, 0, 1)              // innocent: 5 us message
		b.data(wc, 0, roce.RCWriteOnly, 0, 4)
		b.ack(c2, 0, 6)
		b.ack(wc, 0, 7)
		opts := Options{IndexBase: 1, IdealMCTUs: tc.ideal, Conns: []Conn{wc.conn(0, VerbWrite, 1, 1, 1024), c2.conn(1, VerbWrite, 1, 1, 1024)}}
		res := b.run(opts)
		nn := res.NoisyNeighbor
		if nn == nil || len(nn.InnocentQPs) != 1 || nn.InnocentQPs[0] != 2 || nn.InnocentMedianMCTUs != 5 ||
			nn.Flagged != tc.flagged || nn.Ratio != 5/tc.ideal {
			t.Fatalf("ideal %v: noisy neighbor %+v", tc.ideal, nn)
		}
		if c := check(t, res, "noisy-neighbor", 2); c.OK == tc.flagged {
			t.Errorf("ideal %v: check %+v", tc.ideal, c)
		}
	}
}

// ETS: the slowed connection leaves bandwidth; the other one must take it.
func TestETSWorkConservation(t *testing.T) {
	for _, tc := range []struct {
		other float64
		want  bool
	}{{50, false}, {80, true}} {
		b := &builder{t: t}
		c2 := mkConn("10.0.0.4", "10.0.0.3", 0x12, 0x23, 7000)
		b.data(wc, 0, roce.RCWriteOnly, roce.EventECN, 0)
		b.data(c2, 0, roce.RCWriteOnly, 0, 1)
		opts := Options{IndexBase: 1, LinkGbps: 100, Conns: []Conn{wc.conn(0, VerbWrite, 1, 1, 1024), c2.conn(1, VerbWrite, 1, 1, 1024)},
			Traffic: []TrafficIn{{Conn: 0, GoodputGbps: 20, Class: 0, MCTUs: []float64{3}}, {Conn: 1, GoodputGbps: tc.other, Class: 1}}}
		res := b.run(opts)
		if res.ETS == nil || res.ETS.WorkConserving != tc.want || res.ETS.SlowedQP != 1 || res.ETS.OtherQP != 2 {
			t.Fatalf("other %v Gb/s: ets %+v", tc.other, res.ETS)
		}
		if c := check(t, res, "ets", 2); c.OK != tc.want {
			t.Errorf("ets check %+v", c)
		}
		if res.Traffic[0].Source != "generator" || res.Traffic[0].MCTUs[0] != 3 || res.Traffic[1].MCTUs == nil {
			t.Errorf("traffic %+v", res.Traffic)
		}
	}
}

// Comment metadata (trace.pcapng) is honored: event=drop makes the packet undelivered.
func TestCommentMetadata(t *testing.T) {
	b := &builder{t: t, plain: true}
	b.data(wc, 0, roce.RCWriteFirst, 0, 0)
	b.data(wc, 1, roce.RCWriteLast, 0, 1)
	b.frames[0].comment = "event=drop iter=1 seq=1"
	b.frames[1].comment = "event=none iter=1 seq=2"
	b.nak(wc, 0, 2)
	b.data(wc, 0, roce.RCWriteFirst, 0, 5)
	b.data(wc, 1, roce.RCWriteLast, 0, 6)
	b.ack(wc, 1, 7)
	res := b.run(gbnOpts(2, 1))
	wantOK(t, check(t, res, "gbn", 1))
	if res.Metadata != "comment" || len(res.Retransmissions) != 1 || res.Retransmissions[0].Event != "drop" ||
		fv(res.Retransmissions[0].LatencyUs) != 5 {
		t.Fatalf("metadata %s retransmissions %+v", res.Metadata, res.Retransmissions)
	}
}

// An IPv6 mirror dump (the switch writes the event into the hop limit) is read as mirrored: the drop and its
// switch timestamps are the frames'.
func TestIPv6MirrorMetadata(t *testing.T) {
	wc6 := mkConn("fd00::2", "fd00::3", 0x11, 0x22, 1001)
	b := &builder{t: t, ipv6: true}
	b.data(wc6, 0, roce.RCWriteFirst, roce.EventDrop, 0)
	b.data(wc6, 1, roce.RCWriteLast, 0, 1)
	b.nak(wc6, 0, 2)
	b.data(wc6, 0, roce.RCWriteFirst, 0, 5)
	b.data(wc6, 1, roce.RCWriteLast, 0, 6)
	b.ack(wc6, 1, 7)
	res := b.run(Options{IndexBase: 1, Conns: []Conn{wc6.conn(0, VerbWrite, 2, 1, 1024)}})
	wantOK(t, check(t, res, "gbn", 1))
	if res.Metadata != "mirror" || len(res.Retransmissions) != 1 || res.Retransmissions[0].Event != "drop" ||
		fv(res.Retransmissions[0].LatencyUs) != 5 {
		t.Fatalf("metadata %s retransmissions %+v", res.Metadata, res.Retransmissions)
	}
}

// untaggedReader is a reader whose captures are not Lumina dumps (analyze.MirrorTagger).
type untaggedReader struct{ sliceReader }

func (untaggedReader) MirrorTagged() bool { return false }

// A reader that knows its capture is no Lumina dump (ordinary traffic sent with TTL 1) keeps the analyzer from
// reading the TTL as an event; without that knowledge the first packet's TTL decides, as before.
func TestMirrorTaggerNo(t *testing.T) {
	b := &builder{t: t, plain: true}
	b.data(wc, 0, roce.RCWriteOnly, 0, 0)
	b.data(wc, 1, roce.RCWriteOnly, 0, 1)
	for _, f := range b.frames { // TTL 1, "drop", with the IPv4 checksum fixed
		f.data[roce.EthernetLen+8] = 1
		f.data[roce.EthernetLen+10], f.data[roce.EthernetLen+11] = 0, 0
		cs := roce.IPv4Checksum(f.data[roce.EthernetLen : roce.EthernetLen+20])
		f.data[roce.EthernetLen+10], f.data[roce.EthernetLen+11] = byte(cs>>8), byte(cs)
	}
	res, err := Analyze(&untaggedReader{sliceReader{frames: b.frames}}, gbnOpts(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Metadata != "none" || len(res.Retransmissions) != 0 {
		t.Errorf("untagged capture: metadata %s, %d retransmissions; want none", res.Metadata, len(res.Retransmissions))
	}
	if res := b.run(gbnOpts(1, 2)); res.Metadata != "mirror" {
		t.Errorf("a reader that does not know: metadata %s; want mirror (the first packet's TTL decides)", res.Metadata)
	}
}

// The comment's other separators and numeric events (trace.ParseComment) read as the testbed's form does.
func TestCommentMetadataSeparators(t *testing.T) {
	b := &builder{t: t, plain: true}
	b.data(wc, 0, roce.RCWriteFirst, 0, 0)
	b.data(wc, 1, roce.RCWriteLast, 0, 1)
	b.frames[0].comment = "iter=1,event=1;seq=1"
	b.frames[1].comment = "iter=1\tevent=none\nseq=2"
	b.nak(wc, 0, 2)
	b.data(wc, 0, roce.RCWriteFirst, 0, 5)
	b.data(wc, 1, roce.RCWriteLast, 0, 6)
	b.ack(wc, 1, 7)
	res := b.run(gbnOpts(2, 1))
	if res.Metadata != "comment" || len(res.Retransmissions) != 1 || res.Retransmissions[0].Event != "drop" {
		t.Fatalf("metadata %s retransmissions %+v", res.Metadata, res.Retransmissions)
	}
}
