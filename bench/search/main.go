// Command search-bench measures what Collie's Figure 4 shows: the evaluations and the wall time each search
// algorithm needs to find each anomaly of a subsystem, averaged over several seeds, for random input, Lumina's
// genetic fuzzing, simulated annealing without MFS and simulated annealing with MFS.
//
//	go run ./bench/search -seeds 5 -budget 3000                 # the synthetic planted-anomaly subsystem
//	go run ./bench/search -profile cx6vpi-200g -budget 2000     # a simulated profile, once its evaluator is registered
//
// On the synthetic subsystem a finding is attributed to the planted regions that contain its workload. On any
// other profile there is no ground truth: a reference search (simulated annealing with MFS, -refbudget
// evaluations) first collects minimal feature sets, and a finding is attributed to the confirmed reference
// sets that hold its workload.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/lumina-go/lumina/search"
)

// saCfg is the annealing configuration under test (flags).
var saCfg search.SAConfig

type variant struct {
	name string
	algo string
	mfs  bool
}

var variants = []variant{
	{"random", search.AlgoRandom, true},
	{"ga", search.AlgoGA, true},
	{"sa (no MFS)", search.AlgoSA, false},
	{"sa + MFS", search.AlgoSA, true},
}

func main() {
	profile := flag.String("profile", search.SyntheticProfile, "profile whose registered evaluator to search")
	seeds := flag.Int("seeds", 5, "seeds per algorithm")
	budget := flag.Int("budget", 3000, "evaluations per search")
	refBudget := flag.Int("refbudget", 10000, "evaluations of the reference search (profiles without ground truth)")
	d := search.DefaultConfig().SA
	flag.Float64Var(&saCfg.StartTemp, "t0", d.StartTemp, "annealing start temperature")
	flag.Float64Var(&saCfg.Decay, "decay", d.Decay, "annealing temperature decay per stage")
	flag.IntVar(&saCfg.Iterations, "iters", d.Iterations, "annealing iterations per temperature")
	flag.IntVar(&saCfg.Chains, "chains", d.Chains, "annealing chains")
	saCfg.MinTemp, saCfg.Restarts = d.MinTemp, d.Restarts
	flag.Parse()
	if err := run(*profile, *seeds, *budget, *refBudget); err != nil {
		fmt.Fprintln(os.Stderr, "search-bench:", err)
		os.Exit(1)
	}
}

func run(profile string, seeds, budget, refBudget int) error {
	ev, err := search.EvaluatorFor(profile)
	if err != nil {
		return err
	}
	classify, names, err := classifier(ev, refBudget)
	if err != nil {
		return err
	}
	fmt.Printf("profile %s, %d seeds, budget %d evaluations, %d anomalies to find\n\n", profile, seeds, budget, len(names))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "anomaly\t")
	for _, v := range variants {
		fmt.Fprintf(tw, "%s\t", v.name)
	}
	fmt.Fprintln(tw)
	type stat struct {
		evals, found int
		wall         time.Duration
	}
	stats := make([]map[string]*stat, len(variants))
	totals := make([]time.Duration, len(variants))
	for i, v := range variants {
		stats[i] = map[string]*stat{}
		for s := 1; s <= seeds; s++ {
			cfg := search.DefaultConfig()
			cfg.Algo, cfg.MFS, cfg.Budget, cfg.Seed, cfg.SA = v.algo, v.mfs, budget, uint64(s), saCfg
			start := time.Now()
			res, err := search.Search(context.Background(), ev, cfg)
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", v.name, s, err)
			}
			totals[i] += time.Since(start)
			seen := map[string]bool{}
			for _, a := range res.Anomalies {
				for _, n := range classify(a.Workload) {
					if seen[n] {
						continue
					}
					seen[n] = true
					st := stats[i][n]
					if st == nil {
						st = &stat{}
						stats[i][n] = st
					}
					st.evals += a.FoundAt
					st.wall += a.Elapsed
					st.found++
				}
			}
		}
	}
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t", n)
		for i := range variants {
			st := stats[i][n]
			if st == nil {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%d ev %s (%d/%d)\t", st.evals/st.found, (st.wall / time.Duration(st.found)).Round(time.Microsecond), st.found, seeds)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "found (mean per seed)\t")
	for i := range variants {
		n := 0
		for _, st := range stats[i] {
			n += st.found
		}
		fmt.Fprintf(tw, "%.1f of %d\t", float64(n)/float64(seeds), len(names))
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "wall per search\t")
	for i := range variants {
		fmt.Fprintf(tw, "%s\t", (totals[i] / time.Duration(seeds)).Round(time.Millisecond))
	}
	fmt.Fprintln(tw)
	fmt.Println("cells: mean evaluations and wall time to the first finding of the anomaly, over the seeds that found it")
	return tw.Flush()
}

// classifier returns how findings are attributed to anomalies, and the anomalies' names.
func classifier(ev search.Evaluator, refBudget int) (func(search.Workload) []string, []string, error) {
	if syn, ok := ev.(*search.Synthetic); ok {
		var names []string
		for _, r := range syn.Regions {
			names = append(names, r.Name)
		}
		return func(w search.Workload) []string {
			var out []string
			for _, i := range syn.Inside(w) {
				out = append(out, syn.Regions[i].Name)
			}
			return out
		}, names, nil
	}
	cfg := search.DefaultConfig()
	cfg.Budget, cfg.Seed = refBudget, 1000
	ref, err := search.Search(context.Background(), ev, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("reference search: %w", err)
	}
	// Only confirmed feature sets are anomalies to find: an unconfirmed one is a single point (two causes at
	// once) and one cut by the budget may be narrower than the anomaly.
	var names []string
	var sets []*search.Anomaly
	for _, a := range ref.Anomalies {
		if a.Unconfirmed != nil || a.MFSCut {
			continue
		}
		names = append(names, fmt.Sprintf("#%d %s %s", a.ID, a.Symptom, a.MFS))
		sets = append(sets, a)
	}
	fmt.Printf("reference search: %d anomalies in %d evaluations, %d with a confirmed feature set (the others are single points with more than one cause, or were cut by the budget)\n",
		len(ref.Anomalies), ref.Evaluations, len(sets))
	return func(w search.Workload) []string {
		var out []string
		for i, a := range sets {
			if a.MFS.Match(w) {
				out = append(out, names[i])
			}
		}
		return out
	}, slices.Clip(names), nil
}
