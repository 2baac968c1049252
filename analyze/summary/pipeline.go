package summary

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// pipeline spreads the per-packet work of a Source over the cores in four stages:
//
//  1. one reader goroutine reads the merged stream (file parsing, the merge) and copies the packets into
//     batches;
//  2. decoder goroutines decode each batch's frames and verify their ICRCs, batches in parallel (the consumer
//     decodes a batch itself when it reaches it before any decoder took it up);
//  3. the consumer (Source.Next, on the caller's goroutine) takes the batches back in stream order and hands
//     out their packets with the stage-2 decoding (the analyzers read them);
//  4. one counter goroutine takes each batch the consumer is done with, in stream order, and counts its packets
//     into the summary (Source.count), while the consumer goes on with the next batch.
//
// Everything that depends on the order of the packets happens in stages 3 and 4, each in the stream's order
// and each on one goroutine, so the report is the same as the one-worker path's whatever the number of workers
// or cores. The summary counts exactly the packets the consumer read: a batch it left midway (Report before the
// end) is counted up to there when the pipeline stops. Memory is bounded: a fixed number of batches circulate
// between the stages, each holding the read buffers its frames lie in, the packets' comments and their
// decodings; a batch ends before these pass pipeBatchBytes (size), whatever the capture holds besides frames
// (unknown blocks, options).
type pipeline struct {
	src     trace.Reader
	merger  *trace.Merger
	port    uint16
	skipCRC bool
	// The batches point at the packets the stream returns instead of copying them: the files read into
	// buffers that are recycled only once no batch holds them (trace.File.SetBuffers).
	// reading is, per file, the buffer it reads into now (nil: the file's first one, which is never recycled);
	// taken the one the file took last from the pool; filling the batch the reader fills.
	reading, taken []*rbuf
	filling        *pbatch
	poolMu         sync.Mutex
	pool           []*rbuf
	// allocated is the bytes of read buffers the pool allocated; largest the largest size a sent batch had;
	// selfDecoded the batches the consumer decoded itself, passed the work items decoders found claimed (tests).
	allocated, largest, selfDecoded int
	passed                          atomic.Int64

	free    chan *pbatch  // batches the reader may fill
	work    chan workItem // batches for the decoders
	ordered chan *pbatch  // every filled batch, in stream order, for the consumer
	counted chan *pbatch  // every batch the consumer is done with, in stream order, for the counter
	done    chan struct{}
	reader  sync.WaitGroup
	workers sync.WaitGroup
	counter sync.WaitGroup
	stopped bool
	// count counts packet i of b into the summary (stage 4; Source.count).
	count func(b *pbatch, i int)

	cur     *pbatch          // the batch the consumer reads
	scratch roce.ICRCScratch // the consumer's, for the batches it decodes itself
	pos     int              // index in cur of the next packet
	err     error            // what ended the stream, once the consumer reached it
}

// pbatch is a run of consecutive packets of the stream.
type pbatch struct {
	pkts   []trace.Packet // Data points into the read buffers in bufs
	bytes  int            // of the frames
	held   int            // bytes of the read buffers the files moved to while the batch filled
	notes  int            // bytes of the packets' comments (each its own allocation)
	origin []int          // input file of each packet (merger)
	dec    []roce.Packet  // the decodings (stage 2)
	ok     []bool         // DecodePort's result; false for other link types
	icrc   []roce.ICRCStatus
	err    error         // what ended the stream after these packets (io.EOF at the end)
	ready  chan struct{} // stage 2 is done with the batch (sent by the decoder that claimed it)
	// claim is use<<1, with the low bit set by whoever decodes the batch in its use-th use: a decoder, or the
	// consumer when it reaches the batch before any decoder took it up (it then decodes it itself instead of
	// waiting: on a busy machine the decoders may not be running). A decoder that finds the batch in the work
	// queue only after the consumer decoded it, and the batch went round to be filled again, holds an old use
	// and leaves it alone.
	claim atomic.Uint64
	use   uint64
	used  int     // packets in the batch's last use
	bufs  []*rbuf // the read buffers the packets may point into
}

// rbuf is a read buffer of a file, recycled when nothing holds it: the file while it reads into it, and every
// batch filled while it was a file's current buffer.
type rbuf struct {
	b    []byte
	refs atomic.Int32
}

const (
	pipeBatchFrames = 256
	// workers + pipeBatchesExtra batches circulate: enough for every worker to have one while the reader fills
	// one, the consumer reads another and the counter counts a third; pipeWorkersMax bounds the decoders (and
	// so the batches). A batch ends at pipeBatchFrames frames or before it holds pipeBatchBytes bytes
	// (pbatch.size).
	pipeBatchesExtra = 4
	pipeWorkersMax   = 16
)

// pipeHoldDecoders, when not nil, holds the decoders back until it is closed (tests: the consumer then decodes
// the batches itself, and the decoders find old work items).
var pipeHoldDecoders chan struct{}

// pipeReadBuffer is the size of the files' read buffers, pipeBatchBytes the memory a batch holds at most
// (tests shrink them to recycle buffers and end batches often).
var (
	pipeReadBuffer = 256 << 10
	pipeBatchBytes = 1 << 20
)

// pipelineWorkers is the number of decoder goroutines for Options.Workers: 0 means one per core (GOMAXPROCS);
// a result below 2 means no pipeline (the one-worker path decodes in line).
func pipelineWorkers(workers int) int {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return min(workers, pipeWorkersMax)
}

func newPipeline(files []*trace.File, src trace.Reader, merger *trace.Merger, opts Options, workers int,
	count func(b *pbatch, i int)) *pipeline {
	n := workers + pipeBatchesExtra
	p := &pipeline{src: src, merger: merger, port: opts.Port, skipCRC: opts.SkipICRC, count: count,
		free: make(chan *pbatch, n), work: make(chan workItem, n), ordered: make(chan *pbatch, n), counted: make(chan *pbatch, n),
		done: make(chan struct{}), reading: make([]*rbuf, len(files)), taken: make([]*rbuf, len(files))}
	if p.port == 0 {
		p.port = roce.UDPPort
	}
	for i, f := range files {
		f.SetBuffers(func(min int) []byte { return p.take(i, min) }, func([]byte) { p.retire(i) })
	}
	for i := 0; i < n; i++ {
		p.free <- &pbatch{pkts: make([]trace.Packet, 0, pipeBatchFrames),
			origin: make([]int, 0, pipeBatchFrames), dec: make([]roce.Packet, pipeBatchFrames),
			ok: make([]bool, pipeBatchFrames), icrc: make([]roce.ICRCStatus, pipeBatchFrames),
			ready: make(chan struct{}, 1)}
	}
	p.reader.Add(1)
	go p.read()
	p.counter.Add(1)
	go p.countBatches()
	for i := 0; i < workers; i++ {
		p.workers.Add(1)
		go p.decode()
	}
	return p
}

// take gives file i a read buffer of at least min bytes (trace.File.SetBuffers), from the pool if it can.
func (p *pipeline) take(i, min int) []byte {
	var r *rbuf
	p.poolMu.Lock()
	for k := len(p.pool) - 1; k >= 0 && r == nil; k-- {
		// A pooled buffer too small for this file's block is dropped, so that the pool never holds more
		// buffers than were in use at once.
		if len(p.pool[k].b) >= min {
			r = p.pool[k]
		}
		p.pool[k] = nil
		p.pool = p.pool[:k]
	}
	p.poolMu.Unlock()
	if r == nil {
		r = &rbuf{b: make([]byte, max(min, pipeReadBuffer))}
		p.allocated += len(r.b)
	}
	p.taken[i] = r
	return r.b
}

// retire is file i moving on from its current buffer to the one it took last: the batch being filled holds
// both (its packets may be in either), the file only the new one.
func (p *pipeline) retire(i int) {
	old, r := p.reading[i], p.taken[i]
	p.reading[i] = r
	r.refs.Store(1)
	p.hold(p.filling, r)
	p.filling.held += len(r.b)
	if old != nil {
		p.unhold(old)
	}
}

func (p *pipeline) hold(b *pbatch, r *rbuf) {
	r.refs.Add(1)
	b.bufs = append(b.bufs, r)
}

// unhold drops a hold on r, and puts it back in the pool when it was the last.
func (p *pipeline) unhold(r *rbuf) {
	if r.refs.Add(-1) == 0 {
		p.poolMu.Lock()
		p.pool = append(p.pool, r)
		p.poolMu.Unlock()
	}
}

// start makes b the batch being filled; it holds every file's current buffer, where the packets it will get
// (a merge's waiting heads included) lie unless a file moves on meanwhile (retire).
func (p *pipeline) start(b *pbatch) {
	clear(b.bufs)
	b.bytes, b.held, b.notes, b.pkts, b.origin, b.err, b.bufs = 0, 0, 0, b.pkts[:0], b.origin[:0], nil, b.bufs[:0]
	p.filling = b
	b.use++
	b.claim.Store(b.use << 1)
	for _, r := range p.reading {
		if r != nil {
			p.hold(b, r)
		}
	}
}

// read is stage 1: it fills batches from the stream until the stream ends or the pipeline is stopped.
func (p *pipeline) read() {
	defer p.reader.Done()
	defer close(p.work)
	for {
		var b *pbatch
		select {
		case b = <-p.free:
		case <-p.done:
			return
		}
		p.start(b)
		for len(b.pkts) < pipeBatchFrames {
			pk, err := p.src.Next()
			if err != nil {
				b.err = err
				break
			}
			if len(b.pkts) > 0 && b.size(pk) > pipeBatchBytes {
				// The batch is full: this packet starts the next one.
				p.send(b)
				select {
				case b = <-p.free:
				case <-p.done:
					return
				}
				p.start(b)
			}
			p.add(b, pk)
		}
		p.send(b)
		if b.err != nil {
			return
		}
	}
}

// add appends a packet to the batch.
func (p *pipeline) add(b *pbatch, pk *trace.Packet) {
	b.pkts = append(b.pkts, *pk) // Data points into a read buffer that b holds (start, retire)
	b.bytes += len(pk.Data)
	b.notes += len(pk.Comment)
	in := 0
	if p.merger != nil {
		in, _ = p.merger.Origin()
	}
	b.origin = append(b.origin, in)
}

// size is the memory the batch holds with pk added: the read buffers (the frames lie in them: the larger of
// the frames' bytes and the buffers the files moved to meanwhile; the buffers current when the batch started
// are counted by the batch before) and the comments.
func (b *pbatch) size(pk *trace.Packet) int {
	return max(b.bytes+len(pk.Data), b.held) + b.notes + len(pk.Comment)
}

func (p *pipeline) send(b *pbatch) {
	// The packets and decodings past this use's that an earlier, longer one left point into buffers and
	// comments that would stay alive (the ones before are overwritten).
	if n := len(b.pkts); n < b.used {
		clear(b.pkts[n:b.used])
		clear(b.dec[n:b.used])
	}
	b.used = len(b.pkts)
	p.largest = max(p.largest, max(b.bytes, b.held)+b.notes)
	p.ordered <- b // never blocks: the channels hold every batch there is
	select {
	case p.work <- workItem{b, b.use}:
	default: // the decoders are behind (work items of batches the consumer decoded itself): it will decode this one
	}
}

// workItem is a batch for the decoders in its use-th use (pbatch.claim).
type workItem struct {
	b   *pbatch
	use uint64
}

// decode is stage 2.
func (p *pipeline) decode() {
	defer p.workers.Done()
	if pipeHoldDecoders != nil {
		<-pipeHoldDecoders
	}
	scratch := new(roce.ICRCScratch)
	for w := range p.work {
		if b := w.b; b.claim.CompareAndSwap(w.use<<1, w.use<<1|1) {
			p.decodeBatch(b, scratch)
			b.ready <- struct{}{}
		} else {
			p.passed.Add(1)
		}
	}
}

// decodeBatch decodes a batch's frames and verifies their ICRCs, gathering in the caller's scratch (the
// decoded packets keep none of their own: they are smaller to hand to the consumer's core).
func (p *pipeline) decodeBatch(b *pbatch, scratch *roce.ICRCScratch) {
	for i := range b.pkts {
		pk := &b.pkts[i]
		d := &b.dec[i]
		b.ok[i], b.icrc[i] = false, roce.ICRCNotCheckable
		if pk.LinkType != trace.LinkTypeEthernet {
			continue
		}
		ok := d.DecodePort(pk.Data, pk.OrigLen, p.port)
		b.ok[i] = ok
		if ok && !p.skipCRC && !d.Truncated {
			b.icrc[i] = d.CheckICRCScratch(scratch)
		}
	}
}

// countBatches is stage 4: it counts the batches the consumer is done with, then frees them for the reader.
func (p *pipeline) countBatches() {
	defer p.counter.Done()
	for b := range p.counted {
		for i := range b.pkts {
			p.count(b, i)
		}
		for _, r := range b.bufs {
			p.unhold(r)
		}
		p.free <- b // never blocks: the channel holds every batch there is
	}
}

// errStopped is what reading a Source after Report or Close returns before the end of the stream.
var errStopped = errors.New("the capture's reading was stopped (Report or Close) before its end")

// next returns the next packet of the stream with its decoding, or the error that ended the stream.
func (p *pipeline) next() (pk *trace.Packet, origin int, dec *roce.Packet, ok bool, icrc roce.ICRCStatus, err error) {
	for p.cur == nil || p.pos == len(p.cur.pkts) {
		if p.err != nil {
			return nil, 0, nil, false, 0, p.err
		}
		if p.stopped {
			return nil, 0, nil, false, 0, errStopped
		}
		if b := p.cur; b != nil {
			p.cur = nil
			err := b.err   // read before the counter may free the batch
			p.counted <- b // never blocks: the channel holds every batch there is
			if err != nil {
				p.err = err
				continue
			}
		}
		b := <-p.ordered // the reader sends a batch with an error last, so the stream never runs dry
		if b.claim.CompareAndSwap(b.use<<1, b.use<<1|1) {
			p.decodeBatch(b, &p.scratch)
			p.selfDecoded++
		} else {
			<-b.ready
		}
		p.cur, p.pos = b, 0
	}
	b, i := p.cur, p.pos
	p.pos++
	return &b.pkts[i], b.origin[i], &b.dec[i], b.ok[i], b.icrc[i], nil
}

// stop ends the goroutines and waits for them, and counts the packets the consumer read of the batch it is in:
// the summary then holds every packet read, and the stream's readers are no longer touched.
func (p *pipeline) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	close(p.counted)
	p.counter.Wait()
	if p.cur != nil {
		for i := 0; i < p.pos; i++ {
			p.count(p.cur, i)
		}
	}
	close(p.done)
	p.reader.Wait()
	p.workers.Wait()
}
