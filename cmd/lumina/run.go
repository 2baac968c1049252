package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/htmlreport"
	"github.com/lumina-go/lumina/report"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/verdict"
)

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out      string
		seed     uint64
		jsonOut  bool
		quiet    bool
		dryRun   bool
		verbsBin string
		histPath string
		noHist   bool
		html     bool
		cpuProf  string
		memProf  string
	)
	cmd := &cobra.Command{
		Use:   "run SCENARIO.yaml",
		Short: "Run a test scenario on its testbed (the simulator by default) and analyze it",
		Long: `run executes the scenario on its testbed (testbed: sim, the default simulated testbed), writes the
results directory (effective scenario, dumps, reconstructed trace, counters, traffic log, analysis.json),
runs the integrity check and every analyzer that applies, evaluates the scenario's expect: entries and
prints a summary (or, with --json, the analysis as JSON).

With testbed: remote the roles run on hosts reached over SSH (docs/testbed-remote.md); --dry-run prints
every operation and command host by host without connecting to any.

Exit status: 0 every check and expectation passed, 1 one failed, 2 bad input or environment (a host
unreachable, a host key unknown or changed, authentication failed), 3 invalid test.`,
		Example: `  lumina run examples/listing2.yaml
  lumina run examples/cnp-scope-cx6dx.yaml --out /tmp/cnp --seed 42 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := scenario.Load(args[0])
			if err != nil {
				return fail(exitBadArgs, err)
			}
			if cmd.Flags().Changed("seed") {
				sc.WithSeed(seed)
			}
			if out == "" {
				name := strings.TrimSuffix(filepath.Base(args[0]), filepath.Ext(args[0]))
				out = filepath.Join("results", name)
			}
			if dryRun {
				if err := testbed.DryRun(sc, testbed.Options{OutDir: out, Remote: testbed.RemoteOptions{VerbsBinary: verbsBin}}, stdout); err != nil {
					return fail(exitBadArgs, err) // no run, no verdict: never a check failure
				}
				return nil
			}
			stopProf, err := startRunProfile(cpuProf, memProf)
			if err != nil {
				return fail(exitBadArgs, err)
			}
			defer func() {
				if err := stopProf(); err != nil {
					fmt.Fprintf(stderr, "lumina: %v\n", err)
				}
			}()
			mtr := newMeter(stderr, quiet, "lumina run", "", time.Second)
			// No meter (--quiet, LUMINA_PROGRESS=off): no progress writer either, so that the testbed does not
			// fall back to its own progress lines.
			var progress io.Writer
			if mtr != nil {
				progress = mtr.Writer(stderr)
			}
			// Ctrl-C or a kill: say where the partial results are and that they are marked, then stop. The
			// remote testbed catches the signal itself: it cleans the hosts, and the run ends invalid (exit 3).
			var staging atomic.Value
			if sc.Testbed != "remote" {
				sigs := make(chan os.Signal, 1)
				signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
				defer func() { signal.Stop(sigs); close(sigs) }() // ends the goroutine below
				go func() {
					sig, ok := <-sigs
					if !ok {
						return
					}
					name := "SIGTERM"
					if sig == os.Interrupt {
						name = "SIGINT (Ctrl-C)"
					}
					testbed.Quiesce()
					mtr.Abort() // the bar off its line before the message; no "done"
					if d, _ := staging.Load().(string); d != "" && resultsdir.MarkInterrupted(d, name) {
						fmt.Fprintf(stderr, "lumina: %s: stopped; the partial results in %s are marked %s (lumina analyze refuses them); %s is unchanged\n",
							name, d, resultsdir.FileIncomplete, out)
					} else {
						fmt.Fprintf(stderr, "lumina: %s: stopped\n", name)
					}
					os.Exit(130)
				}()
			}
			var rec *runRecord
			if !noHist {
				rec = startRecord(histPath, sc, out, stderr)
			}
			// The testbed writes a staging directory; the verdict stage judges it there (Finish), so that
			// analysis.json is part of the results directory moved into place whole.
			// A simulator run's trace is judged while it is written (verdict.NewStream, on the second core).
			var o *verdict.Outcome
			var ts *verdict.Stream
			err = testbed.Run(sc, testbed.Options{OutDir: out, Progress: progress, Meter: runMeter(mtr), Remote: testbed.RemoteOptions{VerbsBinary: verbsBin},
				Staged: func(d string) { staging.Store(d) },
				Trace: func(d string, conns []resultsdir.ConnRecord) testbed.TraceConsumer {
					ts = verdict.NewStream(d, sc, conns)
					return ts
				},
				Finish: func(d string) (err error) {
					o, err = verdict.JudgeStream(d, sc, ts)
					return err
				}})
			if err != nil {
				mtr.Abort() // an error or an invalid run follows: never "done"
			} else {
				mtr.Done()
			}
			var invalid *testbed.InvalidRunError
			switch {
			case errors.As(err, &invalid):
				// The run started and could not finish (the remote testbed): the verdict says invalid, with
				// the reason, in the staging directory that keeps the partial results, marked INCOMPLETE.
				o, err = verdict.RecordInvalid(invalid.Dir, sc, invalid.Reason)
				if err == nil {
					fmt.Fprintf(stderr, "lumina: the partial results of the run are in %s, marked %s; %s is unchanged\n",
						invalid.Dir, resultsdir.FileIncomplete, out)
				}
			case err == nil:
				o.Dir = out
			}
			if err != nil {
				partial, _ := staging.Load().(string)
				rec.finish(nil, partial) // no verdict: recorded as an error, exit status 2
			} else {
				rec.finish(o, "")
			}
			if err != nil {
				// The test did not run to a verdict (bad input, the environment, the testbed): never a
				// check failure.
				return fail(exitBadArgs, err)
			}
			if html {
				r, err := htmlreport.FromOutcome(o)
				if err == nil {
					err = writeRunReport(o.Dir, htmlreport.ResultsPage(r), stderr)
				}
				if err != nil {
					return fail(exitBadArgs, fmt.Errorf("the run is judged (%s, in %s) but its report could not be written: %w", o.Doc.Verdict, o.Dir, err))
				}
			}
			if jsonOut {
				if err := writeIndentedJSON(stdout, o.Doc); err != nil {
					return err
				}
			} else {
				report.Run(stdout, o)
			}
			if code := o.ExitCode(); code != exitOK {
				return fail(code, errors.New(""))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "results directory (default results/<scenario name>)")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "override the scenario's seed")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the analysis as JSON instead of the summary")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on long runs (a bar on a terminal, else a line every 2 s, after the first second)")
	cmd.Flags().StringVar(&verbsBin, "verbs-binary", "", "testbed remote on real RNICs (nic.ib-device): the lumina-verbs generator copied to the requester and responder (default $"+testbed.EnvVerbsBinary+"; built once with -tags verbs, never on the hosts)")
	cmd.Flags().StringVar(&histPath, "history", "", "record the run in this history database (default $LUMINA_HISTORY, else the user's data directory: lumina history)")
	cmd.Flags().BoolVar(&noHist, "no-history", false, "do not record the run in the run history")
	cmd.Flags().BoolVar(&html, "report", false, "also write the HTML report (lumina report) as report.html in the results directory")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print, host by host, every operation and command a remote run would execute; connect to nothing, write nothing")
	cmd.Flags().StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	cmd.Flags().StringVar(&memProf, "memprofile", "", "write an allocation profile of the run to this file (go tool pprof)")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	_ = cmd.Flags().MarkHidden("memprofile")
	return cmd
}
