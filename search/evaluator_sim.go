package search

import (
	"context"
	"errors"
	"fmt"

	"github.com/lumina-go/lumina/micro"
	"github.com/lumina-go/lumina/rnic"
)

// SimEvaluator evaluates workloads on the simulated testbed's NIC micro-architecture model (micro.RunWorkload):
// two hosts with the named profile, one switch, a warm-up and then a 500 us window in steady state. The model
// is deterministic (it has no random choice), so seed does not change the result. Safe for concurrent use.
type SimEvaluator struct {
	prof *rnic.Profile
	// WarmupNs and MeasureNs override the model's defaults (0: automatic warm-up, 500 us window).
	WarmupNs, MeasureNs int64
}

// NewSimEvaluator returns the simulated evaluator for an embedded profile name or a profile file; the profile
// needs a micro section (cx6vpi-200g and p2100g have one).
func NewSimEvaluator(profile string) (*SimEvaluator, error) {
	p, err := rnic.LoadProfile(profile)
	if err != nil {
		return nil, fmt.Errorf("simulated evaluator: %w", err)
	}
	if p.Micro == nil {
		return nil, fmt.Errorf("simulated evaluator: profile %s has no micro section: it does not model the NIC's caches, PCIe and processing units", p.Name)
	}
	return NewSimEvaluatorProfile(p)
}

// NewSimEvaluatorProfile returns the simulated evaluator for a loaded profile (one changed in memory, say, to
// see what a mechanism contributes); it needs a micro section. The evaluator keeps the pointer: do not change
// the profile while it is in use.
func NewSimEvaluatorProfile(p *rnic.Profile) (*SimEvaluator, error) {
	if p == nil || p.Micro == nil {
		return nil, errors.New("simulated evaluator: the profile has no micro section: it does not model the NIC's caches, PCIe and processing units")
	}
	return &SimEvaluator{prof: p}, nil
}

// errEventsUnsupported: the micro-architecture model has no event injector (Lumina's events run on the
// packet-level testbed).
var errEventsUnsupported = errors.New("the simulated micro-architecture evaluator cannot inject events; restrict the space to max_events 0")

// Evaluate runs the workload and reports Collie's metrics. Throughput is goodput (frames the receiver placed in
// memory, whole wire frames): Tx is what host A sent, Rx what host A received (direction uni is A to B, loopback
// is B to A plus A to itself). PauseRatio is the larger of the two NICs' pause duration ratios. Counters sum
// both NICs per second of window (mlx5 names where public; pause durations in us/s), except the RX buffer
// occupancy, which is the larger NIC's in bytes.
func (e *SimEvaluator) Evaluate(ctx context.Context, w Workload, seed uint64) (Metrics, error) {
	if err := ctx.Err(); err != nil {
		return Metrics{}, err
	}
	if len(w.Events) > 0 {
		return Metrics{}, errEventsUnsupported
	}
	r, err := micro.RunWorkload(micro.WorkloadConfig{Seed: seed, Profiles: [2]*rnic.Profile{e.prof, e.prof},
		Workload: w.Workload, WarmupNs: e.WarmupNs, MeasureNs: e.MeasureNs})
	if err != nil {
		return Metrics{}, fmt.Errorf("simulating %s on %s: %w", w.String(), e.prof.Name, err)
	}
	a := &r.Hosts[0]
	m := Metrics{
		PauseRatio: max(r.PauseRatio(0), r.PauseRatio(1)),
		TxGbps:     r.Gbps(a.GoodTxBytes), RxGbps: r.Gbps(a.GoodRxBytes),
		TxMpps: r.Mpps(a.GoodTxPackets), RxMpps: r.Mpps(a.GoodRxPackets),
		Counters: map[string]float64{},
	}
	m.LimitGbps, m.LimitMpps = r.Limits()
	for i := range r.Hosts {
		for _, c := range r.Hosts[i].Counters(r.WindowNs) {
			switch c.Name {
			case "rx_buffer_max_bytes", "rx_buffer_avg_bytes":
				m.Counters[c.Name] = max(m.Counters[c.Name], float64(c.Value))
			default:
				m.Counters[c.Name] += float64(c.Value)
			}
		}
	}
	return m, nil
}
