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

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/report"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
)

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out     string
		seed    uint64
		jsonOut bool
		quiet   bool
	)
	cmd := &cobra.Command{
		Use:   "run SCENARIO.yaml",
		Short: "Run a test scenario on its testbed (the simulator by default) and analyze it",
		Long: `run executes the scenario on its testbed (testbed: sim, the default simulated testbed), writes the
results directory (effective scenario, dumps, reconstructed trace, counters, traffic log, analysis.json),
runs the integrity check and every analyzer that applies, evaluates the scenario's expect: entries and
prints a summary (or, with --json, the analysis as JSON).

Exit status: 0 every check and expectation passed, 1 one failed, 2 bad input, 3 invalid test.`,
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
			var progress io.Writer
			if !quiet {
				progress = stderr
			}
			// Ctrl-C or a kill: say where the partial results are and that they are marked, then stop.
			var staging atomic.Value
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
				if d, _ := staging.Load().(string); d != "" && testbed.MarkInterrupted(d, name) {
					fmt.Fprintf(stderr, "lumina: %s: stopped; the partial results in %s are marked %s (lumina analyze refuses them); %s is unchanged\n",
						name, d, testbed.FileIncomplete, out)
				} else {
					fmt.Fprintf(stderr, "lumina: %s: stopped\n", name)
				}
				os.Exit(130)
			}()
			o, err := testbed.Run(sc, testbed.Options{OutDir: out, Progress: progress, Staged: func(d string) { staging.Store(d) }})
			if err != nil {
				// The test did not run to a verdict (bad input, the environment, the testbed): never a
				// check failure.
				return fail(exitBadArgs, err)
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
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on long runs")
	return cmd
}
