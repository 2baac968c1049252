package rnic

import "github.com/lumina-go/lumina/roce"

// The responder: requests are accepted in PSN order (go-back-N; IRN's out-of-order buffer is in irn.go), ACKs
// are coalesced, NAKs sent once per gap, READs executed into an ordered output queue with the ACKs.

// responder is the receive side's state: the expected PSN, the message in progress and the ordered output
// queue of ACKs, NAKs and READ responses.
type responder struct {
	ePSN     roce.PSN
	msn      uint32
	nakState bool // a NAK (sequence error or RNR) is outstanding: discard out-of-order packets silently
	recvWQEs int
	rmsg     int // messages received (responder message index)
	inMsg    bool
	msgFirst roce.PSN // first PSN of the message in progress
	// Invariant: msgLen >= -1.
	msgLen   int // WRITE: RETH length of the message in progress, -1 unknown
	sinceAck int
	// Invariant: 0 <= rqHead <= len(rq) and len(rq)-rqHead <= maxRespItems.
	rq     []respItem
	rqHead int
	// Invariant: readsN >= 0; reads holds the last min(readsN, len(reads)) READ requests.
	reads  [64]readRec
	readsN int
}

// item kinds of the responder's output queue.
const (
	itemAck = iota
	itemNAK
	itemRNR
	itemRead
	itemReadAck // IRN: the requester acknowledges a READ response
)

// respItem is one entry of a QP's ordered control/response output: ACKs, NAKs and READ responses leave in the
// order the requests were processed, so an ACK never overtakes the READ responses before it.
type respItem struct {
	kind     uint8
	psn      roce.PSN
	syndrome uint8
	msn      uint32
	sack     roce.PSN
	hasSACK  bool
	// itemRead
	n, sent int
	length  int
	va      uint64
	rkey    uint32
	msg     int
}

// readRec remembers a recent READ request so a re-issued one maps back to its message.
type readRec struct {
	first roce.PSN
	n     int
	msg   int
}

// maxRespItems bounds the responder queue so a misbehaving peer cannot grow it without limit.
const maxRespItems = 1024

// PostRecv adds n receive WQEs (SENDs consume one each; none left means an RNR NAK).
func (q *QP) PostRecv(n int) {
	if n > 0 {
		q.recvWQEs += n
	}
}

// nextResponse emits the head of the responder queue.
func (q *QP) nextResponse(p *Pkt) {
	it := &q.rq[q.rqHead]
	*p = Pkt{DestQP: q.cfg.RemoteQPN, MigReq: q.cfg.MigReq, Msg: -1}
	switch it.kind {
	case itemRead:
		k := it.sent
		first, last := k == 0, k == it.n-1
		p.PSN = it.psn.Add(k)
		p.Msg = it.msg
		p.PayloadLen = min(q.cfg.MTU, it.length-k*q.cfg.MTU)
		p.PayloadLen = max(p.PayloadLen, 0)
		switch {
		case first && last:
			p.Opcode = roce.RCReadResponseOnly
		case first:
			p.Opcode = roce.RCReadResponseFirst
		case last:
			p.Opcode = roce.RCReadResponseLast
		default:
			p.Opcode = roce.RCReadResponseMiddle
		}
		if first || last {
			p.AETH = roce.AETH{Syndrome: roce.SyndromeACKUnlimited, MSN: it.msn}
		}
		it.sent++
		if it.sent < it.n {
			return
		}
	default:
		p.Opcode = roce.RCAcknowledge
		p.PSN = it.psn
		p.AETH = roce.AETH{Syndrome: it.syndrome, MSN: it.msn}
		if it.hasSACK {
			p.SACK, p.HasSACK = it.sack, true
			p.PayloadLen = SACKLen
		}
	}
	q.rqHead++
	if q.rqHead == len(q.rq) {
		q.rq, q.rqHead = q.rq[:0], 0
	}
}

// SACKLen is the size of the payload an IRN NAK carries after its AETH: one reserved byte then the 24-bit PSN
// that triggered the NAK (big endian). Wire encoding chosen by this project (seed 002 does not fix one).
const SACKLen = 4

// pushItem appends to the responder queue, refusing past the bound.
func (q *QP) pushItem(it respItem) bool {
	if len(q.rq)-q.rqHead >= maxRespItems {
		return false
	}
	if q.rqHead > 0 && q.rqHead == len(q.rq) {
		q.rq, q.rqHead = q.rq[:0], 0
	}
	q.rq = append(q.rq, it)
	return true
}

// queueAck queues a positive ACK for ePSN-1, merging it into a pending ACK at the tail (coalescing).
func (q *QP) queueAck() {
	psn := q.ePSN.Add(-1)
	if n := len(q.rq); n > q.rqHead && q.rq[n-1].kind == itemAck {
		q.rq[n-1].psn, q.rq[n-1].msn = psn, q.msn
		return
	}
	q.pushItem(respItem{kind: itemAck, psn: psn, syndrome: roce.SyndromeACKUnlimited, msn: q.msn})
	q.sinceAck = 0
}

// respond is the go-back-N responder (nic-behaviors.md §1).
func (q *QP) respond(now Time, p *Pkt, out *Output) {
	d := p.PSN.Diff(q.ePSN)
	switch {
	case d > 0: // out of order: one NAK per sequence error, then silence
		if q.nakState {
			q.faultSecondNAK(out)
			return
		}
		q.nakState, q.flt.nakDouble = true, false
		q.inc(CtrOutOfSequence)
		q.stats.OutOfSequence++
		if q.flt.set.has(fNoNAK) {
			return // fault no-nak: recovery is left to the requester's timeout
		}
		q.stats.NAKsSent++
		q.pushItem(respItem{kind: itemNAK, psn: q.flt.set.shift(fNAKWrongPSN, q.ePSN), syndrome: roce.SyndromePSNSeqErr, msn: q.msn})
		out.NAKSent = true
		out.NAKTail = q.isTailGap(p)
	case d < 0: // duplicate
		q.inc(CtrDuplicateRequest)
		q.stats.Duplicates++
		if p.Opcode.IsReadRequest() {
			q.reexecuteRead(p)
			return
		}
		q.queueAck()
	default:
		q.accept(now, p, out)
	}
}

// isTailGap says whether the missing packets run to within the tail window of the current message.
func (q *QP) isTailGap(p *Pkt) bool {
	tp := q.prof.Timing.NAKGenerationTailPackets
	if tp <= 0 {
		return false
	}
	if q.inMsg && q.msgLen >= 0 {
		n := roce.PacketsPerMessage(q.msgLen, q.cfg.MTU)
		remaining := q.msgFirst.Add(n).Diff(q.ePSN)
		return remaining > 0 && remaining <= tp
	}
	return p.Opcode.IsLast() && p.PSN.Diff(q.ePSN) < tp
}

// accept processes the in-order request p (PSN == ePSN).
func (q *QP) accept(now Time, p *Pkt, out *Output) {
	op := p.Opcode
	if op.IsReadRequest() {
		if _, ok := readPackets(p.RETH.DMALen, q.cfg.MTU); !ok {
			q.nakInvalid()
			return
		}
		q.nakState = false
		q.executeRead(p.PSN, p.RETH)
		return
	}
	if !op.IsSend() && !op.IsWrite() {
		return // atomics and others are not modeled: ignore
	}
	if op.IsFirst() {
		if op.IsSend() {
			if q.recvWQEs == 0 {
				q.rnrNAK(p.PSN)
				return
			}
			q.recvWQEs--
		}
		q.inMsg, q.msgFirst, q.msgLen = true, p.PSN, -1
		if op.IsWrite() {
			q.msgLen = int(p.RETH.DMALen)
		}
	}
	q.nakState = false
	q.ePSN = q.ePSN.Add(1)
	q.sinceAck++
	last := op.IsLast()
	if last {
		q.inMsg = false
		q.msn++
		q.stats.Delivered++
		if op.IsSend() || op.HasImm() {
			out.Completions = append(out.Completions, Completion{WRID: uint64(q.rmsg), Time: now, Recv: true,
				Imm: p.Imm, Msg: q.rmsg, Bytes: 0})
		}
		q.rmsg++
	}
	if q.shouldAck(p.AckReq, last) {
		q.queueAck()
	}
}

// executeRead queues the responses of the READ request at psn (the expected PSN) and consumes its PSNs.
func (q *QP) executeRead(psn roce.PSN, reth roce.RETH) {
	n, _ := readPackets(reth.DMALen, q.cfg.MTU)
	q.msn++
	msg := q.rmsg
	q.rmsg++
	q.reads[q.readsN%len(q.reads)] = readRec{first: psn, n: n, msg: msg}
	q.readsN++
	q.pushItem(respItem{kind: itemRead, psn: psn, n: n, length: int(reth.DMALen), va: reth.VA, rkey: reth.RKey,
		msn: q.msn, msg: msg})
	q.ePSN = psn.Add(n)
	q.sinceAck = 0
}

// shouldAck applies the profile's ACK policy to an accepted packet.
func (q *QP) shouldAck(ackReq, last bool) bool {
	switch q.prof.Ack.Mode {
	case AckModeEvery:
		return true
	case AckModeMessage:
		return last
	case AckModeCoalesce:
		return last || q.sinceAck >= q.prof.Ack.Every
	}
	return ackReq
}

// readPackets is the number of response packets (= PSNs) of a READ of length bytes; false if too large.
func readPackets(length uint32, mtu int) (int, bool) {
	if length > 1<<31 {
		return 0, false
	}
	n := roce.PacketsPerMessage(int(length), mtu)
	return n, n < 1<<22
}

// nakInvalid answers a malformed request with a NAK "invalid request" (syndrome 0x61).
func (q *QP) nakInvalid() {
	q.stats.NAKsSent++
	q.pushItem(respItem{kind: itemNAK, psn: q.ePSN, syndrome: 0x60 | uint8(roce.NAKInvalidRequest), msn: q.msn})
}

// rnrNAK answers a SEND that found no receive WQE.
func (q *QP) rnrNAK(psn roce.PSN) {
	q.inc(CtrOutOfBuffer)
	q.stats.RNRNAKsSent++
	q.nakState = true
	q.pushItem(respItem{kind: itemRNR, psn: psn, syndrome: 0x20 | q.cfg.MinRNRTimer&0x1f, msn: q.msn})
}

// reexecuteRead serves a duplicate READ request (a re-issue after a gap or a timeout): responses restart at its
// PSN; unsent responses of earlier READs are dropped because the requester goes back to that PSN anyway.
func (q *QP) reexecuteRead(p *Pkt) {
	n, ok := readPackets(p.RETH.DMALen, q.cfg.MTU)
	if !ok {
		return
	}
	if p.PSN.Add(n).Diff(q.ePSN) > 0 {
		return // claims PSNs never requested: ignore
	}
	w := q.rqHead
	for r := q.rqHead; r < len(q.rq); r++ {
		if q.rq[r].kind != itemRead {
			q.rq[w] = q.rq[r]
			w++
		}
	}
	q.rq = q.rq[:w]
	msg := -1
	for i := 0; i < min(q.readsN, len(q.reads)); i++ {
		r := q.reads[i]
		if d := p.PSN.Diff(r.first); d >= 0 && d < r.n {
			msg = r.msg
			break
		}
	}
	q.pushItem(respItem{kind: itemRead, psn: p.PSN, n: n, length: int(p.RETH.DMALen), va: p.RETH.VA,
		rkey: p.RETH.RKey, msn: q.msn, msg: msg})
}
