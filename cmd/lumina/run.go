package main

import (
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/report"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
)

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out      string
		seed     uint64
		jsonOut  bool
		quiet    bool
		dryRun   bool
		verbsBin string
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
					if errors.Is(err, testbed.ErrInput) {
						return fail(exitBadArgs, err)
					}
					return fail(exitFailed, err)
				}
				return nil
			}
			var progress io.Writer
			if !quiet {
				progress = stderr
			}
			o, err := testbed.Run(sc, testbed.Options{OutDir: out, Progress: progress, Remote: testbed.RemoteOptions{VerbsBinary: verbsBin}})
			if err != nil {
				if errors.Is(err, testbed.ErrInput) {
					return fail(exitBadArgs, err)
				}
				return fail(exitFailed, err)
			}
			if jsonOut {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(o.Doc); err != nil {
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
	cmd.Flags().StringVar(&verbsBin, "verbs-binary", "", "testbed remote on real RNICs (nic.ib-device): the lumina-verbs generator copied to the requester and responder (default $"+testbed.EnvVerbsBinary+"; built once with -tags verbs, never on the hosts)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print, host by host, every operation and command a remote run would execute; connect to nothing, write nothing")
	return cmd
}
