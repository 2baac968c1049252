package netsim

import (
	"math/rand/v2"

	"github.com/lumina-go/lumina/internal/des"
)

// wireOverheadBytes is what Ethernet adds on the wire around a frame: FCS (4), preamble + SFD (8) and the
// inter-frame gap (12). Serialization time counts them so that 100 Gb/s carries ~12 M 1 KB-MTU packets a second.
const wireOverheadBytes = 24

// node identifies the receiving end of a link.
type nodeKind uint8

const (
	nodeHost nodeKind = iota
	nodeSwitch
)

// link is one direction of a cable: a serializer, then propagation; it never drops (the switch's injector
// decides drops). A host's NIC feeds its link one frame at a time (linkStart, then wireIdle when the last bit
// left); the switch's egress links are FIFOs computed by reservation (reserve).
type link struct {
	id       int32
	psPerB   int64 // picoseconds per byte on the wire
	propNs   int64
	extraNs  int64 // host-bound links: the receiving NIC's receive processing, folded into the delivery
	dstKind  nodeKind
	dstID    int32 // host index or 0 for the switch
	dstPort  int32 // switch port the frame arrives on
	srcHost  int32 // host index to notify when idle, -1 for the switch
	busy     bool  // host-driven links: a frame is being serialized
	freeAt   int64 // switch-driven links: when the serializer is free (FIFO by reservation)
	txFrames uint64
	txBytes  uint64
	// Random loss on the cable (lab.LinkConfig.LossProb), from the link's own PRNG stream.
	lossProb float64
	rng      *rand.Rand
	lost     uint64
}

// serNs is the serialization time of a frame of n bytes, rounded up to a whole nanosecond.
func (l *link) serNs(n int) int64 {
	ps := int64(n+wireOverheadBytes) * l.psPerB
	return (ps + 999) / 1000
}

// reserve puts a frame that is ready at time ready on a FIFO link by arithmetic: it starts when the
// serializer is free and arrives after serialization and propagation. One event per frame instead of three.
func (s *sim) reserve(l *link, f int32, ready int64) {
	n := len(s.frames.bufs[f])
	start := max(ready, l.freeAt)
	l.freeAt = start + l.serNs(n)
	l.txFrames++
	l.txBytes += uint64(n)
	s.q.Push(des.Event{At: l.freeAt + l.propNs + l.extraNs, Kind: evLinkArrive, Obj: l.id, Arg: f})
}

func (s *sim) linkStart(l *link, f int32) {
	l.busy = true
	n := len(s.frames.bufs[f])
	l.txFrames++
	l.txBytes += uint64(n)
	done := s.now + l.serNs(n)
	s.q.Push(des.Event{At: done, Kind: evLinkTxDone, Obj: l.id, Arg: f})
}

// linkTxDone: the last bit left; the frame arrives after propagation and the NIC may start the next one.
func (s *sim) linkTxDone(l *link, f int32) {
	s.q.Push(des.Event{At: s.now + l.propNs, Kind: evLinkArrive, Obj: l.id, Arg: f})
	l.busy = false
	if l.srcHost >= 0 {
		s.hosts[l.srcHost].wireIdle(s)
	}
}

func (s *sim) linkArrive(l *link, f int32) {
	if l.lossProb > 0 && l.rng.Float64() < l.lossProb {
		l.lost++
		s.frames.put(f)
		return
	}
	if l.dstKind == nodeSwitch {
		s.sw.arrive(s, int(l.dstPort), f)
		return
	}
	s.hosts[l.dstID].arrive(s, f)
}
