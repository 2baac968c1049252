package rnic

import (
	"fmt"
	"math"

	"github.com/lumina-go/lumina/roce"
)

// The requester: work requests become packets (go-back-N, or IRN's selective repeat in irn.go), ACKs and NAKs
// move the window, READ responses are checked for gaps, and the retransmission timer with IB's retry
// accounting and NVIDIA's adaptive retransmission.

// requester is the send side's state: the send queue, the PSN window and the retransmission accounting.
type requester struct {
	sq []wqe
	// Invariant: 0 <= head <= txIdx <= len(sq); when txIdx < len(sq), 0 <= txOff < sq[txIdx].npkts, else
	// txOff == 0.
	head       int // oldest incomplete WQE
	txIdx      int // cursor: WQE index of the next packet to send
	txOff      int // cursor: packet offset within sq[txIdx]
	nextAssign roce.PSN
	// Invariant: sndUna <= sndNxt <= nextAssign (serial arithmetic): nothing is acknowledged before it is
	// sent, nothing is sent before a work request assigned its PSN.
	sndUna roce.PSN // oldest unacknowledged PSN
	sndNxt roce.PSN // one past the highest PSN sent
	msgs   int      // work requests posted

	// Invariant: retries >= 0 and rnrRetries >= 0.
	retries     int      // consecutive retries without progress
	retryMark   roce.PSN // progress = an acknowledgement at or past this PSN
	rnrRetries  int
	rnrWait     bool
	firstTO     int64 // drawn first timeout after progress (scan mode)
	tStart      Time  // retransmission timer reference
	timerArmed  bool
	timerAt     Time
	toMsgs      int // messages that needed a timeout (adaptive accounting)
	inReadGap   bool
	readGapPSN  roce.PSN
	readsIssued int
}

// wqe is one posted work request on the requester side.
type wqe struct {
	wr       WorkRequest
	msg      int
	first    roce.PSN
	npkts    int // PSNs consumed: data packets (SEND/WRITE) or response packets (READ)
	recvd    int // READ: responses received in order
	issued   bool
	timedOut bool // at least one timeout retransmission (adaptive-retransmission accounting)
}

// PostSend queues a work request. In the error state the request completes at once with a flush error, as
// ibv_post_send does.
func (q *QP) PostSend(now Time, wr WorkRequest, out *Output) error {
	if wr.Verb > VerbRead {
		return fmt.Errorf("post send: work request %d: unknown verb %d", wr.ID, wr.Verb)
	}
	if wr.Length < 0 || wr.Length > 1<<31 {
		return fmt.Errorf("post send: work request %d: length %d: want 0..2^31", wr.ID, wr.Length)
	}
	n := roce.PacketsPerMessage(wr.Length, q.cfg.MTU)
	if n >= 1<<22 {
		return fmt.Errorf("post send: work request %d: %d packets exceed the PSN window", wr.ID, n)
	}
	msg := q.msgs
	q.msgs++
	if q.state == QPStateError {
		out.Completions = append(out.Completions, Completion{WRID: wr.ID, Status: StatusFlushErr, Time: now, Msg: msg})
		return nil
	}
	if q.head > 64 && q.head > len(q.sq)/2 { // compact: keep the queue's storage bounded
		k := copy(q.sq, q.sq[q.head:])
		q.sq = q.sq[:k]
		q.txIdx -= q.head
		q.head = 0
	}
	q.sq = append(q.sq, wqe{wr: wr, msg: msg, first: q.nextAssign, npkts: n})
	q.nextAssign = q.nextAssign.Add(n)
	out.Wake = true
	q.syncTimer(now, out)
	return nil
}

// canSendData reports whether the requester has a packet it may send now.
func (q *QP) canSendData() bool {
	if q.rnrWait || q.state == QPStateError {
		return false
	}
	if q.irn && q.retxPending {
		if _, _, ok := q.irnNextLost(); ok {
			return true
		}
		q.retxPending = false
	}
	if q.txIdx >= len(q.sq) {
		return false
	}
	w := &q.sq[q.txIdx]
	psn := w.first.Add(q.txOff)
	isNew := !psn.Less(q.sndNxt)
	if q.irn && isNew && q.sndNxt.Diff(q.sndUna) >= q.prof.IRN.BDPPackets && q.sndNxt != q.sndUna {
		return false // BDP flow control
	}
	if w.wr.Verb == VerbRead && !w.issued && q.readsIssued >= q.cfg.MaxRdAtomic {
		return false
	}
	return true
}

// nextData emits the packet at the cursor and advances it.
func (q *QP) nextData(now Time, p *Pkt) {
	w := &q.sq[q.txIdx]
	q.emit(now, q.txIdx, q.txOff, p)
	if w.wr.Verb == VerbRead {
		q.txIdx++
		q.txOff = 0
		return
	}
	q.txOff++
	if q.txOff >= w.npkts {
		q.txIdx++
		q.txOff = 0
	}
}

// emit fills p with packet off of WQE idx (for a READ: the READ request for its responses from off on).
func (q *QP) emit(now Time, idx, off int, p *Pkt) {
	w := &q.sq[idx]
	psn := w.first.Add(off)
	retx := psn.Less(q.sndNxt)
	if q.sndNxt == q.sndUna {
		q.tStart = now // first packet in flight: the timer starts now
	}
	mtu := q.cfg.MTU
	*p = Pkt{DestQP: q.cfg.RemoteQPN, PSN: psn, MigReq: q.cfg.MigReq, Retransmission: retx, Msg: w.msg}
	if w.wr.Verb == VerbRead {
		b := off * mtu
		p.Opcode = roce.RCReadRequest
		p.AckReq = true
		p.RETH = roce.RETH{VA: w.wr.RemoteAddr + uint64(b), RKey: w.wr.RKey, DMALen: uint32(max(0, w.wr.Length-b))}
		if !w.issued {
			w.issued = true
			q.readsIssued++
		}
		q.advanceSndNxt(w.first.Add(w.npkts))
		return
	}
	n := w.npkts
	first, last := off == 0, off == n-1
	p.PayloadLen = min(mtu, w.wr.Length-off*mtu)
	p.Opcode = dataOpcode(w.wr.Verb, first, last)
	if first && (w.wr.Verb == VerbWrite || w.wr.Verb == VerbWriteImm) {
		p.RETH = roce.RETH{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: uint32(w.wr.Length)}
	}
	if last && (w.wr.Verb == VerbSendImm || w.wr.Verb == VerbWriteImm) {
		p.Imm = w.wr.Imm
	}
	if last {
		p.SE = w.wr.Verb == VerbSend || w.wr.Verb == VerbSendImm
	}
	every := q.prof.Ack.AckReqEvery
	p.AckReq = last || (every > 0 && (off+1)%every == 0)
	q.advanceSndNxt(psn.Add(1))
}

func (q *QP) advanceSndNxt(to roce.PSN) {
	if q.sndNxt.Less(to) {
		q.sndNxt = to
	}
}

// dataOpcode picks the RC opcode of a SEND/WRITE packet by its position in the message.
func dataOpcode(v Verb, first, last bool) roce.Opcode {
	imm := v == VerbSendImm || v == VerbWriteImm
	if v == VerbSend || v == VerbSendImm {
		switch {
		case first && last && imm:
			return roce.RCSendOnlyImm
		case first && last:
			return roce.RCSendOnly
		case first:
			return roce.RCSendFirst
		case last && imm:
			return roce.RCSendLastImm
		case last:
			return roce.RCSendLast
		}
		return roce.RCSendMiddle
	}
	switch {
	case first && last && imm:
		return roce.RCWriteOnlyImm
	case first && last:
		return roce.RCWriteOnly
	case first:
		return roce.RCWriteFirst
	case last && imm:
		return roce.RCWriteLastImm
	case last:
		return roce.RCWriteLast
	}
	return roce.RCWriteMiddle
}

// onAck handles ACK, NAK and RNR NAK packets.
func (q *QP) onAck(now Time, p *Pkt, out *Output) {
	a := p.AETH
	switch a.Type() {
	case roce.AckTypeACK:
		q.ackUpTo(now, p.PSN, out)
	case roce.AckTypeNAK:
		if !q.validAckPSN(p.PSN.Add(-1)) {
			return
		}
		q.stats.NAKsReceived++
		if a.NAKCode() != roce.NAKPSNSequenceError {
			q.ackUpTo(now, p.PSN.Add(-1), out)
			q.fail(now, StatusRemoteErr, out)
			return
		}
		if q.irn && p.HasSACK {
			q.irnNAK(now, p, out)
			return
		}
		q.ackUpTo(now, p.PSN.Add(-1), out)
		if q.state == QPStateError || !p.PSN.Less(q.sndNxt) {
			return
		}
		q.inc(CtrPacketSeqErr)
		if !q.retry(now, out) {
			return
		}
		q.goBack(q.flt.set.shift(fRetxWrongPSN, p.PSN))
		out.Wake = true
	case roce.AckTypeRNRNAK:
		if !q.validAckPSN(p.PSN.Add(-1)) {
			return
		}
		q.stats.RNRNAKsReceived++
		q.ackUpTo(now, p.PSN.Add(-1), out)
		if q.state == QPStateError || !p.PSN.Less(q.sndNxt) {
			return
		}
		q.inc(CtrRNRNAKRetryErr)
		q.rnrRetries++
		if q.cfg.RNRRetry != 7 && q.rnrRetries > int(q.cfg.RNRRetry) {
			q.inc(CtrRNRRetryExceeded)
			q.fail(now, StatusRNRRetryExc, out)
			return
		}
		q.goBack(p.PSN)
		q.rnrWait = true
		out.Timers = append(out.Timers, TimerReq{Kind: TimerRNR, At: now + roce.RNRTimerNs(a.RNRTimer())})
	}
	q.syncTimer(now, out)
}

// validAckPSN reports whether an acknowledgement of PSN psn can refer to outstanding requests:
// sndUna-1 <= psn < sndNxt.
func (q *QP) validAckPSN(psn roce.PSN) bool {
	return !psn.Less(q.sndUna.Add(-1)) && psn.Less(q.sndNxt)
}

// ackUpTo applies a cumulative acknowledgement of every PSN up to and including psn. A READ whose responses
// are missing below psn is an implied NAK: the READ is re-issued from its first missing PSN.
func (q *QP) ackUpTo(now Time, psn roce.PSN, out *Output) {
	if !q.validAckPSN(psn) {
		return
	}
	before := q.sndUna
	for q.head < len(q.sq) {
		w := &q.sq[q.head]
		if w.wr.Verb == VerbRead {
			next := w.first.Add(w.recvd)
			if !next.LessEq(psn) {
				break
			}
			q.readGap(now, w, out) // acknowledged past missing READ responses
			break
		}
		last := w.first.Add(w.npkts - 1)
		if !last.LessEq(psn) {
			if !psn.Less(w.first) {
				q.sndUna = psn.Add(1)
			}
			break
		}
		if !last.Less(q.sndNxt) {
			break // not fully sent yet (cannot be acknowledged)
		}
		q.sndUna = last.Add(1)
		q.complete(now, StatusSuccess, out)
	}
	if q.sndUna != before {
		q.progress(now)
	}
}

// progress is called when sndUna advances: the timer restarts and, once the acknowledgement reaches the point
// of the last retry, the retry counters reset.
func (q *QP) progress(now Time) {
	q.tStart = now
	q.rnrRetries = 0
	if q.retries > 0 && q.retryMark.Less(q.sndUna) {
		q.retries = 0
		q.drawFirstTimeout()
	}
	if q.inReadGap && q.readGapPSN.Less(q.sndUna) {
		q.inReadGap = false
	}
	if q.txIdx < len(q.sq) {
		// Skip retransmitting what is already acknowledged.
		if psn := q.sq[q.txIdx].first.Add(q.txOff); psn.Less(q.sndUna) && q.sq[q.txIdx].wr.Verb != VerbRead {
			q.goBack(q.sndUna)
		}
	}
	if q.txIdx < q.head {
		q.txIdx, q.txOff = q.head, 0
	}
	if q.irn && q.inRecovery && !q.sndUna.Less(q.recoverSeq) {
		q.inRecovery, q.retxPending = false, false
	}
}

// complete retires the oldest WQE.
func (q *QP) complete(now Time, st Status, out *Output) {
	w := &q.sq[q.head]
	out.Completions = append(out.Completions, Completion{WRID: w.wr.ID, Status: st, Time: now, Bytes: w.wr.Length, Msg: w.msg})
	if w.wr.Verb == VerbRead && w.issued {
		q.readsIssued--
	}
	if st == StatusSuccess {
		q.stats.Completed++
	} else {
		q.stats.Failed++
	}
	q.head++
	if q.txIdx < q.head {
		q.txIdx, q.txOff = q.head, 0
	}
	if q.head == len(q.sq) {
		q.sq, q.head, q.txIdx, q.txOff = q.sq[:0], 0, 0, 0
	}
}

// fail completes the oldest WQE with st, flushes the rest and moves the QP to the error state.
func (q *QP) fail(now Time, st Status, out *Output) {
	if q.head < len(q.sq) {
		q.complete(now, st, out)
	}
	for q.head < len(q.sq) {
		q.complete(now, StatusFlushErr, out)
	}
	q.state = QPStateError
	q.rq, q.rqHead = q.rq[:0], 0
	for _, k := range []TimerKind{TimerRetransmit, TimerRNR, TimerAckCoalesce, TimerDCQCN} {
		out.Timers = append(out.Timers, TimerReq{Kind: k, Cancel: true})
	}
	q.timerArmed = false
}

// goBack moves the transmit cursor to psn (go-back-N, READ re-issue, RNR).
func (q *QP) goBack(psn roce.PSN) {
	for i := q.head; i < len(q.sq); i++ {
		w := &q.sq[i]
		if d := psn.Diff(w.first); d >= 0 && d < w.npkts {
			q.txIdx, q.txOff = i, d
			return
		}
	}
}

// retry accounts one retry (timeout, sequence-error NAK or READ re-issue); false means the limit is exceeded and
// the QP has failed.
func (q *QP) retry(now Time, out *Output) bool {
	if q.retries >= q.retryLimit() {
		q.inc(CtrRetryExceeded)
		if q.adaptive() {
			q.inc(CtrAdpRetransTO)
		}
		q.fail(now, StatusRetryExc, out)
		return false
	}
	q.retries++
	q.retryMark = q.sndNxt.Add(-1)
	q.tStart = now
	return true
}

// onReadResponse accepts in-order READ responses; a gap re-issues the READ from the first missing PSN.
func (q *QP) onReadResponse(now Time, p *Pkt, out *Output) {
	if !q.validAckPSN(p.PSN) || p.PSN == q.sndUna.Add(-1) {
		return
	}
	q.ackUpTo(now, p.PSN.Add(-1), out)
	if q.state == QPStateError || q.head >= len(q.sq) {
		q.syncTimer(now, out)
		return
	}
	w := &q.sq[q.head]
	if w.wr.Verb != VerbRead {
		q.syncTimer(now, out)
		return
	}
	next := w.first.Add(w.recvd)
	switch d := p.PSN.Diff(next); {
	case d == 0:
		w.recvd++
		q.sndUna = p.PSN.Add(1)
		if q.irn && q.prof.IRN.ReadAcks {
			q.pushItem(respItem{kind: itemReadAck, psn: p.PSN, syndrome: roce.SyndromeACKUnlimited, msn: q.msn})
			out.Wake = true
		}
		if w.recvd >= w.npkts {
			q.complete(now, StatusSuccess, out)
		}
		q.progress(now)
	case d > 0:
		q.readGap(now, w, out)
	}
	q.syncTimer(now, out)
}

// readGap re-issues the READ w from its first missing response (once per gap).
func (q *QP) readGap(now Time, w *wqe, out *Output) {
	next := w.first.Add(w.recvd)
	if q.inReadGap && q.readGapPSN == next || q.prof.Timeout.ReadGapWaitsForTimer {
		return
	}
	q.inc(CtrImpliedNAKSeqErr)
	q.stats.ReadReissues++
	if !q.retry(now, out) {
		return
	}
	q.inReadGap, q.readGapPSN = true, next
	q.goBack(q.flt.set.shift(fReadReissueWrongPSN, next))
	out.ReadReissue = true
	out.Wake = true
}

func (q *QP) onRetransmitTimer(now Time, out *Output) {
	if q.rnrWait {
		q.tStart = now // waiting out an RNR NAK is not an ACK timeout
		return
	}
	if q.head >= len(q.sq) || q.sndNxt == q.sndUna {
		return // nothing in flight: syncTimer re-arms if work is pending
	}
	to := q.timeoutNs()
	if to <= 0 {
		return
	}
	if deadline := q.tStart + to; now < deadline {
		q.armTimer(deadline, out)
		return
	}
	w := &q.sq[q.head]
	if !w.timedOut {
		w.timedOut = true
		q.toMsgs++
	}
	if !q.retry(now, out) {
		return
	}
	q.inc(CtrLocalAckTimeoutErr)
	q.stats.Timeouts++
	if q.adaptive() {
		q.inc(CtrAdpRetrans)
	}
	if q.cfg.SlowRestart {
		q.inc(CtrSlowRestart)
		if _, arm := q.rp.onCNP(now); arm {
			out.Timers = append(out.Timers, TimerReq{Kind: TimerDCQCN, At: now + q.prof.DCQCN.TimeResetNs})
		}
	}
	out.Timeout = true
	out.Wake = true
	if q.irn {
		q.irnTimeout()
		return
	}
	q.inReadGap = false
	q.goBack(q.sndUna)
}

// syncTimer keeps a retransmission timer armed whenever work is pending, never later than the real deadline
// (it may fire early: OnTimer then re-arms at the deadline, which saves a timer update per ACK).
func (q *QP) syncTimer(now Time, out *Output) {
	if q.state == QPStateError {
		return
	}
	if q.head >= len(q.sq) {
		if q.timerArmed {
			out.Timers = append(out.Timers, TimerReq{Kind: TimerRetransmit, Cancel: true})
			q.timerArmed = false
		}
		return
	}
	to := q.timeoutNs()
	if to <= 0 {
		return
	}
	at := now + to
	if q.sndNxt != q.sndUna {
		at = q.tStart + to
	}
	if !q.timerArmed || at < q.timerAt {
		q.armTimer(max(at, now), out)
	}
}

func (q *QP) armTimer(at Time, out *Output) {
	q.timerArmed, q.timerAt = true, at
	out.Timers = append(out.Timers, TimerReq{Kind: TimerRetransmit, At: at})
}

func (q *QP) adaptive() bool { return q.cfg.AdaptiveRetrans && q.prof.Timeout.AdaptiveSupported }

// retryLimit is the number of retries allowed before RETRY_EXC_ERR.
func (q *QP) retryLimit() int {
	if q.cfg.RetryCnt == 7 && q.prof.Timeout.RetryCnt7Infinite {
		return math.MaxInt
	}
	lim := int(q.cfg.RetryCnt)
	if q.adaptive() {
		t := &q.prof.Timeout
		k := q.priorTimedOutMsgs()
		lim += t.MaxRetries[min(k, len(t.MaxRetries)-1)] - int(t.ReferenceRetryCnt)
	}
	return max(lim, 0)
}

// priorTimedOutMsgs counts earlier messages that needed a timeout (the current oldest excluded).
func (q *QP) priorTimedOutMsgs() int {
	k := q.toMsgs
	if q.head < len(q.sq) && q.sq[q.head].timedOut {
		k--
	}
	return max(k, 0)
}

// timeoutNs is the timeout the card really applies for the next expiry (Lumina §6.3, see TimeoutModel).
func (q *QP) timeoutNs() int64 {
	if q.irn {
		if q.sndNxt.Diff(q.sndUna) <= q.prof.IRN.RTOLowThreshold {
			return q.prof.IRN.RTOLowNs
		}
		return q.prof.IRN.RTOHighNs
	}
	base := roce.TimeoutNs(q.cfg.Timeout)
	if base == 0 {
		return 0
	}
	t := &q.prof.Timeout
	if q.adaptive() {
		scale := float64(base) / float64(roce.TimeoutNs(t.ReferenceTimeout))
		r := q.retries
		var v int64
		if k := q.priorTimedOutMsgs(); k == 0 {
			if r < len(t.FirstMessageNs) {
				v = t.FirstMessageNs[r]
			} else {
				v = t.FirstMessageNs[len(t.FirstMessageNs)-1]
				for i := len(t.FirstMessageNs); i <= r && v < t.LaterNs; i++ {
					v = min(2*v, t.LaterNs)
				}
			}
		} else if r == 0 {
			v = t.NextMessageFirstNs[min(k-1, len(t.NextMessageFirstNs)-1)]
		} else {
			v = t.LaterNs
		}
		return int64(float64(v) * scale)
	}
	if t.Mode == TimeoutModeSpec {
		return base
	}
	if q.retries == 0 {
		return q.firstTO
	}
	return int64(float64(base) * t.LaterFactor)
}

// drawFirstTimeout picks the first timeout after progress (scan mode): the coarse timer's phase is unknown, so
// it is uniform in [first-min-factor, first-max-factor] x the minimum.
func (q *QP) drawFirstTimeout() {
	t := &q.prof.Timeout
	base := float64(roce.TimeoutNs(q.cfg.Timeout))
	f := (t.FirstMinFactor + t.FirstMaxFactor) / 2
	if q.rng != nil {
		f = t.FirstMinFactor + q.rng.Float64()*(t.FirstMaxFactor-t.FirstMinFactor)
	}
	q.firstTO = int64(base * f)
}
