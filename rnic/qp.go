package rnic

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/lumina-go/lumina/roce"
)

// QPConfig is what a QP needs at creation (the ibv_modify_qp attributes plus the NIC it lives on).
type QPConfig struct {
	Profile  *Profile
	Counters *Counters // NIC-wide counters this QP increments (may be nil)

	LocalQPN, RemoteQPN uint32
	SendPSN             roce.PSN // initial PSN of the requests this QP sends
	RecvPSN             roce.PSN // initial PSN of the requests this QP expects (the peer's SendPSN)

	MTU         int
	Timeout     uint8 // IB exponent: 4.096 us * 2^Timeout, 0 = infinite
	RetryCnt    uint8 // 0..7, 7 is not infinite
	RNRRetry    uint8 // 0..7, 7 = infinite
	MinRNRTimer uint8 // code the responder puts in its RNR NAKs
	MaxRdAtomic int   // outstanding READ requests (default 16 if 0)

	AdaptiveRetrans bool
	SlowRestart     bool
	// DCQCNRP enables the reaction point (rate limiting on CNPs); when false CNPs are counted as ignored.
	DCQCNRP bool
	// MigReq is the value this NIC puts in BTH.MigReq (the profile's, unless the driver overrides it).
	MigReq bool
	// RNG is the only randomness allowed (math/rand/v2, seeded by the driver); nil uses fixed midpoints.
	RNG *rand.Rand
}

// QPState is the QP's state; only the states a running RC QP can be in are modeled.
type QPState uint8

// QP states.
const (
	QPStateRTS   QPState = iota // ready to send
	QPStateError                // after retry exhaustion or a fatal NAK: everything is flushed
)

func (s QPState) String() string {
	if s == QPStateError {
		return "error"
	}
	return "rts"
}

// QPStats are per-QP event counts (the NIC-wide vendor counters are in Counters).
type QPStats struct {
	TxPackets, TxRetransmits, TxBytes uint64
	RxPackets                         uint64
	NAKsSent, NAKsReceived            uint64
	RNRNAKsSent, RNRNAKsReceived      uint64
	Timeouts, ReadReissues            uint64
	Duplicates, OutOfSequence         uint64
	Completed, Failed                 uint64 // requester work requests
	Delivered                         uint64 // responder messages
	CNPsHandled                       uint64
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

// QP is one RC queue pair: requester and responder state machines, pure (see the package doc).
type QP struct {
	cfg   QPConfig
	prof  *Profile
	ctr   *Counters
	state QPState
	irn   bool
	stats QPStats
	rng   *rand.Rand

	// requester
	sq         []wqe
	head       int // oldest incomplete WQE
	txIdx      int // cursor: WQE index of the next packet to send
	txOff      int // cursor: packet offset within sq[txIdx]
	nextAssign roce.PSN
	sndUna     roce.PSN // oldest unacknowledged PSN
	sndNxt     roce.PSN // one past the highest PSN sent
	msgs       int      // work requests posted

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

	// IRN requester
	sacked      bitset
	inRecovery  bool
	recoverSeq  roce.PSN
	highSACK    roce.PSN
	retxCursor  roce.PSN
	retxPending bool // a retransmission of retxCursor is due

	// responder
	ePSN     roce.PSN
	msn      uint32
	nakState bool // a NAK (sequence error or RNR) is outstanding: discard out-of-order packets silently
	recvWQEs int
	rmsg     int // messages received (responder message index)
	inMsg    bool
	msgFirst roce.PSN // first PSN of the message in progress
	msgLen   int      // WRITE: RETH length of the message in progress, -1 unknown
	sinceAck int
	rq       []respItem
	rqHead   int
	reads    [64]readRec
	readsN   int
	// IRN responder: out-of-order packets kept, indexed by PSN modulo the ring size.
	ooo []oooSlot

	rp  rp
	flt faultState // test-only injected faults (faults.go)
}

// oooSlot is one out-of-order packet an IRN responder keeps until the gap before it fills.
type oooSlot struct {
	psn      roce.PSN
	ok       bool
	last     bool
	recvDone bool // SEND/WRITE-with-immediate last packet: a receive completion on delivery
	imm      uint32
	read     bool // a READ request: executed on delivery
	reth     roce.RETH
}

// maxRespItems bounds the responder queue so a misbehaving peer cannot grow it without limit.
const maxRespItems = 1024

// NewQP validates cfg and returns a QP in the RTS state.
func NewQP(cfg QPConfig) (*QP, error) {
	if cfg.Profile == nil {
		return nil, errors.New("qp config: missing profile")
	}
	if !roce.ValidMTU(cfg.MTU) {
		return nil, fmt.Errorf("qp config: mtu %d: want 256, 512, 1024, 2048 or 4096", cfg.MTU)
	}
	if cfg.Timeout > 31 {
		return nil, fmt.Errorf("qp config: timeout %d: want 0..31", cfg.Timeout)
	}
	if cfg.RetryCnt > 7 || cfg.RNRRetry > 7 {
		return nil, fmt.Errorf("qp config: retry_cnt %d, rnr_retry %d: want 0..7", cfg.RetryCnt, cfg.RNRRetry)
	}
	if cfg.MinRNRTimer > 31 {
		return nil, fmt.Errorf("qp config: min_rnr_timer %d: want 0..31", cfg.MinRNRTimer)
	}
	if cfg.LocalQPN > roce.PSNMask || cfg.RemoteQPN > roce.PSNMask {
		return nil, fmt.Errorf("qp config: qpn %#x/%#x: want 24-bit values", cfg.LocalQPN, cfg.RemoteQPN)
	}
	if cfg.MaxRdAtomic < 0 {
		return nil, fmt.Errorf("qp config: max_rd_atomic %d: want >= 0", cfg.MaxRdAtomic)
	}
	if cfg.MaxRdAtomic == 0 {
		cfg.MaxRdAtomic = 16
	}
	if cfg.AdaptiveRetrans && !cfg.Profile.Timeout.AdaptiveSupported {
		return nil, fmt.Errorf("qp config: adaptive retransmission requested but profile %s does not support it", cfg.Profile.Name)
	}
	cfg.SendPSN &= roce.PSNMask
	cfg.RecvPSN &= roce.PSNMask
	q := &QP{cfg: cfg, prof: cfg.Profile, ctr: cfg.Counters, rng: cfg.RNG, irn: cfg.Profile.Transport == TransportIRN}
	q.nextAssign, q.sndUna, q.sndNxt = cfg.SendPSN, cfg.SendPSN, cfg.SendPSN
	q.ePSN = cfg.RecvPSN
	q.msgLen = -1
	q.rp = newRP(cfg.Profile, cfg.DCQCNRP)
	q.flt.set = faultsOf(cfg.Profile)
	q.drawFirstTimeout()
	if q.irn {
		n := 1
		for n < 2*cfg.Profile.IRN.BDPPackets+2 {
			n <<= 1
		}
		q.ooo = make([]oooSlot, n)
	}
	return q, nil
}

// State returns the QP's state.
func (q *QP) State() QPState { return q.state }

// Stats returns the QP's event counts.
func (q *QP) Stats() QPStats { return q.stats }

// RateBps is the DCQCN reaction point's current rate (line rate when the RP is disabled); the driver paces the
// QP's packets at it.
func (q *QP) RateBps() float64 { return q.rp.rateBps() }

// ExpectedPSN is the responder's next expected PSN (for drivers and tests).
func (q *QP) ExpectedPSN() roce.PSN { return q.ePSN }

// OldestUnacked returns the requester's oldest unacknowledged PSN.
func (q *QP) OldestUnacked() roce.PSN { return q.sndUna }

func (q *QP) inc(id CounterID) { q.ctr.Inc(id, 1) }

// ---- requester: posting ----

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

// PostRecv adds n receive WQEs (SENDs consume one each; none left means an RNR NAK).
func (q *QP) PostRecv(n int) {
	if n > 0 {
		q.recvWQEs += n
	}
}

// ---- transmission ----

// HasWork reports whether NextPacket would return a packet now.
func (q *QP) HasWork() bool {
	if q.state == QPStateError {
		return false
	}
	return q.rqHead < len(q.rq) || q.canSendData()
}

// NextPacket fills p with the next packet to transmit: responses, ACKs and NAKs first, then (re)transmissions.
// It returns false when nothing is due now.
func (q *QP) NextPacket(now Time, p *Pkt) bool {
	if q.state == QPStateError {
		return false
	}
	if q.rqHead < len(q.rq) {
		q.nextResponse(p)
		q.stats.TxPackets++
		return true
	}
	if !q.canSendData() {
		return false
	}
	if q.irn && q.retxPending {
		q.irnRetransmit(now, p)
	} else {
		q.nextData(now, p)
	}
	q.stats.TxPackets++
	q.stats.TxBytes += uint64(p.PayloadLen)
	if p.Retransmission {
		q.stats.TxRetransmits++
	}
	q.rp.onBytes(p.PayloadLen)
	return true
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

// ---- receive ----

// Receive processes any packet addressed to this QP (requests, responses, ACK/NAKs, CNPs).
func (q *QP) Receive(now Time, p *Pkt, out *Output) {
	if p == nil || p.BadICRC || q.state == QPStateError {
		return
	}
	q.stats.RxPackets++
	op := p.Opcode
	switch {
	case op == roce.CNP:
		q.OnCNP(now, out)
	case !op.Valid() || op.Transport() != roce.RC:
		return
	case op.IsRequest():
		if q.irn {
			q.irnRespond(now, p, out)
		} else {
			q.respond(now, p, out)
		}
		if q.rqHead < len(q.rq) {
			out.Wake = true
		}
	case op.IsAck():
		q.onAck(now, p, out)
	case op.IsReadResponse():
		q.onReadResponse(now, p, out)
	}
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

// ---- requester: acknowledgements ----

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

// ---- requester: READ responses ----

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
	if q.inReadGap && q.readGapPSN == next {
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

// ---- timers ----

// OnTimer handles the expiry of a timer the QP asked for.
func (q *QP) OnTimer(now Time, k TimerKind, out *Output) {
	if q.state == QPStateError {
		return
	}
	switch k {
	case TimerRetransmit:
		q.timerArmed = false
		q.onRetransmitTimer(now, out)
	case TimerRNR:
		if q.rnrWait {
			q.rnrWait = false
			out.Wake = true
		}
	case TimerDCQCN:
		if q.rp.onTimer() {
			out.Timers = append(out.Timers, TimerReq{Kind: TimerDCQCN, At: now + q.prof.DCQCN.TimeResetNs})
		}
	}
	q.syncTimer(now, out)
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

// ---- DCQCN ----

// OnCNP is the reaction point: a CNP for this QP arrived.
func (q *QP) OnCNP(now Time, out *Output) {
	handled, arm := q.rp.onCNP(now)
	if !handled {
		q.inc(CtrRPCNPIgnored)
		return
	}
	q.inc(CtrRPCNPHandled)
	q.stats.CNPsHandled++
	if arm {
		out.Timers = append(out.Timers, TimerReq{Kind: TimerDCQCN, At: now + q.prof.DCQCN.TimeResetNs})
	}
}
