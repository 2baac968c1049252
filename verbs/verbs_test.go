package verbs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/scenario"
)

func load(t *testing.T, body string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(body), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

const mixed = `testbed: rxe-vm
seed: 5
requester: {nic: {type: ideal, ip-list: [10.0.0.2/24, 10.0.0.4/24]}}
responder: {nic: {type: ideal, ip-list: [10.0.0.3/24, 10.0.0.5/24, 10.0.0.7/24]}}
traffic:
  num-connections: "3,2"
  rdma-verb: send_read
  num-msgs-per-qp: 4
  mtu: 1024
  message-size: 2500
  multi-gid: true
  dscp-list: [10, 26]
  tx-depth: 2
  min-retransmit-timeout: 16
  max-retransmit-retry: 5
  rnr-retry: 6
`

func TestFromScenario(t *testing.T) {
	p, err := FromScenario(load(t, mixed))
	if err != nil {
		t.Fatal(err)
	}
	want := QPParams{MTU: 1024, TxDepth: 2, Timeout: 16, RetryCnt: 5, RNRRetry: 6}
	if p.QP != want {
		t.Errorf("QP params %+v; want %+v", p.QP, want)
	}
	verbs := []string{"send", "send", "send", "read", "read"}
	reqs := []string{"10.0.0.2", "10.0.0.4", "10.0.0.2", "10.0.0.4", "10.0.0.2"}
	resps := []string{"10.0.0.3", "10.0.0.5", "10.0.0.7", "10.0.0.3", "10.0.0.5"}
	dscps := []int{10, 26, 10, 26, 10}
	if len(p.Conns) != 5 {
		t.Fatalf("%d connections; want 5", len(p.Conns))
	}
	psns := map[uint32]bool{}
	for i, c := range p.Conns {
		if c.Index != i || c.Verb != verbs[i] || c.ReqIP.String() != reqs[i] || c.RespIP.String() != resps[i] || c.DSCP != dscps[i] ||
			c.PacketsPerMsg != 3 || c.NumMsgs != 4 || c.MessageSize != 2500 {
			t.Errorf("connection %d: %+v; want verb %s, %s -> %s, dscp %d, 3 packets per message", i, c, verbs[i], reqs[i], resps[i], dscps[i])
		}
		if c.ReqPSN > 0xffffff || c.RespPSN > 0xffffff {
			t.Errorf("connection %d: PSNs %#x %#x exceed 24 bits", i, c.ReqPSN, c.RespPSN)
		}
		psns[c.ReqPSN], psns[c.RespPSN] = true, true
	}
	if len(psns) != 10 {
		t.Errorf("%d distinct initial PSNs among 10; want them random", len(psns))
	}
	// Same seed, same PSNs; another seed, others.
	q, _ := FromScenario(load(t, mixed))
	r, _ := FromScenario(load(t, strings.Replace(mixed, "seed: 5", "seed: 6", 1)))
	if !reflect.DeepEqual(p, q) || r.Conns[0].ReqPSN == p.Conns[0].ReqPSN {
		t.Errorf("initial PSNs: seed 5 twice %#x %#x, seed 6 %#x; want equal, equal, different", p.Conns[0].ReqPSN, q.Conns[0].ReqPSN, r.Conns[0].ReqPSN)
	}
	// Without multi-gid every connection uses the first address of each side.
	s, err := FromScenario(load(t, strings.Replace(mixed, "multi-gid: true", "multi-gid: false", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Conns {
		if c.ReqIP.String() != "10.0.0.2" || c.RespIP.String() != "10.0.0.3" {
			t.Errorf("connection %d without multi-gid: %s -> %s; want 10.0.0.2 -> 10.0.0.3", c.Index, c.ReqIP, c.RespIP)
		}
	}
}

func TestFromScenarioRejects(t *testing.T) {
	for name, tc := range map[string]struct{ from, to, want string }{
		"barrier with depth": {"tx-depth: 2", "tx-depth: 2\n  barrier-sync: true", "barrier-sync needs tx-depth 1"},
		"mtu":                {"mtu: 1024", "mtu: 1500", "mtu 1500"},
		"retry":              {"max-retransmit-retry: 5", "max-retransmit-retry: 9", "max-retransmit-retry 9"},
		"timeout":            {"min-retransmit-timeout: 16", "min-retransmit-timeout: 40", "min-retransmit-timeout 40"},
	} {
		t.Run(name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte(strings.Replace(mixed, tc.from, tc.to, 1)), "t.yaml")
			if err != nil {
				// The scenario loader may refuse it first; that is as good.
				return
			}
			if _, err := FromScenario(sc); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "t.yaml") {
				t.Errorf("error %v; want one naming t.yaml and %q", err, tc.want)
			}
		})
	}
	sc := load(t, mixed)
	sc.Traffic.DSCPList = []int{70}
	if _, err := FromScenario(sc); err == nil || !strings.Contains(err.Error(), "dscp-list[0] = 70") {
		t.Errorf("dscp 70: %v; want an error naming dscp-list[0]", err)
	}
	sc = load(t, mixed)
	sc.Responder.NIC.IPList = nil
	if _, err := FromScenario(sc); err == nil || !strings.Contains(err.Error(), "ip-list") {
		t.Errorf("no responder addresses: %v; want an error about ip-list", err)
	}
}

func TestMTUEnum(t *testing.T) {
	for mtu, want := range map[int]int{256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5, 1500: 0, 0: 0, 8192: 0} {
		if e, ok := MTUEnum(mtu); e != want || ok != (want != 0) {
			t.Errorf("MTUEnum(%d) = %d, %v; want %d", mtu, e, ok, want)
		}
	}
}

func TestGIDAndMeta(t *testing.T) {
	g := GID(netip.MustParseAddr("10.0.0.2"))
	want := [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 2}
	if g != want {
		t.Errorf("GID(10.0.0.2) = %x; want %x (::ffff:10.0.0.2)", g, want)
	}
	p, _ := FromScenario(load(t, mixed))
	p.Conns[3].ReqQPN, p.Conns[3].RespQPN = 17, 18
	m := p.Meta()
	c := m[3]
	if len(m) != 5 || c.Index != 3 || c.Verb != "read" || c.ReqQPN != 17 || c.RespQPN != 18 || uint32(c.ReqIPSN) != p.Conns[3].ReqPSN ||
		uint32(c.RespIPSN) != p.Conns[3].RespPSN || c.PacketsPerMsg != 3 || c.NumMsgs != 4 || c.ReqIP != p.Conns[3].ReqIP {
		t.Errorf("meta %+v does not carry connection 3 %+v", c, p.Conns[3])
	}
}

func plan(n, msgs, depth int, barrier bool) Plan {
	p := Plan{QP: QPParams{MTU: 1024, TxDepth: depth, Barrier: barrier}}
	for i := range n {
		p.Conns = append(p.Conns, ConnPlan{Index: i, Verb: "write", MessageSize: 1000, NumMsgs: msgs, PacketsPerMsg: 1,
			ReqIP: netip.MustParseAddr("10.0.0.2"), RespIP: netip.MustParseAddr("10.0.0.3")})
	}
	return p
}

// postAll posts what the session allows and returns how many each connection posted now.
func postAll(s *Session, n int, now int64) []int {
	got := make([]int, n)
	for i := range n {
		for s.CanPost(i) {
			s.Posted(i, now)
			got[i]++
		}
	}
	return got
}

func TestSessionTxDepth(t *testing.T) {
	s := NewSession(plan(2, 5, 3, false))
	if got := postAll(s, 2, 0); !reflect.DeepEqual(got, []int{3, 3}) {
		t.Fatalf("first posts %v; want tx-depth 3 each", got)
	}
	if err := s.Completed(0, 100); err != nil {
		t.Fatal(err)
	}
	if got := postAll(s, 2, 100); !reflect.DeepEqual(got, []int{1, 0}) {
		t.Errorf("after one completion of connection 0: posts %v; want [1 0]", got)
	}
	for k := range 4 {
		if err := s.Completed(0, int64(200+k*100)); err != nil {
			t.Fatal(err)
		}
		postAll(s, 2, int64(200+k*100))
	}
	if err := s.Completed(0, 1000); err == nil {
		t.Error("a sixth completion of a 5-message connection was accepted")
	}
	if s.Done() {
		t.Error("done while connection 1 has messages outstanding")
	}
	s.Fail(1, StatusRetryExceeded)
	if !s.Done() || s.CanPost(1) {
		t.Errorf("after connection 1 failed: done %v, can post %v; want true, false", s.Done(), s.CanPost(1))
	}
	// A flushed straggler of the failed connection is ignored.
	if err := s.Completed(1, 2000); err != nil {
		t.Error(err)
	}
	r := s.Report()
	c0, c1 := r.Conns[0], r.Conns[1]
	// Message k of connection 0: posted at 0, 0, 0, 100, 200, ...; completed at 100, 200, 300, 400, 500.
	if c0.Status != StatusOK || c0.Completed != 5 || c0.Posted != 5 || !reflect.DeepEqual(c0.MCTUs, []float64{0.1, 0.2, 0.3, 0.3, 0.3}) {
		t.Errorf("connection 0: %+v; want ok, 5/5, MCTs 0.1 0.2 0.3 0.3 0.3 us", c0)
	}
	// 5 x 1000 bytes in 500 ns = 80 Gb/s.
	if c0.GoodputGbps != 80 {
		t.Errorf("goodput %v Gb/s; want 80", c0.GoodputGbps)
	}
	if c1.Status != StatusRetryExceeded || c1.Completed != 0 || c1.Posted != 3 || len(c1.MCTUs) != 0 || c1.GoodputGbps != 0 {
		t.Errorf("connection 1: %+v; want retry-exceeded, 3 posted, none completed", c1)
	}
}

func TestSessionBarrier(t *testing.T) {
	s := NewSession(plan(3, 2, 1, true))
	if got := postAll(s, 3, 0); !reflect.DeepEqual(got, []int{1, 1, 1}) {
		t.Fatalf("round 1 posts %v; want one each", got)
	}
	_ = s.Completed(0, 10)
	_ = s.Completed(1, 10)
	if got := postAll(s, 3, 10); !reflect.DeepEqual(got, []int{0, 0, 0}) {
		t.Errorf("posts %v before connection 2 finished round 1; want none (barrier)", got)
	}
	_ = s.Completed(2, 20)
	if got := postAll(s, 3, 20); !reflect.DeepEqual(got, []int{1, 1, 1}) {
		t.Errorf("round 2 posts %v; want one each", got)
	}
	// A failed connection does not hold the others' barrier.
	s2 := NewSession(plan(2, 3, 1, true))
	postAll(s2, 2, 0)
	_ = s2.Completed(0, 5)
	s2.Fail(1, StatusFlushed)
	if got := postAll(s2, 2, 5); !reflect.DeepEqual(got, []int{1, 0}) {
		t.Errorf("after connection 1 failed: posts %v; want [1 0]", got)
	}
	r := s.Report()
	if r.Conns[0].Status != StatusIncomplete || r.Conns[0].Completed != 1 || r.Conns[0].Posted != 2 {
		t.Errorf("unfinished connection: %+v; want incomplete, 2 posted, 1 completed", r.Conns[0])
	}
}

// The report's JSON round-trips field for field (the testbed reads it as this very type).
func TestReportJSON(t *testing.T) {
	p := plan(1, 2, 1, false)
	p.Conns[0].ReqQPN, p.Conns[0].RespQPN, p.Conns[0].ReqPSN, p.Conns[0].RespPSN = 17, 18, 0xabcdef, 0x123
	s := NewSession(p)
	postAll(s, 1, 0)
	_ = s.Completed(0, 1500)
	r := s.Report()
	r.Error = "x"
	b, _ := json.Marshal(r)
	var tr Report
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tr); err != nil {
		t.Fatalf("the report does not decode back: %v", err)
	}
	c := tr.Conns[0]
	want := ConnReport{Index: 0, Verb: "write", ReqIP: "10.0.0.2", RespIP: "10.0.0.3", ReqQPN: 17, RespQPN: 18,
		ReqIPSN: 0xabcdef, RespIPSN: 0x123, PacketsPerMsg: 1, NumMsgs: 2, Status: StatusIncomplete, Posted: 1,
		Completed: 1, MCTUs: []float64{1.5}, GoodputGbps: 8000.0 / 1500}
	if !reflect.DeepEqual(c, want) || tr.Error != "x" {
		t.Errorf("decoded %+v (error %q); want %+v", c, tr.Error, want)
	}
}

func TestWire(t *testing.T) {
	p, _ := FromScenario(load(t, mixed))
	h := Hello{Version: WireVersion, Plan: p}
	for i, c := range p.Conns {
		h.Req = append(h.Req, Endpoint{Index: i, QPN: uint32(17 + i), GID: c.ReqIP, Addr: 0x7f0000001000, RKey: 0x1234})
	}
	var buf bytes.Buffer
	if err := WriteMsg(&buf, h); err != nil {
		t.Fatal(err)
	}
	if err := WriteMsg(&buf, Done{Done: true}); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReaderSize(&buf, 16) // lines longer than the buffer
	var got Hello
	if err := ReadMsg(rd, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("hello round trip: %+v; want %+v", got, h)
	}
	if err := got.Check(); err != nil {
		t.Errorf("a good hello fails its check: %v", err)
	}
	var d Done
	if err := ReadMsg(rd, &d); err != nil || !d.Done {
		t.Errorf("done: %+v, %v", d, err)
	}
	if err := ReadMsg(rd, &d); err == nil || !strings.Contains(err.Error(), "EOF") {
		t.Errorf("reading past the end: %v; want EOF", err)
	}
	for name, tc := range map[string]struct {
		in, want string
	}{
		"unknown field": {`{"done":true,"extra":1}` + "\n", `unknown field "extra"`},
		"truncated":     {`{"done":tr`, "unexpected EOF after 10 bytes"},
		"not json":      {"hello\n", "decoding verbs.Done"},
	} {
		err := ReadMsg(bufio.NewReader(strings.NewReader(tc.in)), &d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", name, err, tc.want)
		}
	}
	bad := []struct {
		edit func(*Hello)
		want string
	}{
		{func(h *Hello) { h.Version = 9 }, "version 9"},
		{func(h *Hello) { h.Req = h.Req[:2] }, "2 endpoints for 5 connections"},
		{func(h *Hello) { h.Plan.Conns[1].Verb = "atomic" }, `connection 1: verb "atomic"`},
		{func(h *Hello) { h.Plan.Conns[2].Index = 7 }, "connection 2 has index 7"},
		{func(h *Hello) { h.Plan.Conns[0].DSCP = 64 }, "dscp 64"},
		{func(h *Hello) { h.Req[4].GID = netip.Addr{} }, "connection 4: responder address"},
		{func(h *Hello) { h.Plan.QP.MTU = 9000 }, "mtu 9000"},
	}
	for _, b := range bad {
		var c Hello
		raw, _ := json.Marshal(h)
		_ = json.Unmarshal(raw, &c)
		b.edit(&c)
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("bad hello: %v; want an error containing %q", err, b.want)
		}
	}
}
