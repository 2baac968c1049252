package rundiff

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteText prints the comparison as a table for a terminal: per metric old, new, change, tolerance and
// status, then the regressions.
func WriteText(w io.Writer, r *Result) {
	fmt.Fprintf(w, "A (old): %s  %s  nic %s  seed %d  %s\n", r.A.Label, r.A.Scenario, r.A.NIC, r.A.Seed, r.A.Verdict)
	fmt.Fprintf(w, "B (new): %s  %s  nic %s  seed %d  %s\n", r.B.Label, r.B.Scenario, r.B.NIC, r.B.Seed, r.B.Verdict)
	for _, n := range Notes(r) {
		fmt.Fprintln(w, n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tOLD\tNEW\tCHANGE\t\tTOLERANCE\tWORSE\tSTATUS")
	if r.VerdictChanged {
		fmt.Fprintf(tw, "verdict\t%s\t%s\t\t\t\t\t%s\n", r.A.Verdict, r.B.Verdict, mark(r.VerdictStatus()))
	}
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Metric, num(row.Old), num(row.New), signed(row.Change),
			pct(row.ChangePct), tolerance(row), row.Worse, mark(row.Status))
	}
	tw.Flush()
	fmt.Fprintln(w, Summary(r))
}

// Notes are the lines above the comparison's table: whether the two runs ran the same test. lumina diff
// prints them and the HTML report shows them, in the same words.
func Notes(r *Result) []string {
	switch {
	case r.SameScenario:
		return nil
	case r.A.Seed != r.B.Seed:
		return []string{fmt.Sprintf("note: the runs' seeds differ (%d, %d); the scenario hash includes the seed, so it cannot say whether the tests differ otherwise",
			r.A.Seed, r.B.Seed)}
	}
	return []string{"note: the runs' effective scenarios differ (scenario hash); the comparison is of different tests"}
}

// Summary is the line below the comparison's table: what regressed ("REGRESSION: ...") or "no regression".
func Summary(r *Result) string {
	if !r.Regression() {
		return fmt.Sprintf("no regression (%d metric(s) improved beyond tolerance)", len(r.Improved))
	}
	var b strings.Builder
	metrics := r.Regressed
	b.WriteString("REGRESSION:")
	if metrics[0] == "verdict" {
		metrics = metrics[1:]
		fmt.Fprintf(&b, " the verdict got worse (%s -> %s);", r.A.Verdict, r.B.Verdict)
	}
	if len(metrics) == 0 {
		b.WriteString(" no metric regressed")
	} else {
		fmt.Fprintf(&b, " %d metric(s) regressed (moved beyond tolerance the worse way, or lost): %s", len(metrics), strings.Join(metrics, ", "))
	}
	return b.String()
}

// VerdictStatus is the status of the verdict's row: same, improved or regressed.
func (r *Result) VerdictStatus() string {
	switch {
	case !r.VerdictChanged:
		return StatusSame
	case len(r.Regressed) > 0 && r.Regressed[0] == "verdict":
		return StatusRegressed
	}
	return StatusImproved
}

func mark(status string) string {
	if status == StatusRegressed {
		return "REGRESSED"
	}
	return status
}

func num(f *float64) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(*f, 'g', 6, 64)
}

func signed(f *float64) string {
	if f == nil {
		return ""
	}
	if *f > 0 {
		return "+" + num(f)
	}
	return num(f)
}

func pct(f *float64) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf("(%+.1f%%)", *f)
}

// tolerance prints a row's tolerance, and the move it allows from the old value when that is a percentage's.
func tolerance(row Row) string {
	if row.Tolerance.Rel == 0 || row.Allowed == nil {
		return row.Tolerance.String()
	}
	return row.Tolerance.String() + " = ±" + num(row.Allowed)
}
