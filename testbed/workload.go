package testbed

import (
	"fmt"
	"path/filepath"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/micro"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/search/collie"
)

// runWorkload runs a scenario's workload section on the NIC micro-architecture model: no trace, but the
// effective scenario, counters.json (window totals) and workload.json, which the verdict stage judges.
func runWorkload(sc *scenario.Scenario, opts Options) error {
	var cfg micro.WorkloadConfig
	for i, h := range []struct {
		name string
		nic  string
	}{{"requester", sc.Requester.NIC.Type}, {"responder", sc.Responder.NIC.Type}} {
		p, err := loadProfile(sc, h.name, h.nic)
		if err != nil {
			return err
		}
		if p.Micro == nil {
			return badInputf("%s: workload: %s.nic.type %s has no micro section; expected a profile that models the NIC's caches and PCIe (cx6vpi-200g, p2100g or a file with a micro section)",
				sc.Path, h.name, p.Name)
		}
		if err := p.CheckQPType(sc.Workload.QPType); err != nil {
			return badInputf("%s: workload: %s.nic.type %s: %v", sc.Path, h.name, h.nic, err)
		}
		cfg.Profiles[i] = p
	}
	w := sc.Workload
	cfg.Seed = sc.Seed
	cfg.Workload = *w
	cfg.LinkGbps, cfg.PropagationNs, cfg.SwitchLatencyNs = sc.Network.LinkGbps, sc.Network.PropagationNs, sc.Network.SwitchLatencyNs
	r, err := micro.RunWorkload(cfg)
	if err != nil {
		return fmt.Errorf("simulating the workload: %w", err)
	}
	wa := workloadAnalysis(sc, r)

	if err := writeEffective(filepath.Join(opts.OutDir, resultsdir.FileScenario), sc); err != nil {
		return err
	}
	cf := resultsdir.CountersFile{
		Requester: resultsdir.HostCounters{NIC: sc.Requester.NIC.Type, Vendor: vendorOf(sc, sc.Requester), Start: map[string]uint64{},
			Finish: counterMap(r.Hosts[0].Totals())},
		Responder: resultsdir.HostCounters{NIC: sc.Responder.NIC.Type, Vendor: vendorOf(sc, sc.Responder), Start: map[string]uint64{},
			Finish: counterMap(r.Hosts[1].Totals())},
		Switch: resultsdir.SwitchCounters{Ports: []inject.PortCounters{}},
	}
	for _, x := range []struct {
		name string
		v    any
	}{{resultsdir.FileCounters, cf}, {resultsdir.FileWorkload, wa}} {
		if err := writeJSON(opts.OutDir, x.name, x.v); err != nil {
			return err
		}
	}
	if err := writeList(opts.OutDir, resultsdir.FileTraffic, []resultsdir.TrafficRecord{}); err != nil {
		return err
	}
	return writeList(opts.OutDir, resultsdir.FileConnections, []resultsdir.ConnRecord{})
}

// workloadAnalysis derives the monitor's view from the model's window counters.
func workloadAnalysis(sc *scenario.Scenario, r *micro.WorkloadResult) *resultsdir.WorkloadAnalysis {
	wa := &resultsdir.WorkloadAnalysis{WindowUs: float64(r.WindowNs) / 1e3, InFlightGbps: r.WindowGbps,
		InFlightMpps: r.WindowMpps, Symptom: "none"}
	wa.LimitGbps, wa.LimitMpps = r.Limits()
	for i, name := range []string{"requester", "responder"} {
		h := &r.Hosts[i]
		nic := sc.Requester.NIC.Type
		if i == 1 {
			nic = sc.Responder.NIC.Type
		}
		wh := resultsdir.WorkloadHost{Host: name, NIC: nic, PauseRatio: r.PauseRatio(i),
			TxGbps: r.Gbps(h.GoodTxBytes), RxGbps: r.Gbps(h.GoodRxBytes),
			TxMpps: r.Mpps(h.GoodTxPackets), RxMpps: r.Mpps(h.GoodRxPackets),
			Counters: counterMap(h.Counters(r.WindowNs))}
		wa.Hosts = append(wa.Hosts, wh)
	}
	wa.PauseRatio, wa.GoodputGbps, wa.GoodputMpps = r.Judged()
	if wa.LimitGbps > 0 && wa.LimitMpps > 0 {
		wa.LimitShare = max(wa.GoodputGbps/wa.LimitGbps, wa.GoodputMpps/wa.LimitMpps)
	}
	if s := micro.DefaultThresholds.Classify(wa.PauseRatio, wa.GoodputGbps, wa.GoodputMpps, wa.LimitGbps, wa.LimitMpps); s != "" {
		wa.Symptom = s
	}
	wa.Published = published(sc)
	return wa
}

// published lists Collie's published anomalies whose conditions hold at the workload when both NICs are the
// same one of its subsystems (nil otherwise, a profile file included: its NIC is the user's).
func published(sc *scenario.Scenario) *[]resultsdir.PublishedAnomaly {
	if sc.Requester.NIC.Type != sc.Responder.NIC.Type {
		return nil
	}
	cat, err := collie.Load()
	if err != nil {
		return nil // the embedded catalog is checked by its own tests; a run does not fail for it
	}
	p := cat.Lookup(sc.Requester.NIC.Type)
	if p == nil {
		return nil
	}
	out := []resultsdir.PublishedAnomaly{}
	for _, id := range p.Predict(cat, *sc.Workload) {
		if a := cat.Anomaly(id); a != nil {
			out = append(out, resultsdir.PublishedAnomaly{ID: id, Symptom: a.Symptom, Title: a.Title})
		}
	}
	return &out
}
