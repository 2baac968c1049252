package testbed

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
)

// The trace the simulator writes while it runs (simstream.go) is byte for byte the one reconstruct merges from
// the dumps: several dumpers, drops, ECN marks, CNPs, IRN's SACK NAKs.
func TestStreamedTraceIsReconstructed(t *testing.T) {
	for _, name := range []string{"listing2", "noisy-neighbor-cx4lx-8", "ets-two-classes-cx5", "irn-selective-repeat"} {
		sc, err := scenario.Load("../examples/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, resultsdir.DirDump), 0o755); err != nil {
			t.Fatal(err)
		}
		raw, err := runSim(sc, Options{OutDir: dir})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !raw.traceDone {
			t.Fatalf("%s: the simulator did not write the trace while it ran", name)
		}
		streamed, err := os.ReadFile(filepath.Join(dir, resultsdir.FileTrace))
		if err != nil {
			t.Fatal(err)
		}
		if err := reconstruct(dir, raw, sc.IndexBase); err != nil {
			t.Fatal(err)
		}
		merged, err := os.ReadFile(filepath.Join(dir, resultsdir.FileTrace))
		if err != nil {
			t.Fatal(err)
		}
		if len(streamed) < 1000 || !bytes.Equal(streamed, merged) {
			t.Errorf("%s: streamed trace (%d bytes) differs from the dumps' merge (%d bytes)", name, len(streamed), len(merged))
		}
	}
}
