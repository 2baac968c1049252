package search

import (
	"context"
	"math"
	"slices"
)

// Synthetic is an RDMA subsystem with planted anomaly regions, for testing and benchmarking the search without
// a simulator. Each Region is a box of conditions; inside it the subsystem shows the region's symptom, and the
// region's diagnostic counter rises smoothly as a workload gets closer to the box (every unmet condition
// divides it), so a search driven by counters has a gradient to follow, as Collie's Figure 6 shows real
// counters do. It is deterministic given the seed and safe for concurrent use.
type Synthetic struct {
	Regions   []Region
	LimitGbps float64
	LimitMpps float64
}

// Region is one planted anomaly. Empty lists and zero ranges put no condition on their dimension; MsgMin and
// MsgMax bound the smallest and the largest request of the vector.
type Region struct {
	Name                                   string
	Symptom                                Symptom
	Counter                                string
	QPTypes, Opcodes, Directions, Memories []string
	MTUs                                   []int
	NumQPs, WQEBatch, SGE, WQDepth         [2]int
	NumMRs, MRSize                         [2]int
	MsgMin, MsgMax                         [2]int
}

// AtLeast and AtMost build one-sided range conditions.
func AtLeast(v int) [2]int { return [2]int{v, math.MaxInt} }

// AtMost is the range [1, v].
func AtMost(v int) [2]int { return [2]int{1, v} }

// SyntheticF plants eight anomalies shaped after Collie's subsystem F (table 2: #1, #3, #7, #9, #8, #13, #4,
// #5) with
// every boundary on the MFS grid, so the minimal feature sets are known exactly.
func SyntheticF() *Synthetic {
	return &Synthetic{LimitGbps: 200, LimitMpps: 200, Regions: []Region{
		{Name: "ud-batch-depth", Symptom: Pause, Counter: "rx_wqe_cache_miss",
			QPTypes: []string{"ud"}, WQEBatch: AtLeast(64), WQDepth: AtLeast(256)},
		{Name: "read-mtu1k-large", Symptom: Pause, Counter: "rx_pkt_proc_stall",
			Opcodes: []string{"read"}, MTUs: []int{1024}, MsgMin: AtLeast(16384)},
		{Name: "write-many-qps", Symptom: LowThroughput, Counter: "qp_ctx_miss",
			QPTypes: []string{"rc"}, Opcodes: []string{"write"}, NumQPs: AtLeast(512), WQDepth: AtMost(16),
			MsgMax: AtMost(1024)},
		{Name: "bi-sge-mix", Symptom: Pause, Counter: "pcie_ordering_stall",
			Directions: []string{"bi"}, SGE: AtLeast(3), MsgMin: AtMost(1024), MsgMax: AtLeast(65536)},
		{Name: "write-many-mrs", Symptom: LowThroughput, Counter: "mtt_cache_miss",
			QPTypes: []string{"rc"}, Opcodes: []string{"write"}, WQEBatch: [2]int{1, 1}, NumMRs: AtLeast(8192),
			MsgMax: AtMost(1024)},
		{Name: "loopback-incast", Symptom: Pause, Counter: "rx_buffer_occupancy",
			Directions: []string{"loopback"}, NumQPs: AtLeast(16), MsgMin: AtLeast(65536)},
		// Two with many conditions, which random search rarely meets.
		{Name: "bi-read-batch-sge", Symptom: Pause, Counter: "rx_read_pu_stall",
			Directions: []string{"bi"}, Opcodes: []string{"read"}, WQEBatch: AtLeast(32), SGE: AtLeast(4),
			NumQPs: AtLeast(128)},
		{Name: "send-mtu1k-batch-depth", Symptom: Pause, Counter: "rx_wqe_prefetch_miss",
			QPTypes: []string{"rc"}, Opcodes: []string{"send"}, MTUs: []int{1024}, WQEBatch: AtLeast(64),
			WQDepth: AtLeast(512), MsgMin: AtLeast(2048), MsgMax: AtMost(8192)},
	}}
}

// Inside lists the regions that contain w (the ground truth a benchmark scores findings against).
func (s *Synthetic) Inside(w Workload) []int {
	var out []int
	for i, r := range s.Regions {
		if r.closeness(w) == 1 {
			out = append(out, i)
		}
	}
	return out
}

// closeness is 1 inside the region and shrinks with every unmet condition: a wrong categorical value divides
// it by 5, a number outside its range halves it per doubling of distance.
func (r Region) closeness(w Workload) float64 {
	c := 1.0
	cat := func(vals []string, v string) {
		if len(vals) > 0 && !slices.Contains(vals, v) {
			c *= 0.2
		}
	}
	cat(r.QPTypes, w.QPType)
	cat(r.Opcodes, w.Opcode)
	cat(r.Directions, w.Direction)
	cat(r.Memories, w.Memory)
	if len(r.MTUs) > 0 && !slices.Contains(r.MTUs, w.MTU) {
		c *= 0.2
	}
	rng := func(b [2]int, v int) {
		if b == [2]int{} {
			return
		}
		switch {
		case v < b[0]:
			c *= math.Pow(0.5, math.Log2(float64(b[0])/float64(max(v, 1)))+0.5)
		case v > b[1]:
			c *= math.Pow(0.5, math.Log2(float64(v)/float64(b[1]))+0.5)
		}
	}
	rng(r.NumQPs, w.NumQPs)
	rng(r.WQEBatch, w.WQEBatch)
	rng(r.SGE, w.SGE)
	rng(r.WQDepth, w.WQDepth)
	rng(r.NumMRs, w.NumMRs)
	rng(r.MRSize, w.MRSize)
	if len(w.MsgSizes) > 0 {
		rng(r.MsgMin, slices.Min(w.MsgSizes))
		rng(r.MsgMax, slices.Max(w.MsgSizes))
	}
	return c
}

// Evaluate returns the metrics of w: line rate with no pause outside every region; inside a pause region a
// 5% pause ratio and 60% of the limits; inside a low-throughput region 50% of the limits and no pause. The
// seed adds a deterministic 0.1% jitter to the counters.
func (s *Synthetic) Evaluate(ctx context.Context, w Workload, seed uint64) (Metrics, error) {
	if err := ctx.Err(); err != nil {
		return Metrics{}, err
	}
	jitter := func(i uint64) float64 {
		x := (seed + i*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
		x ^= x >> 31
		return 1 + 0.001*(float64(x%2001)/1000-1)
	}
	m := Metrics{LimitGbps: s.LimitGbps, LimitMpps: s.LimitMpps, Counters: map[string]float64{}}
	util, pause := 0.95, 0.0
	for i, r := range s.Regions {
		c := r.closeness(w)
		m.Counters[r.Counter] = 1000 * (1 + 99*c) * jitter(uint64(i))
		switch {
		case c == 1 && r.Symptom == Pause:
			pause, util = max(pause, 0.05), min(util, 0.6)
		case c == 1:
			util = min(util, 0.5)
		case r.Symptom == Pause:
			pause = max(pause, 0.0005*c) // below Collie's 0.1% outside the region
		default:
			util = min(util, 0.95-0.1*c)
		}
	}
	m.PauseRatio = pause
	m.TxGbps, m.TxMpps = util*s.LimitGbps, util*s.LimitMpps
	if w.Direction != "uni" {
		m.RxGbps, m.RxMpps = m.TxGbps, m.TxMpps
	}
	m.Counters["tx_vport_rdma_unicast_bytes"] = m.TxGbps * 1.25e8
	m.Counters["rx_vport_rdma_unicast_bytes"] = m.RxGbps * 1.25e8
	m.Counters["tx_prio3_pause_duration"] = pause * 1e6 // microseconds per second, as mlnx_perf reports it
	return m, nil
}
