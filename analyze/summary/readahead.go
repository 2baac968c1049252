package summary

import (
	"io"
	"os"
)

// readAhead reads a file in a goroutine, a few chunks ahead of its consumer, so that the kernel's copy from the
// page cache runs on another core while the packets are analyzed. It is an io.ReadCloser.
type readAhead struct {
	f    *os.File
	full chan chunk
	free chan []byte
	done chan struct{}
	cur  chunk
	off  int
	err  error
}

type chunk struct {
	b   []byte
	err error
}

const (
	readAheadChunk = 1 << 20
	readAheadDepth = 4
)

func newReadAhead(f *os.File) *readAhead {
	r := &readAhead{f: f, full: make(chan chunk, readAheadDepth), free: make(chan []byte, readAheadDepth+1),
		done: make(chan struct{})}
	for i := 0; i < readAheadDepth+1; i++ {
		r.free <- make([]byte, readAheadChunk)
	}
	go r.fill()
	return r
}

func (r *readAhead) fill() {
	defer close(r.full)
	for {
		var buf []byte
		select {
		case buf = <-r.free:
		case <-r.done:
			return
		}
		n, err := io.ReadFull(r.f, buf)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		select {
		case r.full <- chunk{b: buf[:n], err: err}:
		case <-r.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read copies from the current chunk, waiting for the next one when it is used up.
func (r *readAhead) Read(p []byte) (int, error) {
	for r.off == len(r.cur.b) {
		if r.err != nil {
			return 0, r.err
		}
		if r.cur.b != nil {
			r.free <- r.cur.b[:cap(r.cur.b)]
			r.cur.b = nil
		}
		c, ok := <-r.full
		if !ok {
			return 0, io.EOF
		}
		r.cur, r.off, r.err = c, 0, c.err
		if r.err == nil && len(c.b) == 0 {
			r.err = io.EOF
		}
	}
	n := copy(p, r.cur.b[r.off:])
	r.off += n
	return n, nil
}

// Close stops the goroutine and closes the file.
func (r *readAhead) Close() error {
	close(r.done)
	for range r.full { // let fill return
	}
	return r.f.Close()
}
