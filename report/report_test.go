package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/verdict"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden summaries in testdata from the current output")

// outcome rebuilds what the verdict stage hands the report from a results directory kept in testdata
// (analysis.json, the effective scenario, traffic.json, switch.json), with the results path shown as RESULTS.
func outcome(t *testing.T, dir string) *verdict.Outcome {
	t.Helper()
	o := &verdict.Outcome{Dir: "RESULTS", Doc: &verdict.Document{}}
	if err := resultsdir.ReadJSON(dir, resultsdir.FileAnalysis, o.Doc); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(filepath.Join(dir, resultsdir.FileScenario))
	if err != nil {
		t.Fatal(err)
	}
	sc.Path = o.Doc.Scenario // as given on the command line, not the results directory's copy
	o.Scenario = sc
	if err := resultsdir.ReadJSON(dir, resultsdir.FileTraffic, &o.Traffic); err != nil {
		t.Fatal(err)
	}
	var sw struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := resultsdir.ReadJSON(dir, resultsdir.FileSwitch, &sw); err == nil {
		o.Entries = sw.Entries
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return o
}

// TestRunGolden renders kept results directories and compares the summary with what `lumina run` printed for
// them (the golden files were taken from the command before report moved onto the verdict stage's types).
// They cover a plain pass, an expected counter failure, a workload run, a failing noisy-neighbor check with
// more connections than the table shows, more retransmissions than shown, and a CNP line.
func TestRunGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*.golden")
	if err != nil || len(dirs) < 6 {
		t.Fatalf("golden files: %v %v", dirs, err)
	}
	for _, g := range dirs {
		name := strings.TrimSuffix(filepath.Base(g), ".golden")
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			Run(&buf, outcome(t, filepath.Join("testdata", name)))
			if *rewrite {
				if err := os.WriteFile(g, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(g)
			if err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != string(want) {
				t.Errorf("summary differs from %s (run with -rewrite after checking the change):\n--- got\n%s--- want\n%s", g, got, want)
			}
		})
	}
}

// An invalid test shows the failed integrity checks and nothing of the analysis.
func TestRunInvalid(t *testing.T) {
	o := outcome(t, "testdata/listing2")
	o.Doc.Integrity.OK = false
	o.Doc.Integrity.Checks[1].OK = false
	o.Doc.Integrity.Checks[1].Detail = "seq 7 follows seq 5"
	o.Doc.Verdict = verdict.Invalid
	var buf bytes.Buffer
	Run(&buf, o)
	out := buf.String()
	for _, want := range []string{
		"integrity  INVALID TEST (3/4 checks pass): nothing was analyzed\n",
		"  [FAIL] " + o.Doc.Integrity.Checks[1].Name + ": seq 7 follows seq 5\n",
		"\nINVALID\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\ntrace ") || strings.Contains(out, "\nchecks ") {
		t.Errorf("an invalid test shows analysis results:\n%s", out)
	}
}

// A failed check lists at most five violations in all, each with its packet unless it judges the whole run.
func TestChecksCapsViolations(t *testing.T) {
	var vs []analyze.Violation
	for i := range 7 {
		vs = append(vs, analyze.Violation{Packet: i * 10, Message: "late"})
	}
	vs[0].Packet = -1
	var buf bytes.Buffer
	checks(&buf, []analyze.Check{{Analyzer: "gbn", QP: 2, Violations: vs, ViolationCount: 9}, {Analyzer: "gbn", QP: 3, OK: true}}, 5)
	want := "checks     gbn 1/2 connection(s) pass\n" +
		"  [FAIL] gbn qp 2: 9 violation(s)\n" +
		"         late\n" +
		"         packet 10: late\n" +
		"         packet 20: late\n" +
		"         packet 30: late\n" +
		"         packet 40: late\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	buf.Reset()
	checks(&buf, nil, 5)
	if buf.String() != "checks     none applied\n" {
		t.Errorf("no checks: %q", buf.String())
	}
}

// The capture summary's checker part counts what was not judged by reason, sorted (without a flow table to
// account in flows, the analyzers' skipped list as it is).
func TestCaptureSkipped(t *testing.T) {
	d := &CaptureDoc{Report: &summary.Report{}}
	d.Set(&analyze.Analysis{Checks: []analyze.Check{{Analyzer: "gbn", QP: 1, OK: true}},
		Skipped: []analyze.Skipped{{Reason: "ud"}, {Reason: "no-data"}, {Reason: "ud"}}})
	if !d.ChecksOK() {
		t.Error("ChecksOK false with every check passing")
	}
	var buf bytes.Buffer
	Capture(&buf, d)
	if !strings.Contains(buf.String(), "  not judged (no-data: 1; ud: 2)\n") {
		t.Errorf("capture summary:\n%s", buf.String())
	}
	d.Checks[0].OK = false
	if d.ChecksOK() {
		t.Error("ChecksOK true with a failed check")
	}
}

// A workload's line says which limit is what the workload keeps in flight, and says nothing of it when the
// NIC's or the line's limits are lower.
func TestWorkloadInFlightLine(t *testing.T) {
	for _, c := range []struct {
		wl   resultsdir.WorkloadAnalysis
		want string
	}{
		{resultsdir.WorkloadAnalysis{LimitGbps: 29.1, LimitMpps: 3.29, InFlightGbps: 29.1, InFlightMpps: 3.29},
			"limited by what the workload keeps in flight (its QPs and queue depth): 29.1 Gb/s, 3.29 Mpps\n"},
		{resultsdir.WorkloadAnalysis{LimitGbps: 100, LimitMpps: 3.29, InFlightGbps: 150, InFlightMpps: 3.29},
			"limited by what the workload keeps in flight (its QPs and queue depth): 3.29 Mpps\n"},
		{resultsdir.WorkloadAnalysis{LimitGbps: 100, LimitMpps: 11.3, InFlightGbps: 150, InFlightMpps: 20}, ""},
		{resultsdir.WorkloadAnalysis{LimitGbps: 100, LimitMpps: 11.3}, ""}, // a workload.json from before in_flight
	} {
		var buf bytes.Buffer
		wl := c.wl
		workload(&buf, &verdict.Document{Workload: &wl})
		got := ""
		for _, line := range strings.SplitAfter(buf.String(), "\n") {
			if strings.Contains(line, "in flight") {
				got = strings.TrimLeft(line, " ")
			}
		}
		if got != c.want {
			t.Errorf("%+v: in-flight line %q, want %q", c.wl, got, c.want)
		}
	}
}

// A workload on one of Collie's subsystems names the published anomalies whose conditions hold, says when the
// run shows another symptom, and says so when none holds; elsewhere (no published list) it says nothing.
func TestWorkloadPublishedLine(t *testing.T) {
	one := []resultsdir.PublishedAnomaly{{ID: 14, Symptom: "low-throughput", Title: "Bidirectional RC traffic"}}
	none := []resultsdir.PublishedAnomaly{}
	for _, c := range []struct {
		symptom string
		pub     *[]resultsdir.PublishedAnomaly
		want    string
	}{
		{"low-throughput", &one, "published  #14 (Collie, NSDI 2022: low-throughput): Bidirectional RC traffic\n"},
		{"none", &one, "published  #14 (Collie, NSDI 2022: low-throughput; this run shows none): Bidirectional RC traffic\n"},
		{"none", &none, "published  none: no anomaly Collie (NSDI 2022) publishes for this NIC holds at this workload\n"},
		{"pause", nil, ""},
	} {
		var buf bytes.Buffer
		wl := resultsdir.WorkloadAnalysis{Symptom: c.symptom, Published: c.pub}
		workload(&buf, &verdict.Document{Workload: &wl})
		got := ""
		for _, line := range strings.SplitAfter(buf.String(), "\n") {
			if strings.HasPrefix(line, "published") {
				got += line
			}
		}
		if got != c.want {
			t.Errorf("%s, %v: published lines %q, want %q", c.symptom, c.pub, got, c.want)
		}
	}
}
