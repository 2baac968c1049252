package rundiff

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/lumina-go/lumina/verdict"
)

// Statuses of a compared metric.
const (
	StatusSame      = "same"      // no change at all
	StatusWithin    = "within"    // moved, within its tolerance
	StatusImproved  = "improved"  // moved beyond its tolerance the better way
	StatusRegressed = "regressed" // moved beyond its tolerance the worse way (or either way, for Either)
	StatusOnlyA     = "only-a"    // the new run has no value and may lack it (no retransmission left to time)
	StatusOnlyB     = "only-b"    // the old run had no value
)

// GoneWith names, per metric that may legitimately disappear from the new run, the count that explains it: a
// latency over retransmissions has no value when there is no retransmission left, the timeout interval none
// when there is no timeout. Any other metric the old run had and the new one lacks (or one of these while the
// count is not 0) is a regression: the new run lost a measurement.
var GoneWith = map[string]string{
	"nack_generation_us_mean":  "retransmissions",
	"nack_generation_us_max":   "retransmissions",
	"nack_reaction_us_mean":    "retransmissions",
	"nack_reaction_us_max":     "retransmissions",
	"retx_latency_us_mean":     "retransmissions",
	"retx_latency_us_max":      "retransmissions",
	"timeout_interval_us_mean": "timeouts",
}

// mayLack reports whether run m may lack metric name: its explaining count is there and 0.
func mayLack(m Metrics, name string) bool {
	c, ok := GoneWith[name]
	if !ok {
		return false
	}
	n, ok := m[c]
	return ok && n == 0
}

// Row is one metric of the comparison. Old and New are absent when that run has no value; Change is
// New - Old and ChangePct its share of |Old| (absent when Old is 0).
type Row struct {
	Metric    string   `json:"metric"`
	Unit      string   `json:"unit"`
	Old       *float64 `json:"old"`
	New       *float64 `json:"new"`
	Change    *float64 `json:"change"`
	ChangePct *float64 `json:"change_pct"`
	// Tolerance is the metric's tolerance as applied (a count's percentage with its floor, CountFloor), and
	// Allowed the move it allows from Old (absent without both values).
	Tolerance Tolerance `json:"tolerance"`
	Allowed   *float64  `json:"allowed"`
	Worse     Direction `json:"worse"`
	// Moved: the change is beyond the tolerance.
	Moved  bool   `json:"moved"`
	Status string `json:"status"`
}

// Result is the comparison of run A (old) with run B (new).
type Result struct {
	A    *Run  `json:"a"`
	B    *Run  `json:"b"`
	Rows []Row `json:"rows"`
	// VerdictChanged is set when the runs' verdicts differ; a pass becoming fail or invalid is a regression.
	VerdictChanged bool `json:"verdict_changed"`
	// SameScenario: both runs ran the same effective scenario (same hash); a comparison of different
	// scenarios is still made, and says so.
	SameScenario bool `json:"same_scenario"`
	// Regressed names the metrics that regressed ("verdict" first when the verdict got worse).
	Regressed []string `json:"regressed"`
	// Improved names the metrics that moved beyond their tolerance the better way.
	Improved []string `json:"improved"`
}

// Regression reports whether anything got worse beyond its tolerance (`lumina diff` exits 1).
func (r *Result) Regression() bool { return len(r.Regressed) > 0 }

// Tolerances override the default tolerance of metrics by name; the name "*" applies to every metric not
// named.
type Tolerances map[string]Tolerance

// ParseTolerance reads one override: "NAME=VALUE" where VALUE is an absolute amount in the metric's unit
// ("retransmissions=2"), a percentage of the old value ("mct_us_mean=15%"), or both ("nack_reaction_us_mean=10%,0.5");
// NAME "*" sets every metric's.
func ParseTolerance(s string) (string, Tolerance, error) {
	name, val, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.TrimSpace(val) == "" {
		return "", Tolerance{}, fmt.Errorf("tolerance %q: want METRIC=VALUE, VALUE an amount (2), a percentage (10%%) or both (10%%,2); METRIC * for every metric", s)
	}
	if _, known := DefOf(name); !known && name != "*" {
		return "", Tolerance{}, fmt.Errorf("tolerance %q: no metric %q; the metrics are %s", s, name, strings.Join(Names(), ", "))
	}
	var t Tolerance
	var havePct, haveAbs bool
	for _, part := range strings.Split(val, ",") {
		part = strings.TrimSpace(part)
		pct := strings.HasSuffix(part, "%")
		f, err := strconv.ParseFloat(strings.TrimSuffix(part, "%"), 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return "", Tolerance{}, fmt.Errorf("tolerance %q: %q is not a non-negative number or percentage", s, part)
		}
		if pct {
			if havePct {
				return "", Tolerance{}, fmt.Errorf("tolerance %q: two percentages; want at most one percentage and one amount (10%%,2)", s)
			}
			havePct, t.Rel = true, f/100
		} else {
			if haveAbs {
				return "", Tolerance{}, fmt.Errorf("tolerance %q: two amounts; want at most one percentage and one amount (10%%,2)", s)
			}
			haveAbs, t.Abs = true, f
		}
	}
	return name, t, nil
}

// Names lists the metrics' names in order.
func Names() []string {
	out := make([]string, len(Defs))
	for i, d := range Defs {
		out[i] = d.Name
	}
	return out
}

// toleranceOf is the tolerance of a metric under the overrides.
func (ts Tolerances) of(d Def) Tolerance {
	if t, ok := ts[d.Name]; ok {
		return t
	}
	if t, ok := ts["*"]; ok {
		return t
	}
	return d.Tolerance
}

// VerdictError is the verdict the run history records for a run that reached no verdict (bad input, the
// environment, the testbed failed).
const VerdictError = "error"

// verdictRank orders the verdicts from best to worst: a run that reached no verdict is the worst of all.
var verdictRank = map[string]int{verdict.Pass: 0, verdict.Fail: 1, verdict.Invalid: 2, VerdictError: 3}

// verdictWorse reports whether going from verdict a to b (a != b) is a regression: b ranks worse, or either
// is a verdict this build does not know (nothing can vouch that it is not worse).
func verdictWorse(a, b string) bool {
	ra, okA := verdictRank[a]
	rb, okB := verdictRank[b]
	return !okA || !okB || rb > ra
}

// Compare compares run a (old) with run b (new), metric by metric (in the order of Defs, then any metric
// not defined, by name, with a zero tolerance and Either).
func Compare(a, b *Run, tol Tolerances) *Result {
	r := &Result{A: a, B: b, SameScenario: a.ScenarioHash != "" && a.ScenarioHash == b.ScenarioHash,
		Regressed: []string{}, Improved: []string{}}
	if a.Verdict != b.Verdict {
		r.VerdictChanged = true
		if verdictWorse(a.Verdict, b.Verdict) {
			r.Regressed = append(r.Regressed, "verdict")
		} else {
			r.Improved = append(r.Improved, "verdict")
		}
	}
	defs := append([]Def(nil), Defs...)
	var extra []string
	for _, m := range []Metrics{a.Metrics, b.Metrics} {
		for k := range m {
			if _, ok := DefOf(k); !ok && !contains(extra, k) {
				extra = append(extra, k)
			}
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		defs = append(defs, Def{Name: k, Worse: Either})
	}
	for _, d := range defs {
		ov, okA := a.Metrics[d.Name]
		nv, okB := b.Metrics[d.Name]
		if !okA && !okB {
			continue
		}
		row := Row{Metric: d.Name, Unit: d.Unit, Tolerance: tol.of(d).effective(d), Worse: d.Worse}
		switch {
		case !okB && mayLack(b.Metrics, d.Name):
			row.Old, row.Status = ptr(ov), StatusOnlyA
		case !okB:
			row.Old, row.Moved, row.Status = ptr(ov), true, StatusRegressed
		case !okA:
			row.New, row.Status = ptr(nv), StatusOnlyB
		default:
			row.Old, row.New, row.Change = ptr(ov), ptr(nv), ptr(nv-ov)
			if ov != 0 {
				row.ChangePct = ptr((nv - ov) / math.Abs(ov) * 100)
			}
			row.Allowed = ptr(row.Tolerance.Allowed(ov))
			row.Moved = row.Tolerance.exceeds(ov, nv)
			switch {
			case nv == ov:
				row.Status = StatusSame
			case !row.Moved:
				row.Status = StatusWithin
			case d.Worse == Either || (d.Worse == Up) == (nv > ov):
				row.Status = StatusRegressed
			default:
				row.Status = StatusImproved
			}
		}
		switch row.Status {
		case StatusRegressed:
			r.Regressed = append(r.Regressed, d.Name)
		case StatusImproved:
			r.Improved = append(r.Improved, d.Name)
		}
		r.Rows = append(r.Rows, row)
	}
	return r
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func ptr(f float64) *float64 { return &f }
