// Package testbed runs a scenario on a testbed and collects the raw results into a results directory (the
// contract of spec/scenario-and-cli.md): the effective scenario, what each dumper wrote, the reconstructed
// trace, counters, the traffic log; then the integrity check, the analyzers and the scenario's expectations.
//
// The simulated testbed (package netsim) is the embedded default.
package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lumina-go/lumina/version"
)

// Results directory layout (spec/scenario-and-cli.md "Results directory"), plus our own connections.json and
// switch.json that `lumina analyze RESULTS_DIR` needs to re-run the analyzers.
const (
	FileScenario    = "scenario.yaml"
	FileTrace       = "trace.pcapng"
	DirDump         = "dump"
	FileCounters    = "counters.json"
	FileTraffic     = "traffic.json"
	FileAnalysis    = "analysis.json"
	FileConnections = "connections.json"
	FileSwitch      = "switch.json"
)

// ErrInput marks errors caused by bad input (scenario, profile, flags): the command line maps them to exit
// status 2.
var ErrInput = errors.New("bad input")

type inputError struct{ err error }

func (e inputError) Error() string       { return e.err.Error() }
func (e inputError) Unwrap() []error     { return []error{e.err, ErrInput} }
func badInput(err error) error           { return inputError{err} }
func badInputf(f string, a ...any) error { return inputError{fmt.Errorf(f, a...)} }

// writeJSON writes a results document: v (an object) with schema_version first.
func writeJSON(dir, name string, v any) error {
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

// listKey is the key under which traffic.json and connections.json hold their per-QP lists.
const listKey = "qps"

// writeList writes a per-QP list document (traffic.json, connections.json).
func writeList[T any](dir, name string, list []T) error {
	b, err := version.MarshalList(listKey, list)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return writeFileAtomic(filepath.Join(dir, name), b)
}

// readList reads a per-QP list document, or the bare list of a results directory from before schema_version.
func readList[T any](dir, name string, list *[]T) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := version.UnmarshalList(b, listKey, list); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

func readJSON(dir, name string, v any) error {
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
