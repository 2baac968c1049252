package htmlreport

import (
	"sort"

	"github.com/lumina-go/lumina/analyze"
)

// Metric is one row of the side-by-side metric table of two runs.
type Metric struct {
	Name string   `json:"name"`
	Unit string   `json:"unit,omitempty"`
	A    *float64 `json:"a"` // null: the run does not have it
	B    *float64 `json:"b"`
	// Text values for what is not a number (the verdict).
	AText string `json:"a_text,omitempty"`
	BText string `json:"b_text,omitempty"`
	// Moved says whether the metric differs between the runs (beyond its tolerance, when Status is set).
	Moved bool `json:"moved"`
	// Tolerance and Status come from a comparison with tolerances (lumina diff): Status is same, within,
	// improved, regressed, only_a or only_b. Both are empty for BasicCompare.
	Tolerance string `json:"tolerance,omitempty"`
	Status    string `json:"status,omitempty"`
	// Worse is the direction in which the metric is worse (up, down, either), from lumina diff.
	Worse string `json:"worse,omitempty"`
}

// Comparison is the metric table of two runs and the notes above it (lumina diff's: different scenarios,
// the regression summary).
type Comparison struct {
	Metrics []Metric
	Notes   []string
}

// CompareFunc makes the metric table of `lumina report A B` and its notes. The command sets it to lumina
// diff's comparison (package rundiff, with its tolerances); BasicComparison is what the package does alone.
var CompareFunc = BasicComparison

// BasicComparison is BasicCompare's table with no notes.
func BasicComparison(a, b *Run) Comparison { return Comparison{Metrics: BasicCompare(a, b)} }

// ComparePage is the page of two runs side by side.
func ComparePage(a, b *Run) *Page {
	c := CompareFunc(a, b)
	return &Page{Kind: KindCompare, Title: "lumina report: " + a.Source + " vs " + b.Source, MaxPoints: DefaultMaxPoints,
		Runs: []*Run{a, b}, Compare: c.Metrics, CompareNotes: c.Notes}
}

// BasicCompare lists the headline metrics of both runs, with no tolerance: a metric moved when it differs.
func BasicCompare(a, b *Run) []Metric {
	ma, mb := metrics(a), metrics(b)
	var names []string
	seen := map[string]bool{}
	for _, m := range [][]namedValue{ma, mb} {
		for _, v := range m {
			if !seen[v.name] {
				seen[v.name] = true
				names = append(names, v.name)
			}
		}
	}
	get := func(m []namedValue, n string) *namedValue {
		for i := range m {
			if m[i].name == n {
				return &m[i]
			}
		}
		return nil
	}
	out := []Metric{{Name: "verdict", AText: a.Verdict, BText: b.Verdict, Moved: a.Verdict != b.Verdict}}
	for _, n := range names {
		va, vb := get(ma, n), get(mb, n)
		m := Metric{Name: n}
		if va != nil {
			m.Unit, m.A = va.unit, va.v
		}
		if vb != nil {
			m.Unit, m.B = vb.unit, vb.v
		}
		m.Moved = (m.A == nil) != (m.B == nil) || (m.A != nil && m.B != nil && *m.A != *m.B)
		out = append(out, m)
	}
	return out
}

type namedValue struct {
	name, unit string
	v          *float64
}

func num(v float64) *float64 { return &v }

// metrics are a run's headline figures, in a fixed order.
func metrics(r *Run) []namedValue {
	var m []namedValue
	add := func(name, unit string, v *float64) { m = append(m, namedValue{name, unit, v}) }
	if r.Trace != nil {
		add("packets", "", num(float64(r.Trace.Packets)))
	}
	failed := 0
	for _, c := range r.Checks {
		if !c.OK {
			failed++
		}
	}
	add("checks failed", "", num(float64(failed)))
	exp := 0
	for _, e := range r.Expectations {
		if !e.OK {
			exp++
		}
	}
	add("expectations failed", "", num(float64(exp)))
	mis := 0
	for _, c := range r.Counters {
		if !c.OK {
			mis++
		}
	}
	add("counter mismatches", "", num(float64(mis)))
	add("retransmissions", "", num(float64(r.RetransmissionsTotal)))
	an := r.analysis
	if an == nil {
		an = &analyze.Analysis{}
	}
	var lat []float64
	timeouts := 0
	for _, x := range an.Retransmissions {
		if x.LatencyUs != nil {
			lat = append(lat, *x.LatencyUs)
		}
		if x.Trigger != nil && *x.Trigger == analyze.TriggerTimeout {
			timeouts++
		}
	}
	add("retransmissions by timeout", "", num(float64(timeouts)))
	if len(lat) > 0 {
		sort.Float64s(lat)
		add("retransmission latency mean", "µs", num(mean(lat)))
		add("retransmission latency max", "µs", num(lat[len(lat)-1]))
	}
	if r.CNP != nil {
		add("ECN-marked packets", "", num(float64(r.CNP.ECNMarked)))
		add("CNPs", "", num(float64(r.CNP.CNPs)))
	}
	var mct []float64
	good := 0.0
	for _, t := range an.Traffic {
		mct = append(mct, t.MCTUs...)
		good += t.GoodputGbps
	}
	if len(mct) > 0 {
		sort.Float64s(mct)
		add("MCT mean", "µs", num(mean(mct)))
		add("MCT p99", "µs", num(quantile(mct, 0.99)))
	}
	if len(an.Traffic) > 0 {
		add("goodput (sum over QPs)", "Gbit/s", num(good))
	}
	return m
}

func mean(s []float64) float64 {
	t := 0.0
	for _, v := range s {
		t += v
	}
	return t / float64(len(s))
}
