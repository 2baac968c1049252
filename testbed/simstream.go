package testbed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// The simulator's mirrored frames leave the simulation in batches for a second goroutine, which writes the
// dumps and, at the same time, trace.pcapng: the switch numbers its mirrored copies 1, 2, 3... in the order it
// hands them to the dumpers, so merging the dumps by mirror sequence number (reconstruct) gives them in exactly
// that order, and each packet's annotation is taken as it is mirrored (inject.Recorder.Latest). The writer
// checks every copy (it decodes and follows the previous one); a copy that does not is the simulator's bug and
// fails the run. The simulation never waits for a disk, and nothing grows with the run's length.

// streamRec is one mirrored frame of a batch: frame bytes [off, off+n) of the batch's buffer (the dumper's
// copy, RSS undone, cut to the snap length), its original length, and its annotation.
type streamRec struct {
	dumper     int32
	off, n     int32
	orig       int32
	ts         int64
	conn, iter int32
	annotated  bool
}

type streamBatch struct {
	buf  []byte
	recs []streamRec
}

const (
	streamBatchRecs  = 2048
	streamBatchBytes = 1 << 20
)

// simStream is the writer goroutine and what feeds it.
type simStream struct {
	snap     int
	port     uint16
	base     int
	annotate func(seq uint64) (conn, iter int, ok bool)
	dumps    []*dumper

	cur  *streamBatch
	work chan *streamBatch
	free chan *streamBatch
	done chan struct{}

	// The trace: traceW's bytes collect in traceOut, which goes to the file only at packet boundaries and under
	// dumpWrites (writeTrace), so that an interrupted run (Quiesce) leaves whole blocks.
	traceF   *os.File
	traceWB  writeback // traceF, its writeback started as it is written
	traceOut traceOut
	traceW   *trace.PcapngWriter
	traceE   error // the first error writing it
	nextSeq  uint64
	clock    trace.Unwrap48
	comment  []byte
	// consumer hears the trace's bytes once they are in the file (Options.Trace); head keeps the bytes written
	// before it is set (the header), until the first mirrored frame: no consumer comes after that (setConsumer),
	// and a run without one keeps nothing of the trace (headDone).
	consumer TraceConsumer
	head     []byte
	headDone bool
}

func newSimStream(dir string, dumps []*dumper, snap int, port uint16, base int,
	annotate func(uint64) (int, int, bool)) (*simStream, error) {
	st := &simStream{snap: snap, port: port, base: base, annotate: annotate, dumps: dumps,
		work: make(chan *streamBatch, 4), free: make(chan *streamBatch, 4), done: make(chan struct{}), nextSeq: 1}
	for range 4 {
		st.free <- &streamBatch{buf: make([]byte, 0, streamBatchBytes+64<<10), recs: make([]streamRec, 0, streamBatchRecs)}
	}
	st.cur = <-st.free
	tf, err := os.Create(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		return nil, fmt.Errorf("writing trace: %w", err)
	}
	st.traceF = tf
	st.traceWB.f = tf
	if st.traceW, err = newTraceWriter(&st.traceOut); err != nil {
		tf.Close()
		return nil, err
	}
	if st.writeTrace(); st.traceE != nil { // the header: a trace cut short still starts like one
		tf.Close()
		return nil, st.traceE
	}
	go st.writer()
	return st, nil
}

// newTraceWriter starts trace.pcapng (reconstruct writes the same header).
func newTraceWriter(w io.Writer) (*trace.PcapngWriter, error) {
	return trace.NewPcapngWriter(w, trace.PcapngWriterOptions{UserAppl: "lumina",
		Comment:    "Lumina trace: mirrored packets in mirror-sequence order",
		Interfaces: []trace.InterfaceSpec{{LinkType: trace.LinkTypeEthernet, SnapLen: 65535, Name: "switch-mirror"}}})
}

// dump takes one mirrored frame (the simulator's Dump; the frame is valid during the call only).
func (st *simStream) dump(d int, ts int64, frame []byte) {
	b := st.cur
	n := min(len(frame), st.snap)
	// The RSS rewrite is undone on a copy that keeps at least the headers it reads (the snap length is >= 128).
	k := min(len(frame), max(n, 128))
	off := len(b.buf)
	b.buf = append(b.buf, frame[:k]...)
	if st.port != 0 {
		roce.UndoRSS(b.buf[off:], st.port)
	}
	b.buf = b.buf[:off+n]
	r := streamRec{dumper: int32(d), off: int32(off), n: int32(n), orig: int32(len(frame)), ts: ts}
	if mir, ok := roce.DecodeMirror(b.buf[off:]); ok {
		conn, iter, ok := st.annotate(mir.Seq)
		r.conn, r.iter, r.annotated = int32(conn), int32(iter), ok
	}
	b.recs = append(b.recs, r)
	if len(b.recs) >= streamBatchRecs || len(b.buf) >= streamBatchBytes {
		st.flush()
	}
}

// flush hands the current batch to the writer.
func (st *simStream) flush() {
	if len(st.cur.recs) == 0 {
		return
	}
	st.work <- st.cur
	st.cur = <-st.free
}

// finish writes what is left, waits for the writer and completes trace.pcapng.
func (st *simStream) finish() error {
	st.flush()
	close(st.work)
	<-st.done
	st.writeTrace()
	err := st.traceE
	if cerr := st.traceF.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("writing trace: %w", cerr)
	}
	st.endConsumer(err)
	return err
}

// abandon stops the writer after a failed run; what was written stays for the record.
func (st *simStream) abandon() {
	close(st.work)
	<-st.done
	st.traceF.Close()
	st.endConsumer(errAbandoned)
}

var errAbandoned = errors.New("the run failed: its trace is not complete")

func (st *simStream) writer() {
	defer close(st.done)
	for b := range st.work {
		if !st.headDone { // the consumer, if any, was set before this batch was sent (setConsumer)
			st.headDone, st.head = true, nil
		}
		for i := range b.recs {
			r := &b.recs[i]
			data := b.buf[r.off : r.off+r.n]
			st.dumps[r.dumper].write(r.ts, data, int(r.orig)) // keeps its error (runSim reports it)
			if st.traceE == nil {
				st.tracePacket(r, data)
			}
		}
		b.buf, b.recs = b.buf[:0], b.recs[:0]
		st.free <- b
	}
}

// tracePacket writes the frame into trace.pcapng as reconstruct would.
func (st *simStream) tracePacket(r *streamRec, data []byte) {
	mir, ok := roce.DecodeMirror(data)
	switch {
	case !ok:
		st.traceE = fmt.Errorf("writing trace: mirrored copy %d has no mirror metadata", st.nextSeq)
		return
	case mir.Seq != st.nextSeq:
		st.traceE = fmt.Errorf("writing trace: the switch mirrored seq %d after %d (not the dumps' merge order)", mir.Seq, st.nextSeq-1)
		return
	}
	st.nextSeq++
	st.comment = appendComment(st.comment[:0], mir, int(r.conn), int(r.iter), r.annotated, st.base)
	if err := st.traceW.WritePacketBytes(0, st.clock.Extend(mir.TimestampNs), data, int(r.orig), st.comment); err != nil {
		st.traceE = fmt.Errorf("writing trace: %w", err)
		return
	}
	if len(st.traceOut.b)+st.traceW.Buffered() >= traceWriteBytes {
		st.writeTrace()
	}
}

// traceWriteBytes is how much of trace.pcapng collects before it is written to the file; traceBufBytes holds
// that, the writer's buffer flushed into it and a packet.
const (
	traceWriteBytes = 512 << 10
	traceBufBytes   = traceWriteBytes + 96<<10
)

// traceOut is where trace.pcapng's writer puts its bytes: memory, written to the file by writeTrace.
type traceOut struct{ b []byte }

func (o *traceOut) Write(p []byte) (int, error) {
	o.b = append(o.b, p...)
	return len(p), nil
}

// writeTrace writes the trace's bytes so far (the writer's buffer flushed: they end after a whole block) to
// the file under dumpWrites, as the dumps are written: a command stopping on a signal (Quiesce) leaves
// trace.pcapng cut at a block boundary, never inside one.
func (st *simStream) writeTrace() {
	if st.traceE != nil {
		return
	}
	if err := st.traceW.Flush(); err != nil {
		st.traceE = fmt.Errorf("writing trace: %w", err)
		return
	}
	dumpWrites.Lock()
	_, err := st.traceWB.Write(st.traceOut.b)
	dumpWrites.Unlock()
	if err != nil {
		st.traceE = fmt.Errorf("writing trace: %w", err)
		return
	}
	if st.consumer != nil {
		b := st.consumer.Write(st.traceOut.b)
		if cap(b) < traceBufBytes { // none, or the header's
			b = make([]byte, 0, traceBufBytes)
		}
		st.traceOut.b = b[:0]
	} else {
		if !st.headDone {
			st.head = append(st.head, st.traceOut.b...)
		}
		st.traceOut.b = st.traceOut.b[:0]
	}
}

// setConsumer starts the trace's consumer on the simulation's goroutine before the first mirrored frame (the
// writer goroutine, which calls it next, receives a batch after this).
func (st *simStream) setConsumer(c TraceConsumer) {
	st.consumer = c
	c.Write(st.head)
	st.head = nil // the consumer's now
}

// endConsumer tells the consumer, if any, that the trace is complete (err nil) or never will be.
func (st *simStream) endConsumer(err error) {
	if st.consumer != nil {
		st.consumer.End(err)
		st.consumer = nil
	}
}

// appendComment is a trace packet's annotation: event, mirror sequence number, ITER and the connection with
// the scenario's index base (when the switch recorded them).
func appendComment(b []byte, mir roce.Mirror, conn, iter int, ok bool, base int) []byte {
	b = append(b, "event="...)
	b = append(b, mir.Event.String()...)
	b = append(b, " seq="...)
	b = strconv.AppendUint(b, mir.Seq, 10)
	if ok && conn >= 0 {
		if iter > 0 {
			b = append(b, " iter="...)
			b = strconv.AppendInt(b, int64(iter), 10)
		}
		b = append(b, " qp="...)
		b = strconv.AppendInt(b, int64(conn+base), 10)
	}
	return b
}
