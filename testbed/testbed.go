// Package testbed runs a scenario on a testbed and collects the raw results into a results directory (the
// contract of spec/scenario-and-cli.md, package resultsdir): the effective scenario, what each dumper wrote, the
// reconstructed trace, counters, the traffic log. It judges nothing: the integrity check, the analyzers and
// the scenario's expectations are the verdict stage's (package verdict).
//
// The simulated testbed (package netsim) is the embedded default.
package testbed

import "github.com/lumina-go/lumina/resultsdir"

// ErrInput marks errors caused by bad input (scenario, profile, flags): the command line maps them to exit
// status 2. It is resultsdir.ErrInput, which the verdict stage's errors wrap too.
var ErrInput = resultsdir.ErrInput

func badInput(err error) error                { return resultsdir.BadInput(err) }
func badInputf(f string, a ...any) error      { return resultsdir.BadInputf(f, a...) }
func writeJSON(dir, name string, v any) error { return resultsdir.WriteJSON(dir, name, v) }
func readJSON(dir, name string, v any) error  { return resultsdir.ReadJSON(dir, name, v) }

// writeList writes a per-QP list document (traffic.json, connections.json) with schema_version.
func writeList[T any](dir, name string, list []T) error { return resultsdir.WriteList(dir, name, list) }
