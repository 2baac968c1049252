package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/history"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rundiff"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/verdict"
	"github.com/lumina-go/lumina/version"
)

// envHistoryStepPause is a test hook: before each statement of the transaction that completes a run's record,
// lumina run says so on stderr and waits this long, so that a test can kill it there.
const envHistoryStepPause = "LUMINA_TEST_HISTORY_STEP_PAUSE"

// historyPath is --history, else the default (history.DefaultPath).
func historyPath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return history.DefaultPath()
}

// runRecord is one lumina run's record in the history; a nil *runRecord records nothing.
type runRecord struct {
	db     *history.DB
	id     int64
	stderr io.Writer
}

// startRecord records the run as started. The history is a convenience: when it cannot be written the run
// goes on, with a warning.
func startRecord(flag string, sc *scenario.Scenario, out string, stderr io.Writer) *runRecord {
	path, err := historyPath(flag)
	if err == nil {
		var db *history.DB
		if db, err = history.Open(path); err == nil {
			abs, _ := filepath.Abs(out)
			scPath, _ := filepath.Abs(sc.Path)
			var id int64
			id, err = db.Begin(history.Start{Scenario: rundiff.ScenarioName(sc.Path), ScenarioPath: scPath, Testbed: orSim(sc.Testbed),
				NIC: rundiff.NICOf(sc), Seed: sc.Seed, ResultsDir: abs, Version: version.Get().String(), Time: time.Now()})
			if err == nil {
				r := &runRecord{db: db, id: id, stderr: stderr}
				if d, perr := time.ParseDuration(os.Getenv(envHistoryStepPause)); perr == nil {
					db.Step = func(name string) {
						fmt.Fprintf(stderr, "lumina: history step %s\n", name)
						time.Sleep(d)
					}
				}
				return r
			}
			db.Close()
		}
	}
	fmt.Fprintf(stderr, "lumina: warning: this run is not recorded in the history: %v (--no-history to not try)\n", err)
	return nil
}

// finish records the run's outcome: o when it reached a verdict (its results directory, o.Dir), else an error
// (exit status 2) whose results are the partial directory it left, if any: never the --out directory, which
// holds a previous run's results, if anything.
func (r *runRecord) finish(o *verdict.Outcome, partial string) {
	if r == nil {
		return
	}
	defer r.db.Close()
	var f history.Finish
	switch {
	case o != nil:
		f = finishRecord(o.Dir, o.Doc, o.ExitCode())
	default:
		if _, err := os.Stat(partial); partial == "" || err != nil {
			partial = ""
		}
		f = finishRecord(partial, nil, exitBadArgs)
	}
	if err := r.db.Complete(r.id, f); err != nil {
		fmt.Fprintf(r.stderr, "lumina: warning: %v\n", err)
	}
}

// finishRecord is a run's outcome as the run history records it, for lumina run and each run of lumina
// campaign alike: the verdict document doc of results directory dir and the run's exit status; doc nil when
// the run reached no verdict (an error; dir is then what the run left, "" for nothing).
func finishRecord(dir string, doc *verdict.Document, exit int) history.Finish {
	f := history.Finish{Verdict: rundiff.VerdictError, ExitStatus: exit, Time: time.Now(), Metrics: rundiff.Metrics{}}
	if dir != "" {
		f.ResultsDir, _ = filepath.Abs(dir)
	}
	if doc != nil {
		f.Verdict, f.Metrics = doc.Verdict, rundiff.Extract(doc)
		f.ScenarioHash, _ = rundiff.HashScenario(filepath.Join(dir, resultsdir.FileScenario))
	}
	return f
}

func orSim(tb string) string {
	if tb == "" {
		return "sim"
	}
	return tb
}

func newHistoryCmd(stdout io.Writer) *cobra.Command {
	var (
		path, scen string
		limit      int
		jsonOut    bool
	)
	cmd := &cobra.Command{
		Use:   "history [--scenario NAME] [--limit N] [--json]",
		Short: "List the recorded runs of lumina run, newest first, with their verdicts and key metrics",
		Long: `history lists the runs lumina run recorded (unless --no-history) in the run history, newest first:
id, time, scenario, NICs, seed, verdict, and key metrics (packets, retransmissions, timeouts, CNPs, mean
NACK generation and reaction latencies, mean message completion time). A run still going, or killed before it
finished, is listed as "started", without a verdict. Give two ids to lumina diff to compare runs.

The history is an SQLite database at $` + history.EnvPath + `, else $XDG_DATA_HOME/lumina/history.db, else
~/.local/share/lumina/history.db; --history moves it.`,
		Example: `  lumina history --scenario listing2 --limit 10
  lumina history --json | jq '.runs[0].run.metrics'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return badInput("--limit %d: want 0 (all) or more", limit)
			}
			db, err := openHistory(path)
			if err != nil {
				return err
			}
			defer db.Close()
			runs, err := db.List(history.Filter{Scenario: scen, Limit: limit})
			if err != nil {
				return fail(exitBadArgs, fmt.Errorf("the run history %s: %w", db.Path, err))
			}
			if jsonOut {
				if runs == nil {
					runs = []history.Entry{}
				}
				b, err := version.MarshalList("runs", runs)
				if err != nil {
					return err
				}
				_, err = stdout.Write(b)
				return err
			}
			printHistory(stdout, runs)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "history", "", "the run history database (default $"+history.EnvPath+", else the user's data directory)")
	cmd.Flags().StringVar(&scen, "scenario", "", "only the runs of this scenario (its file name without .yaml)")
	cmd.Flags().IntVarP(&limit, "limit", "n", 20, "the newest N runs (0: all)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the runs as JSON, with every metric")
	return cmd
}

// openHistory opens the history for reading commands, read-only: a missing database is bad input, never
// created, and reading needs no write access and never changes the schema.
func openHistory(flag string) (*history.DB, error) {
	path, err := historyPath(flag)
	if err != nil {
		return nil, fail(exitBadArgs, err)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, badInput("the run history %s: %v; lumina run records runs there (or give --history PATH)", path, errors.Unwrap(err))
	}
	db, err := history.OpenReader(path)
	if err != nil {
		return nil, fail(exitBadArgs, err)
	}
	return db, nil
}

func printHistory(w io.Writer, runs []history.Entry) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs recorded")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tSCENARIO\tNIC\tSEED\tVERDICT\tPKTS\tRETX\tTMO\tCNPS\tNACK-GEN us\tNACK-REACT us\tMCT us")
	for _, e := range runs {
		v := e.Run.Verdict
		if e.State != history.StateComplete {
			v = "(" + e.State + ")"
		}
		m := e.Run.Metrics
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.StartedAt.Local().Format("2006-01-02 15:04:05"),
			e.Run.Scenario, e.Run.NIC, e.Run.Seed, v, metric(m, "packets"), metric(m, "retransmissions"), metric(m, "timeouts"),
			metric(m, "cnps"), metric(m, "nack_generation_us_mean"), metric(m, "nack_reaction_us_mean"), metric(m, "mct_us_mean"))
	}
	tw.Flush()
}

func metric(m rundiff.Metrics, name string) string {
	v, ok := m[name]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 5, 64)
}

func newDiffCmd(stdout io.Writer) *cobra.Command {
	var (
		path    string
		tols    []string
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two runs metric by metric; exit 1 when one regressed beyond its tolerance",
		Long: `diff compares run A (the old: firmware A, yesterday) with run B (the new), metric by metric: old and new
value, change, the tolerance and which direction is worse, and whether it moved beyond the tolerance the
worse way (REGRESSED) or the better way (improved). A and B are results directories of lumina run or ids
in the run history (lumina history; "12" or "#12"). A verdict that gets worse (pass, fail, invalid,
error: best to worst), or changes to or from one lumina does not know, is a regression too.

A metric A has and B lacks is a regression, except a latency over retransmissions when B has none
left, and the timeout interval when B has no timeout (only-a).

Metrics and default tolerances (a move counts when |new - old| > max(absolute, percentage x |old|); a
percentage of a count allows at least 1):
` + metricsHelp() + `
Exit status: 0 no metric regressed, 1 at least one did, 2 bad input (no such run or directory, a
directory without analysis.json, a malformed --tolerance).`,
		Example: `  lumina diff results/fw-a results/fw-b
  lumina diff 41 42 --tolerance mct_us_mean=20% --tolerance retransmissions=2
  lumina diff results/fw-a results/fw-b --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tol := rundiff.Tolerances{}
			for _, s := range tols {
				name, t, err := rundiff.ParseTolerance(s)
				if err != nil {
					return badInput("--tolerance: %v", err)
				}
				tol[name] = t
			}
			var runs [2]*rundiff.Run
			var db *history.DB
			defer func() {
				if db != nil {
					db.Close()
				}
			}()
			for i, a := range args {
				r, err := loadRun(a, path, &db)
				if err != nil {
					return err
				}
				runs[i] = r
			}
			res := rundiff.Compare(runs[0], runs[1], tol)
			if jsonOut {
				if err := writeIndentedJSON(stdout, res); err != nil {
					return err
				}
			} else {
				rundiff.WriteText(stdout, res)
			}
			if res.Regression() {
				return fail(exitFailed, errors.New(""))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "history", "", "the run history for ids (default $"+history.EnvPath+", else the user's data directory)")
	cmd.Flags().StringArrayVar(&tols, "tolerance", nil, "METRIC=VALUE: an absolute amount (2), a percentage of the old value (10%) or both (10%,2); METRIC * for all; repeatable")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the comparison as JSON")
	return cmd
}

// loadRun reads a run: a results directory when arg is a directory, else a history id.
func loadRun(arg, path string, db **history.DB) (*rundiff.Run, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		r, err := rundiff.LoadDir(arg)
		if err != nil {
			return nil, fail(exitBadArgs, err)
		}
		return r, nil
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(arg, "#"), 10, 64)
	if err != nil || id <= 0 {
		return nil, badInput("%s: neither a results directory nor a run id of the history (a number, as lumina history lists)", arg)
	}
	if *db == nil {
		if *db, err = openHistory(path); err != nil {
			return nil, err
		}
	}
	e, err := (*db).Get(id)
	if err != nil {
		return nil, fail(exitBadArgs, err)
	}
	if e.State != history.StateComplete {
		return nil, badInput("run %d is not complete in the history (state %s: still running, or killed): nothing to compare", id, e.State)
	}
	return &e.Run, nil
}

func metricsHelp() string {
	var b strings.Builder
	for _, d := range rundiff.Defs {
		fmt.Fprintf(&b, "  %-25s %-6s worse %-6s tolerance %-8s %s\n", d.Name, d.Unit, d.Worse, d.Tolerance, d.Help)
	}
	return b.String()
}
