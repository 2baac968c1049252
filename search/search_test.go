package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/lumina-go/lumina/version"
)

func TestMonitorThresholds(t *testing.T) {
	mon := DefaultMonitor()
	line := Metrics{TxGbps: 190, TxMpps: 10, LimitGbps: 200, LimitMpps: 100}
	cases := []struct {
		name string
		m    Metrics
		want Symptom
	}{
		{"line rate", line, None},
		{"pause just above 0.1%", Metrics{PauseRatio: 0.00101, TxGbps: 190, LimitGbps: 200, LimitMpps: 100}, Pause},
		{"pause at 0.1% is not above it", Metrics{PauseRatio: 0.001, TxGbps: 190, LimitGbps: 200, LimitMpps: 100}, None},
		{"low bits but packets at the limit", Metrics{TxGbps: 100, TxMpps: 90, LimitGbps: 200, LimitMpps: 100}, None},
		{"both low", Metrics{TxGbps: 100, TxMpps: 50, LimitGbps: 200, LimitMpps: 100}, LowThroughput},
		{"rx direction busy", Metrics{TxGbps: 100, RxGbps: 170, TxMpps: 50, LimitGbps: 200, LimitMpps: 100}, None},
		{"pause wins over low throughput", Metrics{PauseRatio: 0.01, TxGbps: 10, LimitGbps: 200, LimitMpps: 100}, Pause},
		{"no limits: throughput not judged", Metrics{TxGbps: 1}, None},
	}
	for _, c := range cases {
		if got := mon.Check(c.m); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	strict := Monitor{PauseRatio: 0.01, LowFraction: 0.5}
	if got := strict.Check(Metrics{PauseRatio: 0.005, TxGbps: 110, TxMpps: 10, LimitGbps: 200, LimitMpps: 100}); got != None {
		t.Errorf("configured thresholds ignored: %q", got)
	}
}

func TestDeltaE(t *testing.T) {
	perf, diag := Objective{Name: "tx_bytes"}, Objective{Name: "miss", Diagnostic: true}
	if got := DeltaE(perf, 100, 80); got != -0.2 {
		t.Errorf("performance 100->80: %v, want (B-A)/A = -0.2", got)
	}
	if got := DeltaE(diag, 100, 200); got != -0.5 {
		t.Errorf("diagnostic 100->200: %v, want (A-B)/B = -0.5", got)
	}
	if got := DeltaE(diag, 200, 100); got != 1 {
		t.Errorf("diagnostic 200->100: %v, want 1", got)
	}
	if got := DeltaE(diag, 5, 0); math.IsInf(got, 0) || got <= 0 {
		t.Errorf("diagnostic to zero: %v, want a large finite positive", got)
	}
}

// TestCounterKinds: traffic counters are performance counters (minimized); misses, back-pressure, discards,
// buffer occupancy, bytes read again and pause durations are diagnostic (maximized), bytes in the name or not.
func TestCounterKinds(t *testing.T) {
	for name, perf := range map[string]bool{
		"tx_vport_rdma_unicast_bytes": true, "rx_vport_rdma_unicast_packets": true, "rx_bytes_phy": true,
		"tx_prio3_pause_duration": false, "rx_buffer_max_bytes": false, "rx_buffer_avg_bytes": false,
		"tx_staging_refetch_bytes": false, "qpc_cache_miss": false, "rx_discards_phy": false,
		"pcie_internal_back_pressure": false, "packet_seq_err": false, "rx_out_of_buffer": false,
	} {
		if got := isPerformanceCounter(name); got != perf {
			t.Errorf("%s: performance %v, want %v", name, got, perf)
		}
	}
}

// TestMetropolisRate checks that a worse move is accepted with probability exp(-dE/T), not Collie's 1-dE*T.
func TestMetropolisRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 43))
	const n = 200000
	for _, c := range []struct{ dE, T float64 }{{0.1, 1}, {1, 1}, {0.5, 0.25}, {2, 0.5}, {0.05, 0.01}} {
		acc := 0
		for range n {
			if Metropolis(c.dE, c.T, rng) {
				acc++
			}
		}
		p := math.Exp(-c.dE / c.T)
		sigma := math.Sqrt(p * (1 - p) / n)
		got := float64(acc) / n
		if math.Abs(got-p) > 5*sigma+1e-9 {
			t.Errorf("dE %v T %v: accepted %.5f, want exp(-dE/T) = %.5f (±%.5f)", c.dE, c.T, got, p, 5*sigma)
		}
	}
	for range 1000 {
		if !Metropolis(-0.3, 0.01, rng) || !Metropolis(0, 1, rng) {
			t.Fatal("a better or equal move must always be accepted")
		}
	}
	if Metropolis(0.1, 0, rng) {
		t.Error("at zero temperature a worse move must be rejected")
	}
}

func TestSpaceSamplingAndMutation(t *testing.T) {
	sp := DefaultSpace()
	sp.MaxEvents = 2
	rng := rand.New(rand.NewPCG(1, 2))
	changed := map[string]int{}
	qps := 0
	for i := range 3000 {
		w := sp.Sample(rng)
		if err := sp.Validate(w); err != nil {
			t.Fatalf("sample %d %s invalid: %v", i, w, err)
		}
		if w.NumQPs <= 16 {
			qps++
		}
		n, dim := sp.Mutate(rng, w)
		if err := sp.Validate(n); err != nil {
			t.Fatalf("mutation of %s on %s gave invalid %s: %v", w, dim, n, err)
		}
		if dim == "" || n.Key() == w.Key() {
			t.Fatalf("mutation of %s changed nothing", w)
		}
		changed[dim]++
	}
	for _, d := range mutableDims {
		if changed[d] == 0 {
			t.Errorf("dimension %s never mutated", d)
		}
	}
	// num_mrs counts per QP; the host's total stays within Collie's 200K.
	over := sp.Sample(rng)
	over.NumQPs, over.NumMRs = 1000, 1000
	if err := sp.Validate(over); err == nil || !strings.Contains(err.Error(), "above max_total_mrs 200000") {
		t.Errorf("1000 QPs x 1000 MRs: error %v, want the total bound", err)
	}
	sp.repair(&over)
	if over.NumMRs != 200 {
		t.Errorf("repair left %d MRs per QP for 1000 QPs, want 200", over.NumMRs)
	}
	// Log sampling: about ln(17)/ln(20001) = 29% of points have at most 16 QPs (uniform sampling: 0.08%).
	if qps < 600 || qps > 1150 {
		t.Errorf("%d of 3000 samples with <= 16 QPs, want about 860", qps)
	}
	bad := []struct {
		f    func(*Workload)
		want string
	}{
		{func(w *Workload) { w.QPType, w.Opcode = "ud", "write" }, "opcode"},
		{func(w *Workload) { w.WQEBatch, w.WQDepth = 64, 32 }, "wq_depth 32 below wqe_batch 64"},
		{func(w *Workload) { w.QPType, w.Opcode, w.MTU = "ud", "send", 1024 }, "exceeds the mtu"},
		{func(w *Workload) { w.MTU = 1500 }, "mtu 1500"},
		{func(w *Workload) { w.NumQPs = 0 }, "num_qps 0 outside"},
		{func(w *Workload) { w.MsgSizes = nil }, "msg_sizes has 0 sizes"},
	}
	for _, b := range bad {
		w := OrdinaryWorkload()
		b.f(&w)
		if err := sp.Validate(w); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: error %v, want one containing %q", w, err, b.want)
		}
	}
}

func TestMFSJSONAndMatch(t *testing.T) {
	m := MFS{"qp_type": {Values: []string{"rc"}}, "mtu": {Ints: []int{1024}}, "num_qps": {Low: 16, High: 64},
		"msg_mix": {Low: 1024, High: 65536}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"msg_mix":[1024,65536],"mtu":[1024],"num_qps":[16,64],"qp_type":["rc"]}`; string(b) != want {
		t.Errorf("json %s, want %s", b, want)
	}
	var back MFS
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(back); !bytes.Equal(got, b) {
		t.Errorf("round trip %s, want %s", got, b)
	}
	for _, bad := range []string{`{"qps":[1,2]}`, `{"num_qps":[1]}`, `{"mtu":["x"]}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	w := OrdinaryWorkload()
	w.MTU, w.NumQPs, w.MsgSizes = 1024, 32, []int{65536, 512}
	if !m.Match(w) {
		t.Errorf("%s should match %s", w, m)
	}
	w.MsgSizes = []int{65536, 2048}
	if m.Match(w) {
		t.Errorf("%s has no request <= 1K and should not match", w)
	}
}

// findings maps each planted region of syn to the first evaluation an anomaly inside it was found at.
func findings(syn *Synthetic, res *Result) map[string]int {
	out := map[string]int{}
	for _, a := range res.Anomalies {
		for _, r := range syn.Inside(a.Workload) {
			if _, ok := out[syn.Regions[r].Name]; !ok {
				out[syn.Regions[r].Name] = a.FoundAt
			}
		}
	}
	return out
}

func TestAlgorithmsFindPlantedAnomalies(t *testing.T) {
	for _, algo := range []string{AlgoRandom, AlgoGA, AlgoSA} {
		t.Run(algo, func(t *testing.T) {
			syn := SyntheticF()
			cfg := DefaultConfig()
			cfg.Algo, cfg.Budget, cfg.Seed = algo, 3000, 5
			res, err := Search(context.Background(), syn, cfg)
			if err != nil {
				t.Fatal(err)
			}
			found := findings(syn, res)
			if len(found) < 5 {
				t.Errorf("found regions %v, want at least 5 of %d within 3000 evaluations", found, len(syn.Regions))
			}
			for _, a := range res.Anomalies {
				in := syn.Inside(a.Workload)
				if len(in) == 0 {
					t.Errorf("anomaly %d at %s is in no planted region", a.ID, a.Workload)
				}
				if !a.MFS.Match(a.Workload) || !a.MFS.Match(a.Reproducer) {
					t.Errorf("anomaly %d: MFS %s does not hold its point or reproducer", a.ID, a.MFS)
				}
				m, _ := syn.Evaluate(context.Background(), a.Reproducer, a.Seed)
				if got := cfg.Monitor.Check(m); got != a.Symptom {
					t.Errorf("anomaly %d: reproducer %s shows %q, want %q", a.ID, a.Reproducer, got, a.Symptom)
				}
			}
			t.Logf("%s: regions %v", algo, found)
		})
	}
}

// recordingSearch runs a search and returns its records.
func recordingSearch(t *testing.T, ev Evaluator, cfg Config) (*Result, []Record) {
	t.Helper()
	var recs []Record
	cfg.Log = func(r Record) error { recs = append(recs, r); return nil }
	res, err := Search(context.Background(), ev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res, recs
}

func TestMFSProbesCountedAndPointsSkipped(t *testing.T) {
	syn := SyntheticF()
	cfg := DefaultConfig()
	cfg.Budget = 2000
	res, recs := recordingSearch(t, syn, cfg)
	if len(res.Anomalies) == 0 || res.Skipped == 0 {
		t.Fatalf("%d anomalies, %d skipped: want some of both", len(res.Anomalies), res.Skipped)
	}
	if len(recs) != res.Evaluations {
		t.Errorf("%d records for %d evaluations", len(recs), res.Evaluations)
	}
	for _, a := range res.Anomalies {
		probes := 0
		for _, r := range recs {
			if (r.Kind == "mfs" || r.Kind == "verify" || r.Kind == "reduce") && r.Anomaly == a.ID {
				probes++
			}
		}
		if probes != a.MFSProbes || probes == 0 {
			t.Errorf("anomaly %d: %d probe records, MFSProbes %d", a.ID, probes, a.MFSProbes)
		}
		// After the MFS is known (and the proposals already drawn have run), nothing inside it is evaluated.
		after := a.FoundAt + a.MFSProbes + cfg.Batch
		for _, r := range recs[min(after, len(recs)):] {
			if (r.Kind == "search" || r.Kind == "restart") && a.MFS.Match(r.Workload) {
				t.Errorf("evaluation %d (%s) lies in anomaly %d's MFS %s, found at %d", r.Eval, r.Workload, a.ID, a.MFS, a.FoundAt)
				break
			}
		}
	}
	// Probes are cached: probing the same workloads again costs nothing.
	e := &engine{cfg: cfg, ctx: context.Background(), ev: syn, cache: map[string]Metrics{}, replayed: map[string]Metrics{},
		workers: 2, refs: map[string]float64{}}
	e.sp, e.msp = &e.cfg.Space, &e.cfg.Space
	ws := []Workload{OrdinaryWorkload(), OrdinaryWorkload()}
	ws[1].NumQPs = 7
	if _, err := e.probe(ws, "mfs", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.probe(append(ws, ws[0]), "mfs", 1); err != nil {
		t.Fatal(err)
	}
	if e.evals != 2 {
		t.Errorf("%d probe evaluations for 2 distinct workloads probed twice", e.evals)
	}
	// A cached probe next to a new one: the new one is measured and its symptom lands in its own slot.
	fresh := OrdinaryWorkload()
	fresh.QPType, fresh.Opcode, fresh.WQEBatch, fresh.WQDepth = "ud", "send", 64, 256
	fresh.MsgSizes = []int{2048}
	syms, err := e.probe([]Workload{ws[0], fresh}, "mfs", 1)
	if err != nil {
		t.Fatal(err)
	}
	if e.evals != 3 || syms[0] != None || syms[1] != Pause {
		t.Errorf("cached + new probe: %d evaluations, symptoms %v; want 3 and [none pause] (ud-batch-depth region)", e.evals, syms)
	}

	// Without MFS nothing is skipped and the search keeps reporting points of the regions it already found.
	cfg.MFS = false
	res2, _ := recordingSearch(t, syn, cfg)
	if res2.Skipped != 0 || len(res2.Anomalies) <= len(findings(syn, res2)) {
		t.Errorf("without MFS: %d skipped, %d anomalies over %d regions; want none skipped and repeats",
			res2.Skipped, len(res2.Anomalies), len(findings(syn, res2)))
	}
}

// TestBudgetBoundsMFS: the budget counts MFS probes and is never exceeded; an MFS the budget cut short still
// holds its point and says so.
func TestBudgetBoundsMFS(t *testing.T) {
	syn := SyntheticF()
	full := DefaultConfig()
	full.Budget = 2000
	ref, refRecs := recordingSearch(t, syn, full)
	if len(ref.Anomalies) == 0 {
		t.Fatal("no anomaly to cut")
	}
	first := ref.Anomalies[0]
	cfg := DefaultConfig()
	cfg.Budget = first.FoundAt + first.MFSProbes/2
	res, recs := recordingSearch(t, syn, cfg)
	if res.Evaluations > cfg.Budget || len(recs) != res.Evaluations {
		t.Fatalf("%d evaluations, %d records for a budget of %d", res.Evaluations, len(recs), cfg.Budget)
	}
	if len(res.Anomalies) == 0 {
		t.Fatalf("no anomaly within %d evaluations; the full run found one at %d", cfg.Budget, first.FoundAt)
	}
	a := res.Anomalies[0]
	if !a.MFSCut || !a.MFS.Match(a.Workload) || a.FoundAt != first.FoundAt {
		t.Errorf("cut anomaly: found at %d (full run %d), mfs_cut %v, MFS %s holds its point %v",
			a.FoundAt, first.FoundAt, a.MFSCut, a.MFS, a.MFS.Match(a.Workload))
	}
	if first.MFSCut {
		t.Errorf("the full run's first MFS was cut")
	}
	// The cut run is a prefix of the longer one, so resuming it with the larger budget continues the MFS.
	for i, r := range recs {
		if r.Kind != refRecs[i].Kind || r.Workload.Key() != refRecs[i].Workload.Key() {
			t.Fatalf("evaluation %d: %s %s, the longer run has %s %s", i+1, r.Kind, r.Workload, refRecs[i].Kind, refRecs[i].Workload)
		}
	}
}

// TestTwoCausesNotGeneralized: a point inside two anomaly regions stays anomalous whichever single factor
// changes, so one factor at a time calls every dimension irrelevant and its simplest point is normal. That set
// is not kept (Collie drops it); the point is reduced to one cause instead, whose feature set is confirmed.
func TestTwoCausesNotGeneralized(t *testing.T) {
	syn := &Synthetic{LimitGbps: 100, LimitMpps: 100, Regions: []Region{
		{Name: "bi", Symptom: Pause, Counter: "a", Directions: []string{"bi"}},
		{Name: "gpu", Symptom: Pause, Counter: "b", Memories: []string{"gpu-same-switch"}},
	}}
	cfg := DefaultConfig()
	e := &engine{cfg: cfg, ctx: context.Background(), ev: syn, cache: map[string]Metrics{}, replayed: map[string]Metrics{},
		workers: 2, refs: map[string]float64{}, seenKeys: map[string]int{}, start: time.Now()}
	e.sp, e.msp = &e.cfg.Space, &e.cfg.Space
	w := OrdinaryWorkload()
	w.Direction, w.Memory, w.NumQPs = "bi", "gpu-same-switch", 40
	m, err := syn.Evaluate(context.Background(), w, 1)
	if err != nil || cfg.Monitor.Check(m) != Pause {
		t.Fatalf("the point: %v, symptom %s", err, cfg.Monitor.Check(m))
	}
	if err := e.newAnomaly(1, w, m, Pause); err != nil {
		t.Fatal(err)
	}
	a := e.found[0]
	if a.Unconfirmed == nil || !a.Unconfirmed.Match(OrdinaryWorkload()) {
		t.Errorf("one-factor set %v: want it kept as unconfirmed, holding everything", a.Unconfirmed)
	}
	want := MFS{"memory": {Values: []string{"gpu-same-switch"}}}
	if a.Reduced == nil || a.Reduced.Direction != "uni" || a.Reduced.Memory != "gpu-same-switch" || a.Reduced.NumQPs != 1 {
		t.Fatalf("reduced point %v: want the ordinary workload with gpu-same-switch memory", a.Reduced)
	}
	if a.MFS.String() != want.String() || !a.Minimal || !a.MFS.Match(w) || a.MFS.Match(OrdinaryWorkload()) {
		t.Errorf("MFS %s (minimal %v, holds the point %v, holds the ordinary workload %v): want %s", a.MFS, a.Minimal,
			a.MFS.Match(w), a.MFS.Match(OrdinaryWorkload()), want)
	}
	if a.Reproducer.Memory != "gpu-same-switch" || a.Reproducer.Direction != "uni" {
		t.Errorf("reproducer %s: want the ordinary workload on GPU memory", a.Reproducer)
	}
}

func readAll(t *testing.T, dir string) (log, anomalies string) {
	t.Helper()
	l, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	a, err := os.ReadFile(filepath.Join(dir, AnomaliesFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(l), strings.ReplaceAll(string(a), dir, "DIR")
}

func TestDeterministicWhateverTheCores(t *testing.T) {
	for _, algo := range []string{AlgoRandom, AlgoGA, AlgoSA} {
		cfg := DefaultConfig()
		cfg.Algo, cfg.Budget, cfg.Seed = algo, 800, 11
		d1, d2, d3 := t.TempDir(), t.TempDir(), t.TempDir()
		cfg.Workers = 1
		if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: d1, Profile: "synthetic"}); err != nil {
			t.Fatal(err)
		}
		cfg.Workers = 4
		if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: d2, Profile: "synthetic"}); err != nil {
			t.Fatal(err)
		}
		cfg.Seed = 12
		if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: d3, Profile: "synthetic"}); err != nil {
			t.Fatal(err)
		}
		l1, a1 := readAll(t, d1)
		l2, a2 := readAll(t, d2)
		l3, _ := readAll(t, d3)
		if l1 != l2 || a1 != a2 {
			t.Errorf("%s: same seed, 1 and 4 workers: outputs differ", algo)
		}
		if l1 == l3 {
			t.Errorf("%s: seeds 11 and 12 gave the same search", algo)
		}
		if n := strings.Count(l1, "\n"); n < 800 {
			t.Errorf("%s: %d lines for a budget of 800", algo, n)
		}
	}
}

// countingEvaluator counts the evaluations that reach the evaluator.
type countingEvaluator struct {
	Evaluator
	n atomic.Int64
}

func (c *countingEvaluator) Evaluate(ctx context.Context, w Workload, seed uint64) (Metrics, error) {
	c.n.Add(1)
	return c.Evaluator.Evaluate(ctx, w, seed)
}

func TestResumeEqualsUninterrupted(t *testing.T) {
	for _, algo := range []string{AlgoGA, AlgoSA} {
		cfg := DefaultConfig()
		cfg.Algo, cfg.Seed = algo, 3
		full, part := t.TempDir(), t.TempDir()
		cfg.Budget = 1500
		if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: full, Profile: "synthetic"}); err != nil {
			t.Fatal(err)
		}
		cfg.Budget = 700
		if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: part, Profile: "synthetic"}); err != nil {
			t.Fatal(err)
		}
		// A write cut short by a crash: half a line without its newline.
		f, _ := os.OpenFile(filepath.Join(part, LogFile), os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"eval":99999,"kind":"sea`)
		f.Close()
		recs, _, err := ReadLog(filepath.Join(part, LogFile))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: part, Profile: "synthetic"}); err == nil {
			t.Errorf("%s: a second search into a directory with a log was not refused", algo)
		}
		cfg.Budget = 1500
		ev := &countingEvaluator{Evaluator: SyntheticF()}
		res, err := RunDir(context.Background(), ev, cfg, DirOptions{Dir: part, Profile: "synthetic", Resume: true})
		if err != nil {
			t.Fatal(err)
		}
		lf, af := readAll(t, full)
		lp, ap := readAll(t, part)
		if lf != lp || af != ap {
			t.Errorf("%s: resumed search differs from the uninterrupted one", algo)
		}
		// Only what comes after the records is evaluated (the last MFS may take the count past the budget).
		if calls := ev.n.Load(); calls > int64(res.Evaluations-len(recs)) || calls == 0 {
			t.Errorf("%s: resuming after %d recorded evaluations called the evaluator %d times", algo, len(recs), calls)
		}
		other := cfg
		other.Seed = 4
		_, err = RunDir(context.Background(), SyntheticF(), other, DirOptions{Dir: part, Profile: "synthetic", Resume: true})
		if err == nil || !strings.Contains(err.Error(), "seed") {
			t.Errorf("%s: resuming with another seed: %v, want an error naming the seed", algo, err)
		}
	}
}

func TestRestrictedSpace(t *testing.T) {
	base := DefaultSpace()
	run := func(src string) *Result {
		t.Helper()
		sp, err := ParseRestrict("space.yaml", []byte(src), base)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		full := base
		cfg.Space, cfg.MFSSpace, cfg.Budget = sp, &full, 600
		res, recs := recordingSearch(t, SyntheticF(), cfg)
		for _, r := range recs {
			if (r.Kind == "search" || r.Kind == "warmup" || r.Kind == "restart") && sp.Validate(r.Workload) != nil {
				t.Fatalf("evaluation %d %s outside the restricted space: %v", r.Eval, r.Workload, sp.Validate(r.Workload))
			}
		}
		return res
	}
	// An RPC library's space: RC, WRITE, few QPs, one direction, 4..64 KB requests. No planted region meets it.
	clean := run("qp_type: [rc]\nopcode: [write]\nnum_qps: [1, 8]\ndirection: [uni]\nmsg_sizes: [4096, 65536]\nwqe_batch: [1, 8]\n")
	if len(clean.Anomalies) != 0 {
		t.Errorf("clean space: %d anomalies, first %s", len(clean.Anomalies), clean.Anomalies[0].MFS)
	}
	// A space that holds the UD batch anomaly (Collie #1).
	dirty := run("qp_type: [ud]\nwqe_batch: [32, 128]\nwq_depth: [128, 1024]\n")
	if len(dirty.Anomalies) == 0 {
		t.Fatal("the space holding ud-batch-depth reported no anomaly")
	}
	if got := mustJSON(t, dirty.Anomalies[0].MFS); got != `{"qp_type":["ud"],"wq_depth":[256,1024],"wqe_batch":[64,128]}` {
		t.Errorf("restricted MFS %s, want the planted conditions over the whole space", got)
	}
	// Many MRs per QP leave room for fewer QPs: every sample and mutation stays within the bound.
	few, err := ParseRestrict("space.yaml", []byte("num_mrs: [1000, 2000]\n"), base)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range 300 {
		w := few.Sample(rng)
		n, _ := few.Mutate(rng, w)
		if err := few.Validate(w); err != nil || few.Validate(n) != nil {
			t.Fatalf("sample %d %s: %v; its mutation %s: %v", i, w, err, n, few.Validate(n))
		}
	}
	// The MR bound can be lifted for an application that registers more.
	big, err := ParseRestrict("space.yaml", []byte("num_qps: [1000, 1000]\nnum_mrs: [1000, 1000]\nmax_total_mrs: 1000000\n"), base)
	if err != nil || big.MaxTotalMRs != 1000000 {
		t.Errorf("lifting max_total_mrs: %v, bound %d", err, big.MaxTotalMRs)
	}
	for _, bad := range []struct{ src, want string }{
		{"qp_type: [rc]\nqps: [1, 2]\n", "space.yaml:2:1: unknown dimension \"qps\""},
		{"num_qps: [10, 1]\n", "space.yaml:1:1: num_qps: expected [LOW, HIGH]"},
		{"num_qps: [1, 30000]\n", "<= 20000"},
		{"mtu: [1500]\n", "space.yaml:1:7: mtu: 1500 is not one of"},
		{"qp_type: [ud]\nopcode: [read]\n", "restricted space is empty"},
		{"qp_type: rc\n", "expected a non-empty list"},
		{"num_qps: [1000, 1000]\nnum_mrs: [1000, 1000]\n", "raise max_total_mrs"},
		{"max_total_mrs: -1\n", "space.yaml:1:1: max_total_mrs: expected a number of MRs"},
	} {
		_, err := ParseRestrict("space.yaml", []byte(bad.src), base)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.src, err, bad.want)
		}
	}
}

func TestOutputsFollowTheContract(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Budget = 1200
	res, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: dir, Profile: "cx6vpi-200g"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, AnomaliesFile))
	var list []map[string]json.RawMessage
	if err := version.UnmarshalList(data, AnomaliesKey, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 || len(list) != len(res.Anomalies) {
		t.Fatalf("%d anomalies in the file, %d found", len(list), len(res.Anomalies))
	}
	dims := []string{"qp_type", "opcode", "num_qps", "mtu", "wqe_batch", "sge", "wq_depth", "num_mrs", "mr_size",
		"msg_sizes", "direction", "memory"}
	for i, a := range list {
		for _, k := range []string{"id", "symptom", "mfs", "scenario", "found_at_evaluation", "counters"} {
			if _, ok := a[k]; !ok {
				t.Errorf("anomaly %d lacks %q", i, k)
			}
		}
		var sym string
		json.Unmarshal(a["symptom"], &sym)
		if sym != "pause" && sym != "low-throughput" {
			t.Errorf("anomaly %d: symptom %q", i, sym)
		}
		var mfs map[string][]json.RawMessage
		if err := json.Unmarshal(a["mfs"], &mfs); err != nil || len(mfs) == 0 {
			t.Errorf("anomaly %d: mfs %s is not a map of lists", i, a["mfs"])
		}
		for k := range mfs {
			if !slices.Contains(dims, k) && k != "msg_min" && k != "msg_max" && k != "events" {
				t.Errorf("anomaly %d: mfs dimension %q is not a contract name", i, k)
			}
		}
		var path string
		json.Unmarshal(a["scenario"], &path)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("anomaly %d: scenario: %v", i, err)
		}
		var sc struct {
			Testbed   string `yaml:"testbed"`
			Seed      uint64 `yaml:"seed"`
			Requester struct {
				NIC struct{ Type string } `yaml:"nic"`
			} `yaml:"requester"`
			Responder struct {
				NIC struct{ Type string } `yaml:"nic"`
			} `yaml:"responder"`
			Workload map[string]any `yaml:"workload"`
		}
		if err := yaml.UnmarshalWithOptions(src, &sc, yaml.Strict()); err != nil {
			t.Fatalf("anomaly %d: scenario does not parse: %v\n%s", i, err, src)
		}
		if sc.Testbed != "sim" || sc.Requester.NIC.Type != "cx6vpi-200g" || sc.Responder.NIC.Type != "cx6vpi-200g" {
			t.Errorf("anomaly %d: scenario header %+v", i, sc)
		}
		for _, d := range dims {
			if _, ok := sc.Workload[d]; !ok {
				t.Errorf("anomaly %d: scenario workload lacks %s", i, d)
			}
		}
		// The scenario's workload is the reproducer, dimension for dimension.
		wb, _ := json.Marshal(sc.Workload)
		var w Workload
		json.Unmarshal(wb, &w)
		if w.Key() != res.Anomalies[i].Reproducer.Key() || sc.Seed != res.Anomalies[i].Seed {
			t.Errorf("anomaly %d: scenario workload %s seed %d, reproducer %s seed %d", i, w, sc.Seed,
				res.Anomalies[i].Reproducer, res.Anomalies[i].Seed)
		}
	}
	logData, _ := os.ReadFile(filepath.Join(dir, LogFile))
	lines := strings.Split(strings.TrimSuffix(string(logData), "\n"), "\n")
	if len(lines) != res.Evaluations {
		t.Errorf("%d log lines for %d evaluations", len(lines), res.Evaluations)
	}
	var first map[string]json.RawMessage
	json.Unmarshal([]byte(lines[0]), &first)
	for _, k := range []string{"eval", "workload", "metrics", "energy", "accepted"} {
		if _, ok := first[k]; !ok {
			t.Errorf("log line lacks %q: %s", k, lines[0])
		}
	}
}

type failingEvaluator struct {
	m        Metrics
	failFrom int // QPs from which it fails
}

func (f failingEvaluator) Evaluate(ctx context.Context, w Workload, seed uint64) (Metrics, error) {
	if w.NumQPs >= f.failFrom {
		return Metrics{}, errors.New("simulator exploded")
	}
	return f.m, nil
}

func TestEvaluatorFailuresAndCancellation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Budget = 200
	_, err := Search(context.Background(), failingEvaluator{Metrics{TxGbps: 1}, 100}, cfg)
	if err == nil || !strings.Contains(err.Error(), "simulator exploded") || !strings.Contains(err.Error(), "qps=") {
		t.Errorf("evaluator error: %v, want it wrapped with the workload", err)
	}
	_, err = Search(context.Background(), failingEvaluator{Metrics{TxGbps: math.NaN()}, math.MaxInt}, cfg)
	if err == nil || !strings.Contains(err.Error(), "NaN for tx_gbps") {
		t.Errorf("NaN metrics: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	cfg.Budget = 100000
	cfg.Progress = func(p Progress) {
		if n++; n == 5 {
			cancel()
		}
	}
	res, err := Search(ctx, SyntheticF(), cfg)
	if err != nil || !res.Interrupted || res.Evaluations >= 100000 {
		t.Errorf("cancelled search: err %v, interrupted %v, %d evaluations", err, res.Interrupted, res.Evaluations)
	}
	bad := DefaultConfig()
	bad.Algo = "bo"
	if _, err := Search(context.Background(), SyntheticF(), bad); err == nil || !strings.Contains(err.Error(), `"bo"`) {
		t.Errorf("unknown algorithm: %v", err)
	}
}

func TestEvaluatorFor(t *testing.T) {
	if _, err := EvaluatorFor("cx6vpi-200g-test-none"); err == nil || !strings.Contains(err.Error(), "synthetic, ") {
		t.Errorf("missing profile: %v, want an error listing the profiles with an evaluator", err)
	}
	if _, err := EvaluatorFor("cx5"); err == nil {
		t.Error("cx5 has no micro section, yet it has an evaluator")
	}
	if ev, err := EvaluatorFor(SyntheticProfile); err != nil || ev == nil {
		t.Errorf("synthetic: %v", err)
	}
	if ev, err := EvaluatorFor("cx6vpi-200g"); err != nil || ev == nil {
		t.Errorf("cx6vpi-200g: %v", err)
	}
	if p := Profiles(); !slices.Contains(p, "synthetic") || !slices.Contains(p, "cx6vpi-200g") || slices.Contains(p, "cx5") ||
		!slices.IsSorted(p) {
		t.Errorf("Profiles() = %v", p)
	}
}

// TestPerformanceSignals: with signals "performance" the search drives only the counters every NIC has, and
// an unknown signals value is refused.
func TestPerformanceSignals(t *testing.T) {
	objs := performanceOnly([]Objective{{Name: "rx_wqe_cache_miss", Diagnostic: true}, {Name: objPause, Diagnostic: true},
		{Name: "tx_vport_rdma_unicast_bytes"}, {Name: "tx_prio3_pause_duration", Diagnostic: true}, {Name: "mtt_cache_miss", Diagnostic: true}})
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != objPause+",tx_vport_rdma_unicast_bytes,tx_prio3_pause_duration" {
		t.Errorf("performance objectives %v", names)
	}
	if got := performanceOnly([]Objective{{Name: "qpc_cache_miss", Diagnostic: true}}); len(got) != 1 || got[0].Name != objThroughput {
		t.Errorf("only diagnostic counters: %v, want throughput alone", got)
	}
	cfg := DefaultConfig()
	cfg.Signals = "diag"
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), `signals "diag"`) {
		t.Errorf("signals diag: %v", err)
	}
	cfg.Signals, cfg.Budget, cfg.Algo = SignalsPerformance, 60, AlgoSA
	res, err := Search(context.Background(), SyntheticF(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objectives {
		if !(o.Name == objThroughput || o.Name == objPause || isPerformanceCounter(o.Name) || strings.Contains(o.Name, "pause_duration")) {
			t.Errorf("a performance-only search drives %s", o.Name)
		}
	}
	if len(res.Objectives) == 0 {
		t.Error("no objectives")
	}
}

// TestDirPublished: with DirOptions.Published every anomaly of anomalies.json carries the published ids the
// callback gives for the point the search hit ([] where it gives none); without it the field is absent.
func TestDirPublished(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Budget, cfg.Seed = 600, 5
	with, without := t.TempDir(), t.TempDir()
	pub := func(w Workload) []int {
		if w.Direction == "bi" {
			return []int{7}
		}
		return nil
	}
	res, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: with, Profile: "synthetic", Published: pub})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: without, Profile: "synthetic"}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Anomalies []struct {
			Workload  Workload `json:"workload"`
			Published *[]int   `json:"published"`
		} `json:"anomalies"`
	}
	b, err := os.ReadFile(filepath.Join(with, AnomaliesFile))
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("anomalies.json: %v", err)
	}
	if len(doc.Anomalies) == 0 || len(doc.Anomalies) != len(res.Anomalies) {
		t.Fatalf("%d anomalies written, %d found: want the same, and some", len(doc.Anomalies), len(res.Anomalies))
	}
	bi := 0
	for i, a := range doc.Anomalies {
		want := []int{}
		if a.Workload.Direction == "bi" {
			want = []int{7}
			bi++
		}
		if a.Published == nil || !slices.Equal(*a.Published, want) {
			t.Errorf("anomaly %d (%s): published %v, want %v", i+1, a.Workload.Direction, a.Published, want)
		}
	}
	if bi == 0 || bi == len(doc.Anomalies) {
		t.Errorf("all %d anomalies on one side of the callback (bi: %d): the test needs both", len(doc.Anomalies), bi)
	}
	b, err = os.ReadFile(filepath.Join(without, AnomaliesFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"published"`) {
		t.Errorf("without a Published callback anomalies.json names published anomalies:\n%s", b)
	}
}
