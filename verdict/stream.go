package verdict

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
)

// Stream is the verdict's reading of a simulator run's trace.pcapng while the testbed writes it
// (testbed.Options.Trace: the testbed hands it the file's bytes, in order, once they are in the file). On a
// goroutine of its own it reads them as trace.Open would read the file, and feeds each packet to the integrity
// check and to the analyzers (analyze.Stream), so that JudgeStream, after the run, need not read the trace back:
// it gives the analysis.json Judge gives from the directory alone. Whatever the stream could not do as Judge
// would (bytes that do not read as a trace, a packet without mirror metadata, an analyzer that panics, a run
// that ended without the whole trace, connections or counters other than it started with) leaves JudgeStream
// to Judge, which reads the files and says what is wrong as it always does. Memory is a few chunks of the
// trace, whatever the run's length.
type Stream struct {
	dir   string
	conns []resultsdir.ConnRecord

	chunks chan []byte // bytes for the reader, in order; closed by End
	free   chan []byte // chunks the reader is done with
	done   chan struct{}
	failed atomic.Bool // the stream's result will not be used: Write stops copying
	endErr error       // End's argument (read after done)

	// The result, read after done.
	ic  *trace.IntegrityChecker
	an  *analyze.Stream
	f   *trace.File
	err error
}

// streamChunks is how many chunks of the trace may wait for the reader (each about 512 KB, the testbed's write
// size); the writer waits beyond that. The chunks the reader is done with go back to the writer.
const streamChunks = 2

// NewStream starts reading the trace of a run of sc writing into dir, with the run's connections (the records
// the run writes as connections.json).
func NewStream(dir string, sc *scenario.Scenario, conns []resultsdir.ConnRecord) *Stream {
	s := &Stream{dir: dir, conns: conns, chunks: make(chan []byte, streamChunks), free: make(chan []byte, streamChunks+1),
		done: make(chan struct{}), ic: trace.NewIntegrityChecker(trace.IntegrityOptions{})}
	// The analyzers' options as far as they are known before the run: its counters (only their discards count
	// until the end), traffic log and link rate come to analyze.Stream.Finish.
	s.an = analyze.NewStream(analyzeOptions(sc, conns, &resultsdir.CountersFile{}, nil))
	go s.read()
	return s
}

// Write is given the trace's next bytes, which it keeps, and returns a buffer it is done with, if any
// (testbed.TraceConsumer).
func (s *Stream) Write(p []byte) []byte {
	if s.failed.Load() || len(p) == 0 {
		return p
	}
	s.chunks <- p
	select {
	case b := <-s.free:
		return b
	default:
		return nil
	}
}

// End says the trace is complete (err nil) or will not be (testbed.TraceConsumer).
func (s *Stream) End(err error) {
	s.endErr = err
	close(s.chunks)
}

// chunkReader reads the chunks in order.
type chunkReader struct {
	s   *Stream
	buf []byte // the chunk being read
	rem []byte // its unread bytes
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.rem) == 0 {
		if r.buf != nil {
			select {
			case r.s.free <- r.buf:
			default: // enough spare chunks
			}
			r.buf = nil
		}
		b, ok := <-r.s.chunks
		if !ok {
			return 0, io.EOF
		}
		r.buf, r.rem = b, b
	}
	n := copy(p, r.rem)
	r.rem = r.rem[n:]
	return n, nil
}

// errStreamPacket: a packet of the trace without mirror metadata (Judge says which).
var errStreamPacket = errors.New("a trace packet without mirror metadata")

// read is the stream's goroutine: it reads the trace as it comes and, once it fails, drains what is left.
func (s *Stream) read() {
	defer close(s.done)
	r := &chunkReader{s: s}
	defer func() {
		if p := recover(); p != nil {
			s.err = fmt.Errorf("the analyzers failed (a bug in lumina): %v", p)
		}
		if s.err != nil {
			s.failed.Store(true)
			for range s.chunks {
			}
		}
	}()
	f, err := trace.NewReader(r, filepath.Join(s.dir, resultsdir.FileTrace))
	if err != nil {
		s.err = err
		return
	}
	s.f = f
	for {
		p, err := f.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			s.err = err
			return
		}
		mir, ok := roce.DecodeMirror(p.Data)
		if !ok {
			s.err = errStreamPacket
			return
		}
		s.ic.Add(p.Index, mir)
		s.an.Packet(p)
	}
}

// result waits for the stream and gives its integrity conditions and analysis, for the directory dir, its
// connections, counters and the analyzers' whole options; ok is false when it must not stand for Judge's.
func (s *Stream) result(dir string, conns []resultsdir.ConnRecord, cf resultsdir.CountersFile, opts analyze.Options) (integ trace.Integrity, an *analyze.Analysis, ok bool) {
	<-s.done
	defer func() {
		if recover() != nil { // the analyzers' finish failed (a bug): Judge's reading of the file reports it
			integ, an, ok = trace.Integrity{}, nil, false
		}
	}()
	if s.err != nil || s.endErr != nil || s.f == nil || dir != s.dir || len(conns) != len(s.conns) {
		return trace.Integrity{}, nil, false
	}
	for i := range conns {
		if conns[i] != s.conns[i] {
			return trace.Integrity{}, nil, false
		}
	}
	an, ok = s.an.Finish(opts)
	if !ok {
		return trace.Integrity{}, nil, false
	}
	return finishIntegrity(dir, s.ic, s.f, cf), an, true
}
