package verdict

import (
	"fmt"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/version"
)

// workloadOutcome judges a workload run (Collie's monitor as the "workload" check), evaluates the scenario's
// expectations and writes analysis.json.
func workloadOutcome(sc *scenario.Scenario, dir string, wa *resultsdir.WorkloadAnalysis, cf *resultsdir.CountersFile) (*Outcome, error) {
	check := analyze.Check{Analyzer: "workload", QP: sc.IndexBase, OK: wa.Symptom == "none", Violations: []analyze.Violation{}}
	switch wa.Symptom {
	case "pause":
		check.Violations = append(check.Violations, analyze.Violation{Packet: -1, Message: fmt.Sprintf(
			"PFC pause duration ratio %.2f%% is above 0.1%% on an uncongested switch (goodput %.1f Gb/s, %.1f Mpps)",
			100*wa.PauseRatio, wa.GoodputGbps, wa.GoodputMpps)})
	case "low-throughput":
		check.Violations = append(check.Violations, analyze.Violation{Packet: -1, Message: fmt.Sprintf(
			"goodput %.1f Gb/s, %.1f Mpps is more than 20%% below both limits %.0f Gb/s and %.1f Mpps, without pause",
			wa.GoodputGbps, wa.GoodputMpps, wa.LimitGbps, wa.LimitMpps)})
	}
	check.ViolationCount = len(check.Violations)
	doc := &Document{Version: version.Get(), Scenario: sc.Path, Testbed: sc.Testbed, Seed: sc.Seed, IndexBase: sc.IndexBase,
		Integrity: trace.Integrity{OK: true, Checks: []trace.CheckResult{}},
		Analysis:  &analyze.Analysis{Checks: []analyze.Check{check}, Metadata: "none"}, Workload: wa}
	if err := judge(sc, doc); err != nil {
		return nil, err
	}
	if err := writeJSON(dir, resultsdir.FileAnalysis, doc); err != nil {
		return nil, err
	}
	return &Outcome{Dir: dir, Doc: doc, Scenario: sc, Counters: cf}, nil
}

// judgeWorkload judges a workload results directory from its workload.json (there is no trace).
func judgeWorkload(dir string, sc *scenario.Scenario) (*Outcome, error) {
	var wa resultsdir.WorkloadAnalysis
	if err := readJSON(dir, resultsdir.FileWorkload, &wa); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	var cf resultsdir.CountersFile
	if err := readJSON(dir, resultsdir.FileCounters, &cf); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	return workloadOutcome(sc, dir, &wa, &cf)
}
