// Command calibrate fits a simulated profile's micro-architecture parameters to Collie's published conditions
// (search/collie/anomalies.yaml): coordinate descent over the numeric micro fields, each tried at a few
// multiples of its value, keeping a change only when the agreement on a seeded sample of random points rises
// and every constraint still holds: each published trigger of the profile's subsystem shows its symptom
// (#9's on the profile with PCIe relaxed ordering as the catalog's profile needs it), and perftest-like
// workloads (RC, 64 KB, MTU 4096, 1/8/64 QPs, post lists of 1 and 16, one and both directions) reach line
// rate without pause. It prints each accepted change and, at the end, the changed fields as profile YAML
// paths; it writes nothing. Calibrate on one sample seed and judge the result on another
// (`go run ./bench/agreement`, seed 1), so the fit is not to the points it is measured on.
//
//	go run ./bench/calibrate -profile cx6vpi-200g -n 300 -seed 2
//	go run ./bench/calibrate -profile p2100g -only rx. -rounds 1
//	go run ./bench/calibrate -profile p2100g=try.yaml   # a profile file, against p2100g's anomalies
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/lumina-go/lumina/micro"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/search/collie"
)

func main() {
	prof := flag.String("profile", "cx6vpi-200g", "profile (NAME=FILE.yaml: a profile file judged against NAME's anomalies)")
	n := flag.Int("n", 300, "random points in the calibration sample")
	seed := flag.Uint64("seed", 2, "calibration sample seed (judge the result on another: bench/agreement uses 1)")
	rounds := flag.Int("rounds", 2, "passes over the parameters")
	only := flag.String("only", "", "comma-separated prefixes of the fields to vary (e.g. rx.,cache.; default: all but the fixed ones)")
	skip := flag.String("skip", "", "comma-separated prefixes of fields to leave alone, besides the fixed ones")
	workers := flag.Int("workers", 0, "evaluations in parallel (0: GOMAXPROCS)")
	flag.Parse()
	if err := run(*prof, *n, *seed, *rounds, split(*only), split(*skip), *workers); err != nil {
		fmt.Fprintln(os.Stderr, "calibrate:", err)
		os.Exit(2)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// fixed are the fields a calibration must not move: the published limits low throughput is judged against
// (message rate, PCIe bandwidth), sizes the hardware documents, and the pause priority.
var fixed = []string{"max-mpps", "max-mpps-per-qp", "pcie.read-gbps", "pcie.write-gbps", "pcie.read-request-bytes",
	"tx.wqe-base-bytes", "tx.wqe-sge-bytes", "rx.wqe-bytes", "rx.pause-priority", "cache.qpc-bytes",
	"cache.mtt-page-bytes", "cache.mtt-bytes", "rx.xon-bytes", "tx.loopback-gbps", "pcie.relaxed-ordering"}

// field is one numeric micro field, found by reflection, with its YAML path.
type field struct {
	path  string
	index []int
}

func fields(t reflect.Type, prefix string, index []int) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		idx := append(slices.Clone(index), i)
		switch f.Type.Kind() {
		case reflect.Struct:
			out = append(out, fields(f.Type, prefix+tag+".", idx)...)
		case reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
			out = append(out, field{prefix + tag, idx})
		}
	}
	return out
}

// get reads a field as a number (a switch as 0 or 1).
func get(m *rnic.MicroArch, f field) float64 {
	v := reflect.ValueOf(m).Elem().FieldByIndex(f.index)
	switch v.Kind() {
	case reflect.Float64:
		return v.Float()
	case reflect.Bool:
		if v.Bool() {
			return 1
		}
		return 0
	}
	return float64(v.Int())
}

func set(m *rnic.MicroArch, f field, x float64) {
	v := reflect.ValueOf(m).Elem().FieldByIndex(f.index)
	switch v.Kind() {
	case reflect.Float64:
		v.SetFloat(x)
	case reflect.Bool:
		v.SetBool(x != 0)
	default:
		v.SetInt(int64(math.Round(x)))
	}
}

func isBool(m *rnic.MicroArch, f field) bool {
	return reflect.ValueOf(m).Elem().FieldByIndex(f.index).Kind() == reflect.Bool
}

// candidates are the values tried for a field: halved, three quarters, one and a half, doubled (integers
// rounded, distinct, not below 1).
func candidates(v float64, isInt bool) []float64 {
	var out []float64
	for _, k := range []float64{0.5, 0.75, 1.5, 2} {
		x := v * k
		if isInt {
			x = math.Round(x)
			if x < 1 {
				x = 1
			}
		}
		if x != v && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

type calib struct {
	name    string // the catalog profile
	cat     *collie.Catalog
	entry   *collie.Profile
	sp      search.Space
	n       int
	seed    uint64
	workers int
	// triggers: each published trigger of the subsystem with the relaxed ordering its catalog profile has.
	triggers []trig
}

type trig struct {
	id      int
	relaxed bool
	low     bool
	w       scenario.Workload
}

func run(arg string, n int, seed uint64, rounds int, only, skip []string, workers int) error {
	cat, err := collie.Load()
	if err != nil {
		return err
	}
	name, file, ok := strings.Cut(arg, "=")
	if !ok {
		file = name
	}
	entry, err := cat.Profile(name)
	if err != nil {
		return err
	}
	p, err := rnic.LoadProfile(file)
	if err != nil {
		return err
	}
	if p.Micro == nil {
		return fmt.Errorf("profile %s has no micro section", p.Name)
	}
	sp, err := search.ProfileSpace(file, search.DefaultSpace())
	if err != nil {
		return err
	}
	c := &calib{name: name, cat: cat, entry: entry, sp: sp, n: n, seed: seed, workers: workers}
	for _, cp := range cat.Profiles {
		if cp.Subsystem != entry.Subsystem {
			continue
		}
		for _, id := range cp.Anomalies {
			a := cat.Anomaly(id)
			if slices.ContainsFunc(c.triggers, func(t trig) bool { return t.id == id }) {
				continue
			}
			c.triggers = append(c.triggers, trig{id: id, relaxed: cp.RelaxedOrdering, low: a.Symptom == collie.LowThroughput, w: a.Trigger})
		}
	}
	var vary []field
	for _, f := range fields(reflect.TypeFor[rnic.MicroArch](), "", nil) {
		v := get(p.Micro, f)
		switch {
		case v == 0 && !isBool(p.Micro, f): // a mechanism the profile does not have
		case slices.Contains(fixed, f.path):
		case len(only) > 0 && !slices.ContainsFunc(only, func(s string) bool { return strings.HasPrefix(f.path, s) }):
		case slices.ContainsFunc(skip, func(s string) bool { return strings.HasPrefix(f.path, s) }):
		default:
			vary = append(vary, f)
		}
	}
	best := *p.Micro
	if err := c.constraints(p, &best); err != nil {
		return fmt.Errorf("the profile as it is fails a constraint: %w", err)
	}
	score, err := c.agreement(p, &best)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d fields to vary; agreement %d/%d (%.1f%%) on %d points, seed %d\n", p.Name, len(vary), score, n,
		100*float64(score)/float64(n), n, seed)
	start := time.Now()
	for r := 1; r <= rounds; r++ {
		changed := false
		for _, f := range vary {
			v := get(&best, f)
			isInt := reflect.ValueOf(&best).Elem().FieldByIndex(f.index).Kind() != reflect.Float64
			cands := candidates(v, isInt)
			if isBool(&best, f) {
				cands = []float64{1 - v} // a switch: the other setting
			}
			for _, x := range cands {
				m := best
				set(&m, f, x)
				if f.path == "rx.xoff-bytes" {
					m.Rx.XonBytes = max(m.Rx.XoffBytes-(best.Rx.XoffBytes-best.Rx.XonBytes), 0)
				}
				if m.Check() != nil {
					continue
				}
				s, err := c.agreement(p, &m)
				if err != nil {
					return err
				}
				if s <= score {
					continue
				}
				if err := c.constraints(p, &m); err != nil {
					fmt.Printf("  %-34s %g -> %g: %d -> %d, but %v [%s]\n", f.path, v, x, score, s, err, time.Since(start).Round(time.Second))
					continue
				}
				fmt.Printf("  %-34s %g -> %g: agreement %d -> %d (%.1f%%) [%s]\n", f.path, v, x, score, s,
					100*float64(s)/float64(n), time.Since(start).Round(time.Second))
				best, score, changed = m, s, true
				v = x
			}
		}
		if !changed {
			break
		}
	}
	fmt.Printf("%s: agreement %d/%d (%.1f%%) after calibration; changed fields:\n", p.Name, score, n, 100*float64(score)/float64(n))
	for _, f := range vary {
		if a, b := get(p.Micro, f), get(&best, f); a != b {
			fmt.Printf("  micro.%s: %g -> %g\n", f.path, a, b)
		}
	}
	return nil
}

func with(p *rnic.Profile, m *rnic.MicroArch) *rnic.Profile {
	q := *p
	mm := *m
	q.Micro = &mm
	return &q
}

func (c *calib) agreement(p *rnic.Profile, m *rnic.MicroArch) (int, error) {
	ev, err := search.NewSimEvaluatorProfile(with(p, m))
	if err != nil {
		return 0, err
	}
	r, err := search.Agreement(context.Background(), ev, c.sp, search.DefaultMonitor(), c.n, c.seed, c.workers,
		func(w search.Workload) []int { return c.entry.Predict(c.cat, w.Workload) })
	if err != nil {
		return 0, err
	}
	return r.Both + r.Neither, nil
}

// constraints runs the published triggers and the perftest-like workloads; the first one that fails is the
// error.
func (c *calib) constraints(p *rnic.Profile, m *rnic.MicroArch) error {
	for _, t := range c.triggers {
		mm := *m
		mm.PCIe.RelaxedOrdering = t.relaxed
		s, err := summarize(with(p, &mm), t.w)
		if err != nil {
			return fmt.Errorf("trigger #%d: %w", t.id, err)
		}
		want := "pause"
		if t.low {
			want = "low-throughput"
		}
		if got := micro.DefaultThresholds.Classify(s.pause, s.gbps, s.mpps, s.limG, s.limP); got != want {
			return fmt.Errorf("trigger #%d shows %q, not %s", t.id, got, want)
		}
	}
	for _, op := range []string{"write", "send", "read"} {
		for _, dir := range []string{micro.DirUni, micro.DirBi} {
			for _, qps := range []int{1, 8, 64} {
				for _, b := range []int{1, 16} {
					w := scenario.Workload{QPType: "rc", Opcode: op, NumQPs: qps, MTU: 4096, WQEBatch: b, SGE: 1,
						WQDepth: 128, NumMRs: 1, MRSize: 64 << 10, MsgSizes: []int{64 << 10}, Direction: dir, Memory: micro.MemLocal}
					s, err := summarize(with(p, m), w)
					if err != nil {
						return err
					}
					if s.pause != 0 || s.gbps < 0.97*s.limG {
						return fmt.Errorf("perftest-like %s %s %d QPs batch %d: pause %.4f, %.1f of %.0f Gb/s", op, dir, qps, b, s.pause, s.gbps, s.limG)
					}
				}
			}
		}
	}
	return nil
}

type summary struct{ pause, gbps, mpps, limG, limP float64 }

// summarize runs w on p at both ends and keeps what the anomaly tests look at: the worse pause ratio and the
// busier direction's goodput against the limits.
func summarize(p *rnic.Profile, w scenario.Workload) (summary, error) {
	r, err := micro.RunWorkload(micro.WorkloadConfig{Seed: 1, Profiles: [2]*rnic.Profile{p, p}, Workload: w})
	if err != nil {
		return summary{}, err
	}
	s := summary{limG: r.LimitGbps, limP: r.LimitMpps}
	s.pause, s.gbps, s.mpps = r.Judged()
	return s, nil
}
