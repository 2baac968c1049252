package analyze

// class is a checker's verdict on one transmitted data packet.
type class struct {
	retx       bool   // the PSN was sent before
	roundStart bool   // it starts a retransmission round (go-back-N restart, IRN recovery, READ re-issue)
	trigger    string // the round's trigger: nack | timeout | read-reissue | rnr; "" for new data
}

const triggerRNR = "rnr"

// gbnState is the go-back-N specification for RC Write/Send (nic-behaviors.md §1), split as the reference
// analyzer does into the requester's view (what it sent, the ACKs and NAKs delivered to it) and the
// responder's view (the data delivered to it, the ACKs and NAKs it sent), both reconstructed at the switch.
type gbnState struct {
	// Requester.
	sndNxt    int64 // next new PSN
	una       int64 // oldest PSN not acknowledged to the requester
	prevSent  int64
	inRetx    bool
	roundTrig string
	nakPend   bool // a NAK reached the requester and it has not gone back yet
	nakRel    int64
	nakIdx    int
	rnrPend   bool
	rnrRel    int64

	// Responder.
	ePSN        int64 // next PSN the responder accepts
	seqErr      bool  // a sequence error is outstanding (out-of-order packet seen, expected PSN not yet)
	seqErrRel   int64
	seqErrOOS   int64
	seqErrIdx   int
	seqErrNAKed bool
	firstNAKIdx int
	late        bool // an episode ended with no NAK seen yet; a NAK may still be on its way to the switch
	lateRel     int64
	lateOOS     int64
	lateIdx     int
	ackOrder
	dupPend bool
	dupRel  int64
	dupIdx  int

	// Counts for the counter check.
	nakRounds, timeoutRounds, naksSent, naksDelivered, dups, episodes int
}

func (g *gbnState) init() { g.lastAck = -1 }

const gbn = "gbn"

func (g *gbnState) onSend(cs *connState, r int64, pi pktInfo) class {
	switch {
	case r > g.sndNxt:
		cs.violate(gbn, pi.idx, "data PSN %d skips ahead: the next new PSN is %d", cs.abs(r), cs.abs(g.sndNxt))
		g.sndNxt, g.prevSent, g.inRetx = r+1, r, false
		return class{}
	case r == g.sndNxt:
		g.sndNxt++
		g.prevSent, g.inRetx = r, false
		return class{}
	}
	c := class{retx: true}
	switch {
	case g.nakPend && r == g.nakRel:
		g.nakPend = false
		g.nakRounds++
		c.roundStart, c.trigger = true, TriggerNACK
	case g.rnrPend && r == g.rnrRel:
		g.rnrPend = false
		c.roundStart, c.trigger = true, triggerRNR
	case g.inRetx && r == g.prevSent+1:
		c.trigger = g.roundTrig
	case g.inRetx && r > g.prevSent+1:
		if r > g.una {
			cs.violate(gbn, pi.idx, "go-back-N retransmission jumped from PSN %d to PSN %d, skipping unacknowledged PSN %d",
				cs.abs(g.prevSent), cs.abs(r), cs.abs(g.prevSent+1))
		}
		c.trigger = g.roundTrig
	case g.nakPend:
		cs.violate(gbn, pi.idx, "retransmission from PSN %d but the NAK (packet %d) asked for PSN %d",
			cs.abs(r), g.nakIdx, cs.abs(g.nakRel))
		g.nakPend = false
		g.nakRounds++
		c.roundStart, c.trigger = true, TriggerNACK
	default:
		if r != g.una {
			cs.violate(gbn, pi.idx, "timeout retransmission from PSN %d but the oldest unacknowledged PSN is %d",
				cs.abs(r), cs.abs(g.una))
		}
		g.timeoutRounds++
		c.roundStart, c.trigger = true, TriggerTimeout
	}
	g.inRetx, g.prevSent = true, r
	if c.roundStart {
		g.roundTrig = c.trigger
	}
	return c
}

// captureGap accounts for PSNs up to r that a plain capture missed.
func (g *gbnState) captureGap(r int64) {
	if g.ePSN == g.sndNxt {
		g.ePSN = r
	}
	g.sndNxt = r
}

func (g *gbnState) onRecv(cs *connState, r int64, pi pktInfo) {
	switch {
	case r == g.ePSN:
		g.ePSN++
		if g.seqErr {
			g.seqErr = false
			if !g.seqErrNAKed {
				g.flushLate(cs)
				g.late, g.lateRel, g.lateOOS, g.lateIdx = true, g.seqErrRel, g.seqErrOOS, g.seqErrIdx
			}
		}
	case r > g.ePSN:
		if !g.seqErr {
			g.flushLate(cs)
			g.seqErr, g.seqErrRel, g.seqErrOOS, g.seqErrIdx, g.seqErrNAKed = true, g.ePSN, r, pi.idx, false
			g.episodes++
		}
	default:
		g.dups++
		g.dupPend, g.dupRel, g.dupIdx = true, r, pi.idx
	}
}

// flushLate reports an ended sequence error that never got its NAK.
func (g *gbnState) flushLate(cs *connState) {
	if g.late {
		g.late = false
		missingNAK(cs, g.lateIdx, g.lateOOS, g.lateRel)
	}
}

func missingNAK(cs *connState, idx int, oos, expected int64) {
	cs.violate(gbn, idx, "missing NAK: PSN %d arrived while PSN %d was expected; the responder must send one NAK carrying PSN %d",
		cs.abs(oos), cs.abs(expected), cs.abs(expected))
}

func (g *gbnState) onAckSeen(cs *connState, r int64, pi pktInfo) {
	g.onAck(cs, gbn, "responder", g.ePSN, r, pi)
	g.dupPend = false
}

func (g *gbnState) onNAKSeen(cs *connState, r int64, pi pktInfo, hasSACK bool) {
	g.naksSent++
	switch {
	case g.seqErr && g.seqErrNAKed:
		cs.violate(gbn, pi.idx, "second NAK for the same sequence error (expected PSN %d, first NAK at packet %d)",
			cs.abs(g.seqErrRel), g.firstNAKIdx)
	case g.seqErr:
		switch {
		case r < g.seqErrRel && cs.receiverDiscarded():
			// The NIC discarded PSN r.. after the switch: its sequence error starts there.
			g.nicLoss(cs, r)
		case r != g.seqErrRel:
			cs.violate(gbn, pi.idx, "NAK for PSN %d but expected PSN is %d", cs.abs(r), cs.abs(g.seqErrRel))
		}
		g.seqErrNAKed, g.firstNAKIdx = true, pi.idx
	case g.late && r == g.lateRel:
		g.late = false // the NAK was sent in time and reached the switch after the retransmission
	case hasSACK:
		cs.violate(gbn, pi.idx, "NAK for PSN %d selectively acknowledges a packet: go-back-N sends one NAK per sequence error, after which out-of-order packets are discarded silently",
			cs.abs(r))
	case r < g.ePSN && cs.receiverDiscarded():
		// Packets from PSN r on passed the switch but the receiving NIC discarded them (its discard counters
		// moved): the NAK is the NIC's, for a loss the trace cannot show.
		g.nicLoss(cs, r)
		g.seqErr, g.seqErrRel, g.seqErrOOS, g.seqErrIdx, g.seqErrNAKed, g.firstNAKIdx = true, r, g.ePSN, pi.idx, true, pi.idx
		g.episodes++
	default:
		cs.violate(gbn, pi.idx, "NAK for PSN %d without a sequence error: every packet up to PSN %d arrived in order",
			cs.abs(r), cs.abs(g.ePSN-1))
	}
	g.cover(cs, gbn, r-1, pi, "NAK", r)
	g.dupPend = false
}

// nicLoss rewinds the receiver to PSN r: the packets from there on were lost inside the receiving NIC.
func (g *gbnState) nicLoss(cs *connState, r int64) {
	if r < g.ePSN {
		g.ePSN = r
	}
	cs.a.nicLosses++
}

func (g *gbnState) onAckDelivered(r int64) {
	if r+1 > g.una {
		g.una = r + 1
	}
	if g.nakPend && g.una > g.nakRel {
		g.nakPend = false
	}
}

func (g *gbnState) onNAKDelivered(r int64, pi pktInfo) {
	g.naksDelivered++
	if r > g.una {
		g.una = r
	}
	g.nakPend, g.nakRel, g.nakIdx = true, r, pi.idx
}

// finish checks the final state: nothing pending, every packet sent, received and acknowledged.
func (g *gbnState) finish(cs *connState, total int64, lastIdx int) {
	if cs.a.meta == MetaNone && g.anyAck && g.lastAck+1 > g.sndNxt {
		g.captureGap(g.lastAck + 1) // the capture missed the tail the final ACK covers
	}
	g.flushLate(cs)
	if g.seqErr && !g.seqErrNAKed {
		missingNAK(cs, g.seqErrIdx, g.seqErrOOS, g.seqErrRel)
	}
	if g.nakPend && g.una <= g.nakRel {
		cs.violate(gbn, g.nakIdx, "NAK for PSN %d was never acted on: no retransmission from it followed", cs.abs(g.nakRel))
	}
	if g.dupPend {
		cs.violate(gbn, g.dupIdx, "duplicate PSN %d was never re-acknowledged", cs.abs(g.dupRel))
	}
	completeness(cs, gbn, total, g.sndNxt, g.ePSN, g.lastAck, g.anyAck, lastIdx)
}

// stoppedOnError tells whether the traffic generator reported that the connection ended with an error (retries
// exceeded, flushed...): its trace ends where the NIC gave up, so it cannot be complete.
func (cs *connState) stoppedOnError() bool {
	a := cs.a
	if a.stopped == nil {
		a.stopped = make(map[int]bool, len(a.opts.Traffic))
		for _, t := range a.opts.Traffic {
			if _, seen := a.stopped[t.Conn]; !seen { // the first record of a connection decides
				a.stopped[t.Conn] = t.Status != "" && t.Status != "ok"
			}
		}
	}
	return a.stopped[cs.c.Index]
}

// completeness reports a connection that did not finish: the requester must have sent every packet, the
// responder received them all in order, and the final ACK covered the last one.
//
// A plain capture without a known total proves nothing here: it may simply have stopped mid-flight.
func completeness(cs *connState, name string, total, sndNxt, ePSN, lastAck int64, anyAck bool, lastIdx int) {
	if total < 0 && cs.a.meta == MetaNone || cs.stoppedOnError() {
		return
	}
	want := sndNxt
	if total >= 0 {
		want = total
		if sndNxt != total {
			cs.violate(name, lastIdx, "incomplete: the requester sent %d packets (up to PSN %d); the connection has %d (up to PSN %d)",
				sndNxt, cs.abs(sndNxt-1), total, cs.abs(total-1))
		}
	}
	if ePSN != want {
		cs.violate(name, lastIdx, "incomplete: the responder received in order up to PSN %d; expected every packet up to PSN %d",
			cs.abs(ePSN-1), cs.abs(want-1))
	}
	switch {
	case !anyAck && want > 0:
		cs.violate(name, lastIdx, "incomplete: no ACK at all; expected a final ACK for PSN %d", cs.abs(want-1))
	case anyAck && lastAck != want-1:
		cs.violate(name, lastIdx, "incomplete: the last ACK is for PSN %d; expected a final ACK for PSN %d",
			cs.abs(lastAck), cs.abs(want-1))
	}
}
