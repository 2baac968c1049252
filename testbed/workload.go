package testbed

import (
	"fmt"
	"path/filepath"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/netsim"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/version"
)

// FileWorkload is what a `workload:` run measured (also the "workload" section of analysis.json).
const FileWorkload = "workload.json"

// Collie's anomaly thresholds (seeds/003 §5.2, spec/nic-microarchitecture.md): pause duration ratio above
// 0.1%, or throughput more than 20% below both the bits/s and the packets/s limits without pause.
const (
	workloadPauseRatio = 0.001
	workloadLowShare   = 0.8
)

// WorkloadAnalysis is a workload run's result: the NICs' pause, the goodput against the profile's limits and
// the symptom Collie's monitor would report. Throughput counts whole wire frames the receiver placed in memory.
type WorkloadAnalysis struct {
	WindowUs float64 `json:"window_us"`
	// LimitGbps is the line rate; LimitMpps the packets/s limit for the workload's frame sizes.
	LimitGbps float64 `json:"limit_gbps"`
	LimitMpps float64 `json:"limit_mpps"`
	// PauseRatio is the larger of the two NICs' pause duration ratios (tx_prioN_pause_duration / window).
	PauseRatio float64 `json:"pause_duration_ratio"`
	// GoodputGbps and GoodputMpps are the busier direction's; LimitShare the larger of their shares of the
	// limits (1 = at a limit).
	GoodputGbps float64 `json:"goodput_gbps"`
	GoodputMpps float64 `json:"goodput_mpps"`
	LimitShare  float64 `json:"limit_share"`
	// Symptom is pause, low-throughput or none.
	Symptom string         `json:"symptom"`
	Hosts   []WorkloadHost `json:"hosts"`
}

// WorkloadHost is one NIC's view: goodput it sent and received, its pause ratio and counters per second.
type WorkloadHost struct {
	Host       string            `json:"host"` // requester (host A) or responder (host B)
	NIC        string            `json:"nic"`
	PauseRatio float64           `json:"pause_duration_ratio"`
	TxGbps     float64           `json:"tx_goodput_gbps"`
	RxGbps     float64           `json:"rx_goodput_gbps"`
	TxMpps     float64           `json:"tx_goodput_mpps"`
	RxMpps     float64           `json:"rx_goodput_mpps"`
	Counters   map[string]uint64 `json:"counters_per_second"`
}

// runWorkload runs a scenario's workload section on the NIC micro-architecture model: no trace, but the
// effective scenario, counters.json (window totals), workload.json and analysis.json, whose "workload" check
// fails when the workload shows Collie's symptom.
func runWorkload(sc *scenario.Scenario, opts Options) (*Outcome, error) {
	var cfg netsim.WorkloadConfig
	for i, h := range []struct {
		name string
		nic  string
	}{{"requester", sc.Requester.NIC.Type}, {"responder", sc.Responder.NIC.Type}} {
		p, err := loadProfile(sc, h.name, h.nic)
		if err != nil {
			return nil, err
		}
		if p.Micro == nil {
			return nil, badInputf("%s: workload: %s.nic.type %s has no micro section; expected a profile that models the NIC's caches and PCIe (cx6vpi-200g, p2100g or a file with a micro section)",
				sc.Path, h.name, p.Name)
		}
		cfg.Profiles[i] = p
	}
	w := sc.Workload
	cfg.Seed = sc.Seed
	cfg.Workload = netsim.Workload{QPType: w.QPType, Opcode: w.Opcode, NumQPs: w.NumQPs, MTU: w.MTU,
		WQEBatch: w.WQEBatch, SGE: w.SGE, WQDepth: w.WQDepth, NumMRs: w.NumMRs, MRSize: w.MRSize,
		MsgSizes: w.MsgSizes, Direction: w.Direction, Memory: w.Memory}
	cfg.LinkGbps, cfg.PropagationNs, cfg.SwitchLatencyNs = sc.Network.LinkGbps, sc.Network.PropagationNs, sc.Network.SwitchLatencyNs
	r, err := netsim.RunWorkload(cfg)
	if err != nil {
		return nil, fmt.Errorf("simulating the workload: %w", err)
	}
	wa := workloadAnalysis(sc, r)

	if err := writeEffective(filepath.Join(opts.OutDir, FileScenario), sc); err != nil {
		return nil, err
	}
	cf := CountersFile{
		Requester: HostCounters{NIC: sc.Requester.NIC.Type, Vendor: vendorOf(sc, sc.Requester), Start: map[string]uint64{},
			Finish: counterMap(r.Hosts[0].Totals())},
		Responder: HostCounters{NIC: sc.Responder.NIC.Type, Vendor: vendorOf(sc, sc.Responder), Start: map[string]uint64{},
			Finish: counterMap(r.Hosts[1].Totals())},
		Switch: SwitchCounters{Ports: []netsim.SwitchPortCounters{}},
	}
	for _, x := range []struct {
		name string
		v    any
	}{{FileCounters, cf}, {FileWorkload, wa}} {
		if err := writeJSON(opts.OutDir, x.name, x.v); err != nil {
			return nil, err
		}
	}
	if err := writeList(opts.OutDir, FileTraffic, []TrafficRecord{}); err != nil {
		return nil, err
	}
	if err := writeList(opts.OutDir, FileConnections, []ConnRecord{}); err != nil {
		return nil, err
	}

	return workloadOutcome(sc, opts.OutDir, wa, &cf)
}

// workloadOutcome judges a workload run (Collie's monitor as the "workload" check), evaluates the scenario's
// expectations and writes analysis.json; lumina analyze DIR calls it again on workload.json.
func workloadOutcome(sc *scenario.Scenario, dir string, wa *WorkloadAnalysis, cf *CountersFile) (*Outcome, error) {
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
	tree := docTree(doc)
	doc.Expectations = evaluateTree(sc, tree)
	doc.Verdict = verdict(sc, tree, doc)
	if err := writeJSON(dir, FileAnalysis, doc); err != nil {
		return nil, err
	}
	return &Outcome{Dir: dir, Doc: doc, Scenario: sc, Counters: cf}, nil
}

// reanalyzeWorkload re-judges a workload results directory from its workload.json (there is no trace).
func reanalyzeWorkload(dir string, sc *scenario.Scenario) (*Outcome, error) {
	var wa WorkloadAnalysis
	if err := readJSON(dir, FileWorkload, &wa); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	var cf CountersFile
	if err := readJSON(dir, FileCounters, &cf); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	return workloadOutcome(sc, dir, &wa, &cf)
}

// workloadAnalysis derives the monitor's view from the model's window counters.
func workloadAnalysis(sc *scenario.Scenario, r *netsim.WorkloadResult) *WorkloadAnalysis {
	wa := &WorkloadAnalysis{WindowUs: float64(r.WindowNs) / 1e3, LimitGbps: r.LimitGbps, LimitMpps: r.LimitMpps,
		Symptom: "none"}
	for i, name := range []string{"requester", "responder"} {
		h := &r.Hosts[i]
		nic := sc.Requester.NIC.Type
		if i == 1 {
			nic = sc.Responder.NIC.Type
		}
		wh := WorkloadHost{Host: name, NIC: nic, PauseRatio: r.PauseRatio(i),
			TxGbps: r.Gbps(h.GoodTxBytes), RxGbps: r.Gbps(h.GoodRxBytes),
			TxMpps: r.Mpps(h.GoodTxPackets), RxMpps: r.Mpps(h.GoodRxPackets),
			Counters: counterMap(h.Counters(r.WindowNs))}
		wa.Hosts = append(wa.Hosts, wh)
		wa.PauseRatio = max(wa.PauseRatio, wh.PauseRatio)
		wa.GoodputGbps = max(wa.GoodputGbps, wh.TxGbps, wh.RxGbps)
		wa.GoodputMpps = max(wa.GoodputMpps, wh.TxMpps, wh.RxMpps)
	}
	if wa.LimitGbps > 0 && wa.LimitMpps > 0 {
		wa.LimitShare = max(wa.GoodputGbps/wa.LimitGbps, wa.GoodputMpps/wa.LimitMpps)
	}
	switch {
	case wa.PauseRatio > workloadPauseRatio:
		wa.Symptom = "pause"
	case wa.GoodputGbps < workloadLowShare*wa.LimitGbps && wa.GoodputMpps < workloadLowShare*wa.LimitMpps:
		wa.Symptom = "low-throughput"
	}
	return wa
}
