package search

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
)

// IntRange is an inclusive range of an integer dimension. Log makes sampling and mutation uniform in log space:
// counts and sizes span orders of magnitude, and uniform sampling over num_qps 1..20000 would almost never pick
// a handful of connections. Step rounds values (message sizes to Collie's 32 B granularity).
type IntRange struct {
	Min  int  `json:"min"`
	Max  int  `json:"max"`
	Log  bool `json:"log,omitempty"`
	Step int  `json:"step,omitempty"`
}

func (r IntRange) contains(v int) bool { return v >= r.Min && v <= r.Max }

// sample draws a value of the range; lo and hi narrow it further (both inside the range).
func (r IntRange) sample(rng *rand.Rand, lo, hi int) int {
	lo, hi = max(lo, r.Min), min(hi, r.Max)
	if hi <= lo {
		return r.round(lo, lo, lo)
	}
	var v int
	if r.Log && lo > 0 {
		// Uniform in log space over [lo, hi+1) so that hi is reachable after flooring.
		a, b := math.Log(float64(lo)), math.Log(float64(hi)+1)
		v = int(math.Exp(a + rng.Float64()*(b-a)))
	} else {
		v = lo + rng.IntN(hi-lo+1)
	}
	return r.round(v, lo, hi)
}

// round snaps v to the step and keeps it within [lo, hi].
func (r IntRange) round(v, lo, hi int) int {
	if r.Step > 1 {
		v = (v + r.Step/2) / r.Step * r.Step
		for v < lo {
			v += r.Step
		}
		for v > hi {
			v -= r.Step
		}
	}
	return min(max(v, lo), hi)
}

// grid discretizes the range into the value regions the MFS algorithm probes: powers of two for log ranges
// (every step a doubling), every value for short linear ranges, 16 even steps otherwise. It always holds the
// range's ends and v itself.
func (r IntRange) grid(v int) []int {
	g := []int{r.Min, r.Max}
	if r.contains(v) {
		g = append(g, v)
	}
	switch {
	case r.Log:
		for p := 1; p <= r.Max && p > 0; p *= 2 {
			if p > r.Min {
				g = append(g, r.round(p, r.Min, r.Max))
			}
		}
	case r.Max-r.Min <= 16:
		for x := r.Min; x <= r.Max; x++ {
			g = append(g, x)
		}
	default:
		for i := 1; i < 16; i++ {
			g = append(g, r.round(r.Min+(r.Max-r.Min)*i/16, r.Min, r.Max))
		}
	}
	slices.Sort(g)
	return slices.Compact(g)
}

// Space is the workload space a search explores: Collie's four dimensions (host topology, memory regions,
// transport, message pattern), the direction, and Lumina's event dimension. The zero value is not useful; start
// from DefaultSpace and narrow it.
type Space struct {
	QPTypes  []string `json:"qp_type"`
	Opcodes  []string `json:"opcode"`
	NumQPs   IntRange `json:"num_qps"`
	MTUs     []int    `json:"mtu"`
	WQEBatch IntRange `json:"wqe_batch"`
	SGE      IntRange `json:"sge"`
	WQDepth  IntRange `json:"wq_depth"`
	NumMRs   IntRange `json:"num_mrs"`
	MRSize   IntRange `json:"mr_size"`
	MsgSize  IntRange `json:"msg_sizes"` // each element of the request vector
	MsgCount IntRange `json:"msg_count"` // the vector's length (Collie: 1..8)
	// MaxTotalMRs bounds num_qps x num_mrs (num_mrs counts per QP; Collie bounds the MRs a host registers at
	// 200K); 0: no bound.
	MaxTotalMRs int      `json:"max_total_mrs,omitempty"`
	Directions  []string `json:"direction"`
	Memories    []string `json:"memory"`
	// MaxEvents bounds Lumina's event dimension; 0 (Collie's setting: no drops on the switch) disables it.
	MaxEvents   int      `json:"max_events,omitempty"`
	EventTypes  []string `json:"event_types,omitempty"`
	EventMaxPSN int      `json:"event_max_psn,omitempty"`
}

// DefaultSpace is Collie's space (seeds/003 §4 and its code): up to 20K QPs and 200K
// MRs in all (the paper's bounds; num_mrs is per QP, so up to 200K / num_qps each), WQE batch up to the
// engine's 128, 1..4 SGEs, WQ depth up to 1024, request vectors of 1..8 sizes from 32 B to 128 KB in 32 B steps,
// MTU 256..4096, MRs of 4 KB..4 MB.
func DefaultSpace() Space {
	return Space{
		QPTypes:     []string{"rc", "uc", "ud"},
		Opcodes:     []string{"send", "write", "read"},
		NumQPs:      IntRange{Min: 1, Max: 20000, Log: true},
		MTUs:        roce.MTUs(),
		WQEBatch:    IntRange{Min: 1, Max: 128, Log: true},
		SGE:         IntRange{Min: 1, Max: 4},
		WQDepth:     IntRange{Min: 1, Max: 1024, Log: true},
		NumMRs:      IntRange{Min: 1, Max: 200000, Log: true},
		MaxTotalMRs: 200000,
		MRSize:      IntRange{Min: 4096, Max: 4 << 20, Log: true, Step: 4096},
		MsgSize:     IntRange{Min: 32, Max: 128 << 10, Log: true, Step: 32},
		MsgCount:    IntRange{Min: 1, Max: 8},
		Directions:  []string{"uni", "bi", "loopback"},
		Memories:    []string{"local", "remote-numa", "gpu-same-switch", "gpu-cross-switch"},
		EventTypes:  []string{"drop", "ecn", "corrupt"},
		EventMaxPSN: 64,
	}
}

// OrdinaryWorkload is a perftest-like workload (one RC QP writing 64 KB messages at MTU 4096): the simplest
// setting a minimal reproducer falls back to for the dimensions an anomaly does not depend on.
func OrdinaryWorkload() Workload {
	return Workload{Workload: scenario.DefaultWorkload()}
}

// opcodesFor lists the opcodes a QP type supports (IBTA): UD only SEND, UC SEND and WRITE, RC all three.
func opcodesFor(qpType string) []string {
	switch qpType {
	case "ud":
		return []string{"send"}
	case "uc":
		return []string{"send", "write"}
	case "rc":
		return []string{"send", "write", "read"}
	}
	return nil
}

// allowedOpcodes is opcodesFor narrowed to the space.
func (s *Space) allowedOpcodes(qpType string) []string {
	var out []string
	for _, op := range opcodesFor(qpType) {
		if slices.Contains(s.Opcodes, op) {
			out = append(out, op)
		}
	}
	return out
}

// Check reports whether the space itself is usable: every list non-empty, every range ordered, at least one
// QP type with an allowed opcode.
func (s *Space) Check() error {
	for name, l := range map[string][]string{"qp_type": s.QPTypes, "opcode": s.Opcodes,
		"direction": s.Directions, "memory": s.Memories} {
		if len(l) == 0 {
			return fmt.Errorf("space: %s has no values", name)
		}
	}
	if len(s.MTUs) == 0 {
		return fmt.Errorf("space: mtu has no values")
	}
	for _, m := range s.MTUs {
		if !roce.ValidMTU(m) {
			return fmt.Errorf("space: mtu %d is not a power of two in 256..4096", m)
		}
	}
	for _, r := range []struct {
		name string
		r    IntRange
		min  int
	}{{"num_qps", s.NumQPs, 1}, {"wqe_batch", s.WQEBatch, 1}, {"sge", s.SGE, 1}, {"wq_depth", s.WQDepth, 1},
		{"num_mrs", s.NumMRs, 1}, {"mr_size", s.MRSize, 1}, {"msg_sizes", s.MsgSize, 1}, {"msg_count", s.MsgCount, 1}} {
		if r.r.Min < r.min || r.r.Max < r.r.Min {
			return fmt.Errorf("space: %s range [%d, %d] is empty or below %d", r.name, r.r.Min, r.r.Max, r.min)
		}
	}
	ok := false
	for _, t := range s.QPTypes {
		if len(opcodesFor(t)) == 0 {
			return fmt.Errorf("space: unknown qp_type %q (expected rc, uc or ud)", t)
		}
		ok = ok || len(s.allowedOpcodes(t)) > 0
	}
	if !ok {
		return fmt.Errorf("space: no qp_type supports any of the opcodes %v", s.Opcodes)
	}
	if s.MaxTotalMRs < 0 || (s.MaxTotalMRs > 0 && s.MaxTotalMRs < s.NumQPs.Min*s.NumMRs.Min) {
		return fmt.Errorf("space: max_total_mrs %d is below num_qps minimum x num_mrs minimum %d (raise max_total_mrs, 0: no bound)",
			s.MaxTotalMRs, s.NumQPs.Min*s.NumMRs.Min)
	}
	if s.WQEBatch.Min > s.WQDepth.Max {
		return fmt.Errorf("space: wqe_batch minimum %d exceeds wq_depth maximum %d", s.WQEBatch.Min, s.WQDepth.Max)
	}
	return nil
}

// Validate checks a workload against the space and the verbs rules: the opcode is one the QP type supports,
// the WQ is at least as deep as a batch, UD messages fit in one MTU, every SGE holds at least one byte.
func (s *Space) Validate(w Workload) error {
	if !slices.Contains(s.QPTypes, w.QPType) {
		return fmt.Errorf("qp_type %q not in %v", w.QPType, s.QPTypes)
	}
	if !slices.Contains(s.allowedOpcodes(w.QPType), w.Opcode) {
		return fmt.Errorf("opcode %q not allowed for qp_type %s (allowed %v)", w.Opcode, w.QPType, s.allowedOpcodes(w.QPType))
	}
	if !slices.Contains(s.MTUs, w.MTU) {
		return fmt.Errorf("mtu %d not in %v", w.MTU, s.MTUs)
	}
	for _, d := range orderedDims {
		r := d.rng(s)
		if v := *d.ptr(&w); !r.contains(v) {
			return fmt.Errorf("%s %d outside [%d, %d]", d.name, v, r.Min, r.Max)
		}
	}
	if w.WQDepth < w.WQEBatch {
		return fmt.Errorf("wq_depth %d below wqe_batch %d", w.WQDepth, w.WQEBatch)
	}
	if s.MaxTotalMRs > 0 && w.NumQPs*w.NumMRs > s.MaxTotalMRs {
		return fmt.Errorf("num_qps %d x num_mrs %d = %d MRs, above max_total_mrs %d", w.NumQPs, w.NumMRs,
			w.NumQPs*w.NumMRs, s.MaxTotalMRs)
	}
	if !s.MsgCount.contains(len(w.MsgSizes)) {
		return fmt.Errorf("msg_sizes has %d sizes, expected %d..%d", len(w.MsgSizes), s.MsgCount.Min, s.MsgCount.Max)
	}
	for i, m := range w.MsgSizes {
		if !s.MsgSize.contains(m) {
			return fmt.Errorf("msg_sizes[%d] %d outside [%d, %d]", i, m, s.MsgSize.Min, s.MsgSize.Max)
		}
		if w.QPType == "ud" && m > w.MTU {
			return fmt.Errorf("msg_sizes[%d] %d exceeds the mtu %d (a UD message is one packet)", i, m, w.MTU)
		}
		if m < w.SGE {
			return fmt.Errorf("msg_sizes[%d] %d is smaller than its %d SGEs", i, m, w.SGE)
		}
	}
	if !slices.Contains(s.Directions, w.Direction) {
		return fmt.Errorf("direction %q not in %v", w.Direction, s.Directions)
	}
	if !slices.Contains(s.Memories, w.Memory) {
		return fmt.Errorf("memory %q not in %v", w.Memory, s.Memories)
	}
	if len(w.Events) > s.MaxEvents {
		return fmt.Errorf("%d events, the space allows %d", len(w.Events), s.MaxEvents)
	}
	for i, e := range w.Events {
		if !slices.Contains(s.EventTypes, e.Type) || e.QP < 1 || e.QP > w.NumQPs || e.PSN < 1 || e.Iter < 1 {
			return fmt.Errorf("events[%d] {qpn %d, psn %d, iter %d, type %q} invalid (qpn 1..%d, psn and iter >= 1, type in %v)",
				i, e.QP, e.PSN, e.Iter, e.Type, w.NumQPs, s.EventTypes)
		}
	}
	return nil
}

// orderedDim is an integer dimension with an order, probed by the MFS algorithm as a range.
type orderedDim struct {
	name string
	ptr  func(*Workload) *int
	rng  func(*Space) IntRange
}

var orderedDims = []orderedDim{
	{"num_qps", func(w *Workload) *int { return &w.NumQPs }, func(s *Space) IntRange { return s.NumQPs }},
	{"wqe_batch", func(w *Workload) *int { return &w.WQEBatch }, func(s *Space) IntRange { return s.WQEBatch }},
	{"sge", func(w *Workload) *int { return &w.SGE }, func(s *Space) IntRange { return s.SGE }},
	{"wq_depth", func(w *Workload) *int { return &w.WQDepth }, func(s *Space) IntRange { return s.WQDepth }},
	{"num_mrs", func(w *Workload) *int { return &w.NumMRs }, func(s *Space) IntRange { return s.NumMRs }},
	{"mr_size", func(w *Workload) *int { return &w.MRSize }, func(s *Space) IntRange { return s.MRSize }},
}

func orderedDimByName(name string) (orderedDim, bool) {
	for _, d := range orderedDims {
		if d.name == name {
			return d, true
		}
	}
	return orderedDim{}, false
}

// Sample draws a valid workload uniformly per dimension (log-uniform for log ranges).
func (s *Space) Sample(rng *rand.Rand) Workload {
	var w Workload
	types := slices.DeleteFunc(slices.Clone(s.QPTypes), func(t string) bool { return len(s.allowedOpcodes(t)) == 0 })
	w.QPType = types[rng.IntN(len(types))]
	ops := s.allowedOpcodes(w.QPType)
	w.Opcode = ops[rng.IntN(len(ops))]
	w.NumQPs = s.NumQPs.sample(rng, s.NumQPs.Min, s.qpCap())
	w.MTU = s.MTUs[rng.IntN(len(s.MTUs))]
	w.WQEBatch = s.WQEBatch.sample(rng, s.WQEBatch.Min, min(s.WQEBatch.Max, s.WQDepth.Max))
	w.WQDepth = s.WQDepth.sample(rng, max(w.WQEBatch, s.WQDepth.Min), s.WQDepth.Max)
	w.NumMRs = s.NumMRs.sample(rng, s.NumMRs.Min, s.mrCap(w.NumQPs))
	w.MRSize = s.MRSize.sample(rng, s.MRSize.Min, s.MRSize.Max)
	w.MsgSizes = s.sampleMsgs(rng, w.QPType, w.MTU)
	w.SGE = s.SGE.sample(rng, s.SGE.Min, s.SGE.Max)
	w.Direction = s.Directions[rng.IntN(len(s.Directions))]
	w.Memory = s.Memories[rng.IntN(len(s.Memories))]
	if s.MaxEvents > 0 {
		for range rng.IntN(s.MaxEvents + 1) {
			w.Events = append(w.Events, s.sampleEvent(rng, w.NumQPs))
		}
	}
	s.repair(&w)
	return w
}

// qpCap is the most QPs the space allows with its fewest MRs per QP.
func (s *Space) qpCap() int {
	if s.MaxTotalMRs > 0 {
		return max(min(s.NumQPs.Max, s.MaxTotalMRs/max(s.NumMRs.Min, 1)), s.NumQPs.Min)
	}
	return s.NumQPs.Max
}

// mrCap is the most MRs per QP the space allows with n QPs.
func (s *Space) mrCap(n int) int {
	if s.MaxTotalMRs > 0 {
		return max(min(s.NumMRs.Max, s.MaxTotalMRs/max(n, 1)), s.NumMRs.Min)
	}
	return s.NumMRs.Max
}

func (s *Space) msgCap(qpType string, mtu int) int {
	if qpType == "ud" {
		return min(s.MsgSize.Max, mtu)
	}
	return s.MsgSize.Max
}

func (s *Space) sampleMsgs(rng *rand.Rand, qpType string, mtu int) []int {
	n := s.MsgCount.sample(rng, s.MsgCount.Min, s.MsgCount.Max)
	out := make([]int, n)
	for i := range out {
		out[i] = s.MsgSize.sample(rng, s.MsgSize.Min, s.msgCap(qpType, mtu))
	}
	return out
}

func (s *Space) sampleEvent(rng *rand.Rand, numQPs int) Event {
	return Event{QP: 1 + rng.IntN(numQPs), PSN: 1 + rng.IntN(max(1, s.EventMaxPSN)), Iter: 1,
		Type: s.EventTypes[rng.IntN(len(s.EventTypes))]}
}

// repair restores the coupling rules after a change to one dimension, the way Collie forces the WQ depth to at
// least the batch: depth >= batch, UD messages <= MTU, at least one byte per SGE, the MRs within the total bound,
// events on existing QPs.
func (s *Space) repair(w *Workload) {
	if !slices.Contains(s.allowedOpcodes(w.QPType), w.Opcode) {
		if ops := s.allowedOpcodes(w.QPType); len(ops) > 0 {
			w.Opcode = ops[0]
		}
	}
	if w.WQDepth < w.WQEBatch {
		if w.WQEBatch <= s.WQDepth.Max {
			w.WQDepth = w.WQEBatch
		} else {
			w.WQEBatch, w.WQDepth = s.WQDepth.Max, s.WQDepth.Max
		}
	}
	limit := s.msgCap(w.QPType, w.MTU)
	for i, m := range w.MsgSizes {
		if m > limit {
			w.MsgSizes[i] = s.MsgSize.round(limit, s.MsgSize.Min, limit)
		}
	}
	if len(w.MsgSizes) > 0 {
		w.SGE = min(w.SGE, slices.Min(w.MsgSizes))
	}
	w.SGE = max(w.SGE, s.SGE.Min)
	w.NumQPs = min(w.NumQPs, s.qpCap())
	w.NumMRs = min(w.NumMRs, s.mrCap(w.NumQPs))
	w.Events = slices.DeleteFunc(w.Events, func(e Event) bool { return e.QP > w.NumQPs })
}

// mutableDims are the dimensions Mutate picks from uniformly, as Collie does.
var mutableDims = []string{"qp_type", "opcode", "num_qps", "mtu", "wqe_batch", "sge", "wq_depth", "num_mrs",
	"mr_size", "msg_sizes", "direction", "memory", "events"}

// Mutate changes one dimension of w, picked uniformly among those the space lets change, to a different value
// (Collie's per-dimension mutation), then restores the coupling rules. It returns the new workload and the
// dimension it changed; w is not modified.
func (s *Space) Mutate(rng *rand.Rand, w Workload) (Workload, string) {
	for range 64 {
		n := clone(w)
		dim := mutableDims[rng.IntN(len(mutableDims))]
		if s.mutateDim(rng, &n, dim) {
			s.repair(&n)
			if n.Key() != w.Key() {
				return n, dim
			}
		}
	}
	// Every dimension is pinned (a restricted space of one point): nothing to change.
	return clone(w), ""
}

func otherString(rng *rand.Rand, vals []string, cur string) (string, bool) {
	c := slices.DeleteFunc(slices.Clone(vals), func(v string) bool { return v == cur })
	if len(c) == 0 {
		return cur, false
	}
	return c[rng.IntN(len(c))], true
}

func (s *Space) mutateDim(rng *rand.Rand, w *Workload, dim string) bool {
	var ok bool
	switch dim {
	case "qp_type":
		types := slices.DeleteFunc(slices.Clone(s.QPTypes), func(t string) bool { return len(s.allowedOpcodes(t)) == 0 })
		w.QPType, ok = otherString(rng, types, w.QPType)
		if ops := s.allowedOpcodes(w.QPType); ok && !slices.Contains(ops, w.Opcode) {
			w.Opcode = ops[rng.IntN(len(ops))]
		}
	case "opcode":
		w.Opcode, ok = otherString(rng, s.allowedOpcodes(w.QPType), w.Opcode)
	case "direction":
		w.Direction, ok = otherString(rng, s.Directions, w.Direction)
	case "memory":
		w.Memory, ok = otherString(rng, s.Memories, w.Memory)
	case "mtu":
		c := slices.DeleteFunc(slices.Clone(s.MTUs), func(v int) bool { return v == w.MTU })
		if ok = len(c) > 0; ok {
			w.MTU = c[rng.IntN(len(c))]
		}
	case "msg_sizes":
		limit := s.msgCap(w.QPType, w.MTU)
		if rng.IntN(2) == 0 || len(w.MsgSizes) == 0 {
			// Collie regenerates the whole request vector.
			w.MsgSizes = s.sampleMsgs(rng, w.QPType, w.MTU)
		} else {
			// A finer step: one request of the vector changes size.
			i := rng.IntN(len(w.MsgSizes))
			w.MsgSizes[i] = s.MsgSize.sample(rng, s.MsgSize.Min, limit)
		}
		ok = true
	case "events":
		if s.MaxEvents == 0 {
			return false
		}
		switch {
		case len(w.Events) > 0 && (len(w.Events) == s.MaxEvents || rng.IntN(2) == 0):
			i := rng.IntN(len(w.Events))
			w.Events = slices.Delete(w.Events, i, i+1)
		default:
			w.Events = append(w.Events, s.sampleEvent(rng, w.NumQPs))
		}
		ok = true
	default:
		d, found := orderedDimByName(dim)
		if !found {
			return false
		}
		r, p := d.rng(s), d.ptr(w)
		lo, hi := r.Min, r.Max
		if dim == "wq_depth" {
			lo = max(lo, w.WQEBatch) // depth >= batch: draw only depths that keep the rule
		}
		if dim == "sge" && len(w.MsgSizes) > 0 {
			hi = min(hi, slices.Min(w.MsgSizes))
		}
		for range 16 {
			if v := r.sample(rng, lo, hi); v != *p {
				*p, ok = v, true
				break
			}
		}
	}
	return ok
}

func clone(w Workload) Workload {
	w.MsgSizes = slices.Clone(w.MsgSizes)
	w.Events = slices.Clone(w.Events)
	return w
}

// Key is a canonical text form of the workload: equal workloads have equal keys. It names a point for caching
// and seeds its evaluation.
func (w Workload) Key() string {
	b, _ := json.Marshal(w) // a struct of strings and ints always marshals
	return string(b)
}

// String is a compact human form: "rc write qps=4 mtu=1024 batch=8 sge=2 depth=128 mrs=1x64K msgs=[512 64K] bi local".
func (w Workload) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s qps=%d mtu=%d batch=%d sge=%d depth=%d mrs=%dx%s msgs=[", w.QPType, w.Opcode,
		w.NumQPs, w.MTU, w.WQEBatch, w.SGE, w.WQDepth, w.NumMRs, size(w.MRSize))
	for i, m := range w.MsgSizes {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(size(m))
	}
	fmt.Fprintf(&sb, "] %s %s", w.Direction, w.Memory)
	for _, e := range w.Events {
		fmt.Fprintf(&sb, " %s@qp%d/psn%d/iter%d", e.Type, e.QP, e.PSN, e.Iter)
	}
	return sb.String()
}

func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}
