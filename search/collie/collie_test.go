package collie

import (
	"strings"
	"testing"

	"github.com/lumina-go/lumina/scenario"
)

// TestCatalog: the embedded file parses, holds Collie's 18 anomalies once each (13 on subsystem F, 5 on H,
// the old ones #9, #12, #13), and every profile's list is of its subsystem.
func TestCatalog(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Anomalies) != 18 {
		t.Fatalf("%d anomalies, want 18", len(c.Anomalies))
	}
	var f, h []int
	var old []int
	for _, a := range c.Anomalies {
		switch a.Subsystem {
		case "F":
			f = append(f, a.ID)
		case "H":
			h = append(h, a.ID)
		}
		if a.Status == "old" {
			old = append(old, a.ID)
		}
	}
	if len(f) != 13 || len(h) != 5 {
		t.Errorf("subsystem F has %v, H %v: want 13 and 5 (table 2)", f, h)
	}
	if len(old) != 3 || old[0] != 9 || old[1] != 12 || old[2] != 13 {
		t.Errorf("old anomalies %v, want [9 12 13]", old)
	}
	p, err := c.Profile("collie-f")
	if err != nil || len(p.Anomalies) != 13 {
		t.Fatalf("collie-f: %v, %v: want the 13 anomalies of F", p, err)
	}
	if _, err := c.Profile("nope"); err == nil || !strings.Contains(err.Error(), "cx6vpi-200g") {
		t.Errorf("unknown profile: %v, want an error listing the known ones", err)
	}
}

// TestPredict: each anomaly's conditions hold at its trigger (the thresholds of #7 and #18, which the table
// puts above their own triggers, are read at the trigger), and a perftest-like workload meets none of them.
func TestPredict(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Anomalies {
		if !a.When.Holds(a.Trigger) {
			t.Errorf("#%d: the conditions do not hold at the trigger (%s)", a.ID, a.When.Unmet(a.Trigger))
		}
	}
	// The two thresholds read at their triggers hold there and stop one step below.
	for _, tc := range []struct {
		profile string
		id      int
		below   func(w *scenario.Workload)
	}{
		{"p2100g", 18, func(w *scenario.Workload) { w.WQEBatch = 15 }},
		{"cx6vpi-200g", 7, func(w *scenario.Workload) { w.NumQPs = 479 }},
	} {
		p, _ := c.Profile(tc.profile)
		w := c.Anomaly(tc.id).Trigger
		if got := p.Predict(c, w); len(got) != 1 || got[0] != tc.id {
			t.Errorf("#%d's trigger predicts %v, want [%d]", tc.id, got, tc.id)
		}
		tc.below(&w)
		if got := p.Predict(c, w); len(got) != 0 {
			t.Errorf("#%d's trigger one step below its threshold predicts %v, want none", tc.id, got)
		}
	}
	f, _ := c.Profile("cx6vpi-200g")
	nine := c.Anomaly(9).Trigger
	if got := f.Predict(c, nine); len(got) != 0 {
		t.Errorf("cx6vpi-200g (relaxed ordering on) predicts %v for #9's trigger, want none", got)
	}
	cf, _ := c.Profile("collie-f")
	if got := cf.Predict(c, nine); len(got) != 1 || got[0] != 9 {
		t.Errorf("collie-f predicts %v for #9's trigger, want [9]", got)
	}
	perftest := c.Anomaly(1).Trigger
	perftest.QPType, perftest.Opcode, perftest.WQEBatch, perftest.WQDepth, perftest.MTU, perftest.MsgSizes = "rc", "write", 1, 128, 4096, []int{65536}
	for _, name := range []string{"cx6vpi-200g", "collie-f", "p2100g"} {
		p, _ := c.Profile(name)
		if got := p.Predict(c, perftest); len(got) != 0 {
			t.Errorf("%s predicts %v for a perftest-like workload", name, got)
		}
	}
}

// TestParseErrors: bad files are refused with the place and the expectation.
func TestParseErrors(t *testing.T) {
	good := `source: x
anomalies:
  - id: 1
    subsystem: F
    status: new
    symptom: pause
    cause: c
    title: t
    source: s
    when: {qp_type: [ud], wqe_batch: {min: 64}}
    trigger: {qp_type: ud, opcode: send, num_qps: 1, mtu: 2048, wqe_batch: 64, sge: 1, wq_depth: 256, num_mrs: 1, mr_size: 65536, msg_sizes: [2048], direction: uni, memory: local}
profiles:
  - {name: p, subsystem: F, anomalies: [1]}
`
	if _, err := Parse([]byte(good), "t.yaml"); err != nil {
		t.Fatalf("good file: %v", err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"symptom: pause", "symptom: slow", `anomaly #1 (entry 1): symptom "slow"`},
		{"wqe_batch: {min: 64}", "wqe_batch: {min: 64, max: 8}", "wqe_batch: min 64 above max 8"},
		{"qp_type: [ud], wqe", "qp_type: [xd], wqe", `qp_type "xd"`},
		{"wqe_batch: {min: 64}", "wqe_bach: {min: 64}", "unknown field"},
		{"wq_depth: 256, num_mrs", "wq_depth: 256, num_mrz", "unknown field"},
		{"wqe_batch: 64, sge", "wqe_batch: 8, sge", "does not meet the conditions (wqe_batch 8 outside [64, ])"},
		{"anomalies: [1]", "anomalies: [2]", `profile "p" (entry 1): anomaly #2 is not in the catalog`},
		{"subsystem: F, anomalies", "subsystem: H, anomalies", "anomaly #1 is of subsystem F"},
	} {
		bad := strings.Replace(good, c.from, c.to, 1)
		if bad == good {
			t.Fatalf("case %q does not change the file", c.from)
		}
		_, err := Parse([]byte(bad), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "t.yaml") {
			t.Errorf("%s -> %s: error %v, want one starting with the file and containing %q", c.from, c.to, err, c.want)
		}
	}
}
