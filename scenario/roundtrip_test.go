package scenario

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// sourceless drops what only says where a scenario came from (path, positions, ignored keys, dialect),
// which the effective scenario does not carry.
func sourceless(s *Scenario) *Scenario {
	c := *s
	c.Path, c.IgnoredKeys, c.Format = "", nil, ""
	c.Events = make([]Event, len(s.Events))
	for i, e := range s.Events {
		e.Line, e.Col = 0, 0
		c.Events[i] = e
	}
	c.Expect = make([]Expectation, len(s.Expect))
	for i, e := range s.Expect {
		e.Line, e.Col = 0, 0
		c.Expect[i] = e
	}
	return &c
}

// roundTrip writes s's effective scenario, loads it back and fails unless both are equal.
func roundTrip(t testing.TB, s *Scenario) string {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteEffective(&buf); err != nil {
		t.Fatalf("WriteEffective: %v", err)
	}
	back, err := Parse(buf.Bytes(), "effective.yaml")
	if err != nil {
		t.Fatalf("effective scenario does not load: %v\n%s", err, buf.String())
	}
	if a, b := sourceless(s), sourceless(back); !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip changed the scenario\nbefore %+v\nafter  %+v\nfile:\n%s", a, b, buf.String())
	}
	return buf.String()
}

const richScenario = `
testbed: netns
seed: 18446744073709551615
index-base: 0
rewrite-udp-dst-port: 9000
requester:
  nic:
    type: "my cards/x: y.yaml"
    ip-list: [10.1.0.2/16]
    prio-dscp-map: {0: "07,06", 3: [26, 27]}
    ets:
      dscp-to-tc: {26: 1, 0: 0}
      traffic-classes:
        - {tc: 0, weight: 30}
        - {tc: 1, weight: 70}
        - {tc: 7, strict: true}
  roce-parameters: {dcqcn-rp-enable: false, min-time-between-cnps: 0.5, adaptive-retrans: true, dcqcn-enable: false}
responder:
  nic: {type: e810}
traffic:
  num-connections: 4
  rdma-verb: send
  num-msgs-per-qp: 5
  mtu: 4096
  message-size: 102400
  tx-depth: 8
  rnr-retry: 3
  dscp-list: [26, 0]
network:
  link-gbps: 0.5
  propagation-ns: 0
  dumper-weights: [2, 1, 1]
  snap-len: 128
  event-table-capacity: 100
  run-timeout-ms: 1
events:
  - {qpn: all, psn: 0, every: 50, type: ecn}
  - {qpn: [1, 3], psn: 4, msg: 0, iter: 3, type: drop}
  - {qpn: 2, psn: all, every-msg: true, type: delay, delay-us: 0.125}
  - {qpn: 2, psn: 1, type: reorder, behind: 7}
  - {qpn: 2, psn: 2, type: duplicate, copies: 2}
  - {qpn: 0, psn: 3, type: rewrite, field: dscp, value: 63}
  - {qpn: 0-1, nth: 0, packet: cnp, type: corrupt}
expect:
  - integrity: ok
  - {check: gbn, qp: 0}
  - {check: cnp}
  - {path: 'retransmissions[qp=1,psn=4].trigger', equals: nack}
  - {path: cnp.scope_inferred, not-equals: "true"}
  - {path: a.b, equals: null}
  - {path: a.b, equals: 2.5}
  - {path: 'traffic[*].mct_us[0]', between: [0, 1e6]}
  - {path: 'traffic[*]', count: 4}
  - {path: x, min: -3}
  - {path: x, max: 1e-3}
  - {path: x, approx: {value: 10, tolerance: 12.5%}}
  - {path: x, approx: {value: 10, tolerance: 0.25}}
`

func TestRoundTrip(t *testing.T) {
	for _, f := range []string{"testdata/listing2.yaml", "testdata/reference-example.yml"} {
		s, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		out := roundTrip(t, s)
		if !strings.Contains(out, "\nseed: ") || !strings.Contains(out, "\nindex-base: ") {
			t.Errorf("%s: effective scenario lacks seed or index-base:\n%s", f, out)
		}
	}
	s := mustParse(t, richScenario)
	if len(s.Events) != 4+2+1+1+1+1+2 || len(s.Expect) != 13 {
		t.Fatalf("rich scenario: %d events, %d expectations", len(s.Events), len(s.Expect))
	}
	out := roundTrip(t, s)
	for _, want := range []string{"num-connections: 4\n", "psn: all\n", "type: corrupt\n", "tolerance: 12.5%\n", "seed: 18446744073709551615\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("effective scenario lacks %q:\n%s", want, out)
		}
	}
	sr := mustParse(t, "traffic: {rdma-verb: send_read, num-qps: \"1,2\"}\nevents:\n  - {qpn: 2, psn: 1, packet: read-req, type: drop}\n")
	if out := roundTrip(t, sr); !strings.Contains(out, "num-connections: 1,2\n") {
		t.Errorf("send_read counts not kept:\n%s", out)
	}
}

// TestEffectiveIsDeterministic guards the results directory: the same scenario writes the same bytes.
func TestEffectiveIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	for _, buf := range []*bytes.Buffer{&a, &b} {
		s := mustParse(t, richScenario)
		if err := s.WriteEffective(buf); err != nil {
			t.Fatal(err)
		}
	}
	if a.String() != b.String() {
		t.Error("two writes of the same scenario differ")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errTest }

var errTest = &Error{Msg: "disk full"}

func TestWriteEffectiveError(t *testing.T) {
	s := mustParse(t, "seed: 3\n")
	err := s.WriteEffective(failWriter{})
	if err == nil || !strings.HasPrefix(err.Error(), "writing effective scenario: ") {
		t.Errorf("error %v; want a wrapped write error", err)
	}
}
