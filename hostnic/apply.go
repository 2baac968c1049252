package hostnic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// OSRunner runs commands and touches files on this host.
type OSRunner struct{}

// Run runs argv without a shell; a failure carries the command's standard error.
func (OSRunner) Run(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return out, fmt.Errorf("%w: %s", err, msg)
		}
		return out, err
	}
	return out, nil
}

// ReadFile reads a file (sysfs and configfs attributes are small).
func (OSRunner) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// WriteFile writes an existing attribute file (never creates one: sysfs and configfs attributes exist).
func (OSRunner) WriteFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LookPath finds a command on PATH.
func (OSRunner) LookPath(name string) (string, error) { return exec.LookPath(name) }

// StepError is a step that failed: the host, its position, the step and the cause.
type StepError struct {
	Host  string
	Index int
	Step  Step
	Err   error
}

func (e *StepError) Error() string {
	host := e.Host
	if host == "" {
		host = "local host"
	}
	return fmt.Sprintf("hostnic: %s: step %d (%s): %v", host, e.Index+1, e.Step.Desc, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// explain turns the common failures into sentences: a missing tool, a permission problem, a missing file.
func explain(what string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return fmt.Errorf("%s: tool not installed (not found on PATH): %w", what, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%s: permission denied (EACCES/EPERM: needs root or CAP_NET_ADMIN): %w", what, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: does not exist (wrong interface or device name, or the driver does not offer it): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Apply runs steps in order and returns, in the order they were made, the undo steps of every change it made.
// It stops at the first failure with a *StepError; the undo list then covers the steps done before it, and the
// caller passes it to Undo. report (may be nil) hears about every step.
func Apply(ctx context.Context, r Runner, steps []Step, report func(StepReport)) (undo []Step, err error) {
	for i, s := range steps {
		note, u, err := applyOne(ctx, r, s)
		undo = append(undo, u...)
		if err != nil {
			err = &StepError{Host: s.Host, Index: i, Step: s, Err: err}
		}
		if report != nil {
			report(StepReport{Index: i, Step: s, Err: err, Note: note})
		}
		if err != nil {
			return undo, err
		}
	}
	return undo, nil
}

func applyOne(ctx context.Context, r Runner, s Step) (note string, undo []Step, err error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	switch s.Op {
	case OpLookPath:
		if len(s.Argv) == 0 {
			return "", nil, errors.New("no tool named")
		}
		p, err := r.LookPath(s.Argv[0])
		if err != nil {
			return "", nil, explain(s.Argv[0], err)
		}
		return p, nil, nil
	case OpCheck:
		b, err := r.ReadFile(s.Path)
		if err != nil {
			return "", nil, explain(s.Path, err)
		}
		got := strings.TrimSpace(string(b))
		if s.Value != "" && got != s.Value {
			return "", nil, fmt.Errorf("%s holds %q; expected %q", s.Path, got, s.Value)
		}
		return got, nil, nil
	case OpWrite:
		b, err := r.ReadFile(s.Path)
		if err != nil {
			return "", nil, explain("reading "+s.Path+" before writing it", err)
		}
		prev := strings.TrimSpace(string(b))
		if err := r.WriteFile(s.Path, []byte(s.Value+"\n")); err != nil {
			return "", nil, explain("writing "+s.Value+" to "+s.Path, err)
		}
		u := Step{Host: s.Host, Desc: "restore " + s.Path + " to " + prev + " (" + s.Desc + ")", Op: OpWrite, Path: s.Path, Value: prev}
		return "was " + prev, []Step{u}, nil
	case OpRun:
		if len(s.Argv) == 0 {
			return "", nil, errors.New("empty command")
		}
		var fills []map[string]string
		if s.Query != nil {
			out, err := r.Run(ctx, s.Query.Argv)
			if err != nil {
				return "", nil, explain("reading the state before the change ("+strings.Join(s.Query.Argv, " ")+")", err)
			}
			fills, err = parseQuery(s.Query.Parser, out)
			if err != nil {
				return "", nil, fmt.Errorf("reading the state before the change (%s): %w", strings.Join(s.Query.Argv, " "), err)
			}
		}
		if _, err := r.Run(ctx, s.Argv); err != nil {
			return "", nil, explain(strings.Join(s.Argv, " "), err)
		}
		if s.Undo != nil {
			u := *s.Undo
			u.Host = s.Host
			undo = append(undo, u)
		}
		var notes []string
		for _, f := range fills {
			argv := make([]string, 0, len(s.UndoArgv))
			for _, a := range s.UndoArgv {
				empty := false
				for k, v := range f {
					if strings.Contains(a, "{"+k+"}") && v == "" {
						empty = true
					}
					a = strings.ReplaceAll(a, "{"+k+"}", v)
				}
				// "key={x}" with nothing read for x: the setting was never configured; leave it out of the undo.
				if empty && strings.HasSuffix(a, "=") {
					continue
				}
				argv = append(argv, a)
			}
			undo = append(undo, Step{Host: s.Host, Desc: "undo: " + s.Desc, Op: OpRun, Argv: argv})
			notes = append(notes, fmtFill(f))
		}
		return strings.Join(notes, "; "), undo, nil
	}
	return "", nil, fmt.Errorf("unknown step kind %q", s.Op)
}

func fmtFill(f map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(f) {
		parts = append(parts, "was "+k+"="+f[k])
	}
	return strings.Join(parts, " ")
}

// Undo runs undo steps (as Apply returned them) in reverse order. It goes on after a failure, so that as much
// as possible is restored, and returns every failure joined.
func Undo(ctx context.Context, r Runner, undo []Step, report func(StepReport)) error {
	var errs []error
	for i := len(undo) - 1; i >= 0; i-- {
		s := undo[i]
		// An undo is never cancelled half-way by the run's context: restoring the host matters more.
		note, _, err := applyOne(context.WithoutCancel(ctx), r, s)
		if err != nil {
			err = &StepError{Host: s.Host, Index: i, Step: s, Err: err}
			errs = append(errs, err)
		}
		if report != nil {
			report(StepReport{Index: i, Step: s, Err: err, Note: note})
		}
	}
	return errors.Join(errs...)
}

// ReadDir lists a directory's entry names, sorted.
func (OSRunner) ReadDir(path string) ([]string, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}
