package resultsdir

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FileIncomplete marks a results directory whose run has not finished (or was interrupted or failed): its
// content says why. `lumina analyze` refuses such a directory (exit status 3).
const FileIncomplete = "INCOMPLETE"

// ErrIncomplete marks the error of analyzing a results directory that holds an INCOMPLETE marker: the command
// line maps it to exit status 3 (invalid test), like a trace that fails the integrity check.
var ErrIncomplete = errors.New("incomplete results directory")

type incompleteError struct{ err error }

func (e incompleteError) Error() string   { return e.err.Error() }
func (e incompleteError) Unwrap() []error { return []error{e.err, ErrIncomplete} }

// resultsEntries are the names a results directory may hold; an existing --out directory with anything else in
// it is not replaced (it is not ours to delete).
var resultsEntries = map[string]bool{FileScenario: true, FileTrace: true, DirDump: true, FileCounters: true,
	FileTraffic: true, FileAnalysis: true, FileConnections: true, FileSwitch: true, FileWorkload: true,
	DirRxeRaw: true, DirRemoteRaw: true, FileIncomplete: true}

// Staging is a results directory being written: a fresh sibling of the final directory, marked INCOMPLETE,
// that Commit syncs and moves into place whole. Until then the final directory keeps the previous run's
// complete results (or does not exist); a run killed at any point leaves the previous results untouched and a
// staging directory that `lumina analyze` refuses.
type Staging struct {
	// Dir is where the testbed writes (a sibling of Final named after it).
	Dir string
	// Final is the results directory the run was asked for.
	Final string
}

// Begin checks that final can become a results directory (it does not exist, or it is a directory
// holding nothing but results files) and creates the staging directory beside it with its dump directory and
// the INCOMPLETE marker. Its errors are environment errors (exit status 2): nothing has run.
func Begin(final, what string) (*Staging, error) {
	if final == "" {
		return nil, BadInputf("no results directory given")
	}
	final = filepath.Clean(final)
	if err := checkReplaceable(final); err != nil {
		return nil, err
	}
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, BadInputf("results directory %s: cannot create its parent: %w", final, err)
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(final)+".partial-")
	if err != nil {
		return nil, BadInputf("results directory %s: cannot write in %s: %w", final, parent, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private; a results directory is not
		os.RemoveAll(tmp)
		return nil, BadInputf("results directory %s: %w", final, err)
	}
	st := &Staging{Dir: tmp, Final: final}
	marker := fmt.Sprintf("lumina: this results directory is incomplete: %s started at %s (pid %d) and has not finished;\n"+
		"if that process is gone, the run was interrupted. The complete results go to %s.\n",
		what, time.Now().UTC().Format(time.RFC3339), os.Getpid(), final)
	if err := os.WriteFile(filepath.Join(tmp, FileIncomplete), []byte(marker), 0o644); err != nil {
		os.RemoveAll(tmp)
		return nil, BadInputf("results directory %s: cannot write in %s: %w", final, parent, err)
	}
	if err := os.Mkdir(filepath.Join(tmp, DirDump), 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, BadInputf("results directory %s: %w", final, err)
	}
	return st, nil
}

// checkReplaceable accepts a path that does not exist, or a directory that is empty or holds only results
// files (a previous run's).
func checkReplaceable(final string) error {
	st, err := os.Lstat(final)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return BadInputf("results directory %s: %w", final, err)
	}
	if !st.IsDir() {
		return BadInputf("results directory %s exists and is not a directory; choose another --out", final)
	}
	// A mount point cannot be swapped with its staging sibling (rename across file systems): the finished
	// results would be stranded, marked incomplete. Refuse it before anything runs.
	if pst, err := os.Stat(filepath.Dir(final)); err == nil {
		if a, b := st.Sys().(*syscall.Stat_t), pst.Sys().(*syscall.Stat_t); a != nil && b != nil && a.Dev != b.Dev {
			return BadInputf("results directory %s is a mount point; results are written beside it and moved into place, so give a directory inside it (e.g. %s)",
				final, filepath.Join(final, "results"))
		}
	}
	entries, err := os.ReadDir(final)
	if err != nil {
		return BadInputf("results directory %s: %w", final, err)
	}
	var foreign []string
	for _, e := range entries {
		n := e.Name()
		if !resultsEntries[n] && !(strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp")) {
			foreign = append(foreign, n)
		}
	}
	if len(foreign) > 0 {
		if len(foreign) > 3 {
			foreign = append(foreign[:3], "...")
		}
		return BadInputf("results directory %s holds files that are not results (%s): a run replaces the whole directory; choose another --out",
			final, strings.Join(foreign, ", "))
	}
	return nil
}

// Commit syncs every file and moves the staging directory into place, replacing a previous run's directory in
// one step (or, where the file system cannot exchange directories, in two renames). Each directory carries an
// INCOMPLETE marker whenever a kill could leave it in an in-between state: the old run's before it is
// swapped out (and until it is deleted), the new run's until it is in place.
func (s *Staging) Commit() error {
	if err := syncTree(s.Dir); err != nil {
		return fmt.Errorf("finishing results: %w", err)
	}
	if err := checkReplaceable(s.Final); err != nil {
		return err // something was put there during the run
	}
	err := os.Rename(s.Dir, s.Final)
	if err != nil {
		// Final exists (a non-empty directory cannot be renamed over): mark it superseded, exchange the two
		// atomically, then delete the old run now living at the staging name.
		msg := fmt.Sprintf("lumina: these results are being replaced by a newer run of the same results directory (%s)\n", s.Dir)
		if err := os.WriteFile(filepath.Join(s.Final, FileIncomplete), []byte(msg), 0o644); err != nil {
			return fmt.Errorf("moving results into %s: %w", s.Final, err)
		}
		err = unix.Renameat2(unix.AT_FDCWD, s.Dir, unix.AT_FDCWD, s.Final, unix.RENAME_EXCHANGE)
		if err != nil {
			old := s.Dir + ".old"
			if err = os.Rename(s.Final, old); err == nil {
				if err = os.Rename(s.Dir, s.Final); err == nil {
					s.Dir = old
				}
			}
		}
		if err != nil {
			// Neither way worked (a mount point, a busy directory): the previous results stay as they were, and
			// the new ones, complete, stay where they are, unmarked, under their own name.
			_ = os.Remove(filepath.Join(s.Final, FileIncomplete))
			if rerr := os.Remove(filepath.Join(s.Dir, FileIncomplete)); rerr != nil {
				return fmt.Errorf("moving results into %s: %w (they stay in %s, marked incomplete: %v)", s.Final, err, s.Dir, rerr)
			}
			return BadInputf("moving results into %s: %w; the complete results are in %s", s.Final, err, s.Dir)
		}
	}
	if err := os.Remove(filepath.Join(s.Final, FileIncomplete)); err != nil {
		return fmt.Errorf("finishing results: %w", err)
	}
	// The marker's removal and the rename are durable only once both directories are synced; an error here
	// (a writeback error is reported once) fails the run rather than leaving results that a crash could undo.
	for _, d := range []string{s.Final, filepath.Dir(s.Final)} {
		if err := syncPath(d); err != nil {
			return fmt.Errorf("finishing results: syncing %s: %w", d, err)
		}
	}
	if s.Dir != s.Final {
		if err := removeMarked(s.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the previous results (now %s): %w", s.Dir, err)
		}
	}
	return nil
}

// removeMarked deletes a directory that holds an INCOMPLETE marker, the marker last, so that a kill during the
// deletion never leaves a directory without it.
func removeMarked(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	removeFilesConcurrently(dir)
	for _, e := range entries {
		if e.Name() != FileIncomplete {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(dir)
}

// removeFilesConcurrently deletes the regular files under dir but its marker, several at once: freeing a large
// file's pages is most of the time a replaced run's deletion takes (the dumps and trace of a long run), and the
// cores are otherwise idle then. What it leaves (on an error) removeMarked deletes after it. Every name is
// unlinked relative to its directory's open descriptor, and directories are opened without following a
// symlink: a symlink found in the tree, or swapped in for a directory after it was listed, never redirects a
// deletion outside dir (a symlink itself is left to removeMarked, which unlinks it, not its target).
func removeFilesConcurrently(dir string) {
	type file struct {
		dirfd int
		name  string
		size  int64
	}
	var list []file
	var dirfds []int
	defer func() {
		for _, fd := range dirfds {
			unix.Close(fd)
		}
	}()
	var walk func(fd int, top bool)
	walk = func(fd int, top bool) {
		dirfds = append(dirfds, fd)
		dup, err := unix.Dup(fd) // read through a copy: fd stays open for the unlinks
		if err != nil {
			return
		}
		d := os.NewFile(uintptr(dup), dir)
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			if top && n == FileIncomplete {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				list = append(list, file{fd, n, st.Size})
			case unix.S_IFDIR:
				if sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
					walk(sub, false)
				}
			}
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	walk(fd, true)
	if listedHook != nil {
		listedHook(dir)
	}
	// The largest first, so that the large ones are deleted side by side.
	slices.SortFunc(list, func(a, b file) int { return cmp.Compare(b.size, a.size) })
	files := make(chan file)
	var wg sync.WaitGroup
	for range max(2, runtime.NumCPU()) {
		wg.Go(func() {
			for f := range files {
				_ = unix.Unlinkat(f.dirfd, f.name, 0)
			}
		})
	}
	for _, f := range list {
		files <- f
	}
	close(files)
	wg.Wait()
}

// listedHook, when not nil, runs once removeFilesConcurrently has listed the files (a test swaps a directory
// for a symlink there).
var listedHook func(dir string)

// Abort ends a run that failed. A run that failed on its input (nothing ran) leaves nothing behind; otherwise
// the staging directory stays for inspection, its marker saying why, and the error says where it is.
func (s *Staging) Abort(cause error) error {
	if errors.Is(cause, ErrInput) {
		removeMarked(s.Dir)
		return cause
	}
	msg := fmt.Sprintf("lumina: this results directory is incomplete: the run failed: %v\n", cause)
	if err := os.WriteFile(filepath.Join(s.Dir, FileIncomplete), []byte(msg), 0o644); err != nil {
		return cause
	}
	return fmt.Errorf("%w (partial results kept in %s, marked %s)", cause, s.Dir, FileIncomplete)
}

// MarkInterrupted records in a staging directory's marker that the run was interrupted (by what), when the
// directory is still a staging one; it says whether it did.
func MarkInterrupted(dir, by string) bool {
	marker := filepath.Join(dir, FileIncomplete)
	if _, err := os.Stat(marker); err != nil {
		return false // committed (moved away) or gone
	}
	msg := fmt.Sprintf("lumina: this results directory is incomplete: the run was interrupted by %s at %s\n", by, time.Now().UTC().Format(time.RFC3339))
	return os.WriteFile(marker, []byte(msg), 0o644) == nil
}

// syncTree fsyncs every file and directory under dir.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		return syncPath(p)
	})
}

// syncPath fsyncs a file or directory (EINVAL: a file system without fsync, not an error).
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	serr := f.Sync()
	if syncHook != nil {
		serr = syncHook(p, serr)
	}
	cerr := f.Close()
	if serr != nil && !errors.Is(serr, unix.EINVAL) {
		return serr
	}
	return cerr
}

// syncHook, when not nil, replaces an fsync's result (a test makes one fail).
var syncHook func(path string, err error) error

// CheckComplete refuses a results directory that holds the INCOMPLETE marker, quoting it (the error wraps
// ErrIncomplete).
func CheckComplete(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, FileIncomplete))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	reason := strings.Join(strings.Fields(strings.TrimPrefix(string(b), "lumina: ")), " ")
	if err != nil || reason == "" {
		reason = "it holds an " + FileIncomplete + " marker"
	}
	return incompleteError{fmt.Errorf("%s: not analyzed: %s", dir, reason)}
}
