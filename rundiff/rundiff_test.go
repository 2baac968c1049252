package rundiff

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
)

func f(v float64) *float64 { return &v }

func TestExtract(t *testing.T) {
	nack := "nack"
	doc := &verdict.Document{
		Integrity: trace.Integrity{OK: true},
		Analysis: &analyze.Analysis{
			Packets: 100,
			Checks:  []analyze.Check{{OK: true}, {OK: false, ViolationCount: 4}},
			Retransmissions: []analyze.Retransmission{
				{Trigger: &nack, NACKGenerationUs: f(1), NACKReactionUs: f(2), LatencyUs: f(10)},
				{Trigger: &nack, NACKGenerationUs: f(3), NACKReactionUs: nil, LatencyUs: f(30)},
			},
			Timeouts: []analyze.MessageRetries{{Timeouts: 2, TimeoutIntervalsUs: []float64{100, 300}}, {Timeouts: 1}},
			CNP:      analyze.CNPResult{ECNMarked: 5, CNPs: 3},
			Counters: []analyze.CounterCheck{{OK: true}, {OK: false}},
			Traffic:  []analyze.TrafficQP{{MCTUs: []float64{4, 1, 3}, GoodputGbps: 1.5}, {MCTUs: []float64{2}, GoodputGbps: 2}},
		},
		Expectations: []scenario.ExpectResult{{OK: true}, {OK: false}},
	}
	m := Extract(doc)
	want := Metrics{"integrity_ok": 1, "checks_failed": 1, "violations": 4, "expectations_failed": 1, "counter_mismatches": 1,
		"packets": 100, "retransmissions": 2, "timeouts": 3, "nack_generation_us_mean": 2, "nack_generation_us_max": 3,
		"nack_reaction_us_mean": 2, "nack_reaction_us_max": 2, "retx_latency_us_mean": 20, "retx_latency_us_max": 30,
		"timeout_interval_us_mean": 200, "ecn_marked": 5, "cnps": 3, "mct_us_mean": 2.5, "mct_us_p99": 4, "mct_us_max": 4,
		"goodput_gbps": 3.5}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if len(m) != len(want) {
		t.Errorf("metrics %v; want exactly %v", m, want)
	}
	for k := range m {
		if _, ok := DefOf(k); !ok {
			t.Errorf("metric %s has no definition", k)
		}
	}
	// A trace that failed the integrity check was not analyzed: only the integrity and the expectations.
	doc.Integrity.OK = false
	if m := Extract(doc); len(m) != 2 || m["integrity_ok"] != 0 || m["expectations_failed"] != 1 {
		t.Errorf("invalid run: %v", m)
	}
}

func run(verdict string, m Metrics) *Run {
	return &Run{Label: "x", ScenarioHash: "h", Verdict: verdict, Metrics: m}
}

func TestCompare(t *testing.T) {
	a := run("pass", Metrics{"retransmissions": 2, "mct_us_mean": 100, "goodput_gbps": 10, "cnps": 10, "nack_reaction_us_mean": 5, "custom": 1})
	b := run("pass", Metrics{"retransmissions": 2, "mct_us_mean": 109, "goodput_gbps": 9, "cnps": 8, "timeouts": 1, "custom": 1})
	r := Compare(a, b, nil)
	status := map[string]string{}
	for _, row := range r.Rows {
		status[row.Metric] = row.Status
	}
	want := map[string]string{
		"retransmissions":       StatusSame,
		"mct_us_mean":           StatusWithin,    // +9% of 10%
		"goodput_gbps":          StatusRegressed, // -10% of 5%, lower is worse
		"cnps":                  StatusRegressed, // -20%, either way counts
		"nack_reaction_us_mean": StatusRegressed, // gone while b still retransmits
		"timeouts":              StatusOnlyB,
		"custom":                StatusSame,
	}
	for k, v := range want {
		if status[k] != v {
			t.Errorf("%s: %s, want %s", k, status[k], v)
		}
	}
	if len(r.Rows) != len(want) || strings.Join(r.Regressed, ",") != "nack_reaction_us_mean,cnps,goodput_gbps" || !r.Regression() || !r.SameScenario {
		t.Errorf("rows %d, regressed %v, same scenario %v", len(r.Rows), r.Regressed, r.SameScenario)
	}
	// Overrides: goodput may move 20%, everything else 25%.
	r = Compare(a, b, Tolerances{"goodput_gbps": {Rel: 0.2}, "*": {Rel: 0.25}})
	if strings.Join(r.Regressed, ",") != "nack_reaction_us_mean" {
		t.Errorf("with wide tolerances: regressed %v; want only the metric gone (no tolerance covers a lost value)", r.Regressed)
	}
	// Better the other way; a pass becoming fail is a regression by itself.
	r = Compare(b, a, nil)
	if strings.Join(r.Improved, ",") != "goodput_gbps" || strings.Join(r.Regressed, ",") != "timeouts,cnps" {
		t.Errorf("b -> a: improved %v regressed %v", r.Improved, r.Regressed)
	}
	r = Compare(run("pass", Metrics{}), run("fail", Metrics{}), nil)
	if !r.VerdictChanged || strings.Join(r.Regressed, ",") != "verdict" {
		t.Errorf("pass -> fail: %+v", r)
	}
	r = Compare(run("invalid", Metrics{}), run("pass", Metrics{}), nil)
	if r.Regression() || strings.Join(r.Improved, ",") != "verdict" {
		t.Errorf("invalid -> pass: %+v", r)
	}
	// Absolute tolerance, and from 0.
	r = Compare(run("pass", Metrics{"retransmissions": 0}), run("pass", Metrics{"retransmissions": 2}), Tolerances{"retransmissions": {Abs: 2}})
	if r.Regression() || r.Rows[0].Status != StatusWithin || r.Rows[0].ChangePct != nil {
		t.Errorf("0 -> 2 within 2: %+v", r.Rows[0])
	}
	// The result is plain JSON.
	b2, err := json.Marshal(Compare(a, b, nil))
	if err != nil || !strings.Contains(string(b2), `"metric":"goodput_gbps"`) || !strings.Contains(string(b2), `"status":"regressed"`) {
		t.Errorf("JSON: %v %s", err, b2)
	}
	var out strings.Builder
	WriteText(&out, Compare(a, b, nil))
	if !strings.Contains(out.String(), "REGRESSED") || !strings.Contains(out.String(), "REGRESSION: 3 metric(s) regressed") {
		t.Errorf("text:\n%s", out.String())
	}
}

func TestParseTolerance(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		tol  Tolerance
	}{
		{"retransmissions=2", "retransmissions", Tolerance{Abs: 2}},
		{"mct_us_mean=15%", "mct_us_mean", Tolerance{Rel: 0.15}},
		{"nack_reaction_us_mean=10%,0.5", "nack_reaction_us_mean", Tolerance{Rel: 0.1, Abs: 0.5}},
		{"*=5%", "*", Tolerance{Rel: 0.05}},
		{"mct_us_mean=2, 10%", "mct_us_mean", Tolerance{Rel: 0.1, Abs: 2}},
	} {
		name, tol, err := ParseTolerance(c.in)
		if err != nil || name != c.name || tol != c.tol {
			t.Errorf("%s: %s %+v %v", c.in, name, tol, err)
		}
	}
	for _, bad := range []string{"", "packets", "packets=", "nope=1", "packets=x", "packets=-1", "packets=NaN%", "mct_us_mean=10%,5%", "mct_us_mean=1,2", "mct_us_mean=10%,1,5%", "mct_us_mean=10%,"} {
		if _, _, err := ParseTolerance(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// docs/history.md lists every metric with its unit, direction and default tolerance, as Defs has them.
func TestDocumentedDefaults(t *testing.T) {
	doc, err := os.ReadFile("../docs/history.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Defs {
		row := fmt.Sprintf("| `%s` | %s | %s | %s | %s |", d.Name, d.Unit, d.Worse, d.Tolerance, d.Help)
		if !strings.Contains(string(doc), row+"\n") {
			t.Errorf("docs/history.md lacks the row\n%s", row)
		}
	}
}

func TestNICOf(t *testing.T) {
	sc := &scenario.Scenario{Requester: scenario.Host{NIC: scenario.NIC{Type: "cx5"}}, Responder: scenario.Host{NIC: scenario.NIC{Type: "cx5"}}}
	if got := NICOf(sc); got != "cx5" {
		t.Errorf("same NICs: %q", got)
	}
	sc.Responder.NIC.Type = "e810"
	if got := NICOf(sc); got != "cx5/e810" {
		t.Errorf("two NICs: %q", got)
	}
	sc.Remote = &scenario.Remote{Requester: scenario.RemoteHost{ControlIP: "10.0.0.1", IBDevice: "mlx5_0"},
		Responder: scenario.RemoteHost{ControlIP: "10.0.0.2", IfName: "ens1f0"}}
	if got := NICOf(sc); got != "cx5@10.0.0.1:mlx5_0/e810@10.0.0.2:ens1f0" {
		t.Errorf("remote: %q", got)
	}
}

// A run that reached no verdict (error) is the worst outcome; a verdict this build does not know is a
// regression whichever side it is on.
func TestCompareVerdicts(t *testing.T) {
	for _, c := range []struct {
		a, b      string
		regressed bool
	}{
		{"pass", "error", true},
		{"fail", "error", true},
		{"invalid", "error", true},
		{"error", "pass", false},
		{"error", "invalid", false},
		{"pass", "maybe", true},
		{"maybe", "pass", true},
		{"fail", "", true},
		{"invalid", "fail", false},
	} {
		r := Compare(run(c.a, Metrics{}), run(c.b, Metrics{}), nil)
		if !r.VerdictChanged || r.Regression() != c.regressed {
			t.Errorf("%q -> %q: verdict changed %v, regressed %v (%v); want regressed %v", c.a, c.b, r.VerdictChanged, r.Regression(), r.Regressed, c.regressed)
		}
	}
}

// LoadDir reads a results directory's verdict and refuses one it does not know.
func TestLoadDirVerdicts(t *testing.T) {
	sc, err := os.ReadFile("../examples/listing2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"pass", "fail", "invalid", "error", "PASS", "maybe", ""} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "scenario.yaml"), sc, 0o644); err != nil {
			t.Fatal(err)
		}
		doc, _ := json.Marshal(map[string]any{"scenario": "listing2.yaml", "integrity": map[string]any{"ok": true}, "verdict": v})
		if err := os.WriteFile(filepath.Join(dir, "analysis.json"), doc, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := LoadDir(dir)
		switch v {
		case "pass", "fail", "invalid":
			if err != nil || r.Verdict != v {
				t.Errorf("verdict %q: %+v, %v", v, r, err)
			}
		default:
			if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "verdict") {
				t.Errorf("verdict %q accepted: %+v, %v; want a bad-input error naming the verdict", v, r, err)
			}
		}
	}
}

// A metric the old run had and the new one lacks is a regression, unless its explaining count (GoneWith) is 0
// in the new run: no retransmission left to time, no timeout to space.
func TestCompareMissing(t *testing.T) {
	for _, c := range []struct {
		name   string
		b      Metrics
		status string
	}{
		{"retx_latency_us_mean", Metrics{"retransmissions": 0}, StatusOnlyA},
		{"retx_latency_us_mean", Metrics{"retransmissions": 1}, StatusRegressed},
		{"retx_latency_us_mean", Metrics{}, StatusRegressed},
		{"nack_generation_us_max", Metrics{"retransmissions": 0}, StatusOnlyA},
		{"timeout_interval_us_mean", Metrics{"timeouts": 0}, StatusOnlyA},
		{"timeout_interval_us_mean", Metrics{"timeouts": 2, "retransmissions": 0}, StatusRegressed},
		{"mct_us_mean", Metrics{"retransmissions": 0}, StatusRegressed},
		{"goodput_gbps", Metrics{}, StatusRegressed},
		{"packets", Metrics{}, StatusRegressed},
	} {
		r := Compare(run("pass", Metrics{c.name: 5}), run("pass", c.b), nil)
		var got *Row
		for i := range r.Rows {
			if r.Rows[i].Metric == c.name {
				got = &r.Rows[i]
			}
		}
		if got == nil || got.Status != c.status || got.New != nil || (c.status == StatusRegressed) != contains(r.Regressed, c.name) {
			t.Errorf("%s gone, new run %v: %+v, regressed %v; want %s", c.name, c.b, got, r.Regressed, c.status)
		}
	}
	for name, count := range GoneWith {
		if _, ok := DefOf(name); !ok {
			t.Errorf("GoneWith names an unknown metric %s", name)
		}
		if _, ok := DefOf(count); !ok {
			t.Errorf("GoneWith explains %s by an unknown metric %s", name, count)
		}
	}
}

// Fewer packets is no improvement: a NIC that stops sending CNPs or ACKs sends fewer.
func TestPacketsEitherWay(t *testing.T) {
	r := Compare(run("pass", Metrics{"packets": 1000}), run("pass", Metrics{"packets": 900}), nil)
	if !contains(r.Regressed, "packets") {
		t.Errorf("1000 -> 900 packets: regressed %v improved %v; want packets regressed", r.Regressed, r.Improved)
	}
}

// A percentage of a count allows at least one; the table and the JSON say what each tolerance allows.
func TestCountFloor(t *testing.T) {
	r := Compare(run("pass", Metrics{"cnps": 0, "mct_us_mean": 0}), run("pass", Metrics{"cnps": 1, "mct_us_mean": 1}), Tolerances{"*": {Rel: 0.1}})
	st := map[string]Row{}
	for _, row := range r.Rows {
		st[row.Metric] = row
	}
	if c := st["cnps"]; c.Status != StatusWithin || c.Tolerance != (Tolerance{Rel: 0.1, Abs: 1}) || c.Allowed == nil || *c.Allowed != 1 {
		t.Errorf("cnps 0 -> 1 at 10%%: %+v; want within, tolerance 10%% or 1, allowed 1", c)
	}
	if m := st["mct_us_mean"]; m.Status != StatusRegressed || m.Allowed == nil || *m.Allowed != 0 {
		t.Errorf("mct_us_mean 0 -> 1 at 10%%: %+v; want regressed (a latency has no floor), allowed 0", m)
	}
	var out strings.Builder
	WriteText(&out, r)
	for _, want := range []string{"10% or 1 = ±1", "10% = ±0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if c := Compare(run("pass", Metrics{"cnps": 0}), run("pass", Metrics{"cnps": 2}), nil); !contains(c.Regressed, "cnps") {
		t.Errorf("cnps 0 -> 2 at the default: regressed %v; want cnps", c.Regressed)
	}
}

// The text counts the verdict apart from the metrics, and says when only the seed can explain a different hash.
func TestTextNotes(t *testing.T) {
	a := &Run{Label: "a", ScenarioHash: "h1", Seed: 1, Verdict: "pass", Metrics: Metrics{"retransmissions": 1}}
	b := &Run{Label: "b", ScenarioHash: "h2", Seed: 2, Verdict: "fail", Metrics: Metrics{"retransmissions": 2}}
	var out strings.Builder
	WriteText(&out, Compare(a, b, nil))
	for _, want := range []string{"REGRESSION: the verdict got worse (pass -> fail); 1 metric(s) regressed", "seeds differ (1, 2)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "different tests") {
		t.Errorf("text calls runs of different seeds different tests:\n%s", out.String())
	}
	b.Seed, b.Metrics = 1, Metrics{"retransmissions": 1}
	out.Reset()
	WriteText(&out, Compare(a, b, nil))
	for _, want := range []string{"REGRESSION: the verdict got worse (pass -> fail); no metric regressed\n", "different tests"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	// The JSON has the run's metrics under a.metrics and the comparison's rows under rows.
	j, _ := json.Marshal(Compare(a, b, nil))
	var doc map[string]json.RawMessage
	json.Unmarshal(j, &doc)
	if _, ok := doc["rows"]; !ok || doc["metrics"] != nil {
		t.Errorf("JSON keys: %s", j)
	}
}
