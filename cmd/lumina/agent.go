package main

import (
	"io"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/remote"
)

// newAgentCmd is the hidden agent the remote testbed starts on each host over SSH: typed JSON requests on
// standard input, answers on standard output, log on standard error (remote/proto.go).
func newAgentCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var runDir, cleanup string
	cmd := &cobra.Command{
		Use:    "agent --run-dir DIR | --cleanup DIR",
		Short:  "Serve the remote testbed's typed operations on this host (started by lumina run over SSH)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (runDir == "") == (cleanup == "") {
				return badInput("agent needs exactly one of --run-dir DIR and --cleanup DIR")
			}
			run := func(argv []string) (string, error) {
				out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
				if err != nil {
					return string(out), &cmdError{argv: argv, out: string(out), err: err}
				}
				return string(out), nil
			}
			if cleanup != "" {
				if err := remote.Cleanup(cleanup, run, nil); err != nil {
					return fail(1, err)
				}
				return nil
			}
			// The controller gone, sshd closes the agent's output: a write must fail with EPIPE, not kill the
			// agent with SIGPIPE before it has cleaned up.
			signal.Ignore(syscall.SIGPIPE)
			// SIGHUP and SIGTERM (the session torn down) end the agent as the end of its input does.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			a := &remote.Agent{RunDir: runDir, Log: stderr}
			if err := a.Serve(ctx, stdin, stdout); err != nil {
				return fail(1, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runDir, "run-dir", "", "directory for this run's files and undo journal (removed at exit)")
	cmd.Flags().StringVar(&cleanup, "cleanup", "", "undo the journal of a dead agent's run directory and remove it")
	return cmd
}

type cmdError struct {
	argv []string
	out  string
	err  error
}

func (e *cmdError) Error() string {
	return strings.Join(e.argv, " ") + ": " + e.err.Error() + ": " + strings.TrimSpace(e.out)
}
