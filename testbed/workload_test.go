package testbed

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/verdict"
)

func loadText(t *testing.T, text string) *scenario.Scenario {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestWorkloadRun: a reproducer of Collie's anomaly #1 shows the pause in analysis.json and, because it
// expects the workload check to fail, passes; the ordinary workload is clean.
func TestWorkloadRun(t *testing.T) {
	sc := loadText(t, `
requester: {nic: {type: cx6vpi-200g}}
responder: {nic: {type: cx6vpi-200g}}
workload: {qp_type: ud, opcode: send, num_qps: 1, mtu: 2048, wqe_batch: 64, wq_depth: 256, msg_sizes: [2048]}
expect:
  - {path: workload.symptom, equals: pause}
  - {path: workload.pause_duration_ratio, min: 0.001}
  - {path: 'workload.hosts[host=responder].counters_per_second.rx_wqe_cache_miss', min: 1}
  - {path: 'checks[analyzer=workload].ok', equals: false}
`)
	dir := t.TempDir()
	o, err := runJudged(sc, Options{OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if o.ExitCode() != 0 || o.Doc.Verdict != verdict.Pass {
		t.Errorf("verdict %s (exit %d), want pass: expectations %+v", o.Doc.Verdict, o.ExitCode(), o.Doc.Expectations)
	}
	c := o.Doc.Checks[0]
	if c.Analyzer != "workload" || c.OK || len(c.Violations) != 1 || !strings.Contains(c.Violations[0].Message, "PFC pause duration ratio") {
		t.Errorf("workload check %+v: want a failed check naming the pause", c)
	}
	for _, f := range []string{resultsdir.FileScenario, resultsdir.FileCounters, resultsdir.FileWorkload, resultsdir.FileAnalysis} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("results directory lacks %s: %v", f, err)
		}
	}
	var wa resultsdir.WorkloadAnalysis
	if err := readJSON(dir, resultsdir.FileWorkload, &wa); err != nil {
		t.Fatal(err)
	}
	if wa.Symptom != "pause" || wa.PauseRatio <= 0.001 || wa.LimitGbps != 200 || len(wa.Hosts) != 2 {
		t.Errorf("workload.json %+v: want pause on a 200 Gb/s profile", wa)
	}
	// cx6vpi-200g is Collie's subsystem F: the run names #1, whose conditions the workload meets.
	if wa.Published == nil || len(*wa.Published) != 1 || (*wa.Published)[0].ID != 1 || (*wa.Published)[0].Symptom != "pause" ||
		!strings.HasPrefix((*wa.Published)[0].Title, "UD with large WQE batch size") {
		t.Errorf("workload.json published %v: want Collie's #1 (pause)", wa.Published)
	}
	// The effective scenario keeps the workload (defaults filled in) and loads back.
	back, err := scenario.Load(filepath.Join(dir, resultsdir.FileScenario))
	if err != nil || back.Workload == nil || back.Workload.WQEBatch != 64 || back.Workload.NumMRs != 1 {
		t.Errorf("effective scenario: %v, %+v", err, back)
	}

	sc = loadText(t, `
requester: {nic: {type: p2100g}}
responder: {nic: {type: p2100g}}
workload: {wqe_batch: 16}
`)
	o, err = runJudged(sc, Options{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := readJSON(o.Dir, resultsdir.FileWorkload, &wa); err != nil {
		t.Fatal(err)
	}
	if o.ExitCode() != 0 || wa.Symptom != "none" || wa.GoodputGbps < 97 || wa.PauseRatio != 0 {
		t.Errorf("ordinary workload on p2100g: exit %d, %+v: want clean at line rate", o.ExitCode(), wa)
	}
	if wa.Published == nil || len(*wa.Published) != 0 {
		t.Errorf("ordinary workload on p2100g: published %v, want [] (none of subsystem H's holds)", wa.Published)
	}
}

// TestWorkloadPublishedOnlyOnCollieSubsystems: a profile file (the user's NIC) and two different NICs name no
// published anomaly: the field is absent.
func TestWorkloadPublishedOnlyOnCollieSubsystems(t *testing.T) {
	prof, err := os.ReadFile("../rnic/profiles/cx6vpi-200g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(file, prof, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, nics := range [][2]string{{file, file}, {"cx6vpi-200g", "collie-f"}} {
		sc := loadText(t, `
requester: {nic: {type: `+nics[0]+`}}
responder: {nic: {type: `+nics[1]+`}}
workload: {qp_type: ud, opcode: send, num_qps: 1, mtu: 2048, wqe_batch: 64, wq_depth: 256, msg_sizes: [2048]}
`)
		o, err := runJudged(sc, Options{OutDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		var wa resultsdir.WorkloadAnalysis
		if err := readJSON(o.Dir, resultsdir.FileWorkload, &wa); err != nil {
			t.Fatal(err)
		}
		if wa.Symptom != "pause" || wa.Published != nil {
			t.Errorf("%v: symptom %s, published %v: want the pause and no published list", nics, wa.Symptom, wa.Published)
		}
	}
}

func TestWorkloadNeedsMicroProfile(t *testing.T) {
	sc := loadText(t, "workload: {num_qps: 2}\n") // the default NIC is cx5
	_, err := runJudged(sc, Options{OutDir: t.TempDir()})
	if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "requester.nic.type cx5 has no micro section") {
		t.Errorf("error %v, want a bad-input error about cx5's missing micro section", err)
	}
}

// lumina analyze DIR on a workload results directory re-judges it from workload.json (there is no trace).
func TestReanalyzeWorkloadDir(t *testing.T) {
	sc, err := scenario.Load("../examples/collie-01-ud-send-batch-pause.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o, err := runJudged(sc, Options{OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r, err := verdict.Reanalyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Doc.Workload == nil || r.Doc.Workload.Symptom != o.Doc.Workload.Symptom || r.Doc.Verdict != o.Doc.Verdict {
		t.Fatalf("re-analysis: %+v, want the run's symptom %s and verdict %s", r.Doc.Workload, o.Doc.Workload.Symptom, o.Doc.Verdict)
	}
}

// TestWorkloadWindowLimited: a workload that keeps too little in flight to fill the link (one RC QP, queue depth
// 3) is slow by its own design. `lumina run` judges it as the search does, against what it keeps in flight, so it
// is not called low throughput although its goodput is far below the line rate; a deeper queue of the same
// workload keeps the limits at the line's.
func TestWorkloadWindowLimited(t *testing.T) {
	run := func(depth string) resultsdir.WorkloadAnalysis {
		sc := loadText(t, `
requester: {nic: {type: p2100g}}
responder: {nic: {type: p2100g}}
workload: {qp_type: rc, opcode: send, num_qps: 1, mtu: 1024, wq_depth: `+depth+`, msg_sizes: [4096]}
`)
		dir := t.TempDir()
		if _, err := runJudged(sc, Options{OutDir: dir}); err != nil {
			t.Fatal(err)
		}
		var wa resultsdir.WorkloadAnalysis
		if err := readJSON(dir, resultsdir.FileWorkload, &wa); err != nil {
			t.Fatal(err)
		}
		return wa
	}
	shallow := run("3")
	if shallow.InFlightGbps <= 0 || shallow.InFlightGbps >= 100 || shallow.LimitGbps != shallow.InFlightGbps {
		t.Errorf("depth 3: in flight %.1f Gb/s, limit %.1f Gb/s: want the limit to be what is in flight, below the 100 Gb/s line",
			shallow.InFlightGbps, shallow.LimitGbps)
	}
	if shallow.GoodputGbps >= 0.8*100 {
		t.Errorf("depth 3: goodput %.1f Gb/s: the workload was meant to be far below the line rate", shallow.GoodputGbps)
	}
	if shallow.Symptom != "none" {
		t.Errorf("depth 3: symptom %q at %.1f Gb/s with %.1f Gb/s in flight: a window-limited workload is not an anomaly",
			shallow.Symptom, shallow.GoodputGbps, shallow.InFlightGbps)
	}
	deep := run("128")
	if deep.LimitGbps != 100 || deep.InFlightGbps <= 100 {
		t.Errorf("depth 128: limit %.1f Gb/s, in flight %.1f Gb/s: want the line rate as the limit", deep.LimitGbps, deep.InFlightGbps)
	}
}
