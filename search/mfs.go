package search

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// MFS is a minimal feature set (Collie §5.2): the conditions on each dimension an anomaly needs, found one
// factor at a time. A dimension the anomaly does not depend on is absent. Keys are the workload's JSON
// dimension names, plus msg_min and msg_max, the conditions on the smallest and the largest request (as Collie's
// anomalies are written: a mixture of small and large requests is a msg_min whose High is below msg_max's Low).
type MFS map[string]Cond

// Cond is one dimension's condition. Range dimensions (num_qps, wqe_batch, sge, wq_depth, num_mrs, mr_size)
// hold [Low, High]; msg_sizes [Low, High] bounds every request size; msg_min [Low, High] the smallest request,
// msg_max [Low, High] the largest; msg_mix [Low, High] (written by earlier builds, still read) requires at least
// one request of at most Low bytes and one of at least High bytes; mtu lists Ints; qp_type, opcode, direction,
// memory and events (event types present) list Values.
type Cond struct {
	Low, High int
	Values    []string
	Ints      []int
}

type condKind int

const (
	kindRange condKind = iota
	kindInts
	kindStrings
)

func dimKind(name string) (condKind, bool) {
	switch name {
	case "num_qps", "wqe_batch", "sge", "wq_depth", "num_mrs", "mr_size", "msg_sizes", "msg_min", "msg_max", "msg_mix":
		return kindRange, true
	case "mtu":
		return kindInts, true
	case "qp_type", "opcode", "direction", "memory", "events":
		return kindStrings, true
	}
	return 0, false
}

// mfsDims is the order dimensions are probed and printed in.
var mfsDims = []string{"qp_type", "opcode", "num_qps", "mtu", "wqe_batch", "sge", "wq_depth", "num_mrs",
	"mr_size", "msg_sizes", "msg_min", "msg_max", "msg_mix", "direction", "memory", "events"}

// Match reports whether w lies inside the feature set: every condition holds.
func (m MFS) Match(w Workload) bool {
	for dim, c := range m {
		if !c.holds(dim, w) {
			return false
		}
	}
	return true
}

func (c Cond) holds(dim string, w Workload) bool {
	switch dim {
	case "mtu":
		return slices.Contains(c.Ints, w.MTU)
	case "qp_type":
		return slices.Contains(c.Values, w.QPType)
	case "opcode":
		return slices.Contains(c.Values, w.Opcode)
	case "direction":
		return slices.Contains(c.Values, w.Direction)
	case "memory":
		return slices.Contains(c.Values, w.Memory)
	case "events":
		for _, e := range w.Events {
			if slices.Contains(c.Values, e.Type) {
				return true
			}
		}
		return false
	case "msg_sizes":
		return len(w.MsgSizes) > 0 && slices.Min(w.MsgSizes) >= c.Low && slices.Max(w.MsgSizes) <= c.High
	case "msg_min":
		return len(w.MsgSizes) > 0 && slices.Min(w.MsgSizes) >= c.Low && slices.Min(w.MsgSizes) <= c.High
	case "msg_max":
		return len(w.MsgSizes) > 0 && slices.Max(w.MsgSizes) >= c.Low && slices.Max(w.MsgSizes) <= c.High
	case "msg_mix":
		return len(w.MsgSizes) > 0 && slices.Min(w.MsgSizes) <= c.Low && slices.Max(w.MsgSizes) >= c.High
	}
	if d, ok := orderedDimByName(dim); ok {
		v := *d.ptr(&w)
		return v >= c.Low && v <= c.High
	}
	return false
}

// MarshalJSON writes {DIMENSION: [LOW, HIGH] or [VALUE, ...]} with keys sorted.
func (m MFS) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m))
	for dim, c := range m {
		k, ok := dimKind(dim)
		if !ok {
			return nil, fmt.Errorf("mfs: unknown dimension %q", dim)
		}
		switch k {
		case kindRange:
			out[dim] = []int{c.Low, c.High}
		case kindInts:
			out[dim] = c.Ints
		default:
			out[dim] = c.Values
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes, rejecting unknown dimensions and malformed conditions.
func (m *MFS) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("mfs: %w", err)
	}
	out := MFS{}
	for dim, r := range raw {
		k, ok := dimKind(dim)
		if !ok {
			return fmt.Errorf("mfs: unknown dimension %q (expected one of %s)", dim, strings.Join(mfsDims, ", "))
		}
		var c Cond
		switch k {
		case kindRange:
			var lh []int
			if err := json.Unmarshal(r, &lh); err != nil || len(lh) != 2 {
				return fmt.Errorf("mfs: %s: expected [LOW, HIGH] integers, got %s", dim, r)
			}
			c.Low, c.High = lh[0], lh[1]
		case kindInts:
			if err := json.Unmarshal(r, &c.Ints); err != nil || len(c.Ints) == 0 {
				return fmt.Errorf("mfs: %s: expected a non-empty list of integers, got %s", dim, r)
			}
		default:
			if err := json.Unmarshal(r, &c.Values); err != nil || len(c.Values) == 0 {
				return fmt.Errorf("mfs: %s: expected a non-empty list of strings, got %s", dim, r)
			}
		}
		out[dim] = c
	}
	*m = out
	return nil
}

// String is a one-line human form: "qp_type=ud wqe_batch=64..128 wq_depth=256..1024".
func (m MFS) String() string {
	var parts []string
	for _, dim := range mfsDims {
		c, ok := m[dim]
		if !ok {
			continue
		}
		k, _ := dimKind(dim)
		switch {
		case dim == "msg_mix":
			parts = append(parts, fmt.Sprintf("msg_mix=(<=%s & >=%s)", size(c.Low), size(c.High)))
		case k == kindRange && c.Low == c.High:
			parts = append(parts, fmt.Sprintf("%s=%s", dim, size(c.Low)))
		case k == kindRange:
			parts = append(parts, fmt.Sprintf("%s=%s..%s", dim, size(c.Low), size(c.High)))
		case k == kindInts:
			parts = append(parts, fmt.Sprintf("%s=%s", dim, strings.Trim(fmt.Sprint(c.Ints), "[]")))
		default:
			parts = append(parts, fmt.Sprintf("%s=%s", dim, strings.Join(c.Values, ",")))
		}
	}
	if len(parts) == 0 {
		return "(any workload)"
	}
	return strings.Join(parts, " ")
}

// probeFunc evaluates workloads (in parallel, cached) and returns each one's symptom.
type probeFunc func([]Workload) ([]Symptom, error)

// findMFS runs the minimal-feature-set algorithm on an anomalous point p: one factor at a time, every other
// dimension held at p's value, it tests the other values of each categorical dimension and, as Collie does,
// moves each ordered dimension to the two ends of its range. A dimension whose every valid value keeps the
// anomaly is dropped. Where an end does not keep it, a binary search over the dimension's discretized regions
// between p's value and that end finds where the anomaly stops (the anomalous values of a dimension are taken
// to be contiguous around p's, as Collie's ranges are). Invalid probes (e.g. a WQ shallower than the batch)
// are not run: the range ends at the validity bound. With ends, there is no binary search (Collie's
// implementation): a side whose end does not keep the anomaly ends at p's value.
func findMFS(sp *Space, p Workload, sym Symptom, probe probeFunc, ends bool) (MFS, error) {
	f := &mfsFinder{sp: sp, p: p, sym: sym, probe: probe, m: MFS{}, ends: ends}
	for _, step := range []func() error{f.categorical, f.mtu, f.ordered, f.messages, f.events} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return f.m, nil
}

// mfsFinder is one run of findMFS: the anomalous point, its symptom and the conditions found so far.
type mfsFinder struct {
	sp    *Space
	p     Workload
	sym   Symptom
	probe probeFunc
	m     MFS
	ends  bool // probe only the ends of an ordered dimension (MFSEnds)
}

// check probes the valid workloads of ws and says of each whether it shows the symptom (invalid ones are not
// run).
func (f *mfsFinder) check(ws []Workload) ([]probeState, error) {
	out := make([]probeState, len(ws))
	var valid []Workload
	var idx []int
	for i, w := range ws {
		if f.sp.Validate(w) == nil {
			valid = append(valid, w)
			idx = append(idx, i)
		}
	}
	if len(valid) == 0 {
		return out, nil
	}
	syms, err := f.probe(valid)
	if err != nil {
		return nil, err
	}
	for j, s := range syms {
		out[idx[j]] = stateNormal
		if s == f.sym {
			out[idx[j]] = stateAnomalous
		}
	}
	return out, nil
}

// categorical tests every alternative of each categorical dimension at once.
func (f *mfsFinder) categorical() error {
	sp := f.sp
	p := f.p
	check := f.check
	m := f.m
	type catDim struct {
		name string
		vals []string
		set  func(*Workload, string)
		get  func(Workload) string
	}
	cats := []catDim{
		{"qp_type", sp.QPTypes, func(w *Workload, v string) { w.QPType = v }, func(w Workload) string { return w.QPType }},
		{"opcode", sp.Opcodes, func(w *Workload, v string) { w.Opcode = v }, func(w Workload) string { return w.Opcode }},
		{"direction", sp.Directions, func(w *Workload, v string) { w.Direction = v }, func(w Workload) string { return w.Direction }},
		{"memory", sp.Memories, func(w *Workload, v string) { w.Memory = v }, func(w Workload) string { return w.Memory }},
	}
	for _, cd := range cats {
		var alts []Workload
		var names []string
		for _, v := range cd.vals {
			if v == cd.get(p) {
				continue
			}
			q := clone(p)
			cd.set(&q, v)
			alts = append(alts, q)
			names = append(names, v)
		}
		res, err := check(alts)
		if err != nil {
			return err
		}
		keep := []string{cd.get(p)}
		all := true
		for i := range alts {
			switch res[i] {
			case stateAnomalous:
				keep = append(keep, names[i])
			case stateNormal:
				all = false
			}
		}
		if !all {
			m[cd.name] = Cond{Values: inOrder(cd.vals, keep)}
		}
	}
	return nil
}

// mtu treats the MTU as a categorical dimension of integers.
func (f *mfsFinder) mtu() error {
	sp := f.sp
	p := f.p
	check := f.check
	m := f.m
	var alts []Workload
	for _, v := range sp.MTUs {
		if v != p.MTU {
			q := clone(p)
			q.MTU = v
			alts = append(alts, q)
		}
	}
	res, err := check(alts)
	if err != nil {
		return err
	}
	keep := []int{p.MTU}
	all := true
	for i, q := range alts {
		switch res[i] {
		case stateAnomalous:
			keep = append(keep, q.MTU)
		case stateNormal:
			all = false
		}
	}
	if !all {
		slices.Sort(keep)
		m["mtu"] = Cond{Ints: keep}
	}
	return nil
}

// ordered spans each ordered dimension from p's value: its ends first, then a binary search where one does
// not keep the anomaly.
func (f *mfsFinder) ordered() error {
	sp := f.sp
	p := f.p
	check := f.check
	m := f.m
	for _, d := range orderedDims {
		r := d.rng(sp)
		v := *d.ptr(&p)
		at := func(x int) Workload {
			q := clone(p)
			*d.ptr(&q) = x
			return q
		}
		dimCheck := check
		if d.name == "wqe_batch" {
			// The WQ must hold a batch: a batch deeper than p's WQ takes the depth with it, as Collie's mutation
			// does. Such a probe changes two factors, so only a persisting anomaly counts; a normal result is
			// ambiguous and ends the range like the validity bound it stands for.
			at = func(x int) Workload {
				q := clone(p)
				q.WQEBatch, q.WQDepth = x, max(p.WQDepth, x)
				return q
			}
			dimCheck = func(ws []Workload) ([]probeState, error) {
				st, err := check(ws)
				if err != nil {
					return nil, err
				}
				for i, w := range ws {
					if w.WQEBatch > p.WQDepth && st[i] == stateNormal {
						st[i] = stateInvalid
					}
				}
				return st, nil
			}
		}
		lo, hi, loEdge, hiEdge, err := f.span(r.grid(v), v, at, dimCheck)
		if err != nil {
			return err
		}
		if !(loEdge && hiEdge) {
			m[d.name] = Cond{Low: lo, High: hi}
		}
	}
	return nil
}

// messages spans the smallest and the largest request of the vector separately, so that "all requests at
// most 1 KB" and "a mixture of <= 1 KB and >= 64 KB" are both expressible.
func (f *mfsFinder) messages() error {
	sp := f.sp
	p := f.p
	check := f.check
	m := f.m
	if len(p.MsgSizes) > 0 {
		m0, M0 := slices.Min(p.MsgSizes), slices.Max(p.MsgSizes)
		withMax := func(s int) Workload { // the largest requests become s; none may exceed it
			q := clone(p)
			for i, x := range q.MsgSizes {
				if x == M0 {
					q.MsgSizes[i] = s
				} else {
					q.MsgSizes[i] = min(x, s)
				}
			}
			return q
		}
		withMin := func(s int) Workload { // the smallest requests become s; none may be below it
			q := clone(p)
			for i, x := range q.MsgSizes {
				if x == m0 {
					q.MsgSizes[i] = s
				} else {
					q.MsgSizes[i] = max(x, s)
				}
			}
			return q
		}
		grid := sp.MsgSize.grid(m0)
		grid = append(grid, M0)
		slices.Sort(grid)
		grid = slices.Compact(grid)
		a, b, aEdge, bEdge, err := f.span(grid, m0, withMin, check)
		if err != nil {
			return err
		}
		c, d, cEdge, dEdge, err := f.span(grid, M0, withMax, check)
		if err != nil {
			return err
		}
		if !(aEdge && dEdge) {
			m["msg_sizes"] = Cond{Low: a, High: d}
		}
		// The smallest request must stay small when it may not grow as far as the largest may (b < d); the
		// largest must stay large when it may not shrink as far as the smallest may (c > a). Each is a condition
		// of its own, on one end of the vector: a single one is no mixture (some request <= b, or some >= c),
		// and neither are both when they overlap (b >= c: one request between c and b meets both). A mixture
		// is the case b < c. (One msg_mix [min(b, d), max(c, a)] for all these read Low >= High in all but
		// the last: "(<= 128K & >= 32K)" for an anomaly that needs one request of 32 KB or more.)
		if b < d && !bEdge {
			m["msg_min"] = Cond{Low: a, High: b}
		}
		if c > a && !cEdge {
			m["msg_max"] = Cond{Low: c, High: d}
		}
	}
	return nil
}

// events keeps the events when the anomaly goes away without them.
func (f *mfsFinder) events() error {
	p := f.p
	check := f.check
	m := f.m
	if len(p.Events) > 0 {
		q := clone(p)
		q.Events = nil
		res, err := check([]Workload{q})
		if err != nil {
			return err
		}
		if res[0] == stateNormal {
			var types []string
			for _, e := range p.Events {
				if !slices.Contains(types, e.Type) {
					types = append(types, e.Type)
				}
			}
			m["events"] = Cond{Values: types}
		}
	}
	return nil
}

// span finds the anomalous stretch of grid around v, one factor at a time: it probes the lowest and the
// highest valid grid values (Collie's two ends), and on each side where the anomaly did not persist a binary
// search between v and that end finds the last anomalous value (both sides' steps in one batch). It takes
// one probe per side when the anomaly persists to the end and at most 1+ceil(log2(steps to the end))
// otherwise, so a dimension the anomaly does not depend on costs two probes however fine its grid.
// lo and hi are the last anomalous values; an edge flag says the anomaly persisted to the end of the grid or
// of the valid workloads on that side, or that the first value past it was not a valid one-factor probe.
func (f *mfsFinder) span(grid []int, v int, at func(int) Workload, check func([]Workload) ([]probeState, error)) (lo, hi int, loEdge, hiEdge bool, err error) {
	i := slices.Index(grid, v)
	if i < 0 {
		return v, v, false, false, fmt.Errorf("mfs: value %d not on its grid", v)
	}
	// The valid stretch around v: invalid workloads are not run, so the ends are the last valid values.
	valid := func(j int) bool { return f.sp.Validate(at(grid[j])) == nil }
	lowest, highest := i, i
	for lowest > 0 && valid(lowest-1) {
		lowest--
	}
	for highest < len(grid)-1 && valid(highest+1) {
		highest++
	}
	// Each side keeps the index of its last known anomalous value (in) and of its first known value past the
	// anomaly (out, -1 or len(grid) when none is known yet) and the state found there.
	type side struct {
		in, out, end int
		outState     probeState
		done         bool
	}
	down := side{in: i, out: -1, end: lowest, done: lowest == i}
	up := side{in: i, out: len(grid), end: highest, done: highest == i}
	next := func(s *side) int { // the index to probe next on a side
		if s.out == -1 || s.out == len(grid) {
			return s.end
		}
		return (s.in + s.out) / 2
	}
	for !down.done || !up.done {
		var ws []Workload
		var sides []*side
		var idx []int
		for _, s := range []*side{&down, &up} {
			if !s.done {
				j := next(s)
				ws, sides, idx = append(ws, at(grid[j])), append(sides, s), append(idx, j)
			}
		}
		res, err := check(ws)
		if err != nil {
			return v, v, false, false, err
		}
		for k, s := range sides {
			if res[k] == stateAnomalous {
				s.in = idx[k]
			} else {
				s.out, s.outState = idx[k], res[k]
			}
			switch {
			case s.in == s.end, f.ends:
				s.done = true
			case s.out != -1 && s.out != len(grid) && (s.in-s.out == 1 || s.out-s.in == 1):
				s.done = true
			}
		}
	}
	lo, hi = grid[down.in], grid[up.in]
	loEdge = down.in == down.end || (down.out >= 0 && down.outState == stateInvalid)
	hiEdge = up.in == up.end || (up.out < len(grid) && up.outState == stateInvalid)
	return lo, hi, loEdge, hiEdge, nil
}

// probeState is what a probe showed: not run (the workload breaks a validity rule), normal, or the anomaly.
type probeState int8

const (
	stateInvalid probeState = iota
	stateNormal
	stateAnomalous
)

func inOrder(order, vals []string) []string {
	var out []string
	for _, v := range order {
		if slices.Contains(vals, v) {
			out = append(out, v)
		}
	}
	return out
}

// simplify moves p toward the simplest workload the feature set allows: each constrained dimension to the
// value of its range nearest the ordinary workload's, each unconstrained one to the ordinary workload's value
// (OrdinaryWorkload), keeping p's value wherever the result would be invalid. The result is the minimal
// reproducer to verify.
func simplify(sp *Space, p Workload, m MFS) Workload {
	return simplifyIf(sp, p, m, nil)
}

// simplifyIf is simplify where each step must also pass keep (nil: every step does).
func simplifyIf(sp *Space, p Workload, m MFS, keep func(Workload) bool) Workload {
	o := OrdinaryWorkload()
	q := clone(p)
	try := func(f func(*Workload)) {
		t := clone(q)
		f(&t)
		if t.Key() != q.Key() && sp.Validate(t) == nil && m.Match(t) && (keep == nil || keep(t)) {
			q = t
		}
	}
	pickStr := func(dim string, ordinary string, set func(*Workload, string)) {
		if c, ok := m[dim]; ok {
			if slices.Contains(c.Values, ordinary) {
				try(func(w *Workload) { set(w, ordinary) })
			}
			return
		}
		try(func(w *Workload) { set(w, ordinary) })
	}
	// The transport pair changes together: rc/write first, then any allowed pair in the MFS.
	try(func(w *Workload) { w.QPType, w.Opcode = o.QPType, o.Opcode })
	pickStr("direction", o.Direction, func(w *Workload, v string) { w.Direction = v })
	pickStr("memory", o.Memory, func(w *Workload, v string) { w.Memory = v })
	try(func(w *Workload) { w.MTU = o.MTU })
	for _, d := range orderedDims {
		want := *d.ptr(&o)
		if c, ok := m[d.name]; ok {
			want = min(max(want, c.Low), c.High)
		}
		try(func(w *Workload) { *d.ptr(w) = want })
	}
	// Requests: a single uniform size when no mixture is needed, the nearest allowed to the ordinary 64 KB;
	// else one large and one small request, each the nearest allowed to it.
	small, large := msgBounds(sp, m)
	want := o.MsgSizes[0]
	if lo, hi := max(small[0], large[0]), min(small[1], large[1]); lo <= hi {
		try(func(w *Workload) { w.MsgSizes = []int{min(max(want, lo), hi)} })
		if len(q.MsgSizes) > 1 {
			try(func(w *Workload) { w.MsgSizes = []int{slices.Max(w.MsgSizes)} })
		}
	} else {
		try(func(w *Workload) {
			w.MsgSizes = []int{min(max(want, large[0]), large[1]), min(max(want, small[0]), small[1])}
		})
	}
	if _, ok := m["events"]; !ok {
		try(func(w *Workload) { w.Events = nil })
	}
	// A second pass: the depth may now shrink once the batch has.
	for _, d := range orderedDims {
		want := *d.ptr(&o)
		if c, ok := m[d.name]; ok {
			want = min(max(want, c.Low), c.High)
		}
		try(func(w *Workload) { *d.ptr(w) = want })
	}
	return q
}

// msgBounds are the ranges an MFS allows the smallest and the largest request of the vector, [Low, High] each.
func msgBounds(sp *Space, m MFS) (small, large [2]int) {
	small = [2]int{sp.MsgSize.Min, sp.MsgSize.Max}
	large = small
	if c, ok := m["msg_sizes"]; ok {
		small[0], large[1] = max(small[0], c.Low), min(large[1], c.High)
	}
	if c, ok := m["msg_min"]; ok {
		small = [2]int{max(small[0], c.Low), min(small[1], c.High)}
	}
	if c, ok := m["msg_max"]; ok {
		large = [2]int{max(large[0], c.Low), min(large[1], c.High)}
	}
	if c, ok := m["msg_mix"]; ok {
		small[1], large[0] = min(small[1], c.Low), max(large[0], c.High)
	}
	return small, large
}

// reduce is the greedy pass of delta debugging: it moves p toward the ordinary workload one dimension at a
// time, in simplify's order, keeping each move after which the anomaly (the same symptom) is still there. What
// is left of p are dimensions each of which the anomaly needed when it was tried: one cause of a point that had
// several. It stops probing at the first error.
func reduce(sp *Space, p Workload, sym Symptom, probe probeFunc) (Workload, error) {
	var err error
	q := simplifyIf(sp, p, MFS{}, func(t Workload) bool {
		if err != nil {
			return false
		}
		var syms []Symptom
		syms, err = probe([]Workload{t})
		return err == nil && syms[0] == sym
	})
	return q, err
}

// mfsProbeBound is an upper bound of the probes one findMFS can take in a space (verification and reduction
// excluded): every alternative of each categorical dimension and the MTU, the events once, and for each
// ordered dimension and each end of the message-size vector two sides of one end probe and a binary search.
func mfsProbeBound(sp *Space) int {
	n := len(sp.QPTypes) + len(sp.Opcodes) + len(sp.Directions) + len(sp.Memories) + len(sp.MTUs) + 1
	for _, d := range orderedDims {
		n += spanBound(len(d.rng(sp).grid(d.rng(sp).Min)))
	}
	n += 2 * spanBound(len(sp.MsgSize.grid(sp.MsgSize.Min))+1)
	return n
}

// spanBound is the most probes span takes on a grid of n values: per side one end and a binary search over
// at most n-2 values between p's and that end.
func spanBound(n int) int {
	return 2 * (1 + bits.Len(uint(max(n-2, 0))))
}
