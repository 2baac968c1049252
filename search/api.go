// Package search finds workloads that make an RDMA subsystem misbehave, as Collie does (seeds/003): PFC pause
// frames although the network is not congested, or throughput far below both the NIC's bits/s and packets/s
// limits. It explores Collie's workload space (host topology, memory regions, transport, message pattern,
// direction) and Lumina's event dimension with random search, Lumina's genetic fuzzing (seeds/000 Algorithm 1)
// or simulated annealing with Metropolis acceptance, and reduces each anomaly to a minimal feature set.
//
// The search is independent of what evaluates a workload: an Evaluator runs it (the simulated testbed's NIC
// micro-architecture model, or later real hardware) and returns its metrics.
package search

import (
	"context"

	"github.com/lumina-go/lumina/scenario"
)

// Workload is one point of the search space: a scenario's workload section (its JSON names are the
// dimension names of spec/nic-microarchitecture.md) plus Lumina's event dimension.
type Workload struct {
	scenario.Workload
	// Events are Lumina's event dimension: injected drops/marks (scenario event syntax), usually empty.
	Events []Event `json:"events,omitempty"`
}

// Event is one injected event of a workload (relative connection, packet, round, action).
type Event struct {
	QP   int    `json:"qpn"`  // 1-based connection
	PSN  int    `json:"psn"`  // 1-based packet of the connection
	Iter int    `json:"iter"` // 1-based round
	Type string `json:"type"` // drop | ecn | corrupt
}

// Metrics is what an evaluation measured, in steady state.
type Metrics struct {
	// PauseRatio is the PFC pause duration the NIC sent per unit time (Collie: 0.001 = 0.1% is an anomaly).
	PauseRatio float64 `json:"pause_ratio"`
	TxGbps     float64 `json:"tx_gbps"`
	RxGbps     float64 `json:"rx_gbps"`
	TxMpps     float64 `json:"tx_mpps"`
	RxMpps     float64 `json:"rx_mpps"`
	// LimitGbps and LimitMpps are the subsystem's bits/s and packets/s limits for this workload (line rate,
	// and the NIC's message rate for its packet size): "low throughput" is judged against both.
	LimitGbps float64 `json:"limit_gbps"`
	LimitMpps float64 `json:"limit_mpps"`
	// Counters are the performance and diagnostic counters (vendor names where public), as rates per second
	// or totals over the measurement window; the search uses them as its signal.
	Counters map[string]float64 `json:"counters"`
}

// Evaluator runs one workload on the system under test and measures it. seed makes a simulated evaluation
// reproducible. Implementations must be safe for concurrent use (evaluations run in parallel on all cores).
type Evaluator interface {
	Evaluate(ctx context.Context, w Workload, seed uint64) (Metrics, error)
}
