package htmlreport

import (
	"github.com/lumina-go/lumina/rundiff"
)

// Metric is one row of the side-by-side metric table of two runs: a row of lumina diff's comparison
// (package rundiff), so that the page and `lumina diff A B` agree row for row.
type Metric struct {
	Name string   `json:"name"`
	Unit string   `json:"unit,omitempty"`
	A    *float64 `json:"a"` // null: the run does not have it
	B    *float64 `json:"b"`
	// Text values for what is not a number (the verdict).
	AText string `json:"a_text,omitempty"`
	BText string `json:"b_text,omitempty"`
	// Moved says whether the metric moved beyond its tolerance (for the verdict: whether it changed).
	Moved bool `json:"moved"`
	// Tolerance is the metric's tolerance as applied; Status is same, within, improved, regressed, only-a or
	// only-b; Worse the direction in which the metric is worse (up, down, either).
	Tolerance string `json:"tolerance,omitempty"`
	Status    string `json:"status,omitempty"`
	Worse     string `json:"worse,omitempty"`
}

// ComparePage is the page of two judged runs side by side under lumina diff's comparison of them (its
// default tolerances), with the notes diff prints around its table (the scenarios or seeds differ, the
// regression summary) in its words.
func ComparePage(a, b *Run) (*Page, error) {
	res, err := compare(a, b)
	if err != nil {
		return nil, err
	}
	out := []Metric{{Name: "verdict", AText: res.A.Verdict, BText: res.B.Verdict, Moved: res.VerdictChanged, Status: res.VerdictStatus()}}
	for _, r := range res.Rows {
		out = append(out, Metric{Name: r.Metric, Unit: r.Unit, A: r.Old, B: r.New, Moved: r.Moved,
			Tolerance: r.Tolerance.String(), Status: r.Status, Worse: string(r.Worse)})
	}
	return &Page{Kind: KindCompare, Title: "lumina report: " + a.Source + " vs " + b.Source, MaxPoints: DefaultMaxPoints,
		Runs: []*Run{a, b}, Compare: out, CompareNotes: append(rundiff.Notes(res), rundiff.Summary(res))}, nil
}

// compare is rundiff's comparison of two runs read from results directories (their verdict documents as
// LoadResults read them).
func compare(a, b *Run) (*rundiff.Result, error) {
	var runs [2]*rundiff.Run
	for i, r := range []*Run{a, b} {
		if r.doc == nil {
			return nil, badInput("%s: not a judged results directory; two results directories are compared", r.Source)
		}
		rr, err := rundiff.FromDoc(r.Source, r.doc)
		if err != nil {
			return nil, badInput("%v", err)
		}
		runs[i] = rr
	}
	return rundiff.Compare(runs[0], runs[1], nil), nil
}
