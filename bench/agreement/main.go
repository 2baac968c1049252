// Command agreement measures how well a simulated profile's anomaly regions match Collie's published
// conditions (search/collie/anomalies.yaml): over a fixed, seeded sample of random points of the default search
// space it evaluates each point on the profile, asks the search's monitor whether it is anomalous, and asks
// whether some published condition of the profile's anomalies holds there. The space is the profile's
// (search.ProfileSpace: without the QP types its NIC cannot create).
//
//	go run ./bench/agreement                          # cx6vpi-200g, collie-f and p2100g, 1,000 points each
//	go run ./bench/agreement -profiles p2100g -n 200 -v
//	go run ./bench/agreement -profiles cx6vpi-200g -explain   # which mechanisms make the extra anomalies
//	go run ./bench/agreement -profiles cx6vpi-200g -only rx-wqe -v   # one mechanism alone: where it is broader than published
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/search/collie"
)

func main() {
	profiles := flag.String("profiles", "cx6vpi-200g,collie-f,p2100g", "comma-separated profiles (NAME=FILE.yaml: a profile file judged against NAME's anomalies)")
	n := flag.Int("n", 1000, "random points per profile")
	seed := flag.Uint64("seed", 1, "sample seed")
	verbose := flag.Bool("v", false, "list the points where the profile and the published conditions disagree")
	expl := flag.Bool("explain", false, "attribute the points anomalous with nothing predicted to the model's mechanisms (counterfactual runs; slow)")
	only := flag.String("only", "", "keep only these comma-separated mechanisms of the -explain list, taking the others out")
	off := flag.String("off", "", "take these comma-separated mechanisms of the -explain list out")
	flag.Int64Var(&win.warmupNs, "warmup-ns", 0, "run every workload this long before its window (0: the model's automatic warm-up)")
	flag.Int64Var(&win.measureNs, "measure-ns", 0, "measure every workload over a window this long (0: the model's 500 us)")
	flag.Parse()
	if win.warmupNs < 0 || win.measureNs < 0 {
		fmt.Fprintln(os.Stderr, "agreement: -warmup-ns and -measure-ns must be at least 0 (0: the model's defaults)")
		os.Exit(2)
	}
	keep, err := keepFunc(*only, *off)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agreement:", err)
		os.Exit(2)
	}
	if err := run(strings.Split(*profiles, ","), *n, *seed, *verbose, *expl, keep); err != nil {
		fmt.Fprintln(os.Stderr, "agreement:", err)
		os.Exit(2)
	}
}

// win is the warm-up and window every workload runs with (-warmup-ns, -measure-ns; 0: the model's defaults), so
// that how much the verdicts depend on them can be measured.
var win struct{ warmupNs, measureNs int64 }

// withWindow applies win to a simulated profile's evaluator (the synthetic subsystem has no window).
func withWindow(ev search.Evaluator) search.Evaluator {
	if se, ok := ev.(*search.SimEvaluator); ok {
		se.WarmupNs, se.MeasureNs = win.warmupNs, win.measureNs
	}
	return ev
}

// keepFunc turns -only and -off into which mechanisms stay (nil: the profile as it is).
func keepFunc(only, off string) (func(int) bool, error) {
	if only != "" && off != "" {
		return nil, fmt.Errorf("-only and -off exclude each other")
	}
	list := only + off
	if list == "" {
		return nil, nil
	}
	named := map[int]bool{}
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(mechanisms, func(m mechanism) bool { return m.name == name })
		if i < 0 {
			var names []string
			for _, m := range mechanisms {
				names = append(names, m.name)
			}
			return nil, fmt.Errorf("no mechanism %q (mechanisms: %s)", name, strings.Join(names, ", "))
		}
		named[i] = true
	}
	if only != "" {
		return func(i int) bool { return named[i] }, nil
	}
	return func(i int) bool { return !named[i] }, nil
}

func run(profiles []string, n int, seed uint64, verbose, expl bool, keep func(int) bool) error {
	cat, err := collie.Load()
	if err != nil {
		return err
	}
	for _, arg := range profiles {
		// NAME, or NAME=FILE.yaml to evaluate a profile file (a narrowing being tried) against NAME's anomalies.
		name, file, ok := strings.Cut(arg, "=")
		if !ok {
			file = name
		}
		p, err := cat.Profile(name)
		if err != nil {
			return err
		}
		ev, err := search.EvaluatorFor(file)
		if err != nil {
			return err
		}
		if keep != nil {
			p, err := rnic.LoadProfile(file)
			if err != nil {
				return err
			}
			if p.Micro == nil {
				return fmt.Errorf("profile %s has no micro section", p.Name)
			}
			if ev, err = search.NewSimEvaluatorProfile(variant(p, keep)); err != nil {
				return err
			}
		}
		ev = withWindow(ev)
		sp, err := search.ProfileSpace(file, search.DefaultSpace())
		if err != nil {
			return err
		}
		start := time.Now()
		r, err := search.Agreement(context.Background(), ev, sp, search.DefaultMonitor(), n, seed, 0,
			func(w search.Workload) []int { return p.Predict(cat, w.Workload) })
		if err != nil {
			return err
		}
		el := time.Since(start)
		if win.warmupNs > 0 || win.measureNs > 0 {
			fmt.Printf("(warm-up %s, window %s) ", nsOrAuto(win.warmupNs, "automatic"), nsOrAuto(win.measureNs, "500 us"))
		}
		fmt.Printf("%s: %d points (seed %d): agreement %.1f%%, anomalous %.1f%%, predicted %.1f%% "+
			"(both %d, anomalous only %d, predicted only %d, neither %d); %.0f evaluations/s\n",
			name, n, seed, 100*r.Agreement(), 100*r.AnomalousShare(), 100*r.PredictedShare(),
			r.Both, r.Extra, r.Missed, r.Neither, float64(n)/el.Seconds())
		perID := map[int][2]int{}
		for _, pt := range r.Points {
			for _, id := range pt.Predicted {
				c := perID[id]
				c[0]++
				if pt.Symptom != search.None {
					c[1]++
				}
				perID[id] = c
			}
		}
		var ids []int
		for id := range perID {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		fmt.Print("  per anomaly (points predicted / of them anomalous):")
		for _, id := range ids {
			fmt.Printf(" #%d %d/%d", id, perID[id][0], perID[id][1])
		}
		fmt.Println()
		if expl {
			if err := explain(file, r.Points); err != nil {
				return err
			}
		}
		if verbose {
			for _, pt := range r.Points {
				if !pt.Agree() {
					m := pt.Metrics
					fmt.Printf("  %-14s predicted %v: %s | pause %.4f tx %.1f rx %.1f Gb/s %.1f/%.1f Mpps limits %.1f Gb/s %.1f Mpps\n",
						orNormal(pt.Symptom), pt.Predicted, pt.Workload.String(), m.PauseRatio, m.TxGbps, m.RxGbps, m.TxMpps, m.RxMpps, m.LimitGbps, m.LimitMpps)
				}
			}
		}
	}
	return nil
}

func orNormal(s search.Symptom) string {
	if s == search.None {
		return "normal"
	}
	return string(s)
}

// nsOrAuto prints a duration in nanoseconds as microseconds, or what 0 stands for.
func nsOrAuto(ns int64, auto string) string {
	if ns == 0 {
		return auto
	}
	return fmt.Sprintf("%g us", float64(ns)/1e3)
}
