package rnic

import "github.com/lumina-go/lumina/roce"

// IRN (seed 002 §3): the responder keeps out-of-order packets and NAKs every out-of-order arrival with the
// cumulative ACK (the expected PSN, in the BTH) plus the PSN that triggered it (Pkt.SACK, on the wire SACKLen
// bytes after the AETH); the requester retransmits only lost packets on entering recovery — first the
// cumulative-ACK PSN, then any unSACKed PSN below the highest SACKed one — and leaves recovery when the
// cumulative ACK passes the recovery sequence. BDP-FC caps in-flight packets; the RTO is low while few packets
// are in flight. Limit: lost READ responses are recovered by the requester's re-issue (as go-back-N); the
// per-packet READ ACKs are sent but the responder does not use them. An out-of-order READ request is kept and
// executed when the gap before it fills.

// irnState is IRN's additions to both roles.
type irnState struct {
	// IRN requester. Invariant: inRecovery and retxPending only on an IRN QP.
	sacked      bitset
	inRecovery  bool
	recoverSeq  roce.PSN
	highSACK    roce.PSN
	retxCursor  roce.PSN
	retxPending bool // a retransmission of retxCursor is due
	// IRN responder: out-of-order packets kept, indexed by PSN modulo the ring size.
	// Invariant: ooo != nil exactly on an IRN QP.
	ooo []oooSlot
}

// irnRespond is the IRN responder.
func (q *QP) irnRespond(now Time, p *Pkt, out *Output) {
	d := p.PSN.Diff(q.ePSN)
	switch {
	case d < 0:
		q.inc(CtrDuplicateRequest)
		q.stats.Duplicates++
		if p.Opcode.IsReadRequest() {
			q.reexecuteRead(p)
			return
		}
		q.queueAck()
	case d == 0:
		q.accept(now, p, out)
		if q.ePSN == p.PSN {
			return // not accepted (RNR, invalid)
		}
		q.drainOOO(now, out)
		q.queueAck()
	default:
		op := p.Opcode
		if d >= len(q.ooo) || !(op.IsSend() || op.IsWrite() || op.IsReadRequest()) {
			return // beyond the reorder window or not modeled: recovered by a later SACK or the RTO
		}
		if _, ok := readPackets(p.RETH.DMALen, q.cfg.MTU); op.IsReadRequest() && !ok {
			return
		}
		s := &q.ooo[int(p.PSN)&(len(q.ooo)-1)]
		if s.ok && s.psn == p.PSN {
			q.inc(CtrDuplicateRequest)
			q.stats.Duplicates++
			q.queueAck()
			return
		}
		*s = oooSlot{psn: p.PSN, ok: true, last: op.IsLast(), recvDone: op.IsLast() && (op.IsSend() || op.HasImm()),
			imm: p.Imm, read: op.IsReadRequest(), reth: p.RETH}
		q.inc(CtrOutOfSequence)
		q.stats.OutOfSequence++
		q.stats.NAKsSent++
		q.pushItem(respItem{kind: itemNAK, psn: q.ePSN, syndrome: roce.SyndromePSNSeqErr, msn: q.msn,
			sack: p.PSN, hasSACK: true})
		out.NAKSent = true
	}
}

// drainOOO delivers the kept packets that the in-order arrival made contiguous.
func (q *QP) drainOOO(now Time, out *Output) {
	for {
		s := &q.ooo[int(q.ePSN)&(len(q.ooo)-1)]
		if !s.ok || s.psn != q.ePSN {
			return
		}
		s.ok = false
		if s.read {
			q.executeRead(s.psn, s.reth)
			continue
		}
		q.ePSN = q.ePSN.Add(1)
		if s.last {
			q.msn++
			q.stats.Delivered++
			if s.recvDone {
				out.Completions = append(out.Completions, Completion{WRID: uint64(q.rmsg), Time: now, Recv: true,
					Imm: s.imm, Msg: q.rmsg})
			}
			q.rmsg++
		}
	}
}

// sackSlot marks psn selectively acknowledged.
func (q *QP) sackSlot(psn roce.PSN) {
	if q.sacked.psn == nil {
		n := 1
		for n < 2*q.prof.IRN.BDPPackets+2 {
			n <<= 1
		}
		q.sacked = bitset{psn: make([]roce.PSN, n), ok: make([]bool, n)}
	}
	i := int(psn) & (len(q.sacked.psn) - 1)
	q.sacked.psn[i], q.sacked.ok[i] = psn, true
}

func (q *QP) isSacked(psn roce.PSN) bool {
	if q.sacked.psn == nil {
		return false
	}
	i := int(psn) & (len(q.sacked.psn) - 1)
	return q.sacked.ok[i] && q.sacked.psn[i] == psn
}

// bitset remembers SACKed PSNs in a ring indexed by PSN (the PSN is stored, so stale entries never alias).
type bitset struct {
	psn []roce.PSN
	ok  []bool
}

// irnNAK handles a NAK with a SACK: cumulative ACK, SACK bookkeeping, loss recovery.
func (q *QP) irnNAK(now Time, p *Pkt, out *Output) {
	q.ackUpTo(now, p.PSN.Add(-1), out)
	if q.state == QPStateError {
		return
	}
	q.inc(CtrPacketSeqErr)
	if s := p.SACK; q.sndUna.Less(s) && s.Less(q.sndNxt) {
		q.sackSlot(s)
		if !s.Less(q.highSACK) || !q.inRecovery {
			q.highSACK = s.Add(1)
		}
	}
	if !q.inRecovery {
		q.inRecovery = true
		q.recoverSeq = q.sndNxt
		q.retxCursor = q.sndUna
		q.flt.sackRetx = false
	}
	q.retxPending = true
	out.Wake = true
	q.syncTimer(now, out)
}

// irnNextLost finds the next packet to retransmit in recovery: an unSACKed packet start between the retransmit
// cursor and the highest SACKed PSN. It returns the WQE index and packet offset.
func (q *QP) irnNextLost() (idx, off int, ok bool) {
	if !q.inRecovery {
		return 0, 0, false
	}
	if q.retxCursor.Less(q.sndUna) {
		q.retxCursor = q.sndUna
	}
	i := q.head
	for q.retxCursor.Less(q.highSACK) && q.retxCursor.Less(q.sndNxt) {
		psn := q.retxCursor
		for i < len(q.sq) && !psn.Less(q.sq[i].first.Add(q.sq[i].npkts)) {
			i++
		}
		if i >= len(q.sq) {
			return 0, 0, false
		}
		w := &q.sq[i]
		d := psn.Diff(w.first)
		if w.wr.Verb == VerbRead && d != 0 {
			q.retxCursor = w.first.Add(w.npkts) // only the request itself is a packet
			continue
		}
		if !q.isSacked(psn) || q.flt.set.has(fIRNRetxSacked) && !q.flt.sackRetx {
			return i, d, true // fault irn-retx-sacked: also one SACKed packet per recovery
		}
		q.retxCursor = psn.Add(1)
	}
	return 0, 0, false
}

// irnRetransmit sends the next lost packet (canSendData made sure there is one).
func (q *QP) irnRetransmit(now Time, p *Pkt) {
	idx, off, ok := q.irnNextLost()
	if !ok {
		q.retxPending = false
		q.nextData(now, p)
		return
	}
	q.emit(now, idx, off, p)
	if q.flt.set.has(fIRNRetxSacked) && q.isSacked(p.PSN) {
		q.flt.sackRetx = true
	}
	w := &q.sq[idx]
	if w.wr.Verb == VerbRead {
		q.retxCursor = w.first.Add(w.npkts)
	} else {
		q.retxCursor = w.first.Add(off + 1)
	}
}

// irnTimeout enters recovery with every unSACKed outstanding packet counted lost.
func (q *QP) irnTimeout() {
	q.inRecovery = true
	q.recoverSeq = q.sndNxt
	q.highSACK = q.sndNxt
	q.retxCursor = q.sndUna
	q.retxPending = true
}

// SACKPayload is the wire form of IRN's selective acknowledgement: the SACKLen bytes a NAK carries after its
// AETH — one reserved zero byte, then the 24-bit PSN that triggered the NAK, big-endian.
func SACKPayload(psn roce.PSN) [SACKLen]byte {
	return [SACKLen]byte{0, byte(psn >> 16), byte(psn >> 8), byte(psn)}
}

// ParseSACK reads the SACK PSN from a NAK's payload; false when the payload is not a SACK.
func ParseSACK(payload []byte) (roce.PSN, bool) {
	if len(payload) != SACKLen || payload[0] != 0 {
		return 0, false
	}
	return roce.PSN(uint32(payload[1])<<16 | uint32(payload[2])<<8 | uint32(payload[3])), true
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
