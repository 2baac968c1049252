package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/htmlreport"
)

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out   string
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "report RESULTS_DIR [RESULTS_DIR_B] | SEARCH_DIR | CAMPAIGN_DIR | CAPTURE... [-o FILE.html]",
		Short: "Write an offline HTML report with interactive plots of a run, a capture, a search, or two runs side by side",
		Long: `report writes one self-contained HTML file (no network: the plotting library, Apache ECharts, is
inside it) that shows what the verdict stage decided for a results directory: the verdict and the
integrity conditions, expectations and checks, per connection a zoomable time-sequence diagram (time
against PSN: data, retransmissions, ACKs, NAKs, CNPs and one series per injected event type; hover for
the packet), the retransmission latency by drop position, the timeout ladder, CNPs against ECN marks with the inferred
limiter scope, message completion time CDFs, the traffic and the NIC counters (start, finish, delta,
expected from the trace). It reads analysis.json as the run or lumina analyze wrote it and changes nothing.

Given two results directories it shows both side by side under a table of their metrics; given a
lumina search directory, the anomalies with their minimal feature sets and the score over evaluations;
given a lumina campaign directory, the suite: verdicts, per item its key metrics and results (linked to
the item's report.html where there is one); given capture files, what lumina analyze finds in them.

Large traces: the data, ACK and ECN-mark series draw at most 4000 points at a time (the lowest and
highest PSN per time bucket); retransmissions, NAKs, CNPs, drops and the other injected events draw
every packet; zooming in draws every packet of the window.

Exit status: 0 the report was written, 2 bad input (nothing written; also when -o names an input or
a file the report reads inside an input directory).`,
		Example: `  lumina report results/listing2
  lumina report results/fw-a results/fw-b -o ab.html
  lumina report search-results
  lumina report capture.pcap`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mtr := newMeter(stderr, quiet, "report", "", time.Second)
			mtr.Phase("reading and analyzing", 0)
			page, err := htmlreport.Load(args)
			if err != nil {
				mtr.Done()
				return fail(exitBadArgs, err)
			}
			if out == "" {
				out = defaultReportPath(args, page.Kind)
			}
			if err := outputIsInput(out, args); err != nil {
				mtr.Done()
				return fail(exitBadArgs, err)
			}
			mtr.Phase("writing "+out, 0)
			err = htmlreport.WriteFile(out, page)
			mtr.Done()
			if err != nil {
				return fail(exitBadArgs, fmt.Errorf("writing the report: %w", err))
			}
			fmt.Fprintln(stdout, out)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on large inputs (a bar on a terminal, else a line every 2 s, after the first second)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "the HTML file (default: report.html in the results or search directory; for captures, CAPTURE.html)")
	return cmd
}

// defaultReportPath is report.html in the one directory given, the first capture's name with .html, or
// compare.html in the current directory for two runs.
func defaultReportPath(args []string, kind string) string {
	switch kind {
	case htmlreport.KindCompare:
		return "compare.html"
	case htmlreport.KindCapture:
		a := args[0]
		return a[:len(a)-len(filepath.Ext(a))] + ".html"
	}
	return filepath.Join(args[0], reportFile)
}

// outputIsInput refuses an output that is one of the inputs, or a file the report reads inside an input
// directory (every file there but HTML: the report reads none), compared as files (os.SameFile), so that
// another path to the same file is caught too.
func outputIsInput(out string, args []string) error {
	fo, err := os.Stat(out)
	if err != nil {
		return nil // a new file, or one we cannot stat: nothing of the input to overwrite
	}
	for _, a := range args {
		fa, err := os.Stat(a)
		if err != nil {
			continue
		}
		if os.SameFile(fo, fa) {
			return fmt.Errorf("-o %s is the input %s: the report would overwrite what it reads", out, a)
		}
		if !fa.IsDir() || strings.EqualFold(filepath.Ext(out), ".html") {
			continue
		}
		var hit string
		_ = filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
			if err != nil || hit != "" || d.IsDir() {
				return nil
			}
			if fi, err := os.Stat(p); err == nil && os.SameFile(fo, fi) {
				hit = p
			}
			return nil
		})
		if hit != "" {
			return fmt.Errorf("-o %s is %s, a file of the input directory %s: the report would overwrite what it reads", out, hit, a)
		}
	}
	return nil
}

// reportFile is the report's name in a results directory (lumina run --report).
const reportFile = "report.html"

// writeRunReport writes DIR/report.html for lumina run --report.
func writeRunReport(dir string, page *htmlreport.Page, stderr io.Writer) error {
	path := filepath.Join(dir, reportFile)
	if err := htmlreport.WriteFile(path, page); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(stderr, "lumina: report: %s\n", path)
	return nil
}
