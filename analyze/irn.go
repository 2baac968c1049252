package analyze

// irnState is IRN's selective repeat (seed 002 §3, nic-behaviors.md §4): the receiver keeps out-of-order
// packets and NAKs every out-of-order arrival with the cumulative ACK (the BTH PSN) and the PSN that triggered
// it (the SACK); the sender retransmits only packets known lost, never one that was selectively acknowledged,
// and leaves recovery when the cumulative ACK passes the highest PSN sent when recovery began.
type irnState struct {
	// Sender.
	sndNxt, una int64
	prevSent    int64
	inRec       bool
	recSeq      int64
	retxInRec   bool
	lastTimeout bool // the previous packet was a timeout retransmission (a timeout round continues)
	sackMax     int64
	rnrPend     bool
	rnrRel      int64

	// Receiver.
	ePSN     int64
	pend     []irnPend // out-of-order arrivals still owed a NAK, in arrival order
	pendHead int
	ackOrder

	recoveries, timeoutRounds, naksSent, dups int
}

type irnPend struct {
	cum, sack int64
	idx       int
}

// maxIRNPend bounds the out-of-order arrivals waiting for their NAK: an IRN receiver NAKs each within its
// NAK generation time, i.e. a few hundred packets at most.
const maxIRNPend = 4096

func neverNAKed(cs *connState, h irnPend) {
	if c := cs.viol[irn]; c != nil && len(c.Violations) >= cs.a.maxViol {
		c.ViolationCount++ // listed no more: skip formatting (a go-back-N connection gets one per arrival)
		return
	}
	cs.violate(irn, h.idx, "out-of-order arrival of PSN %d was never NAKed: IRN NAKs every out-of-order arrival (expected PSN %d)",
		cs.abs(h.sack), cs.abs(h.cum))
}

func (s *irnState) init() { s.lastAck, s.sackMax = -1, -1 }

const irn = "irn"

func (s *irnState) onSend(cs *connState, r int64, pi pktInfo) class {
	switch {
	case r > s.sndNxt:
		cs.violate(irn, pi.idx, "data PSN %d skips ahead: the next new PSN is %d", cs.abs(r), cs.abs(s.sndNxt))
		s.sndNxt, s.prevSent, s.lastTimeout = r+1, r, false
		return class{}
	case r == s.sndNxt:
		s.sndNxt++
		s.prevSent, s.lastTimeout = r, false
		return class{}
	}
	c := class{retx: true}
	if s.rnrPend && r == s.rnrRel {
		s.rnrPend = false
		s.prevSent, s.lastTimeout = r, false
		return class{retx: true, roundStart: true, trigger: triggerRNR}
	}
	switch {
	case cs.flag(r, slotSacked):
		cs.violate(irn, pi.idx, "retransmitted PSN %d, which the receiver had selectively acknowledged", cs.abs(r))
	case r < s.una:
		cs.violate(irn, pi.idx, "retransmitted PSN %d, which was already cumulatively acknowledged (up to PSN %d)",
			cs.abs(r), cs.abs(s.una-1))
	}
	if s.inRec {
		if r != s.una && r >= s.sackMax {
			cs.violate(irn, pi.idx, "retransmitted PSN %d before it was known lost: the cumulative ACK is at PSN %d and no higher PSN was selectively acknowledged",
				cs.abs(r), cs.abs(s.una))
		}
		c.trigger = TriggerNACK
		c.roundStart = !s.retxInRec
		s.retxInRec = true
		s.lastTimeout = false
	} else {
		c.trigger = TriggerTimeout
		c.roundStart = !(s.lastTimeout && r == s.prevSent+1)
		if c.roundStart {
			s.timeoutRounds++
		}
		s.lastTimeout = true
	}
	s.prevSent = r
	return c
}

// captureGap accounts for PSNs up to r that a plain capture missed.
func (s *irnState) captureGap(r int64) {
	if s.ePSN == s.sndNxt {
		s.ePSN = r
	}
	s.sndNxt = r
}

func (s *irnState) onRecv(cs *connState, r int64, pi pktInfo) {
	switch {
	case r == s.ePSN:
		cs.setFlag(r, slotRcvd)
		for cs.flag(s.ePSN, slotRcvd) {
			s.ePSN++
		}
	case r > s.ePSN && !cs.flag(r, slotRcvd):
		cs.setFlag(r, slotRcvd)
		s.pend = append(s.pend, irnPend{cum: s.ePSN, sack: r, idx: pi.idx})
		if len(s.pend)-s.pendHead > maxIRNPend {
			// Thousands of arrivals without a NAK (a go-back-N receiver, which the IRN checker shadows until a
			// SACK shows up): the oldest will never be answered; judge it now rather than hold it.
			neverNAKed(cs, s.pend[s.pendHead])
			s.pendHead++
		}
		if s.pendHead >= maxIRNPend {
			s.pend = s.pend[:copy(s.pend, s.pend[s.pendHead:])]
			s.pendHead = 0
		}
	default:
		s.dups++
	}
}

func (s *irnState) onAckSeen(cs *connState, r int64, pi pktInfo) {
	s.onAck(cs, irn, "receiver", s.ePSN, r, pi)
}

func (s *irnState) onNAKSeen(cs *connState, r, sr int64, hasSACK bool, pi pktInfo) {
	s.naksSent++
	s.cover(cs, irn, r-1, pi, "NAK", r)
	if !hasSACK {
		cs.violate(irn, pi.idx, "NAK for PSN %d carries no SACK: IRN NAKs every out-of-order arrival with the cumulative ACK and the PSN that triggered it",
			cs.abs(r))
		return
	}
	if s.pendHead == len(s.pend) {
		cs.violate(irn, pi.idx, "NAK (cumulative PSN %d, SACK %d) without an out-of-order arrival to answer", cs.abs(r), cs.abs(sr))
		return
	}
	h := s.pend[s.pendHead]
	s.pendHead++
	if s.pendHead == len(s.pend) {
		s.pend, s.pendHead = s.pend[:0], 0
	}
	if h.sack != sr {
		cs.violate(irn, pi.idx, "NAK selectively acknowledges PSN %d but the out-of-order arrival it answers (packet %d) was PSN %d",
			cs.abs(sr), h.idx, cs.abs(h.sack))
	}
	if h.cum != r {
		cs.violate(irn, pi.idx, "NAK carries cumulative PSN %d but the expected PSN was %d when PSN %d arrived (packet %d)",
			cs.abs(r), cs.abs(h.cum), cs.abs(h.sack), h.idx)
	}
}

func (s *irnState) onAckDelivered(r int64) {
	if r+1 > s.una {
		s.una = r + 1
	}
	if s.inRec && s.una > s.recSeq {
		s.inRec = false
	}
}

func (s *irnState) onNAKDelivered(cs *connState, r, sr int64, hasSACK bool, pi pktInfo) {
	if !hasSACK {
		return
	}
	if r > s.una {
		s.una = r
	}
	cs.setFlag(sr, slotSacked)
	if sr > s.sackMax {
		s.sackMax = sr
	}
	if !s.inRec {
		s.inRec, s.recSeq, s.retxInRec = true, s.sndNxt-1, false
		s.recoveries++
	}
	if s.una > s.recSeq {
		s.inRec = false
	}
}

func (s *irnState) finish(cs *connState, total int64, lastIdx int) {
	if cs.a.meta == MetaNone && s.anyAck && s.lastAck+1 > s.sndNxt {
		s.captureGap(s.lastAck + 1) // the capture missed the tail the final ACK covers
	}
	for _, h := range s.pend[s.pendHead:] {
		neverNAKed(cs, h)
	}
	completeness(cs, irn, total, s.sndNxt, s.ePSN, s.lastAck, s.anyAck, lastIdx)
}
