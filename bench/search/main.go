// Command search-bench measures what Collie's figures 4 and 5 show: how many anomalies of a subsystem each search
// algorithm finds against its budget, averaged over several seeds, for random input, Lumina's genetic fuzzing,
// simulated annealing without MFS and simulated annealing with MFS (Collie), the guided ones driving performance
// counters only (Perf) or all counters with the diagnostic ones (Diag).
//
//	go run ./bench/search -profile collie-f -seeds 10 -budget 400 -svg docs/search-collie-f.svg
//	go run ./bench/search -seeds 10 -budget 3000             # the synthetic planted-anomaly subsystem
//	go run ./bench/search -profile collie-f -only "Collie (Perf),Collie (Diag)" -mfs-style ends   # Collie's own MFS
//
// A finding is attributed to ground truth: on the synthetic subsystem to the planted regions that contain its
// workload; on a profile of the published catalog (search/collie/anomalies.yaml) to the profile's published
// anomalies whose conditions hold at its workload; on any other profile to the confirmed feature sets of a
// reference search (simulated annealing with MFS, -refbudget evaluations).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/search/collie"
)

// saCfg is the annealing configuration under test (flags).
var saCfg search.SAConfig

// mfsStyle is how the searches with MFS span an ordered dimension (flag).
var mfsStyle string

type variant struct {
	name    string
	algo    string
	mfs     bool
	signals string
}

// variants are Collie's figure 4 and 5 contenders: random input generation (no MFS: Collie enhanced only BO
// with it), Lumina's genetic fuzzing, annealing without MFS (SA) and with it (Collie), each guided one driving
// performance counters only (Perf) or all counters (Diag).
var variants = []variant{
	{"random", search.AlgoRandom, false, search.SignalsAll},
	{"GA (Perf)", search.AlgoGA, true, search.SignalsPerformance},
	{"GA (Diag)", search.AlgoGA, true, search.SignalsAll},
	{"SA (Perf)", search.AlgoSA, false, search.SignalsPerformance},
	{"SA (Diag)", search.AlgoSA, false, search.SignalsAll},
	{"Collie (Perf)", search.AlgoSA, true, search.SignalsPerformance},
	{"Collie (Diag)", search.AlgoSA, true, search.SignalsAll},
}

func main() {
	profile := flag.String("profile", search.SyntheticProfile, "profile whose registered evaluator to search")
	seeds := flag.Int("seeds", 10, "seeds per algorithm")
	budget := flag.Int("budget", 3000, "evaluations per search")
	points := flag.Int("points", 10, "budget checkpoints of the curve")
	refBudget := flag.Int("refbudget", 10000, "evaluations of the reference search (profiles without ground truth)")
	svg := flag.String("svg", "", "write the curve as an SVG plot to this file")
	only := flag.String("only", "", "comma-separated contenders to run (default all): "+contenderNames())
	flag.StringVar(&mfsStyle, "mfs-style", search.MFSBisect, "how the MFS spans an ordered dimension: bisect or ends (Collie's implementation: its two ends only)")
	d := search.DefaultConfig().SA
	flag.Float64Var(&saCfg.StartTemp, "t0", d.StartTemp, "annealing start temperature")
	flag.Float64Var(&saCfg.Decay, "decay", d.Decay, "annealing temperature decay per stage")
	flag.IntVar(&saCfg.Iterations, "iters", d.Iterations, "annealing iterations per temperature")
	flag.IntVar(&saCfg.Chains, "chains", d.Chains, "annealing chains")
	saCfg.MinTemp, saCfg.Restarts = d.MinTemp, d.Restarts
	flag.Parse()
	if *seeds < 1 || *budget < 1 || *points < 1 {
		fmt.Fprintln(os.Stderr, "search-bench: -seeds, -budget and -points must be at least 1")
		os.Exit(2)
	}
	if *only != "" {
		var keep []variant
		for _, n := range strings.Split(*only, ",") {
			i := slices.IndexFunc(variants, func(v variant) bool { return v.name == strings.TrimSpace(n) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "search-bench: -only: no contender %q (have %s)\n", n, contenderNames())
				os.Exit(2)
			}
			keep = append(keep, variants[i])
		}
		variants = keep
	}
	if err := run(*profile, *seeds, *budget, *points, *refBudget, *svg); err != nil {
		fmt.Fprintln(os.Stderr, "search-bench:", err)
		os.Exit(1)
	}
}

func contenderNames() string {
	var out []string
	for _, v := range variants {
		out = append(out, v.name)
	}
	return strings.Join(out, ", ")
}

// curve is one variant's result: per seed, the evaluation at which each anomaly was first found.
type curve struct {
	v       variant
	foundAt []map[string]int
	wall    time.Duration
	evals   int
}

// at is the mean and standard deviation over seeds of the anomalies found within n evaluations.
func (c *curve) at(n int) (mean, sd float64) {
	var xs []float64
	for _, f := range c.foundAt {
		k := 0
		for _, e := range f {
			if e <= n {
				k++
			}
		}
		xs = append(xs, float64(k))
	}
	return meanSD(xs)
}

func meanSD(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var s, q float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	for _, x := range xs {
		q += (x - m) * (x - m)
	}
	return m, math.Sqrt(q / float64(len(xs)))
}

func run(profile string, seeds, budget, points, refBudget int, svgPath string) error {
	ev, err := search.EvaluatorFor(profile)
	if err != nil {
		return err
	}
	space, err := search.ProfileSpace(profile, search.DefaultSpace())
	if err != nil {
		return err
	}
	classify, names, err := classifier(profile, ev, space, refBudget)
	if err != nil {
		return err
	}
	fmt.Printf("profile %s, %d seeds, budget %d evaluations, %d anomalies to find, MFS style %s\n\n", profile, seeds, budget, len(names), mfsStyle)
	fi, err := os.Stderr.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	var curves []*curve
	for _, v := range variants {
		c := &curve{v: v}
		for s := 1; s <= seeds; s++ {
			cfg := search.DefaultConfig()
			cfg.Algo, cfg.MFS, cfg.Budget, cfg.Seed, cfg.SA, cfg.Signals = v.algo, v.mfs, budget, uint64(s), saCfg, v.signals
			cfg.MFSStyle = mfsStyle
			cfg.Space = space
			start := time.Now()
			res, err := search.Search(context.Background(), ev, cfg)
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", v.name, s, err)
			}
			c.wall += time.Since(start)
			c.evals += res.Evaluations
			f := map[string]int{}
			for _, a := range res.Anomalies {
				for _, n := range classify(a.Workload) {
					if _, ok := f[n]; !ok {
						f[n] = a.FoundAt
					}
				}
			}
			c.foundAt = append(c.foundAt, f)
			if tty {
				fmt.Fprintf(os.Stderr, "\r%-14s seed %d/%d, %s", v.name, s, seeds, c.wall.Round(time.Second))
			}
		}
		// Progress on stderr, a line per contender: the whole comparison takes minutes on a profile.
		if tty {
			fmt.Fprint(os.Stderr, "\r")
		}
		fmt.Fprintf(os.Stderr, "%-14s %d seeds in %s, %.0f evaluations/s\n", v.name, seeds, c.wall.Round(time.Second),
			float64(c.evals)/c.wall.Seconds())
		curves = append(curves, c)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "anomaly\t")
	for _, c := range curves {
		fmt.Fprintf(tw, "%s\t", c.v.name)
	}
	fmt.Fprintln(tw)
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t", n)
		for _, c := range curves {
			var at []float64
			for _, f := range c.foundAt {
				if e, ok := f[n]; ok {
					at = append(at, float64(e))
				}
			}
			if len(at) == 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			m, _ := meanSD(at)
			fmt.Fprintf(tw, "%.0f (%d/%d)\t", m, len(at), seeds)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "found at the budget\t")
	for _, c := range curves {
		m, sd := c.at(budget)
		fmt.Fprintf(tw, "%.1f ± %.1f of %d\t", m, sd, len(names))
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "evaluations/s\t")
	for _, c := range curves {
		fmt.Fprintf(tw, "%.0f\t", float64(c.evals)/c.wall.Seconds())
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("cells: mean evaluation of the first finding of the anomaly (seeds that found it / seeds)")
	fmt.Printf("\nanomalies found against budget (mean ± standard deviation over %d seeds; Collie's figure 4)\n", seeds)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "evaluations\t")
	for _, c := range curves {
		fmt.Fprintf(tw, "%s\t", c.v.name)
	}
	fmt.Fprintln(tw)
	for _, n := range checkpoints(budget, points) {
		fmt.Fprintf(tw, "%d\t", n)
		for _, c := range curves {
			m, sd := c.at(n)
			fmt.Fprintf(tw, "%.1f ± %.1f\t", m, sd)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if svgPath != "" {
		title := fmt.Sprintf("%s: anomalies found against budget, mean ± sd over %d seeds (%d to find)", profile, seeds, len(names))
		if err := os.WriteFile(svgPath, []byte(plotSVG(title, curves, budget, points, len(names))), 0o644); err != nil {
			return err
		}
		fmt.Println("\nwrote", svgPath)
	}
	return nil
}

func checkpoints(budget, points int) []int {
	var out []int
	for k := 1; k <= points; k++ {
		out = append(out, max(1, budget*k/points))
	}
	return slices.Compact(out)
}

// classifier returns how findings are attributed to anomalies, and the anomalies' names.
func classifier(profile string, ev search.Evaluator, space search.Space, refBudget int) (func(search.Workload) []string, []string, error) {
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
	cat, err := collie.Load()
	if err != nil {
		return nil, nil, err
	}
	if p := cat.Lookup(profile); p != nil {
		var names []string
		for _, id := range p.Anomalies {
			names = append(names, fmt.Sprintf("#%d", id))
		}
		fmt.Printf("ground truth: the published conditions of %s's anomalies (%s)\n", profile, collie.File)
		return func(w search.Workload) []string {
			var out []string
			for _, id := range p.Predict(cat, w.Workload) {
				out = append(out, fmt.Sprintf("#%d", id))
			}
			return out
		}, names, nil
	}
	cfg := search.DefaultConfig()
	cfg.Budget, cfg.Seed, cfg.Space = refBudget, 1000, space
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
	if len(sets) == 0 {
		return nil, nil, errors.New("the reference search confirmed no anomaly: nothing to score against")
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

// plotSVG draws the curves (mean with a standard-deviation band) on evaluations against anomalies found.
func plotSVG(title string, curves []*curve, budget, points, total int) string {
	const W, H, left, right, top, bottom = 760, 420, 60, 190, 40, 50
	pw, ph := float64(W-left-right), float64(H-top-bottom)
	x := func(n int) float64 { return float64(left) + pw*float64(n)/float64(budget) }
	y := func(v float64) float64 { return float64(top) + ph*(1-v/float64(max(total, 1))) }
	colors := []string{"#d62728", "#ff7f0e", "#bcbd22", "#9467bd", "#8c564b", "#1f77b4", "#2ca02c"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="13">%s</text>`+"\n", left, xmlEscape(title))
	for k := 0; k <= total; k++ {
		if total > 10 && k%2 == 1 {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n",
			left, float64(left)+pw, y(float64(k)), y(float64(k)), left-6, y(float64(k))+4, k)
	}
	for _, n := range append([]int{0}, checkpoints(budget, points)...) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(n), H-bottom+16, n)
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/><line x1="%d" x2="%d" y1="%d" y2="%.1f" stroke="black"/>`+"\n",
		left, float64(left)+pw, y(0), y(0), left, left, top, y(0))
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">evaluations</text>`+"\n", float64(left)+pw/2, H-12)
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">anomalies found</text>`+"\n", float64(top)+ph/2, float64(top)+ph/2)
	ns := append([]int{0}, checkpoints(budget, points)...)
	for i, c := range curves {
		col := colors[i%len(colors)]
		var line, band []string
		var lower []string
		for _, n := range ns {
			m, sd := c.at(n)
			line = append(line, fmt.Sprintf("%.1f,%.1f", x(n), y(m)))
			band = append(band, fmt.Sprintf("%.1f,%.1f", x(n), y(min(m+sd, float64(total)))))
			lower = append([]string{fmt.Sprintf("%.1f,%.1f", x(n), y(max(m-sd, 0)))}, lower...)
		}
		fmt.Fprintf(&b, `<polygon points="%s" fill="%s" fill-opacity="0.10" stroke="none"/>`+"\n", strings.Join(append(band, lower...), " "), col)
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(line, " "), col)
		ly := top + 14 + 18*i
		m, sd := c.at(budget)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s %.1f ± %.1f</text>`+"\n",
			W-right+10, W-right+30, ly, ly, col, W-right+36, ly+4, xmlEscape(c.v.name), m, sd)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
