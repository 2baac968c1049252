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

	"github.com/lumina-go/lumina/version"
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
	// DirRxeRaw is the subdirectory where the rxe-vm testbed keeps the guest's own files (logs, tool output,
	// the guest switch's status).
	DirRxeRaw = "rxe-vm"
	// DirRemoteRaw is the subdirectory with the remote testbed's switch status and each agent's log.
	DirRemoteRaw = "remote"
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

// WriteJSON writes a results document to dir/name: v (an object) as indented JSON with schema_version first
// and a final newline, replacing the file whole.
func WriteJSON(dir, name string, v any) error {
	b, err := version.MarshalDocument(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return writeFileAtomic(filepath.Join(dir, name), b)
}

// writeFileAtomic replaces path with data whole (a re-analysis rewrites analysis.json in place: a kill must
// not leave half of it).
func writeFileAtomic(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing results: %w", err)
	}
	return nil
}

// ReadJSON decodes dir/name into v; a decoding error names the file, and a document written by a newer lumina
// (its schema_version) is refused.
func ReadJSON(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if _, err := version.CheckSchema(b); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// ListKey is the key under which traffic.json and connections.json hold their per-QP lists.
const ListKey = "qps"

// WriteList writes a per-QP list document (traffic.json, connections.json): {"schema_version": N, "qps": list}.
func WriteList[T any](dir, name string, list []T) error {
	b, err := version.MarshalList(ListKey, list)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return writeFileAtomic(filepath.Join(dir, name), b)
}

// ReadList reads a per-QP list document, or the bare list of a results directory from before schema_version.
func ReadList[T any](dir, name string, list *[]T) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := version.UnmarshalList(b, ListKey, list); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// IsDir tells whether path looks like a results directory: a complete one (it holds the effective scenario),
// or one a run left incomplete (its INCOMPLETE marker), which CheckComplete refuses.
func IsDir(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	for _, f := range []string{FileScenario, FileIncomplete} {
		if _, err := os.Stat(filepath.Join(path, f)); err == nil {
			return true
		}
	}
	return false
}
