package testbed

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"golang.org/x/sys/unix"
)

// A writeback error the early fsync of trace.pcapng reports fails the run: the commit's own fsync would not
// see it again (Linux consumes it), so the directory is not committed, and what was written stays marked
// INCOMPLETE.
func TestEarlyFsyncErrorFailsTheRun(t *testing.T) {
	sc, err := scenario.Load("../examples/listing2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prev := syncFile
	t.Cleanup(func() { syncFile = prev })
	var failed bool
	syncFile = func(f *os.File) error {
		if filepath.Base(f.Name()) == resultsdir.FileTrace && !failed {
			failed = true // once, as the kernel reports it
			return &os.PathError{Op: "sync", Path: f.Name(), Err: unix.EIO}
		}
		return prev(f)
	}
	out := filepath.Join(t.TempDir(), "res")
	var staged string
	err = Run(sc, Options{OutDir: out, Staged: func(d string) { staged = d }})
	if !failed {
		t.Fatal("trace.pcapng was not fsynced early: the test injects nothing")
	}
	if err == nil || !errors.Is(err, unix.EIO) {
		t.Fatalf("Run: %v; want the fsync's EIO", err)
	}
	if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("%s exists (%v): a run whose trace did not reach the disk was committed", out, serr)
	}
	if _, serr := os.Stat(filepath.Join(staged, resultsdir.FileIncomplete)); serr != nil {
		t.Errorf("staging directory %s not marked incomplete: %v", staged, serr)
	}
}
