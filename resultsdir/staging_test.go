package resultsdir

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// writeRun writes a run's files into a staging directory of final and commits it.
func writeRun(t *testing.T, final string, files map[string]string) {
	t.Helper()
	st, err := Begin(final, "test run")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(st.Dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Commit(); err != nil {
		t.Fatal(err)
	}
}

// tree lists the files and symlinks under dir with their contents (a symlink's is where it points).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			to, err := os.Readlink(p)
			m[rel] = "-> " + to
			return err
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			m[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Replacing a run deletes exactly the old run's files: the new run's are in place, nothing else beside the
// results directory is touched, and no staging directory is left.
func TestReplaceDeletesExactlyTheOldRun(t *testing.T) {
	parent := t.TempDir()
	final := filepath.Join(parent, "res")
	if err := os.WriteFile(filepath.Join(parent, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeRun(t, final, map[string]string{FileTrace: "old trace", "dump/dumper-0.pcap": "old dump 0",
		"dump/dumper-1.pcap": "old dump 1", FileAnalysis: "old analysis"})
	writeRun(t, final, map[string]string{FileTrace: "new trace", "dump/dumper-0.pcap": "new dump 0", FileCounters: "new counters"})
	got := tree(t, parent)
	want := map[string]string{"keep.txt": "mine", "res/" + FileTrace: "new trace", "res/dump/dumper-0.pcap": "new dump 0",
		"res/" + FileCounters: "new counters"}
	if len(got) != len(want) {
		t.Errorf("after the replacement: %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q; want %q (all: %v)", k, got[k], v, got)
		}
	}
	entries, _ := os.ReadDir(parent)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"keep.txt", "res"}) {
		t.Errorf("beside the results: %v; want keep.txt and res only", names)
	}
}

// outside is a directory beside the results holding a dump and a trace a symlink could point at.
func outside(t *testing.T, parent string) (string, map[string]string) {
	t.Helper()
	target := filepath.Join(parent, "elsewhere")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"dumper-0.pcap", FileTrace} {
		if err := os.WriteFile(filepath.Join(target, n), []byte("not yours: "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return target, tree(t, target)
}

// An old run whose dump/ and trace.pcapng are symlinks is replaced without touching what they point at.
func TestReplaceLeavesSymlinkTargets(t *testing.T) {
	parent := t.TempDir()
	target, before := outside(t, parent)
	final := filepath.Join(parent, "res")
	writeRun(t, final, map[string]string{FileAnalysis: "old analysis"})
	if err := os.RemoveAll(filepath.Join(final, DirDump)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(final, DirDump)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(target, FileTrace), filepath.Join(final, FileTrace)); err != nil {
		t.Fatal(err)
	}
	writeRun(t, final, map[string]string{FileTrace: "new trace"})
	if after := tree(t, target); !maps.Equal(after, before) {
		t.Errorf("the symlinks' targets: %v; want them untouched: %v", after, before)
	}
	if got := tree(t, final); len(got) != 1 || got[FileTrace] != "new trace" {
		t.Errorf("results after the replacement: %v; want the new trace only", got)
	}
}

// A directory of the old run swapped for a symlink after the deletion listed it does not redirect the
// deletion: the files are unlinked in the directory that was listed.
func TestReplaceSymlinkSwappedMidDeletion(t *testing.T) {
	parent := t.TempDir()
	target, before := outside(t, parent)
	final := filepath.Join(parent, "res")
	writeRun(t, final, map[string]string{"dump/dumper-0.pcap": "old dump 0", FileTrace: "old trace"})
	swapped := false
	listedHook = func(dir string) {
		if err := os.Rename(filepath.Join(dir, DirDump), filepath.Join(dir, "dump.moved")); err != nil {
			t.Error(err)
			return
		}
		if err := os.Symlink(target, filepath.Join(dir, DirDump)); err != nil {
			t.Error(err)
			return
		}
		swapped = true
	}
	t.Cleanup(func() { listedHook = nil })
	writeRun(t, final, map[string]string{FileTrace: "new trace"})
	if !swapped {
		t.Fatal("the deletion never listed the old run: the test swaps nothing")
	}
	if after := tree(t, target); !maps.Equal(after, before) {
		t.Errorf("the swapped-in symlink's target: %v; want it untouched: %v", after, before)
	}
	if got := tree(t, final); len(got) != 1 || got[FileTrace] != "new trace" {
		t.Errorf("results after the replacement: %v; want the new trace only", got)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 2 {
		t.Errorf("beside the results: %d entries; want elsewhere and res", len(entries))
	}
}

// A failed fsync of the results directory's parent after the rename fails the commit (the rename and the
// marker's removal are not durable); an fsync the file system does not support (EINVAL) does not.
func TestCommitReportsParentSyncError(t *testing.T) {
	for _, c := range []struct {
		fail    error
		wantErr bool
	}{{unix.EIO, true}, {unix.EINVAL, false}} {
		parent := t.TempDir()
		final := filepath.Join(parent, "run")
		syncHook = func(p string, err error) error {
			if p == parent {
				return c.fail
			}
			return err
		}
		st, err := Begin(final, "test run")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(st.Dir, "a"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		err = st.Commit()
		syncHook = nil
		if c.wantErr && (err == nil || !errors.Is(err, unix.EIO)) {
			t.Errorf("parent fsync %v: Commit returned %v, want the error", c.fail, err)
		}
		if !c.wantErr && err != nil {
			t.Errorf("parent fsync %v: Commit returned %v, want nil", c.fail, err)
		}
	}
}
