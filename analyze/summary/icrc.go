package summary

import (
	"runtime"
	"sync"

	"github.com/lumina-go/lumina/roce"
)

// icrcPool verifies ICRCs on another core: the frames of complete RoCE packets are copied into batches that a
// worker goroutine decodes and checks. Only the totals are reported, so the order in which batches finish
// does not matter and the result is the same as checking in line.
type icrcPool struct {
	work   chan *icrcBatch
	free   chan *icrcBatch
	cur    *icrcBatch
	wg     sync.WaitGroup
	mu     sync.Mutex
	counts [3]int64 // indexed by roce.ICRCStatus
}

type icrcBatch struct {
	data []byte // the frames, back to back
	ends []int  // end offset of each frame in data
}

const (
	icrcBatchFrames = 256
	icrcBatchBytes  = 1 << 20
	icrcBatches     = 8 // batches in flight: bounds the memory the pool holds (~8 MiB)
)

// newICRCPool starts the workers; nil when the process has a single core to run on (then checking in line is
// as fast).
func newICRCPool() *icrcPool {
	workers := min(runtime.GOMAXPROCS(0)-1, 2)
	if workers < 1 {
		return nil
	}
	p := &icrcPool{work: make(chan *icrcBatch, icrcBatches), free: make(chan *icrcBatch, icrcBatches+1)}
	for i := 0; i < icrcBatches+1; i++ {
		p.free <- &icrcBatch{data: make([]byte, 0, icrcBatchBytes), ends: make([]int, 0, icrcBatchFrames)}
	}
	p.cur = <-p.free
	for i := 0; i < workers; i++ {
		p.wg.Add(1)
		go p.run()
	}
	return p
}

func (p *icrcPool) run() {
	defer p.wg.Done()
	var pkt roce.Packet
	var counts [3]int64
	for b := range p.work {
		start := 0
		for _, end := range b.ends {
			f := b.data[start:end]
			start = end
			if pkt.Decode(f, len(f)) {
				counts[pkt.CheckICRC()]++
			} else {
				counts[roce.ICRCNotCheckable]++
			}
		}
		b.data, b.ends = b.data[:0], b.ends[:0]
		p.free <- b
	}
	p.mu.Lock()
	for i, n := range counts {
		p.counts[i] += n
	}
	p.mu.Unlock()
}

// add queues a complete frame for checking (the frame is copied).
func (p *icrcPool) add(frame []byte) {
	b := p.cur
	if len(b.ends) == icrcBatchFrames || len(b.data)+len(frame) > cap(b.data) && len(b.ends) > 0 {
		p.work <- b
		b = <-p.free
		p.cur = b
	}
	b.data = append(b.data, frame...)
	b.ends = append(b.ends, len(b.data))
}

// finish waits for the workers and returns the totals; the pool is unusable afterwards.
func (p *icrcPool) finish() [3]int64 {
	if len(p.cur.ends) > 0 {
		p.work <- p.cur
	}
	close(p.work)
	p.wg.Wait()
	return p.counts
}
