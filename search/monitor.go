package search

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/lumina-go/lumina/micro"
)

// Symptom is the kind of anomaly an evaluation shows (Collie §5.2).
type Symptom string

// The two anomaly kinds; None when the workload is normal.
const (
	None          Symptom = ""
	Pause         Symptom = "pause"
	LowThroughput Symptom = "low-throughput"
)

// Monitor is Collie's anomaly monitor. A pause anomaly is a PFC pause duration ratio above PauseRatio (0.1%:
// the two hosts share one uncongested switch, so any sustained pause is the NIC's own doing). A low-throughput
// anomaly is throughput below (1-LowFraction) of both the bits/s and the packets/s limits, without pause.
type Monitor struct {
	PauseRatio  float64 `json:"pause_ratio"`
	LowFraction float64 `json:"low_fraction"`
}

// DefaultMonitor has Collie's thresholds: 0.1% pause, 20% below both limits.
func DefaultMonitor() Monitor {
	return Monitor{PauseRatio: micro.AnomalyPauseRatio, LowFraction: micro.AnomalyLowFraction}
}

// Check classifies one evaluation (micro.Thresholds.Classify). Throughput is the busier direction; without a
// limit (0) low throughput cannot be judged and is not reported.
func (m Monitor) Check(x Metrics) Symptom {
	t := micro.Thresholds{Pause: m.PauseRatio, Low: m.LowFraction}
	return Symptom(t.Classify(x.PauseRatio, max(x.TxGbps, x.RxGbps), max(x.TxMpps, x.RxMpps), x.LimitGbps, x.LimitMpps))
}

// Objective is one signal the search drives to an extreme: a performance counter it minimizes or a diagnostic
// counter it maximizes (Collie §5.1).
type Objective struct {
	Name       string `json:"name"`
	Diagnostic bool   `json:"diagnostic"`
}

// The two derived objectives every evaluation has, besides the evaluator's counters.
const (
	objThroughput = "throughput"  // performance: the busier direction's share of its bits/s or packets/s limit
	objPause      = "pause_ratio" // diagnostic: pause is the symptom itself
)

// Value reads the objective from one evaluation's metrics.
func (o Objective) Value(m Metrics) float64 {
	switch o.Name {
	case objThroughput:
		return utilization(m)
	case objPause:
		return m.PauseRatio
	}
	return m.Counters[o.Name]
}

// utilization is how close the busier direction comes to the nearer of its two limits (1 = at a limit), or
// the raw Gbps when the evaluator gives no limits.
func utilization(m Metrics) float64 {
	if m.LimitGbps <= 0 || m.LimitMpps <= 0 {
		return max(m.TxGbps, m.RxGbps)
	}
	return max(max(m.TxGbps, m.RxGbps)/m.LimitGbps, max(m.TxMpps, m.RxMpps)/m.LimitMpps)
}

// isPerformanceCounter tells traffic-volume counters (bytes, packets moved: the search minimizes them) from
// diagnostic ones (misses, back-pressure, discards, buffer occupancy, bytes read again, pause duration: it
// maximizes them), whose names may count bytes too.
func isPerformanceCounter(name string) bool {
	n := strings.ToLower(name)
	for _, d := range []string{"pause", "buffer", "refetch", "discard", "drop", "miss", "err", "back_pressure", "occupancy"} {
		if strings.Contains(n, d) {
			return false
		}
	}
	return strings.Contains(n, "bytes") || strings.Contains(n, "packets")
}

// rankObjectives builds the objectives from a sample of evaluations and orders them as Collie does (§7.2):
// by the coefficient of variation over the sample, most variable first; objectives that never vary carry no
// signal and are dropped (throughput is kept as the last resort). refs are the sample means, the scale the
// GA score and the recorded energies use.
func rankObjectives(sample []Metrics) ([]Objective, map[string]float64) {
	names := map[string]bool{}
	for _, m := range sample {
		for k := range m.Counters {
			names[k] = true
		}
	}
	objs := []Objective{{Name: objThroughput}, {Name: objPause, Diagnostic: true}}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		objs = append(objs, Objective{Name: k, Diagnostic: !isPerformanceCounter(k)})
	}
	refs := map[string]float64{}
	cv := map[string]float64{}
	for _, o := range objs {
		var sum, sq float64
		for _, m := range sample {
			v := o.Value(m)
			sum += v
			sq += v * v
		}
		n := float64(max(len(sample), 1))
		mean := sum / n
		sd := math.Sqrt(max(sq/n-mean*mean, 0))
		refs[o.Name] = mean
		if mean != 0 {
			cv[o.Name] = sd / math.Abs(mean)
		}
	}
	var ranked []Objective
	for _, o := range objs {
		if cv[o.Name] > 1e-9 {
			ranked = append(ranked, o)
		}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return cv[ranked[i].Name] > cv[ranked[j].Name] })
	if len(ranked) == 0 {
		ranked = objs[:1]
	}
	return ranked, refs
}

// What a search drives (Config.Signals).
const (
	SignalsAll         = "all"
	SignalsPerformance = "performance"
)

// performanceOnly keeps the objectives every NIC reports (Collie's performance counters: bits and packets per
// second, and the pause duration the monitor itself reads) and drops the diagnostic ones (cache misses, PCIe
// back-pressure, buffer occupancy, ...), keeping their order. Throughput stays if nothing else is left.
func performanceOnly(objs []Objective) []Objective {
	var out []Objective
	for _, o := range objs {
		if o.Name == objThroughput || o.Name == objPause || isPerformanceCounter(o.Name) || strings.Contains(o.Name, "pause_duration") {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		out = []Objective{{Name: objThroughput}}
	}
	return out
}

// tiny keeps relative changes finite when a counter is zero.
const tiny = 1e-12

// DeltaE is Collie's energy difference for a move from a point whose objective was a to one where it is b:
// (b-a)/a for a performance counter (lower is better), (a-b)/b for a diagnostic counter (higher is better).
// Negative means the new point is better.
func DeltaE(o Objective, a, b float64) float64 {
	if o.Diagnostic {
		return (a - b) / max(math.Abs(b), tiny)
	}
	return (b - a) / max(math.Abs(a), tiny)
}

// energy is the objective normalized by its reference, signed so that lower is better: what search.jsonl
// records and the progress line reports.
func energy(o Objective, v, ref float64) float64 {
	e := v / max(math.Abs(ref), tiny)
	if o.Diagnostic {
		e = -e
	}
	return clampF(e, -1e9, 1e9)
}

// Metropolis is the acceptance rule of simulated annealing: a move that lowers the energy (dE <= 0) is always
// taken, a worse one with probability exp(-dE/T). (Collie's code accepts when random() > dE*T, which is not
// this rule.)
func Metropolis(dE, T float64, rng *rand.Rand) bool {
	if dE <= 0 {
		return true
	}
	if T <= 0 {
		return false
	}
	return rng.Float64() < math.Exp(-dE/T)
}

// score is the GA's multi-objective score (seeds/000 Algorithm 1): sum w_i s(i) over the objectives, where
// s(i) is the relative distance from the reference toward the objective's extreme (up for diagnostic counters,
// down for performance counters), clamped so that one counter cannot drown the others.
func score(objs []Objective, refs map[string]float64, weights map[string]float64, m Metrics) float64 {
	var total, wsum float64
	for _, o := range objs {
		w := 1.0
		if weights != nil {
			if x, ok := weights[o.Name]; ok {
				w = x
			}
		}
		ref := max(math.Abs(refs[o.Name]), tiny)
		s := (o.Value(m) - ref) / ref
		if !o.Diagnostic {
			s = -s
		}
		total += w * clampF(s, -10, 10)
		wsum += math.Abs(w)
	}
	if wsum == 0 {
		return 0
	}
	return total / wsum
}

func clampF(x, lo, hi float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return min(max(x, lo), hi)
}

// movedCounters are the counters of an anomalous evaluation that moved against the reference (the mean over
// the warm-up sample): at least doubled or at most halved. Pause ratio and throughput share are included when
// they moved too.
func movedCounters(m Metrics, refs map[string]float64) map[string]float64 {
	out := map[string]float64{}
	moved := func(v, ref float64) bool {
		if ref == 0 {
			return v != 0
		}
		r := v / ref
		return r >= 2 || r <= 0.5
	}
	for k, v := range m.Counters {
		if moved(v, refs[k]) {
			out[k] = v
		}
	}
	if moved(m.PauseRatio, refs[objPause]) {
		out[objPause] = m.PauseRatio
	}
	if u := utilization(m); moved(u, refs[objThroughput]) {
		out["throughput_share"] = u
	}
	return out
}
