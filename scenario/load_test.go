package scenario

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, src string) *Scenario {
	t.Helper()
	s, err := Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestListing2(t *testing.T) {
	s, err := Load("testdata/listing2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != FormatLuminaGo || s.IndexBase != 1 || s.Seed != 7 || s.Testbed != "sim" {
		t.Errorf("format %q base %d seed %d testbed %q; want lumina-go 1 7 sim", s.Format, s.IndexBase, s.Seed, s.Testbed)
	}
	wantIPs := []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24"), netip.MustParsePrefix("10.0.0.12/24")}
	if !slices.Equal(s.Requester.NIC.IPList, wantIPs) || s.Requester.NIC.Type != "cx5" || s.Responder.NIC.Type != "cx5" {
		t.Errorf("requester NIC %+v", s.Requester.NIC)
	}
	r := s.Requester.RoCEParameters
	if r.DCQCNRPEnable || !r.DCQCNNPEnable || r.MinTimeBetweenCNPsUs == nil || *r.MinTimeBetweenCNPsUs != 0 || r.AdaptiveRetrans || !r.SlowRestart {
		t.Errorf("requester roce-parameters %+v", r)
	}
	// The responder gave no roce-parameters: defaults.
	if rr := s.Responder.RoCEParameters; !rr.DCQCNRPEnable || !rr.DCQCNNPEnable || rr.MinTimeBetweenCNPsUs != nil || rr.SlowRestart {
		t.Errorf("responder roce-parameters %+v, want defaults", rr)
	}
	tr := s.Traffic
	if tr.NumConnections != 2 || tr.Verb != VerbWrite || tr.NumMsgsPerQP != 10 || tr.MTU != 1024 || tr.MessageSize != 10240 ||
		!tr.MultiGID || !tr.BarrierSync || tr.TxDepth != 1 || tr.MinRetransmitTimeout != 14 || tr.MaxRetransmitRetry != 7 {
		t.Errorf("traffic %+v", tr)
	}
	if tr.PacketsPerMessage() != 10 || tr.PacketsPerConnection() != 100 {
		t.Errorf("packets per message %d per connection %d; want 10, 100", tr.PacketsPerMessage(), tr.PacketsPerConnection())
	}
	want := []string{
		"{qpn: 1, psn: 4, iter: 1, type: ecn, packet: data}",
		"{qpn: 2, psn: 5, iter: 1, type: drop, packet: data}",
		"{qpn: 2, psn: 5, iter: 2, type: drop, packet: data}",
	}
	if got := eventStrings(s.Events); !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
	if e := s.Events[1]; e.Line != 28 || e.Col != 7 {
		t.Errorf("event 1 at %d:%d; want 28:7 (its '{')", e.Line, e.Col)
	}
	if len(s.IgnoredKeys) != 0 {
		t.Errorf("ignored keys %q; want none", s.IgnoredKeys)
	}
}

func eventStrings(es []Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return out
}

func TestReferenceExampleLoadsUnchanged(t *testing.T) {
	s, err := Load("testdata/reference-example.yml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != FormatLumina || s.IndexBase != 0 {
		t.Errorf("format %q base %d; want lumina, 0", s.Format, s.IndexBase)
	}
	if s.Requester.NIC.Type != "cx6dx" || s.Responder.NIC.Type != "cx6dx" {
		t.Errorf("NIC types %q %q; want cx6dx (CX6)", s.Requester.NIC.Type, s.Responder.NIC.Type)
	}
	if len(s.Requester.NIC.IPList) != 4 || s.Responder.NIC.IPList[3] != netip.MustParsePrefix("10.0.0.32/24") {
		t.Errorf("ip lists %v %v", s.Requester.NIC.IPList, s.Responder.NIC.IPList)
	}
	if s.Requester.RoCEParameters.DCQCNRPEnable || !s.Responder.RoCEParameters.DCQCNRPEnable || !s.Requester.RoCEParameters.SlowRestart {
		t.Errorf("capitalised booleans misread: %+v %+v", s.Requester.RoCEParameters, s.Responder.RoCEParameters)
	}
	if s.Traffic.NumConnections != 4 || s.Traffic.MessageSize != 1024000 || s.Traffic.PacketsPerMessage() != 1000 || s.Traffic.BarrierSync {
		t.Errorf("traffic %+v", s.Traffic)
	}
	if s.Network.SnapLen != 128 || s.RewriteUDPDstPort != 9741 || s.Network.Dumpers != 2 {
		t.Errorf("snap-len %d port %d dumpers %d", s.Network.SnapLen, s.RewriteUDPDstPort, s.Network.Dumpers)
	}
	// The reference's orchestrator copies each event to every message: every-msg.
	want := []string{
		"{qpn: 0, psn: 4, iter: 1, every-msg: true, type: ecn, packet: data}",
		"{qpn: 1, psn: 4, iter: 1, every-msg: true, type: ecn, packet: data}",
		"{qpn: 2, psn: 3, iter: 1, every-msg: true, type: drop, packet: data}",
		"{qpn: 3, psn: 5, iter: 1, every-msg: true, type: drop, packet: data}",
	}
	if got := eventStrings(s.Events); !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
	// 4 top-level, 9 switch, 2x(4 host + 5 nic), 2x(4 + 2 pkt-dump-conf + 4 nic), 1 traffic.listen-port.
	if len(s.IgnoredKeys) != 4+9+18+20+1 {
		t.Errorf("%d ignored keys; want 52: %q", len(s.IgnoredKeys), s.IgnoredKeys)
	}
	for _, k := range []string{
		"testdata/reference-example.yml:3:1: local-workspace",
		"testdata/reference-example.yml:10:3: switch.sde-path",
		"testdata/reference-example.yml:28:5: requester.nic.pci-addr",
		"testdata/reference-example.yml:76:5: requester-mirror.pkt-dump-conf.num-pkts",
		"testdata/reference-example.yml:104:3: traffic.listen-port",
	} {
		if !slices.Contains(s.IgnoredKeys, k) {
			t.Errorf("ignored keys lack %q", k)
		}
	}
	if slices.ContainsFunc(s.IgnoredKeys, func(k string) bool { return strings.HasSuffix(k, "snap-len") }) {
		t.Error("pkt-dump-conf.snap-len is used, yet recorded as ignored")
	}
}

func TestDefaults(t *testing.T) {
	s := mustParse(t, "testbed: sim\n")
	want := defaultScenario()
	want.Path = "x.yaml"
	want.IgnoredKeys = nil
	if s.Seed != 1 || s.IndexBase != 1 || s.RewriteUDPDstPort != 9741 || s.Format != FormatLuminaGo {
		t.Errorf("seed %d base %d port %d format %q", s.Seed, s.IndexBase, s.RewriteUDPDstPort, s.Format)
	}
	if s.Requester.NIC.IPList[0].String() != "10.0.0.2/24" || s.Responder.NIC.IPList[0].String() != "10.0.0.3/24" {
		t.Errorf("default IPs %v %v", s.Requester.NIC.IPList, s.Responder.NIC.IPList)
	}
	tr := s.Traffic
	if tr.NumConnections != 1 || tr.Verb != "write" || tr.NumMsgsPerQP != 1 || tr.MTU != 1024 || tr.MessageSize != 10240 ||
		tr.TxDepth != 1 || tr.MinRetransmitTimeout != 14 || tr.MaxRetransmitRetry != 7 || tr.RNRRetry != 7 || len(tr.DSCPList) != 0 {
		t.Errorf("traffic defaults %+v", tr)
	}
	n := s.Network
	if n.LinkGbps != 0 || n.PropagationNs != 100 || n.SwitchLatencyNs != 300 || n.Dumpers != 2 || !slices.Equal(n.DumperWeights, []int{1, 1}) ||
		n.SnapLen != 128 || n.EventTableCapacity != 8192 || n.RunTimeoutMs != 10000 {
		t.Errorf("network defaults %+v", n)
	}
	if !s.Requester.RoCEParameters.DCQCNRPEnable || !s.Requester.RoCEParameters.DCQCNNPEnable || s.Requester.RoCEParameters.AdaptiveRetrans {
		t.Errorf("roce defaults %+v", s.Requester.RoCEParameters)
	}
}

func TestIndexBaseChoice(t *testing.T) {
	for _, c := range []struct {
		src  string
		base int
		fmt  string
	}{
		{"traffic: {num-qps: 2}\n", 1, FormatLuminaGo},
		{"result-path: /tmp/r\n", 0, FormatLumina},
		{"num-repeats: 3\n", 0, FormatLumina},
		{"result-path: /tmp/r\nindex-base: 1\n", 1, FormatLumina},
		{"index-base: 0\n", 0, FormatLuminaGo},
	} {
		s := mustParse(t, c.src)
		if s.IndexBase != c.base || s.Format != c.fmt {
			t.Errorf("%q: base %d format %q; want %d %q", c.src, s.IndexBase, s.Format, c.base, c.fmt)
		}
	}
}

func TestAliases(t *testing.T) {
	s := mustParse(t, `
requester: {nic: {type: cx4}}
responder: {nic: {type: E810}}
traffic:
  num-qps: 3
  data-pkt-events:
    - {qpn: 1, psn: 2, type: bit-error}
    - {qpn: 2, psn: 2, type: BIT-ERROR}
`)
	if s.Requester.NIC.Type != "cx4lx" || s.Responder.NIC.Type != "e810" {
		t.Errorf("NIC types %q %q; want cx4lx e810", s.Requester.NIC.Type, s.Responder.NIC.Type)
	}
	if s.Traffic.NumConnections != 3 {
		t.Errorf("num-qps alias: %d connections; want 3", s.Traffic.NumConnections)
	}
	for _, e := range s.Events {
		if e.Type != EventCorrupt || e.Iter != 1 || e.Packet != PacketData {
			t.Errorf("event %v; want corrupt, iter 1, packet data", e)
		}
	}
	for _, c := range []struct{ in, want string }{{"Cx5", "cx5"}, {"cx6", "cx6dx"}, {"IRN", "irn"}, {"ideal", "ideal"}, {"profiles/MyCard.yaml", "profiles/MyCard.yaml"}} {
		s := mustParse(t, "requester: {nic: {type: "+c.in+"}}\n")
		if s.Requester.NIC.Type != c.want {
			t.Errorf("type %q -> %q; want %q", c.in, s.Requester.NIC.Type, c.want)
		}
	}
	s = mustParse(t, "requester: {nic: {type: cards/x.yml}}\n")
	s.Path = "/scen/a.yaml"
	if got := s.ResolvePath(s.Requester.NIC.Type); got != "/scen/cards/x.yml" {
		t.Errorf("ResolvePath = %q; want /scen/cards/x.yml", got)
	}
	for typ, want := range map[string]string{"cards/x.yml": "/scen/cards/x.yml", "y.yaml": "/scen/y.yaml", "cx5": "cx5"} {
		if got := s.ProfileRef(typ); got != want {
			t.Errorf("ProfileRef(%q) = %q; want %q", typ, got, want)
		}
	}
}

func TestSendRead(t *testing.T) {
	s := mustParse(t, `
traffic:
  rdma-verb: send_read
  num-qps: "2,3"
  message-size: 4096
  num-msgs-per-qp: 2
  data-pkt-events:
    - {qpn: 3-5, psn: 5, type: drop, packet: read-req}
`)
	tr := s.Traffic
	if tr.NumConnections != 5 || tr.NumSendQPs != 2 || tr.NumReadQPs != 3 {
		t.Errorf("send_read counts %d = %d + %d; want 5 = 2 + 3", tr.NumConnections, tr.NumSendQPs, tr.NumReadQPs)
	}
	if tr.IsReadQP(1) || !tr.IsReadQP(2) {
		t.Error("IsReadQP: send QPs must come first")
	}
	if len(s.Events) != 3 || s.Events[0].QP != 3 || s.Events[2].QP != 5 || s.Events[0].Packet != PacketReadReq {
		t.Errorf("events %v", eventStrings(s.Events))
	}
}

func TestQPNForms(t *testing.T) {
	for _, c := range []struct {
		qpn  string
		base int
		want []int
	}{
		{"all", 1, []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{"all", 0, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"[1, 3, 5]", 1, []int{1, 3, 5}},
		{"\"2-4\"", 1, []int{2, 3, 4}},
		{"1-8", 1, []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{"[1, 4-6, 8]", 1, []int{1, 4, 5, 6, 8}},
		{"[0, 7]", 0, []int{0, 7}},
		{"7", 0, []int{7}},
	} {
		src := "index-base: " + string(rune('0'+c.base)) + "\ntraffic:\n  num-connections: 8\n  data-pkt-events:\n    - {qpn: " + c.qpn + ", psn: " + string(rune('0'+c.base)) + ", type: drop}\n"
		s := mustParse(t, src)
		var got []int
		for _, e := range s.Events {
			got = append(got, e.QP)
			if e.Line != 5 || e.Col != 7 {
				t.Errorf("qpn %s: expanded event at %d:%d; want the entry's 5:7", c.qpn, e.Line, e.Col)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("qpn %s (base %d): %v; want %v", c.qpn, c.base, got, c.want)
		}
	}
}

func TestExtendedEvents(t *testing.T) {
	s := mustParse(t, `
traffic:
  num-connections: 2
  num-msgs-per-qp: 4
  message-size: 51200
events:
  - {qpn: 1, psn: 1, every: 50, type: ecn}
  - {qpn: 1, psn: 5, msg: 2, type: drop, iter: 2}
  - {qpn: 2, psn: all, every-msg: true, type: delay, delay-us: 2.5}
  - {qpn: 2, psn: 3, type: reorder, behind: 2}
  - {qpn: 2, psn: 4, type: duplicate}
  - {qpn: 1, psn: 1, msg: 1, type: rewrite, field: migreq, value: 1}
  - {qpn: 1, nth: 2, packet: nak, type: delay, delay-us: 10}
  - {qpn: 2, nth: 1, packet: cnp, type: drop}
  - {qpn: 2, nth: 3, packet: ack, type: duplicate, copies: 3}
`)
	want := []string{
		"{qpn: 1, psn: 1, iter: 1, every: 50, type: ecn, packet: data}",
		"{qpn: 1, psn: 5, iter: 2, msg: 2, type: drop, packet: data}",
		"{qpn: 2, psn: all, iter: 1, every-msg: true, type: delay, packet: data, delay-us: 2.5}",
		"{qpn: 2, psn: 3, iter: 1, type: reorder, packet: data, behind: 2}",
		"{qpn: 2, psn: 4, iter: 1, type: duplicate, packet: data, copies: 1}",
		"{qpn: 1, psn: 1, iter: 1, msg: 1, type: rewrite, packet: data, field: migreq, value: 1}",
		"{qpn: 1, nth: 2, iter: 1, type: delay, packet: nak, delay-us: 10}",
		"{qpn: 2, nth: 1, iter: 1, type: drop, packet: cnp}",
		"{qpn: 2, nth: 3, iter: 1, type: duplicate, packet: ack, copies: 3}",
	}
	if got := eventStrings(s.Events); !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
}

func TestNetworkAndETS(t *testing.T) {
	s := mustParse(t, `
requester:
  nic:
    type: cx6dx
    prio-dscp-map: {0: "07,06", 3: "26,27"}
    ets:
      dscp-to-tc: {26: 1, 0: 0}
      traffic-classes:
        - {tc: 0, weight: 50}
        - {tc: 1, weight: 50}
        - {tc: 7, strict: true}
network:
  link-gbps: 25
  dumper-weights: [3, 1, 1]
  snap-len: 256
  run-timeout-ms: 500
`)
	n := s.Requester.NIC
	if !slices.Equal(n.PrioDSCPMap[0], []int{7, 6}) || !slices.Equal(n.PrioDSCPMap[3], []int{26, 27}) {
		t.Errorf("prio-dscp-map %v", n.PrioDSCPMap)
	}
	if n.ETS == nil || n.ETS.DSCPToTC[26] != 1 || len(n.ETS.Classes) != 3 || !n.ETS.Classes[2].Strict || n.ETS.Classes[1].Weight != 50 {
		t.Errorf("ets %+v", n.ETS)
	}
	nw := s.Network
	if nw.LinkGbps != 25 || nw.Dumpers != 3 || !slices.Equal(nw.DumperWeights, []int{3, 1, 1}) || nw.SnapLen != 256 || nw.RunTimeoutMs != 500 {
		t.Errorf("network %+v", nw)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	_, err := Parse([]byte("traffic: {mtu: 1000, tx-depth: 0}\nbogus: 1\n"), "x.yaml")
	var es Errors
	if !errors.As(err, &es) || len(es) != 3 {
		t.Fatalf("want 3 errors as Errors, got %v", err)
	}
	var one *Error
	if !errors.As(err, &one) || one.Line != 1 || one.Path != "traffic.mtu" {
		t.Errorf("errors.As(*Error) = %+v; want the first, traffic.mtu at line 1", one)
	}
	if _, err := Load("testdata/does-not-exist.yaml"); err == nil || !strings.HasPrefix(err.Error(), "reading scenario: ") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestWithSeed(t *testing.T) {
	s := mustParse(t, "seed: 5\n")
	s.WithSeed(18446744073709551615)
	if s.Seed != 18446744073709551615 {
		t.Errorf("seed %d", s.Seed)
	}
	if s := mustParse(t, "seed: 18446744073709551615\n"); s.Seed != 18446744073709551615 {
		t.Errorf("max uint64 seed read as %d", s.Seed)
	}
}

func TestAnchorsAndAliases(t *testing.T) {
	s := mustParse(t, `
requester:
  nic: {type: &card cx6, ip-list: [10.0.0.2/24]}
  roce-parameters: &rp {adaptive-retrans: true}
responder:
  nic: {type: *card, ip-list: [10.0.0.3/24]}
  roce-parameters: *rp
`)
	if s.Responder.NIC.Type != "cx6dx" || s.Responder.NIC.IPList[0].String() != "10.0.0.3/24" || !s.Responder.RoCEParameters.AdaptiveRetrans {
		t.Errorf("aliases not resolved: responder %+v", s.Responder)
	}
}

// iter: all targets every round (Iter 0) and survives the effective scenario's round trip.
func TestIterAll(t *testing.T) {
	y := "traffic: {num-connections: 1}\nevents:\n  - {qpn: 1, psn: 10, iter: all, type: drop}\n"
	sc, err := Parse([]byte(y), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Events) != 1 || sc.Events[0].Iter != 0 {
		t.Fatalf("events %+v, want one with iter 0", sc.Events)
	}
	var b strings.Builder
	if err := sc.WriteEffective(&b); err != nil {
		t.Fatal(err)
	}
	back, err := Parse([]byte(b.String()), "b.yaml")
	if err != nil {
		t.Fatalf("effective scenario does not load: %v\n%s", err, b.String())
	}
	if back.Events[0].Iter != 0 {
		t.Fatalf("round trip lost iter: all: %+v", back.Events[0])
	}
	if _, err := Parse([]byte(strings.Replace(y, "iter: all", "iter: 0", 1)), "c.yaml"); err == nil {
		t.Fatal("iter: 0 accepted; rounds count from 1 (or all)")
	}
}
