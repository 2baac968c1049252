package testbed

import (
	"os"

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
