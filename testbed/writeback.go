package testbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// writeback is a file a simulator run writes (a dump, the trace) that asks the kernel to start writing its pages
// to the disk as they are written, every writebackBytes, without waiting for it (sync_file_range
// SYNC_FILE_RANGE_WRITE): the disk works during the simulation, and the fsyncs before the results directory is
// committed find little left to write. It changes nothing in the file.
type writeback struct {
	f         *os.File
	off, done int64 // bytes written; bytes whose writeback was started
}

// writebackBytes is how much of a file is written before its writeback is started.
const writebackBytes = 8 << 20

func (w *writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.done >= writebackBytes {
		// Only a hint: a file system without it (EINVAL, ESPIPE) loses nothing but the overlap.
		_ = unix.SyncFileRange(int(w.f.Fd()), w.done, w.off-w.done, unix.SYNC_FILE_RANGE_WRITE)
		w.done = w.off
	}
	return n, err
}

// flushes are the fsyncs a simulator run starts early, each file on its own goroutine, while the verdict stage
// works. Their errors are the run's: since Linux 4.13 the first fsync to report a file's writeback error
// consumes it, so the commit's own fsync of the same file (resultsdir.Staging.Commit) would not see it again,
// and the directory would be committed looking complete.
type flushes struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

// syncFile is fsync (a test injects a failing one).
var syncFile = (*os.File).Sync

// start fsyncs the file at path in the background.
func (fl *flushes) start(path string) {
	fl.wg.Go(func() {
		err := syncPath(path)
		if err != nil {
			fl.mu.Lock()
			if fl.err == nil {
				fl.err = fmt.Errorf("writing %s to the disk: %w", filepath.Base(path), err)
			}
			fl.mu.Unlock()
		}
	})
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	serr := syncFile(f)
	cerr := f.Close()
	if serr != nil && !errors.Is(serr, unix.EINVAL) { // EINVAL: a file system without fsync
		return serr
	}
	return cerr
}

// wait waits for the fsyncs started and returns the first error.
func (fl *flushes) wait() error {
	fl.wg.Wait()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.err
}
