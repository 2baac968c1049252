package analyze

import (
	"fmt"
	"github.com/lumina-go/lumina/rnic"

	"github.com/lumina-go/lumina/roce"
)

// maxJump bounds how far ahead of everything seen a PSN may jump before it is treated as garbage: per-PSN
// state is kept in a window of slots, and a corrupt capture must not make it grow to 2^23 entries.
const maxJump = 1 << 20

// connState is everything the analyzers keep about one connection. PSNs are handled as "rel": the signed,
// unwrapped distance from the connection's initial PSN, so that 24-bit wrap-around never matters below.
type connState struct {
	a         *analyzer
	c         Conn
	learned   bool
	respKnown bool
	pairHi    int64 // learning mode: the highest rel of the response range in the pairing index (pairing.go)

	refPSN roce.PSN // the highest PSN seen so far, and its rel: the reference for unwrapping
	refRel int64

	sawRead, sawWS, sawOther, sawSACK bool
	events                            bool // an injected event or a loss touched the connection
	mtuSeen                           int

	iter    int
	prevPSN roce.PSN
	hasPrev bool

	// Per-PSN state, indexed by rel, for the PSNs that can still be referenced (window.go).
	win psnWindow

	// Messages (0-based slices, 1-based numbers elsewhere).
	curMsg    int
	msgT0     []int64
	msgFirst  []int64 // rel of the first packet
	msgLast   []int64 // rel of the last packet; -1 unknown yet
	msgDone   []int64 // completion time; -1 not yet
	nextDone  int
	bytes     int64
	firstData int64
	lastDone  int64
	retries   []MessageRetries // messages with retries, by message

	awaitOOS []int32 // losses waiting for the next out-of-order arrival (NACK generation start)

	haveNAK    bool // the latest NAK seen at the switch, for latency in plain captures
	lastNAKRel int64
	lastNAKT   int64
	lastNAKIdx int

	cePend, nakPend int // index + 1 of the latest unanswered CE / NAK trigger (CNP attribution)
	// earlyCNP is the time of a CNP that answered nothing when it passed (-1: none): a NIC may send the CNP
	// for an out-of-order arrival before the NAK it sends for the same arrival.
	earlyCNP int64

	gbn  gbnState
	irn  irnState
	rd   *readState        // READ connections only (readState; made by read)
	viol map[string]*Check // per analyzer
}

func newConnState(a *analyzer, c Conn, learned bool) *connState {
	cs := &connState{a: a, c: c, learned: learned, refPSN: c.ReqIPSN, refRel: 0, firstData: -1, lastDone: -1,
		earlyCNP: -1}
	cs.gbn.init()
	cs.irn.init()
	return cs
}

// rel unwraps a PSN against the highest PSN seen on the connection.
func (cs *connState) rel(p roce.PSN) int64 {
	r := cs.refRel + int64(p.Diff(cs.refPSN))
	if r > cs.refRel {
		cs.refRel, cs.refPSN = r, p
	}
	return r
}

// peekRel is rel without moving the reference (for ACKs and NAKs, which never lead).
func (cs *connState) peekRel(p roce.PSN) int64 { return cs.refRel + int64(p.Diff(cs.refPSN)) }

// abs is the wire PSN of a rel.
func (cs *connState) abs(r int64) uint32 { return uint32(cs.c.ReqIPSN.Add(int(r))) }

// ensure extends the per-PSN window to hold rel r; false if r is negative or an implausible jump.
func (cs *connState) ensure(r int64) bool {
	if r < 0 || r > cs.win.end()+maxJump {
		return false
	}
	if r >= cs.win.end() {
		cs.grow(r)
	}
	return true
}

func (cs *connState) qp() int { return cs.c.Index + cs.a.opts.IndexBase }

// isIRN says which Write/Send checker judges the connection: IRN when the trace shows SACKs or a NIC runs the
// irn profile.
func (cs *connState) isIRN() bool {
	return cs.sawSACK || cs.a.opts.Requester.Profile == "irn" || cs.a.opts.Responder.Profile == "irn"
}

// setViol files a connection's check of one analyzer; the map is made on the first (most connections never
// have one: a map each would be most of an idle connection's memory).
func (cs *connState) setViol(analyzer string, c *Check) {
	if cs.viol == nil {
		cs.viol = make(map[string]*Check, 3)
	}
	cs.viol[analyzer] = c
}

// violate records a violation for one analyzer of this connection.
func (cs *connState) violate(analyzer string, idx int, format string, args ...any) {
	c := cs.viol[analyzer]
	if c == nil {
		c = &Check{Analyzer: analyzer, QP: cs.qp(), Violations: []Violation{}}
		cs.setViol(analyzer, c)
	}
	c.ViolationCount++
	if len(c.Violations) < cs.a.maxViol {
		c.Violations = append(c.Violations, Violation{Packet: idx, Message: fmt.Sprintf(format, args...)})
	}
}

// plausibleResponse says whether a response PSN fits the requests sent so far (learning-mode pairing).
func (cs *connState) plausibleResponse(p roce.PSN) bool {
	r := cs.peekRel(p)
	if cs.c.Verb == VerbRead {
		return r >= 0 && r < cs.read().sndNxt+4096
	}
	return r >= -1 && r < cs.gbn.sndNxt
}

// stepIter applies the contract's ITER rule (roce.NextIter) to the data packet at rel r; the first one is in
// round 1.
func (cs *connState) stepIter(r int64) {
	psn := roce.PSN(cs.abs(r))
	if !cs.hasPrev {
		cs.iter, cs.hasPrev = 1, true
	} else {
		cs.iter = roce.NextIter(cs.iter, cs.prevPSN, psn)
	}
	cs.prevPSN = psn
}

// assignMsg assigns message numbers on a PSN's first transmission: from PacketsPerMsg when known, else from
// the FIRST/ONLY opcodes.
func (cs *connState) assignMsg(r int64, op roce.Opcode, t int64) int {
	if m := cs.slot(r).msgOf; m > 0 {
		return int(m)
	}
	var m int
	if ppm := cs.c.PacketsPerMsg; ppm > 0 {
		m = int(r/int64(ppm)) + 1
	} else {
		if op.IsFirst() || cs.curMsg == 0 {
			cs.curMsg++
		}
		m = cs.curMsg
	}
	cs.growMsgs(m)
	if cs.msgT0[m-1] < 0 {
		cs.msgT0[m-1] = t
		cs.msgFirst[m-1] = r
		if ppm := cs.c.PacketsPerMsg; ppm > 0 {
			cs.msgFirst[m-1] = int64(m-1) * int64(ppm)
			cs.msgLast[m-1] = int64(m)*int64(ppm) - 1
		}
	}
	if op.IsLast() && cs.c.PacketsPerMsg <= 0 {
		cs.msgLast[m-1] = r
	}
	cs.slot(r).msgOf = int32(m)
	if cs.firstData < 0 {
		cs.firstData = t
	}
	return m
}

func (cs *connState) growMsgs(m int) {
	for len(cs.msgT0) < m {
		cs.msgT0 = append(cs.msgT0, -1)
		cs.msgFirst = append(cs.msgFirst, -1)
		cs.msgLast = append(cs.msgLast, -1)
		cs.msgDone = append(cs.msgDone, -1)
	}
}

// completeTo marks every message whose last PSN is at or before r as completed at t.
func (cs *connState) completeTo(r int64, t int64) {
	for cs.nextDone < len(cs.msgLast) {
		last := cs.msgLast[cs.nextDone]
		if last < 0 || last > r {
			return
		}
		cs.msgDone[cs.nextDone] = t
		cs.lastDone = t
		cs.nextDone++
	}
}

// sent records a transmission of rel r (after the checkers and the loss bookkeeping have looked at it).
func (cs *connState) sent(r int64, pi pktInfo) {
	s := cs.slot(r)
	if s.lastIdx == 0 {
		s.firstTx = pi.t
	}
	s.lastTx = pi.t
	s.lastIdx = int32(pi.idx + 1)
}

// onData handles a SEND or WRITE packet from the requester.
func (cs *connState) onData(p *roce.Packet, pi pktInfo) {
	cs.sawWS = true
	r := cs.rel(p.BTH.PSN)
	if !cs.ensure(r) {
		cs.violate(cs.wsName(), pi.idx, "data PSN %d is %d packets away from the connection's initial PSN %d",
			p.BTH.PSN, r, cs.c.ReqIPSN)
		return
	}
	if pi.ev != 0 {
		cs.events = true
	}
	if cs.a.meta == MetaNone && r > cs.gbn.sndNxt {
		// A plain capture that jumps ahead with nothing retransmitted missed packets (capture loss, sampling):
		// assume they were sent and delivered rather than judge the NIC by what the capture lacks.
		cs.a.res.CaptureGaps += int(r - cs.gbn.sndNxt)
		cs.gbn.captureGap(r)
		cs.irn.captureGap(r)
	}
	cs.stepIter(r)
	m := cs.assignMsg(r, p.BTH.Opcode, pi.t)
	g := cs.gbn.onSend(cs, r, pi)
	ir := cs.irn.onSend(cs, r, pi)
	cl := g
	if cs.isIRN() {
		cl = ir
	}
	cs.a.lossOnSend(cs, r, m, pi, cl, p.BTH.Opcode)
	cs.sent(r, pi)
	if pi.delivered {
		if !cs.flag(r, slotGot) {
			cs.setFlag(r, slotGot)
			cs.bytes += int64(p.PayloadLen)
		}
		cs.gbn.onRecv(cs, r, pi)
		cs.irn.onRecv(cs, r, pi)
		if pi.ce {
			cs.a.cnp.trigger(cs, trigCE, pi)
		}
	}
}

func (cs *connState) wsName() string {
	if cs.isIRN() {
		return "irn"
	}
	return "gbn"
}

// onACK handles a positive acknowledgement from the responder.
func (cs *connState) onACK(p *roce.Packet, pi pktInfo) {
	if cs.c.Verb == VerbRead && !cs.sawWS {
		return // IRN's READ ACKs and ACKs of atomics are not judged
	}
	r := cs.peekRel(p.BTH.PSN)
	cs.gbn.onAckSeen(cs, r, pi)
	cs.irn.onAckSeen(cs, r, pi)
	if pi.delivered {
		cs.gbn.onAckDelivered(r)
		cs.irn.onAckDelivered(r)
		cs.completeTo(r, pi.t)
	}
}

// onNAK handles a PSN-sequence-error NAK from the responder (IRN's carries a SACK).
func (cs *connState) onNAK(p *roce.Packet, pi pktInfo) {
	r := cs.peekRel(p.BTH.PSN)
	sack, hasSACK := SACKOf(p)
	var sr int64 = -1
	if hasSACK {
		cs.sawSACK = true
		sr = cs.peekRel(sack)
	}
	cs.events = true
	cs.haveNAK, cs.lastNAKRel, cs.lastNAKT, cs.lastNAKIdx = true, r, pi.t, pi.idx
	cs.gbn.onNAKSeen(cs, r, pi, hasSACK)
	cs.irn.onNAKSeen(cs, r, sr, hasSACK, pi)
	if pi.delivered {
		cs.gbn.onNAKDelivered(r, pi)
		cs.irn.onNAKDelivered(cs, r, sr, hasSACK, pi)
		cs.completeTo(r-1, pi.t)
	}
	cs.a.lossOnNAK(cs, r, pi)
	cs.a.cnp.trigger(cs, trigNAK, pi)
}

// onRNR handles an RNR NAK: the requester retries from its PSN after the RNR timer.
func (cs *connState) onRNR(p *roce.Packet, pi pktInfo) {
	if !pi.delivered {
		return
	}
	r := cs.peekRel(p.BTH.PSN)
	cs.gbn.rnrPend, cs.gbn.rnrRel = true, r
	cs.irn.rnrPend, cs.irn.rnrRel = true, r
}

// SACKOf returns the selectively acknowledged PSN an IRN NAK carries. The encoding (shared with rnic): a NAK
// with a PSN-sequence-error syndrome followed by a 4-byte payload whose low 24 bits (big-endian) are the
// PSN of the out-of-order packet that triggered it; a plain go-back-N NAK has no payload.
func SACKOf(p *roce.Packet) (roce.PSN, bool) {
	if !p.IsNAK() || p.AETH.NAKCode() != roce.NAKPSNSequenceError || p.PayloadLen != rnic.SACKLen {
		return 0, false
	}
	return rnic.ParseSACK(p.Payload)
}
