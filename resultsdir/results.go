// Package resultsdir is the results directory: the files a testbed writes and the verdict stage reads (the
// contract of docs/scenario.md "Results directory"), the records in them, and how they are read and written.
// It is the data on the arrow testbed -> verdict; it runs nothing. (It is not called results because results/
// is where `lumina run` writes by default, and the repository ignores it.)
package resultsdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Results directory layout, plus our own connections.json and switch.json that `lumina analyze RESULTS_DIR`
// needs to re-run the analyzers, and workload.json for a workload run.
const (
	FileScenario    = "scenario.yaml"
	FileTrace       = "trace.pcapng"
	DirDump         = "dump"
	FileCounters    = "counters.json"
	FileTraffic     = "traffic.json"
	FileAnalysis    = "analysis.json"
	FileConnections = "connections.json"
	FileSwitch      = "switch.json"
	// FileWorkload is what a `workload:` run measured (also the "workload" section of analysis.json).
	FileWorkload = "workload.json"
)

// ErrInput marks errors caused by bad input (scenario, profile, flags, a results directory that is not one):
// the command line maps them to exit status 2.
var ErrInput = errors.New("bad input")

type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{e.err, ErrInput} }

// BadInput marks err as the input's fault (errors.Is(err, ErrInput) holds).
func BadInput(err error) error { return inputError{err} }

// BadInputf is fmt.Errorf marked as the input's fault.
func BadInputf(f string, a ...any) error { return inputError{fmt.Errorf(f, a...)} }

// WriteJSON writes v as indented JSON with a final newline to dir/name.
func WriteJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	b = append(b, '\n')
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	return nil
}

// ReadJSON decodes dir/name into v; a decoding error names the file.
func ReadJSON(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// IsDir tells whether path looks like a results directory (it holds the effective scenario).
func IsDir(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	_, err = os.Stat(filepath.Join(path, FileScenario))
	return err == nil
}
