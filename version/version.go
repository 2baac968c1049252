// Package version says which build of lumina wrote a file: the module version, the VCS commit it was built
// from and the Go toolchain, all read from the binary's build information; and SchemaVersion, the version of
// the JSON documents the tool writes.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// SchemaVersion is the version of every JSON document lumina writes (analysis.json, counters.json,
// traffic.json, connections.json, switch.json, anomalies.json, the --json outputs). It changes when a field
// changes meaning or a document changes shape; added fields keep it.
//
// Version 1: every document is a JSON object with schema_version first; traffic.json and connections.json
// hold their lists under "qps" (version 0, before the field existed, had bare lists, which readers still
// accept).
const SchemaVersion = 1

// Info identifies a build.
type Info struct {
	// Version is the module version, "(devel)" for a binary built from a checkout.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, "unknown" when the build recorded none (go test,
	// go run of a file list, a build outside a checkout).
	Commit string `json:"commit"`
	// Modified is true when the checkout had uncommitted changes.
	Modified bool `json:"modified"`
	// Go is the toolchain that built the binary.
	Go string `json:"go"`
}

// Get returns the running binary's build information.
func Get() Info {
	return fromBuildInfo(debug.ReadBuildInfo())
}

func fromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	in := Info{Version: "unknown", Commit: "unknown", Go: runtime.Version()}
	if !ok || bi == nil {
		return in
	}
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		in.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form `lumina --version` prints, e.g.
// "lumina (devel) commit 44fdec7c0ffee... (modified) go1.26.0".
func (i Info) String() string {
	mod := ""
	if i.Modified {
		mod = " (modified)"
	}
	return fmt.Sprintf("lumina %s commit %s%s %s", i.Version, i.Commit, mod, i.Go)
}
