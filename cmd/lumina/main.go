// Command lumina tests RDMA NICs (RoCEv2) the way the Lumina paper does: an event-injecting switch between two
// hosts, every packet mirrored with metadata, and the complete trace analyzed. The simulated testbed is the
// default; `lumina analyze` works on any capture.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/version"
)

// Exit statuses (spec/scenario-and-cli.md).
const (
	exitOK      = 0 // ran, every check and expectation passed
	exitFailed  = 1 // a check or expectation failed
	exitBadArgs = 2 // bad input: usage, scenario, unreadable capture
	exitInvalid = 3 // invalid test: the trace failed the integrity check; nothing was analyzed
)

// exitError carries an exit status through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func fail(code int, err error) error { return &exitError{code: code, err: err} }

func badInput(format string, a ...any) error { return fail(exitBadArgs, fmt.Errorf(format, a...)) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status; it is the testable entry point.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "lumina:", ee.err)
		}
		return ee.code
	}
	// Cobra's own errors (unknown flag, wrong argument count) are usage errors.
	fmt.Fprintln(stderr, "lumina:", err)
	return exitBadArgs
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "lumina",
		Short: "Test RDMA NICs (RoCEv2): inject events, mirror every packet, analyze the trace",
		Long: `lumina tests RDMA NICs the way the Lumina paper does: an event-injecting switch between two
hosts drops, ECN-marks or corrupts exactly the packets a scenario names, every packet is mirrored
with precise metadata, and the complete trace is analyzed. The simulated testbed is the default.

Exit status: 0 every check passed, 1 a check or expectation failed, 2 bad input or environment
(nothing ran, or no verdict could be reached), 3 invalid test (the trace failed the integrity check,
or the results directory is incomplete), 130 lumina run stopped by Ctrl-C or SIGTERM.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
	}
	// The build: module version ("(devel)" from a checkout), VCS commit, Go toolchain.
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCmd(stdout, stderr), newAnalyzeCmd(stdout, stderr), newProfilesCmd(stdout),
		newSwitchCmd(stdout, stderr), newDumpCmd(stdout, stderr), newSearchCmd(stdout, stderr),
		newAgentCmd(os.Stdin, stdout, stderr), newHistoryCmd(stdout), newDiffCmd(stdout))
	root.AddCommand(newExportCmd(stdout, stderr), newWiresharkCmd(stdout))
	root.AddCommand(newReportCmd(stdout, stderr))
	root.AddCommand(newCampaignCmd(stdout, stderr), newWorkerCmd(stdout, stderr))
	return root
}
