package summary

import (
	"runtime"
	"sync"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// pipeline spreads the per-packet work of a Source over the cores in three stages:
//
//  1. one reader goroutine reads the merged stream (file parsing, the merge) and copies the packets into
//     batches;
//  2. decoder goroutines decode each batch's frames and verify their ICRCs, batches in parallel;
//  3. the consumer (Source.Next, on the caller's goroutine) takes the batches back in stream order and
//     counts every packet into the summary; the analyzers reading the Source use the stage-2 decoding.
//
// Everything that depends on the order of the packets happens in stage 3, in the stream's order, so the report
// is the same as the one-worker path's whatever the number of workers or cores. Memory is bounded: a fixed
// number of batches circulate between the stages (pipeBatches x ~1 MiB of frames plus their decodings).
type pipeline struct {
	src     trace.Reader
	merger  *trace.Merger
	port    uint16
	skipCRC bool

	free    chan *pbatch // batches the reader may fill
	work    chan *pbatch // batches for the decoders
	ordered chan *pbatch // every filled batch, in stream order, for the consumer
	done    chan struct{}
	reader  sync.WaitGroup
	workers sync.WaitGroup
	stopped bool

	cur *pbatch // the batch the consumer reads
	pos int     // index in cur of the next packet
}

// pbatch is a run of consecutive packets of the stream.
type pbatch struct {
	data   []byte         // the frames, back to back
	pkts   []trace.Packet // Data points into data
	origin []int          // input file of each packet (merger)
	dec    []roce.Packet  // the decodings (stage 2)
	ok     []bool         // DecodePort's result; false for other link types
	icrc   []roce.ICRCStatus
	err    error         // what ended the stream after these packets (io.EOF at the end)
	ready  chan struct{} // stage 2 is done with the batch
}

const (
	pipeBatchFrames = 256
	pipeBatchBytes  = 1 << 20
	// pipeBatches batches circulate: enough for every worker to have one while the reader fills one and the
	// consumer reads another; pipeWorkersMax bounds the decoders (and so the batches).
	pipeBatchesExtra = 3
	pipeWorkersMax   = 16
)

// pipelineWorkers is the number of decoder goroutines for Options.Workers: 0 means one per core (GOMAXPROCS);
// a result below 2 means no pipeline (the one-worker path decodes in line).
func pipelineWorkers(workers int) int {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return min(workers, pipeWorkersMax)
}

func newPipeline(src trace.Reader, merger *trace.Merger, opts Options, workers int) *pipeline {
	n := workers + pipeBatchesExtra
	p := &pipeline{src: src, merger: merger, port: opts.Port, skipCRC: opts.SkipICRC,
		free: make(chan *pbatch, n), work: make(chan *pbatch, n), ordered: make(chan *pbatch, n),
		done: make(chan struct{})}
	if p.port == 0 {
		p.port = roce.UDPPort
	}
	for i := 0; i < n; i++ {
		p.free <- &pbatch{data: make([]byte, 0, pipeBatchBytes), pkts: make([]trace.Packet, 0, pipeBatchFrames),
			origin: make([]int, 0, pipeBatchFrames), dec: make([]roce.Packet, pipeBatchFrames),
			ok: make([]bool, pipeBatchFrames), icrc: make([]roce.ICRCStatus, pipeBatchFrames),
			ready: make(chan struct{}, 1)}
	}
	p.reader.Add(1)
	go p.read()
	for i := 0; i < workers; i++ {
		p.workers.Add(1)
		go p.decode()
	}
	return p
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
		b.data, b.pkts, b.origin, b.err = b.data[:0], b.pkts[:0], b.origin[:0], nil
		for len(b.pkts) < pipeBatchFrames {
			pk, err := p.src.Next()
			if err != nil {
				b.err = err
				break
			}
			if len(b.pkts) > 0 && len(b.data)+len(pk.Data) > cap(b.data) {
				// The batch is full: this packet starts the next one. pk stays valid until the next call of
				// src.Next, so it is copied there.
				p.send(b)
				select {
				case b = <-p.free:
				case <-p.done:
					return
				}
				b.data, b.pkts, b.origin, b.err = b.data[:0], b.pkts[:0], b.origin[:0], nil
			}
			p.add(b, pk)
		}
		p.send(b)
		if b.err != nil {
			return
		}
	}
}

// add copies a packet into the batch (a frame larger than the batch's buffer gets a buffer of its own).
func (p *pipeline) add(b *pbatch, pk *trace.Packet) {
	q := *pk
	if len(b.data)+len(pk.Data) <= cap(b.data) {
		start := len(b.data)
		b.data = append(b.data, pk.Data...)
		q.Data = b.data[start:len(b.data):len(b.data)]
	} else {
		q.Data = append([]byte(nil), pk.Data...)
	}
	b.pkts = append(b.pkts, q)
	in := 0
	if p.merger != nil {
		in, _ = p.merger.Origin()
	}
	b.origin = append(b.origin, in)
}

func (p *pipeline) send(b *pbatch) {
	p.ordered <- b // never blocks: the channels hold every batch there is
	p.work <- b
}

// decode is stage 2.
func (p *pipeline) decode() {
	defer p.workers.Done()
	for b := range p.work {
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
				b.icrc[i] = d.CheckICRC()
			}
		}
		b.ready <- struct{}{}
	}
}

// next returns the next packet of the stream with its decoding, or the error that ended the stream.
func (p *pipeline) next() (pk *trace.Packet, origin int, dec *roce.Packet, ok bool, icrc roce.ICRCStatus, err error) {
	for p.cur == nil || p.pos == len(p.cur.pkts) {
		if p.cur != nil {
			if p.cur.err != nil {
				return nil, 0, nil, false, 0, p.cur.err
			}
			p.free <- p.cur
			p.cur = nil
		}
		b := <-p.ordered // the reader sends a batch with an error last, so the stream never runs dry
		<-b.ready
		p.cur, p.pos = b, 0
	}
	b, i := p.cur, p.pos
	p.pos++
	return &b.pkts[i], b.origin[i], &b.dec[i], b.ok[i], b.icrc[i], nil
}

// stop ends the goroutines and waits for them; the stream's readers are no longer touched afterwards.
func (p *pipeline) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	close(p.done)
	p.reader.Wait()
	p.workers.Wait()
}
