package main

import (
	"context"
	"fmt"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/search"
)

// mechanism is one part of the micro-architecture model and how to take it out of a profile: its resource made
// unlimited (caches larger than any workload, receive WQEs resident, read tags without bound), far larger (256
// transmit units: without a bound every queued WQE would start at once, and the payload reads of thousands of
// QPs would flood PCIe past the warm-up), or its cost zero.
type mechanism struct {
	name string
	off  func(m *rnic.MicroArch)
}

const unbounded = 1 << 20

var mechanisms = []mechanism{
	{"rx-wqe", func(m *rnic.MicroArch) { m.Rx.WQEResident = true }},   // receive WQEs on the NIC, never read
	{"qpc", func(m *rnic.MicroArch) { m.Cache.QPCEntries = 1 << 18 }}, // more than 2 x 65,536 QPs
	{"mtt", func(m *rnic.MicroArch) { m.Cache.MTTEntries = 1 << 20 }}, // most workloads' translations
	{"read-tags", func(m *rnic.MicroArch) { m.PCIe.MaxOutstandingReads = unbounded }},
	{"packet-processor", func(m *rnic.MicroArch) {
		r := &m.Rx
		r.WriteNs, r.SendNs, r.UDNs, r.ReadReqNs, r.ReadRespNs, r.AckNs, r.AckGenNs, r.SGENs = 0, 0, 0, 0, 0, 0, 0, 0
		r.ReadRespSGENs, r.ReadRespFirstNs = 0, 0
		m.Tx.PktNs = 0
	}},
	{"tx-units", func(m *rnic.MicroArch) { m.Tx.Units = 256 }}, // 4-32 x the profiles' 8-64
	{"host-path", func(m *rnic.MicroArch) { // remote-socket and cross-switch GPU memory (not #12's same switch)
		m.Host.RemoteNUMAGbps, m.Host.RemoteNUMALatencyNs = 1e5, 0
		m.Host.GPUCrossSwitchGbps, m.Host.GPUCrossSwitchLatency = 1e5, 0
	}},
	{"rx-read-queue", func(m *rnic.MicroArch) { m.PCIe.RxReadQueueBytes = 0 }},
	{"ordering", func(m *rnic.MicroArch) { m.PCIe.RelaxedOrdering = true }}, // collie-f's PCIe ordering (#9)
	// p2100g's own: the receive-WQE fetcher's time, RC's extra share of the shared processor, per-packet READ
	// state, the transmit staging buffer, loopback yielding to the wire.
	{"wqe-fetcher", func(m *rnic.MicroArch) { m.Rx.FetchWQENs, m.Rx.MissFetchDiv, m.Rx.WholeQPCache = 0, 0, false }},
	{"rc-state", func(m *rnic.MicroArch) { m.Rx.RCDataNs, m.Rx.RCStateEntries = 0, 0 }},
	{"read-resp-qpc", func(m *rnic.MicroArch) { m.Rx.ReadRespPerPacketQPC = false }},
	{"staging", func(m *rnic.MicroArch) { m.Tx.StagingBytes = 0 }},
	{"loopback-yield", func(m *rnic.MicroArch) { m.Tx.LoopbackXoffBytes = 0 }},
}

// variant copies the profile with the mechanisms for which keep reports false taken out.
func variant(p *rnic.Profile, keep func(i int) bool) *rnic.Profile {
	q := *p
	m := *p.Micro
	q.Micro = &m
	for i, mc := range mechanisms {
		if !keep(i) {
			mc.off(&m)
		}
	}
	return &q
}

// explain attributes the points that are anomalous with nothing predicted to the model's mechanisms, by
// counterfactuals: for each mechanism, how many of them turn normal when it alone is taken out (it is
// necessary), and how many stay anomalous when it alone is left in (it suffices); the points still anomalous
// with every mechanism out come from what the list does not cover (send-WQE reads, the packet rate, bursts).
func explain(file string, pts []search.AgreementPoint) error {
	p, err := rnic.LoadProfile(file)
	if err != nil {
		return err
	}
	if p.Micro == nil {
		return fmt.Errorf("profile %s has no micro section", p.Name)
	}
	var extra []search.Workload
	for _, pt := range pts {
		if pt.Symptom != search.None && len(pt.Predicted) == 0 {
			extra = append(extra, pt.Workload)
		}
	}
	anomalous := func(q *rnic.Profile) ([]bool, error) {
		sim, err := search.NewSimEvaluatorProfile(q)
		if err != nil {
			return nil, err
		}
		ev := withWindow(sim)
		out := make([]bool, len(extra))
		for i, w := range extra {
			m, err := ev.Evaluate(context.Background(), w, 1)
			if err != nil {
				return nil, err
			}
			out[i] = search.DefaultMonitor().Check(m) != search.None
		}
		return out, nil
	}
	none, err := anomalous(variant(p, func(int) bool { return false }))
	if err != nil {
		return err
	}
	residual := 0
	for _, a := range none {
		if a {
			residual++
		}
	}
	fmt.Printf("  %d points anomalous with nothing predicted; with every mechanism below taken out %d stay anomalous\n", len(extra), residual)
	fmt.Printf("  %-17s %9s %9s\n", "mechanism", "necessary", "suffices")
	for i, mc := range mechanisms {
		without, err := anomalous(variant(p, func(k int) bool { return k != i }))
		if err != nil {
			return err
		}
		only, err := anomalous(variant(p, func(k int) bool { return k == i }))
		if err != nil {
			return err
		}
		var nec, suf int
		for k := range extra {
			if !without[k] {
				nec++
			}
			if only[k] && !none[k] {
				suf++
			}
		}
		fmt.Printf("  %-17s %9d %9d\n", mc.name, nec, suf)
	}
	return nil
}
