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
	switch {
	case r.SameScenario:
	case r.A.Seed != r.B.Seed:
		fmt.Fprintf(w, "note: the runs' seeds differ (%d, %d); the scenario hash includes the seed, so it cannot say whether the tests differ otherwise\n",
			r.A.Seed, r.B.Seed)
	default:
		fmt.Fprintln(w, "note: the runs' effective scenarios differ (scenario hash); the comparison is of different tests")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tOLD\tNEW\tCHANGE\t\tTOLERANCE\tWORSE\tSTATUS")
	if r.VerdictChanged {
		st := StatusImproved
		if len(r.Regressed) > 0 && r.Regressed[0] == "verdict" {
			st = StatusRegressed
		}
		fmt.Fprintf(tw, "verdict\t%s\t%s\t\t\t\t\t%s\n", r.A.Verdict, r.B.Verdict, mark(st))
	}
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Metric, num(row.Old), num(row.New), signed(row.Change),
			pct(row.ChangePct), tolerance(row), row.Worse, mark(row.Status))
	}
	tw.Flush()
	if r.Regression() {
		metrics := r.Regressed
		fmt.Fprint(w, "REGRESSION:")
		if metrics[0] == "verdict" {
			metrics = metrics[1:]
			fmt.Fprintf(w, " the verdict got worse (%s -> %s);", r.A.Verdict, r.B.Verdict)
		}
		if len(metrics) == 0 {
			fmt.Fprintln(w, " no metric regressed")
		} else {
			fmt.Fprintf(w, " %d metric(s) regressed (moved beyond tolerance the worse way, or lost): %s\n", len(metrics), strings.Join(metrics, ", "))
		}
	} else {
		fmt.Fprintf(w, "no regression (%d metric(s) improved beyond tolerance)\n", len(r.Improved))
	}
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
