package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/campaign"
	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/search/collie"
)

func newSearchCmd(stdout, stderr io.Writer) *cobra.Command {
	cfg := search.DefaultConfig()
	var profile, out, restrict string
	var jsonOut, resume, quiet bool
	var qf queueFlags
	cmd := &cobra.Command{
		Use:   "search --profile NAME",
		Short: "Search the workload space for performance anomalies (pause, low throughput), as Collie does",
		Long: `search explores Collie's workload space (QP type and opcode, QPs, MTU, WQE batch, SGEs, WQ depth,
MRs, request sizes, direction, memory placement) on two simulated hosts with the named NIC profile, looking
for PFC pause (pause duration ratio above 0.1%) or throughput 20% below both the bits/s and packets/s limits.
Each anomaly is reduced to its minimal feature set and written with a scenario that reproduces it:

  DIR/anomalies.json   {"schema_version", "anomalies": [{"id", "symptom", "mfs", "scenario", "found_at_evaluation", "counters", "published", ...}]}
  DIR/search.jsonl     one line per evaluation: workload, metrics, energy, accepted
  DIR/scenarios/       anomaly-N.yaml, for lumina run

On Collie's subsystems (cx6vpi-200g and collie-f: F, p2100g: H) "published" and the PUBLISHED
column name the anomalies Collie lists whose conditions (search/collie/anomalies.yaml) hold at the point
the search hit; none: a finding it does not list.

The energy is the search's score of a point: ` + energyMeaning + `.

The search is deterministic for a seed and resumable (--resume, with the same options and a larger
--budget). The budget bounds every evaluation, MFS probes included; a feature set it cut short is
marked mfs_cut and completed by a resumed search with a larger budget. With --restrict SPACE.yaml it
answers whether that narrowed space holds an anomaly: exit status 1 when it does, 0 when it does not
(2: bad input).

With --workers N or --nats URL the evaluations go through the campaign work queue (docs/campaign.md):
an embedded NATS server with N local workers, or a NATS cluster whose lumina worker processes take
them. Each round's proposals (--batch for random and ga, one per annealing chain for sa) are
evaluated in parallel and applied in proposal order, so the result is the same as in process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if profile == "" {
				return badInput("--profile is required (profiles with an evaluator: %v)", search.Profiles())
			}
			if low := strings.ToLower(profile); strings.HasSuffix(low, ".yaml") || strings.HasSuffix(low, ".yml") {
				// The reproducing scenarios name the file; they live elsewhere, so the path must be absolute.
				abs, err := filepath.Abs(profile)
				if err != nil {
					return badInput("profile %s: %v", profile, err)
				}
				profile = abs
			}
			ev, err := search.EvaluatorFor(profile)
			if err != nil {
				return badInput("%v", err)
			}
			queued := qf.q.URL != "" || cmd.Flags().Changed("workers")
			// The profile's space: what its NIC cannot create (a QP type its driver refuses) is not a point.
			full, err := search.ProfileSpace(profile, cfg.Space)
			if err != nil {
				return badInput("%v", err)
			}
			if restrict != "" {
				data, err := os.ReadFile(restrict)
				if err != nil {
					return badInput("reading the restriction: %v", err)
				}
				sp, err := search.ParseRestrict(restrict, data, full) // what the file leaves out is the profile's space
				if err != nil {
					if len(full.QPTypes) < len(cfg.Space.QPTypes) {
						return badInput("%v (profile %s's space has only the QP types its NIC can create)", err, profile)
					}
					return badInput("%v", err)
				}
				if err := search.CheckProfileSpace(profile, sp); err != nil {
					return badInput("%s: %v", restrict, err)
				}
				cfg.Space, cfg.MFSSpace = sp, &full
			} else {
				cfg.Space = full
			}
			if err := cfg.Check(); err != nil {
				return badInput("%v", err)
			}
			mtr := newMeter(stderr, quiet || jsonOut, "search", "", 0)
			defer mtr.Done()
			cfg.Progress = searchMeter(mtr, stderr)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if queued {
				qf.localDefault(cmd.Flags())
				if err := qf.check(); err != nil {
					return err
				}
				if err := os.MkdirAll(out, 0o755); err != nil {
					return badInput("results directory: %v", err)
				}
				qe, err := campaign.OpenSearchQueue(ctx, out, profile, qf.q)
				if err != nil {
					return badInput("%v", err)
				}
				defer qe.Close()
				ev = qe
				// Every proposal of a round in flight at once: the workers, not this process, bound the parallelism.
				cfg.Workers = max(cfg.Batch, cfg.SA.Chains, qf.q.Workers, 1)
			}
			pub, err := publishedFor(profile)
			if err != nil {
				return fail(exitFailed, err)
			}
			opt := search.DirOptions{Dir: out, Profile: profile, Resume: resume}
			if pub != nil {
				opt.Published = pub.match
			}
			res, err := search.RunDir(ctx, ev, cfg, opt)
			if err != nil {
				mtr.Abort()
			} else {
				mtr.Done()
			}
			if err != nil {
				if res == nil {
					return badInput("%v", err)
				}
				return fail(exitFailed, err)
			}
			if jsonOut {
				if err := writeIndentedJSON(stdout, struct {
					Profile string `json:"profile"`
					Algo    string `json:"algo"`
					Seed    uint64 `json:"seed"`
					Out     string `json:"out"`
					*search.Result
				}{profile, cfg.Algo, cfg.Seed, out, res}); err != nil {
					return fail(exitFailed, err)
				}
			} else {
				printSearchSummary(stdout, out, res, pub)
			}
			if res.Interrupted {
				return fail(exitFailed, fmt.Errorf("interrupted after %d evaluations; continue with --resume", res.Evaluations))
			}
			if restrict != "" && len(res.Anomalies) > 0 {
				return fail(exitFailed, fmt.Errorf("the restricted space %s contains an anomaly (%d found); see %s",
					restrict, len(res.Anomalies), out))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&profile, "profile", "", "NIC profile of both simulated hosts: a name, or a profile file (*.yaml) with a micro section")
	f.StringVar(&cfg.Algo, "algo", cfg.Algo, "search algorithm: random, ga (Lumina's genetic fuzzing) or sa (Collie's simulated annealing)")
	f.BoolVar(&cfg.MFS, "mfs", cfg.MFS, "reduce each anomaly to its minimal feature set and skip workloads inside known ones")
	f.StringVar(&cfg.MFSStyle, "mfs-style", search.MFSBisect, "how the MFS spans an ordered dimension: bisect (its ends, then a binary search where the anomaly stops) or ends (its two ends only, as Collie's implementation; no reduction of a point with two causes)")
	f.IntVar(&cfg.Budget, "budget", cfg.Budget, "evaluations, MFS probes included")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random choice of the search")
	f.StringVar(&out, "out", "search-results", "results directory")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON (no progress line)")
	f.StringVar(&restrict, "restrict", "", "YAML file narrowing the space; exit 1 if it contains an anomaly")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress (a bar on a terminal, else a line every 2 s)")
	f.BoolVar(&resume, "resume", false, "continue the search recorded in --out (same options, larger --budget)")
	f.IntVar(&cfg.Batch, "batch", cfg.Batch, "proposals per round of random search and ga, evaluated in parallel")
	f.IntVar(&cfg.SA.Chains, "chains", cfg.SA.Chains, "annealing chains, one proposal each per round, evaluated in parallel")
	qf.add(f, true)
	return cmd
}

// energyMeaning says what the energy of the progress line and search.jsonl measures.
const energyMeaning = "lower is more anomalous. Random search and ga: minus the weighted score of how far each " +
	"objective (throughput, pause ratio, diagnostic counters) moves from its reference toward its extreme, 0 at " +
	"the reference; sa: the chain's objective over its warm-up mean, negated for diagnostic counters (an " +
	"ordinary point is near 1 or -1)"

// published is Collie's catalog (search/collie) for a profile that is one of its subsystems.
type published struct {
	cat     *collie.Catalog
	profile *collie.Profile
}

// publishedFor returns the catalog's entry for the profile, or nil when the profile is not one of the
// subsystems Collie published anomalies for (a profile file too: its NIC is the user's, not the paper's).
func publishedFor(profile string) (*published, error) {
	cat, err := collie.Load()
	if err != nil {
		return nil, err
	}
	p := cat.Lookup(profile)
	if p == nil {
		return nil, nil
	}
	return &published{cat, p}, nil
}

// match lists the published anomalies whose conditions hold at w.
func (p *published) match(w search.Workload) []int { return p.profile.Predict(p.cat, w.Workload) }

func printSearchSummary(w io.Writer, dir string, res *search.Result, pub *published) {
	fmt.Fprintf(w, "%d anomalies in %d evaluations (%d proposals skipped inside known MFS); results in %s\n",
		len(res.Anomalies), res.Evaluations, res.Skipped, dir)
	fmt.Fprintf(w, "best energy %.3g (%s)\n", res.BestEnergy, energyMeaning)
	if len(res.Anomalies) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if pub != nil {
		fmt.Fprintln(tw, "ID\tSYMPTOM\tFOUND AT\tPUBLISHED\tMINIMAL FEATURE SET\tSCENARIO")
	} else {
		fmt.Fprintln(tw, "ID\tSYMPTOM\tFOUND AT\tMINIMAL FEATURE SET\tSCENARIO")
	}
	cut, unconfirmed := 0, 0
	var named []int
	for _, a := range res.Anomalies {
		mfs := a.MFS.String()
		if a.MFSCut {
			mfs += " (*)"
			cut++
		}
		if a.Unconfirmed != nil {
			mfs += " (+)"
			unconfirmed++
		}
		if pub == nil {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", a.ID, a.Symptom, a.FoundAt, mfs, a.Scenario)
			continue
		}
		col := "none"
		if a.Published != nil && len(*a.Published) > 0 {
			var ids []string
			for _, id := range *a.Published {
				ids = append(ids, fmt.Sprintf("#%d", id))
				if !slices.Contains(named, id) {
					named = append(named, id)
				}
			}
			col = strings.Join(ids, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", a.ID, a.Symptom, a.FoundAt, col, mfs, a.Scenario)
	}
	tw.Flush()
	if pub != nil {
		slices.Sort(named)
		fmt.Fprintf(w, "PUBLISHED: the anomalies Collie (NSDI 2022) lists for subsystem %s whose conditions (%s) hold at the point the search hit; none: a finding it does not list\n",
			pub.profile.Subsystem, collie.File)
		for _, id := range named {
			if a := pub.cat.Anomaly(id); a != nil {
				status := "found by Collie"
				if a.Status == "old" {
					status = "known before Collie"
				}
				fmt.Fprintf(w, "  #%d (%s; %s): %s\n", id, a.Symptom, status, a.Title)
			}
		}
	}
	if unconfirmed > 0 {
		fmt.Fprintf(w, "(+) the point had more than one cause (its one-factor set, mfs_unconfirmed, did not reproduce): the set shown is one cause's, isolated at \"reduced\", or else the point itself\n")
	}
	if cut > 0 {
		fmt.Fprintf(w, "(*) the budget ran out during this feature set's probes: it holds the point but may not be minimal (mfs_cut in anomalies.json); a larger --budget completes it\n")
	}
}
