package search

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"
)

// Algorithms a Config may name.
const (
	AlgoRandom = "random"
	AlgoGA     = "ga"
	AlgoSA     = "sa"
)

// MFS styles a Config may name.
const (
	MFSBisect = "bisect"
	MFSEnds   = "ends"
)

// SAConfig tunes simulated annealing (seeds/003 Algorithm 1). Each chain runs Iterations proposals per
// temperature, multiplies the temperature by Decay, and below MinTemp restarts from a random point at
// StartTemp, at most Restarts times. Energy deltas are relative (DeltaE), so temperatures are in units of
// "relative change of the objective".
type SAConfig struct {
	StartTemp  float64 `json:"start_temp"`
	MinTemp    float64 `json:"min_temp"`
	Decay      float64 `json:"decay"`
	Iterations int     `json:"iterations"`
	Restarts   int     `json:"restarts"`
	// Chains is the number of annealing chains run side by side, one proposal each per round; each chain
	// drives one objective at a time (Collie optimizes its counters one after another) and moves to the next
	// objective on each restart.
	Chains int `json:"chains"`
}

// GAConfig tunes Lumina's genetic fuzzing (seeds/000 Algorithm 1): a pool of Pool configurations, each child
// a parent with 1..MaxMutations mutations, kept if its score beats the pool's median or else with probability
// KeepProb. The pool is capped at MaxPool by dropping its lowest score (the paper's pool only grows).
type GAConfig struct {
	Pool         int                `json:"pool"`
	MaxPool      int                `json:"max_pool"`
	KeepProb     float64            `json:"keep_prob"`
	MaxMutations int                `json:"max_mutations"`
	Weights      map[string]float64 `json:"weights,omitempty"` // per objective; 1 when absent
}

// Config is one search.
type Config struct {
	Algo   string `json:"algo"`
	Seed   uint64 `json:"seed"`
	Budget int    `json:"budget"` // evaluations, MFS probes included
	// MFS enables the minimal-feature-set algorithm and skipping of points inside a known MFS.
	MFS bool `json:"mfs"`
	// MFSStyle is how the MFS algorithm spans an ordered dimension (and the message sizes): MFSBisect (also "")
	// probes the two ends and binary-searches where the anomaly stops; MFSEnds probes only the two ends, as
	// Collie's implementation does, and keeps a point whose one-factor set does not reproduce as the point itself
	// instead of reducing it to one cause.
	MFSStyle string `json:"mfs_style,omitempty"`
	Space    Space  `json:"space"`
	// MFSSpace is the space the MFS algorithm probes (nil: Space). A restricted search samples a narrowed
	// Space but reports its anomalies' conditions over the whole space.
	MFSSpace *Space  `json:"mfs_space,omitempty"`
	Monitor  Monitor `json:"monitor"`
	Warmup   int     `json:"warmup"` // random points measured first, to rank the objectives (Collie: 10)
	// Signals is what the search drives: all counters (SignalsAll, also ""), or SignalsPerformance, the counters
	// every NIC has (throughput, bytes and packets, pause duration) without the vendor's diagnostic counters
	// (Collie's figure 5: Perf against Diag).
	Signals string    `json:"signals,omitempty"`
	SA      SAConfig  `json:"sa"`
	GA      GAConfig  `json:"ga"`
	Batch   int       `json:"batch"` // proposals evaluated in parallel per round; fixed so output does not depend on cores
	Workers int       `json:"-"`     // concurrent evaluations; 0 = GOMAXPROCS
	Known   []Anomaly `json:"-"`     // anomalies known beforehand: their MFS are skipped
	// Log receives one record per evaluation, in order (search.jsonl).
	Log func(Record) error `json:"-"`
	// Replay holds the records of an earlier run of the same configuration: the search re-derives its state
	// from them without calling the evaluator, checks that it takes the same steps, and logs only what comes
	// after them.
	Replay []Record `json:"-"`
	// Progress, when set, is called after every round.
	Progress func(Progress) `json:"-"`
}

// DefaultConfig is the configuration `lumina search` starts from.
func DefaultConfig() Config {
	return Config{
		Algo: AlgoSA, Seed: 1, Budget: 1000, MFS: true, Space: DefaultSpace(), Monitor: DefaultMonitor(),
		Warmup: 10, Batch: 8,
		SA: SAConfig{StartTemp: 0.3, MinTemp: 0.01, Decay: 0.9, Iterations: 5, Restarts: 1000, Chains: 2},
		GA: GAConfig{Pool: 10, MaxPool: 64, KeepProb: 0.1, MaxMutations: 2},
	}
}

// Check reports whether a configuration can run.
func (c *Config) Check() error {
	switch c.Algo {
	case AlgoRandom, AlgoGA, AlgoSA:
	default:
		return fmt.Errorf("unknown algorithm %q (expected random, ga or sa)", c.Algo)
	}
	if c.Budget < 1 {
		return fmt.Errorf("budget %d: expected at least 1 evaluation", c.Budget)
	}
	if c.Signals != "" && c.Signals != SignalsAll && c.Signals != SignalsPerformance {
		return fmt.Errorf("signals %q: expected %s or %s", c.Signals, SignalsAll, SignalsPerformance)
	}
	if c.MFSStyle != "" && c.MFSStyle != MFSBisect && c.MFSStyle != MFSEnds {
		return fmt.Errorf("mfs style %q: expected %s or %s", c.MFSStyle, MFSBisect, MFSEnds)
	}
	if c.Batch < 1 || c.Warmup < 1 {
		return fmt.Errorf("batch %d and warmup %d must be at least 1", c.Batch, c.Warmup)
	}
	if err := c.Space.Check(); err != nil {
		return err
	}
	if c.MFSSpace != nil {
		if err := c.MFSSpace.Check(); err != nil {
			return fmt.Errorf("mfs space: %w", err)
		}
	}
	if c.Algo == AlgoSA {
		s := c.SA
		if s.StartTemp <= 0 || s.MinTemp <= 0 || s.Decay <= 0 || s.Decay >= 1 || s.Iterations < 1 || s.Chains < 1 || s.Restarts < 0 {
			return fmt.Errorf("sa: need start_temp > 0, min_temp > 0, 0 < decay < 1, iterations >= 1, chains >= 1, restarts >= 0; got %+v", s)
		}
	}
	if c.Algo == AlgoGA {
		g := c.GA
		if g.Pool < 1 || g.MaxPool < g.Pool || g.KeepProb < 0 || g.KeepProb > 1 || g.MaxMutations < 1 {
			return fmt.Errorf("ga: need pool >= 1, max_pool >= pool, 0 <= keep_prob <= 1, max_mutations >= 1; got %+v", g)
		}
	}
	return nil
}

// Record is one evaluation, one line of search.jsonl.
type Record struct {
	Eval int `json:"eval"` // 1-based
	// Kind is warmup (the random points that rank the objectives), search (a step of the algorithm),
	// restart (an annealing chain's new random start), mfs (an MFS probe), verify (the minimal reproducer) or
	// reduce (moving a point with several causes to one).
	Kind      string   `json:"kind"`
	Chain     int      `json:"chain,omitempty"` // annealing chain, 1-based
	Seed      uint64   `json:"seed"`            // the evaluation's seed (also the reproducing scenario's)
	Workload  Workload `json:"workload"`
	Metrics   Metrics  `json:"metrics"`
	Symptom   Symptom  `json:"symptom,omitempty"`
	Objective string   `json:"objective,omitempty"` // what the energy measures; "score" for random and GA
	// Energy is lower for more extreme points: an annealing chain's objective relative to its warm-up mean
	// (negated for diagnostic counters), or minus the multi-objective score.
	Energy   float64  `json:"energy"`
	DeltaE   *float64 `json:"delta_e,omitempty"` // annealing: Collie's relative energy change against the chain's point
	Accepted bool     `json:"accepted"`          // annealing: moved there; GA: entered the pool; random: always
	Anomaly  int      `json:"anomaly,omitempty"` // the anomaly this evaluation found or fell into
}

// Anomaly is one finding, an element of anomalies.json.
type Anomaly struct {
	ID      int     `json:"id"`
	Symptom Symptom `json:"symptom"`
	MFS     MFS     `json:"mfs"`
	// Scenario is the path of the scenario file that reproduces it (set when the results are written).
	Scenario string `json:"scenario"`
	FoundAt  int    `json:"found_at_evaluation"`
	// Counters are those that moved against the warm-up mean (at least doubled or at most halved).
	Counters map[string]float64 `json:"counters"`
	Workload Workload           `json:"workload"` // the point the search hit
	Metrics  Metrics            `json:"metrics"`
	// Reproducer is the workload in the scenario: the simplest one inside the MFS when it showed the
	// symptom again (Minimal), else the point the search hit.
	Reproducer Workload `json:"reproducer"`
	Minimal    bool     `json:"minimal"`
	Seed       uint64   `json:"seed"`       // evaluation seed of the reproducer
	MFSProbes  int      `json:"mfs_probes"` // evaluations the MFS and its verification took (cache hits excluded)
	// MFSCut: the budget ran out during the MFS; probes past it were not run and count as the anomaly gone,
	// so the feature set holds the point but may be narrower than minimal.
	MFSCut bool `json:"mfs_cut,omitempty"`
	// Unconfirmed is the one-factor-at-a-time result when the simplest point inside it did not show the symptom
	// (the point had more than one cause, so each dimension alone looked irrelevant). Collie then drops the
	// feature set; here MFS is the reduced point's feature set when that one is confirmed, else the hit point
	// itself, so that nothing the search did not measure is skipped or attributed to the anomaly.
	Unconfirmed MFS `json:"mfs_unconfirmed,omitempty"`
	// Reduced is the point holding one cause of the hit point when that had several: the hit point moved toward
	// the ordinary workload one dimension at a time while the anomaly stayed. MFS is then this point's feature
	// set, confirmed like any other.
	Reduced *Workload `json:"reduced,omitempty"`
	// Published lists the published anomalies of the profile's subsystem (Collie's numbers, table 2) whose
	// conditions hold at Workload, the point the search hit: [] when none does (a finding the study does not
	// list), absent when nothing is published for the profile (DirOptions.Published).
	Published *[]int `json:"published,omitempty"`
	// Elapsed is the wall time from the start of the search to this finding (benchmarks; not written).
	Elapsed time.Duration `json:"-"`
}

// Progress is reported after every round.
type Progress struct {
	Evaluations int
	Budget      int
	Anomalies   int
	Skipped     int
	BestEnergy  float64
	Elapsed     time.Duration
}

// Result is what a search found.
type Result struct {
	Anomalies   []*Anomaly  `json:"anomalies"`
	Evaluations int         `json:"evaluations"`
	Skipped     int         `json:"skipped"` // proposals inside a known MFS, not evaluated
	Interrupted bool        `json:"interrupted"`
	Objectives  []Objective `json:"objectives"`
	BestEnergy  float64     `json:"best_energy"`
}

// errReplayDiverged reports a resumed search that does not retrace its records.
var errReplayDiverged = errors.New("the resumed search diverged from the recorded one")

type engine struct {
	cfg      Config
	ctx      context.Context
	ev       Evaluator
	rng      *rand.Rand
	sp, msp  *Space
	cache    map[string]Metrics
	replayed map[string]Metrics
	evals    int
	skipped  int
	mfsCut   bool // the running MFS hit the budget
	found    []*Anomaly
	known    []Anomaly
	seenKeys map[string]int // no-MFS mode: anomalous points already reported
	objs     []Objective
	refs     map[string]float64
	best     float64
	start    time.Time
	workers  int
}

// Search runs one search with the evaluator. It stops at the budget, when the algorithm has nothing left to
// do, or when ctx is cancelled (the result is then marked Interrupted; it is not an error).
func Search(ctx context.Context, ev Evaluator, cfg Config) (*Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	e := &engine{cfg: cfg, ctx: ctx, ev: ev, cache: map[string]Metrics{}, replayed: map[string]Metrics{},
		seenKeys: map[string]int{}, best: math.Inf(1), start: time.Now(), known: cfg.Known}
	// One PCG stream, seeded from the configuration seed, drives every random choice of the search.
	e.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	e.sp = &e.cfg.Space
	e.msp = e.sp
	if cfg.MFSSpace != nil {
		e.msp = e.cfg.MFSSpace
	}
	e.workers = cfg.Workers
	if e.workers <= 0 {
		e.workers = runtime.GOMAXPROCS(0)
	}
	for _, r := range cfg.Replay {
		e.replayed[r.Workload.Key()] = r.Metrics
	}
	err := e.run()
	res := &Result{Evaluations: e.evals, Skipped: e.skipped, Interrupted: ctx.Err() != nil, Objectives: e.objs,
		BestEnergy: e.best}
	res.Anomalies = e.found
	if math.IsInf(res.BestEnergy, 1) {
		res.BestEnergy = 0
	}
	if err != nil && !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return res, err
	}
	if e.evals < len(cfg.Replay) && !res.Interrupted {
		return res, fmt.Errorf("%w: it ended after %d evaluations, the records hold %d (resume with a budget of at least %d)",
			errReplayDiverged, e.evals, len(cfg.Replay), len(cfg.Replay))
	}
	return res, nil
}

func (e *engine) done() bool { return e.evals >= e.cfg.Budget || e.ctx.Err() != nil }

func (e *engine) run() error {
	ws := make([]Workload, e.cfg.Warmup)
	for i := range ws {
		ws[i] = e.sp.Sample(e.rng)
	}
	n := min(len(ws), e.cfg.Budget)
	ms, _, ok, err := e.evaluate(ws[:n])
	if err != nil {
		return err
	}
	e.objs, e.refs = rankObjectives(ms[:ok])
	if e.cfg.Signals == SignalsPerformance {
		e.objs = performanceOnly(e.objs)
	}
	type start struct {
		w Workload
		m Metrics
	}
	var starts []start
	for i := range ok {
		if e.evals >= e.cfg.Budget {
			// An MFS took the rest of the budget: the points measured after its anomaly are not recorded, so
			// that a resumed search with a larger budget continues that MFS exactly where this one stopped.
			break
		}
		sym := e.cfg.Monitor.Check(ms[i])
		id, isNew := e.anomalyOf(ws[i], sym)
		s := score(e.objs, e.refs, e.cfg.GA.Weights, ms[i])
		if err := e.record(Record{Kind: "warmup", Workload: ws[i], Metrics: ms[i], Symptom: sym, Objective: "score",
			Energy: -s, Accepted: true, Anomaly: id}); err != nil {
			return err
		}
		if isNew {
			if err := e.newAnomaly(id, ws[i], ms[i], sym); err != nil {
				return err
			}
			continue
		}
		starts = append(starts, start{ws[i], ms[i]})
	}
	e.progress()
	if e.done() {
		return nil
	}
	switch e.cfg.Algo {
	case AlgoRandom:
		return e.runRandom()
	case AlgoGA:
		pool := make([]member, 0, len(starts))
		for _, s := range starts {
			pool = append(pool, member{s.w, score(e.objs, e.refs, e.cfg.GA.Weights, s.m)})
		}
		return e.runGA(pool)
	default:
		chains := make([]*chain, e.cfg.SA.Chains)
		for k := range chains {
			c := &chain{T: e.cfg.SA.StartTemp, obj: k % len(e.objs)}
			if k < len(starts) {
				w := starts[k].w
				c.cur, c.curVal = &w, e.objs[c.obj].Value(starts[k].m)
			}
			chains[k] = c
		}
		return e.runSA(chains)
	}
}

// propose draws a point with gen, skipping points inside a known MFS (Collie Algorithm 1 line 5); after 100
// skips in a row it falls back to a random point of the space.
func (e *engine) propose(gen func() Workload) Workload {
	for range 100 {
		w := gen()
		if !e.inKnownMFS(w) {
			return w
		}
		e.skipped++
	}
	return e.sp.Sample(e.rng)
}

func (e *engine) inKnownMFS(w Workload) bool {
	if !e.cfg.MFS {
		return false
	}
	for _, a := range e.found {
		if a.MFS.Match(w) {
			return true
		}
	}
	for _, a := range e.known {
		if a.MFS.Match(w) {
			return true
		}
	}
	return false
}

// anomalyOf says which anomaly an evaluation belongs to: a known one whose MFS holds the point (the same
// symptom), or a new one (isNew, with the id it will get). Without MFS every distinct anomalous point is new.
func (e *engine) anomalyOf(w Workload, sym Symptom) (id int, isNew bool) {
	if sym == None {
		return 0, false
	}
	if e.cfg.MFS {
		for _, a := range e.found {
			if a.Symptom == sym && a.MFS.Match(w) {
				return a.ID, false
			}
		}
	} else if id, ok := e.seenKeys[string(sym)+w.Key()]; ok {
		return id, false
	}
	return len(e.found) + 1, true
}

// newAnomaly records an anomaly found at the last evaluation and, with MFS on, derives its feature set and
// verifies a minimal reproducer.
func (e *engine) newAnomaly(id int, w Workload, m Metrics, sym Symptom) error {
	a := &Anomaly{ID: id, Symptom: sym, FoundAt: e.evals, Counters: movedCounters(m, e.refs), Workload: w,
		Metrics: m, Reproducer: w, Seed: evalSeed(e.cfg.Seed, w.Key()), Elapsed: time.Since(e.start)}
	if !e.cfg.MFS {
		a.MFS = exactMFS(w)
		e.seenKeys[string(sym)+w.Key()] = id
		e.found = append(e.found, a)
		return nil
	}
	before := e.evals
	e.mfsCut = false
	probe := func(ws []Workload) ([]Symptom, error) {
		syms, err := e.probe(ws, "mfs", id)
		return syms, err
	}
	ends := e.cfg.MFSStyle == MFSEnds
	mfs, err := findMFS(e.msp, w, sym, probe, ends)
	if err != nil {
		return fmt.Errorf("minimal feature set of anomaly %d: %w", id, err)
	}
	a.MFS = mfs
	ok, err := e.confirm(a, w, mfs)
	if err != nil {
		return err
	}
	if !ok && !e.mfsCut {
		// More than one cause: each dimension alone looked irrelevant, and the anomaly is the point itself. (A
		// set the budget cut short is kept as it is: it holds the point, and its check was not run.) Collie's
		// procedure (MFSEnds) stops there; otherwise the point is reduced to one cause (delta debugging's greedy
		// pass) and that point's feature set taken if its simplest point reproduces.
		a.Unconfirmed, a.MFS = mfs, exactMFS(w)
		if !ends {
			r, err := reduce(e.msp, w, sym, func(ws []Workload) ([]Symptom, error) { return e.probe(ws, "reduce", id) })
			if err != nil {
				return fmt.Errorf("reducing anomaly %d to one cause: %w", id, err)
			}
			if r.Key() != w.Key() {
				m2, err := findMFS(e.msp, r, sym, probe, ends)
				if err != nil {
					return fmt.Errorf("minimal feature set of anomaly %d's reduced point: %w", id, err)
				}
				if ok, err := e.confirm(a, r, m2); err != nil {
					return err
				} else if ok {
					a.MFS, a.Reduced = m2, &r
				}
			}
		}
	}
	a.MFSProbes = e.evals - before
	a.MFSCut = e.mfsCut
	e.found = append(e.found, a)
	return nil
}

// confirm checks a feature set the way Collie does: its simplest point (or p itself, when nothing simpler is
// inside it) must show the symptom again; then that point becomes the anomaly's minimal reproducer.
func (e *engine) confirm(a *Anomaly, p Workload, m MFS) (bool, error) {
	q := simplify(e.msp, p, m)
	if q.Key() != p.Key() {
		syms, err := e.probe([]Workload{q}, "verify", a.ID)
		if err != nil {
			return false, fmt.Errorf("verifying the reproducer of anomaly %d: %w", a.ID, err)
		}
		if syms[0] != a.Symptom {
			return false, nil
		}
	}
	a.Reproducer, a.Minimal, a.Seed = q, true, evalSeed(e.cfg.Seed, q.Key())
	return true, nil
}

// exactMFS describes a single point: what an anomaly's feature set is when the MFS algorithm is off.
func exactMFS(w Workload) MFS {
	m := MFS{
		"qp_type": {Values: []string{w.QPType}}, "opcode": {Values: []string{w.Opcode}},
		"mtu": {Ints: []int{w.MTU}}, "direction": {Values: []string{w.Direction}},
		"memory": {Values: []string{w.Memory}},
	}
	for _, d := range orderedDims {
		v := *d.ptr(&w)
		m[d.name] = Cond{Low: v, High: v}
	}
	if len(w.MsgSizes) > 0 {
		m["msg_sizes"] = Cond{Low: slices.Min(w.MsgSizes), High: slices.Max(w.MsgSizes)}
	}
	return m
}

// probe evaluates MFS probes: cache hits are free; every real evaluation is counted and logged.
func (e *engine) probe(ws []Workload, kind string, id int) ([]Symptom, error) {
	// The budget bounds probes too: those past it are not run (cache hits are free) and answer None. An MFS
	// takes what is left of the budget before the results of its round that come after it (batch drops them).
	run := make([]Workload, 0, len(ws))
	idx := make([]int, 0, len(ws))
	left := e.cfg.Budget - e.evals
	costs := map[string]bool{}
	for i, w := range ws {
		k := w.Key()
		if _, hit := e.cache[k]; !hit && !costs[k] {
			if left <= 0 {
				e.mfsCut = true
				continue
			}
			left--
			costs[k] = true
		}
		run = append(run, w)
		idx = append(idx, i)
	}
	ms, fresh, ok, err := e.evaluate(run)
	if err != nil {
		return nil, err
	}
	if ok < len(run) {
		return nil, e.ctx.Err()
	}
	out := make([]Symptom, len(ws))
	for j, i := range idx {
		out[i] = e.cfg.Monitor.Check(ms[j])
		if fresh[j] {
			s := score(e.objs, e.refs, e.cfg.GA.Weights, ms[j])
			if err := e.record(Record{Kind: kind, Workload: ws[i], Metrics: ms[j], Symptom: out[i],
				Objective: "score", Energy: -s, Anomaly: id}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// evalSeed derives an evaluation's seed from the search seed and the workload, so that the same workload
// always gets the same seed: a repeated point or a cached probe gives the same answer, whatever the order.
func evalSeed(seed uint64, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := h.Sum64() ^ seed*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x & 0x7fffffff // small enough for every YAML and JSON reader
}

// evaluate runs the workloads not yet measured, in parallel, each distinct workload once. ok is how many
// leading workloads have metrics (fewer than len(ws) only when the context was cancelled); fresh marks the
// ones measured now rather than taken from the cache.
func (e *engine) evaluate(ws []Workload) (ms []Metrics, fresh []bool, ok int, err error) {
	ms, fresh = make([]Metrics, len(ws)), make([]bool, len(ws))
	type job struct {
		w   Workload
		key string
		m   Metrics
		err error
	}
	var jobs []*job
	at := make([]*job, len(ws))
	byKey := map[string]*job{}
	for i, w := range ws {
		k := w.Key()
		if m, hit := e.cache[k]; hit {
			ms[i] = m
			continue
		}
		if j, dup := byKey[k]; dup {
			at[i] = j
			continue
		}
		j := &job{w: w, key: k}
		byKey[k], at[i], fresh[i] = j, j, true
		jobs = append(jobs, j)
	}
	sem := make(chan struct{}, e.workers)
	var wg sync.WaitGroup
	for _, j := range jobs {
		if m, hit := e.replayed[j.key]; hit {
			j.m = m
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := e.ctx.Err(); err != nil {
				j.err = err
				return
			}
			j.m, j.err = e.ev.Evaluate(e.ctx, j.w, evalSeed(e.cfg.Seed, j.key))
			if j.err == nil {
				j.err = checkMetrics(j.m)
			}
		}()
	}
	wg.Wait()
	for i := range ws {
		j := at[i]
		if j == nil {
			ok++
			continue
		}
		if j.err != nil {
			if e.ctx.Err() != nil {
				return ms, fresh, ok, nil
			}
			return ms, fresh, ok, fmt.Errorf("evaluating %s: %w", j.w, j.err)
		}
		ms[i] = j.m
		e.cache[j.key] = j.m
		ok++
	}
	return ms, fresh, ok, nil
}

// checkMetrics rejects what would poison the search and its JSON output.
func checkMetrics(m Metrics) error {
	for name, v := range map[string]float64{"pause_ratio": m.PauseRatio, "tx_gbps": m.TxGbps, "rx_gbps": m.RxGbps,
		"tx_mpps": m.TxMpps, "rx_mpps": m.RxMpps, "limit_gbps": m.LimitGbps, "limit_mpps": m.LimitMpps} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("evaluator returned %v for %s", v, name)
		}
	}
	for name, v := range m.Counters {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("evaluator returned %v for counter %s", v, name)
		}
	}
	return nil
}

// record numbers an evaluation, checks it against the replayed records and logs it.
func (e *engine) record(r Record) error {
	e.evals++
	r.Eval = e.evals
	r.Seed = evalSeed(e.cfg.Seed, r.Workload.Key())
	if r.Kind != "mfs" && r.Kind != "verify" && r.Kind != "reduce" && r.Energy < e.best {
		e.best = r.Energy
	}
	if r.Eval <= len(e.cfg.Replay) {
		old := e.cfg.Replay[r.Eval-1]
		if old.Kind != r.Kind || old.Accepted != r.Accepted || old.Workload.Key() != r.Workload.Key() {
			return fmt.Errorf("%w at evaluation %d: recorded %s %s (accepted %v), now %s %s (accepted %v); resume with the options of the first run",
				errReplayDiverged, r.Eval, old.Kind, old.Workload, old.Accepted, r.Kind, r.Workload, r.Accepted)
		}
		return nil
	}
	if e.cfg.Log != nil {
		if err := e.cfg.Log(r); err != nil {
			return fmt.Errorf("logging evaluation %d: %w", r.Eval, err)
		}
	}
	return nil
}

func (e *engine) progress() {
	if e.cfg.Progress == nil {
		return
	}
	best := e.best
	if math.IsInf(best, 1) {
		best = 0
	}
	e.cfg.Progress(Progress{Evaluations: e.evals, Budget: e.cfg.Budget, Anomalies: len(e.found),
		Skipped: e.skipped, BestEnergy: best, Elapsed: time.Since(e.start)})
}

// batch evaluates a round's proposals, as many as the budget still allows, and hands each result to apply in
// proposal order. It returns false when the search must stop.
func (e *engine) batch(props []Workload, apply func(i int, m Metrics) error) (bool, error) {
	n := min(len(props), e.cfg.Budget-e.evals)
	if n <= 0 {
		return false, nil
	}
	ms, _, ok, err := e.evaluate(props[:n])
	if err != nil {
		return false, err
	}
	for i := range ok {
		if e.evals >= e.cfg.Budget {
			break // an MFS took the rest of the budget
		}
		if err := apply(i, ms[i]); err != nil {
			return false, err
		}
	}
	e.progress()
	return ok == n && !e.done(), nil
}

// runRandom is the baseline: independent uniform points (skipping known MFS).
func (e *engine) runRandom() error {
	for {
		props := make([]Workload, e.cfg.Batch)
		for i := range props {
			props[i] = e.propose(func() Workload { return e.sp.Sample(e.rng) })
		}
		more, err := e.batch(props, func(i int, m Metrics) error {
			return e.step(props[i], m, "search", 0, "score", -score(e.objs, e.refs, e.cfg.GA.Weights, m), nil, true)
		})
		if err != nil || !more {
			return err
		}
	}
}

// step logs one search evaluation and handles an anomaly it found.
func (e *engine) step(w Workload, m Metrics, kind string, chain int, obj string, en float64, dE *float64, accepted bool) error {
	sym := e.cfg.Monitor.Check(m)
	id, isNew := e.anomalyOf(w, sym)
	if err := e.record(Record{Kind: kind, Chain: chain, Workload: w, Metrics: m, Symptom: sym, Objective: obj,
		Energy: en, DeltaE: dE, Accepted: accepted, Anomaly: id}); err != nil {
		return err
	}
	if isNew {
		return e.newAnomaly(id, w, m, sym)
	}
	return nil
}

type member struct {
	w     Workload
	score float64
}

// runGA is Lumina's genetic fuzzing: pick a configuration from the pool, mutate it, run it, score it, keep
// it if it beats the pool's median score, else keep it with probability p.
func (e *engine) runGA(pool []member) error {
	g := e.cfg.GA
	for {
		if len(pool) == 0 {
			pool = append(pool, member{e.sp.Sample(e.rng), 0})
		}
		props := make([]Workload, e.cfg.Batch)
		for i := range props {
			parent := pool[e.rng.IntN(len(pool))].w
			props[i] = e.propose(func() Workload {
				w := parent
				for range 1 + e.rng.IntN(g.MaxMutations) {
					w, _ = e.sp.Mutate(e.rng, w)
				}
				return w
			})
		}
		more, err := e.batch(props, func(i int, m Metrics) error {
			s := score(e.objs, e.refs, g.Weights, m)
			sym := e.cfg.Monitor.Check(m)
			_, isNew := e.anomalyOf(props[i], sym)
			keep := false
			switch {
			case isNew && e.cfg.MFS:
				// The point is inside the anomaly's MFS now; breeding from it would only revisit it.
			case s > median(pool):
				keep = true
			default:
				keep = e.rng.Float64() < g.KeepProb
			}
			if keep {
				pool = append(pool, member{props[i], s})
				if len(pool) > g.MaxPool {
					worst := 0
					for j, p := range pool {
						if p.score < pool[worst].score {
							worst = j
						}
					}
					pool = slices.Delete(pool, worst, worst+1)
				}
			}
			return e.step(props[i], m, "search", 0, "score", -s, nil, keep)
		})
		if err != nil || !more {
			return err
		}
	}
}

func median(pool []member) float64 {
	if len(pool) == 0 {
		return math.Inf(-1)
	}
	s := make([]float64, len(pool))
	for i, p := range pool {
		s[i] = p.score
	}
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type chain struct {
	cur      *Workload // nil: the next proposal is a random restart
	curVal   float64
	T        float64
	iter     int
	obj      int
	restarts int
	done     bool
}

// runSA is Collie's Algorithm 1 with the Metropolis rule, several chains side by side: each round every chain
// proposes one mutation of its point (skipping known MFS), the proposals run in parallel, and the results are
// applied chain by chain. A new anomaly sends its chain to a random point and the next objective.
func (e *engine) runSA(chains []*chain) error {
	sa := e.cfg.SA
	for {
		var props []Workload
		var who []int
		for k, c := range chains {
			if c.done {
				continue
			}
			var w Workload
			if c.cur == nil {
				w = e.propose(func() Workload { return e.sp.Sample(e.rng) })
			} else {
				cur := *c.cur
				w = e.propose(func() Workload { n, _ := e.sp.Mutate(e.rng, cur); return n })
			}
			props, who = append(props, w), append(who, k)
		}
		if len(props) == 0 {
			return nil // every chain used up its restarts
		}
		more, err := e.batch(props, func(i int, m Metrics) error {
			c := chains[who[i]]
			o := e.objs[c.obj]
			v := o.Value(m)
			en := energy(o, v, e.refs[o.Name])
			kind, accepted := "restart", true
			var dE *float64
			if c.cur != nil {
				d := DeltaE(o, c.curVal, v)
				dE, kind, accepted = &d, "search", Metropolis(d, c.T, e.rng)
			}
			if accepted {
				w := props[i]
				c.cur, c.curVal = &w, v
			}
			n := len(e.found)
			if err := e.step(props[i], m, kind, who[i]+1, o.Name, en, dE, accepted); err != nil {
				return err
			}
			if len(e.found) > n {
				// Algorithm 1 line 17: after a new anomaly, continue from another random point.
				c.cur, c.obj = nil, (c.obj+1)%len(e.objs)
			}
			if c.iter++; c.iter >= sa.Iterations {
				c.iter, c.T = 0, c.T*sa.Decay
				if c.T < sa.MinTemp {
					if c.restarts >= sa.Restarts {
						c.done = true
					} else {
						c.restarts++
						c.T, c.cur, c.obj = sa.StartTemp, nil, (c.obj+1)%len(e.objs)
					}
				}
			}
			return nil
		})
		if err != nil || !more {
			return err
		}
	}
}
