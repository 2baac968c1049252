package netsim

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/lumina-go/lumina/internal/des"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// qpState is the NIC model's view of one QP: addressing, egress class, pacing, timers and receive ordering.
type qpState struct {
	qp         *rnic.QP
	idx        int32 // index in host.qps
	conn       int
	qpn        uint32
	peerQPN    uint32
	localIP    netip.Addr
	peerIP     netip.Addr
	tos        uint8 // DSCP<<2 | ECT(0)
	udpSport   uint16
	tc         int32 // index in host.classes
	posInClass int   // index in the class's QP list (round robin)
	// readSink: this QP receives READ responses (the requester of a read connection); dataSink: it receives
	// WRITE/SEND data (the responder of a write/send connection).
	readSink, dataSink bool
	// Egress.
	active bool  // the QP said it has packets (Output.Wake) and has not yet run dry
	nextTx int64 // pacing: earliest time its next packet may enter the pipeline
	// Receive side: per-QP FIFO so that processing delays never reorder a QP's packets.
	rxReadyAt   int64
	ctrlReadyAt int64
	// holdReadReq: the next READ request is a re-request after a gap (held for the read NAK generation).
	holdReadReq bool
	nakTail     bool // the NAK the QP just queued is for a gap at the message tail
	holdUntil   int64
	// Timers: the deadline the QP asked for (-1: none) and the time of the one pending event (-1: none).
	timerAt, timerEv [8]int64
	// Message geometry of the PSN space this QP receives data in (for the tail-NAK and first-message rules).
	rxIPSN roce.PSN
	ppm    int // packets per message
	// Frame templates by (opcode, payload length).
	tmpls    []template
	nextTmpl int
	// Statistics for lab.ConnResult.
	dataPkts, retrans uint64
}

// tcState is one egress traffic class.
type tcState struct {
	tc     int
	strict bool
	weight float64
	qps    []int32
	rr     int
	active activeSet // positions in qps whose QP is active
	// ETS start-time fair queueing tag.
	finish float64
	// Non-work-conserving cap: token bucket at the class's guaranteed share.
	capBps     float64
	tokens     float64 // bytes
	lastRefill int64
}

// host is one simulated machine and its RNIC.
type host struct {
	id      int32
	name    string
	prof    *rnic.Profile
	cfg     *lab.HostConfig
	ctr     *rnic.Counters
	np      *rnic.NP
	rng     *rand.Rand
	peerMAC [6]byte
	link    *link
	lineBps float64

	qps   []*qpState
	byQPN map[uint32]int32

	classes []tcState
	order   []int32 // strict classes by descending TC, then ETS classes
	vtime   float64

	ctrlQ      des.Ring[int32]
	pipe       des.Ring[int32]
	pipeBytes  int
	pipeCap    int
	pipeCapB   int
	filling    bool
	kickAt     int64
	ipID       uint16
	out        rnic.Output
	pkt        rnic.Pkt
	dec        roce.Packet
	enc        roce.Packet
	sack       [rnic.SACKLen]byte // the SACK payload of the NAK being encoded
	stallFrom  int64
	stallUntil int64
	zops       *zeroOps
	// Slow paths: completion times of queued items (FIFO single server).
	noisyDone des.Ring[int64]
	apmDone   des.Ring[int64]
}

// expire drops the slow-path items done by now from a FIFO of completion times and returns the backlog and
// the time the last queued item finishes.
func expire(r *des.Ring[int64], now int64) (backlog int, lastDone int64) {
	for r.Len() > 0 && r.Front() <= now {
		r.Pop()
	}
	if r.Len() == 0 {
		return 0, now
	}
	return r.Len(), r.Back()
}

// setupClasses builds the egress classes from the ETS configuration.
func (h *host) setupClasses() {
	cl := h.cfg.ETS.Classes
	if len(cl) == 0 {
		cl = []lab.TrafficClass{{TC: 0, Weight: 1}}
	}
	h.classes = make([]tcState, len(cl))
	for i, c := range cl {
		t := &h.classes[i]
		t.tc, t.strict, t.weight = c.TC, c.Strict, float64(max(c.Weight, 1))
	}
	// Strict classes first, higher TC first; then ETS classes in TC order.
	for pass := 0; pass < 2; pass++ {
		for i := range h.classes {
			if h.classes[i].strict == (pass == 0) {
				h.order = append(h.order, int32(i))
			}
		}
	}
	for i := 1; i < len(h.order); i++ {
		for j := i; j > 0; j-- {
			a, b := &h.classes[h.order[j-1]], &h.classes[h.order[j]]
			if a.strict && b.strict && a.tc < b.tc {
				h.order[j-1], h.order[j] = h.order[j], h.order[j-1]
			}
		}
	}
}

// capClasses applies a non-work-conserving ETS (cx6dx, seed 000 §6.2.1): once QPs are assigned, each ETS class
// in use is capped at its guaranteed share of the line rate among the classes in use. With a single class in
// use nothing is capped (the paper's one-queue experiment: QP1 takes the spare bandwidth).
func (h *host) capClasses() {
	if h.prof.ETS.WorkConserving {
		return
	}
	total, inUse := 0.0, 0
	for i := range h.classes {
		if c := &h.classes[i]; !c.strict && len(c.qps) > 0 {
			total += c.weight
			inUse++
		}
	}
	if inUse < 2 {
		return
	}
	for i := range h.classes {
		if c := &h.classes[i]; !c.strict && len(c.qps) > 0 {
			c.capBps = h.lineBps * c.weight / total
		}
	}
}

// classOf maps a DSCP to a class index (unknown DSCPs and TCs go to the first class).
func (h *host) classOf(dscp int) int32 {
	tc, ok := h.cfg.ETS.DSCPToTC[dscp]
	if !ok {
		return 0
	}
	for i := range h.classes {
		if h.classes[i].tc == tc {
			return int32(i)
		}
	}
	return 0
}

// pick chooses the QP whose packet enters the transmit pipeline next, or -1. wake is the earliest time a
// blocked (paced or shaped) QP becomes eligible, or -1.
func (h *host) pick(now int64) (qi int32, ci int32, wake int64) {
	wake = -1
	note := func(t int64) {
		if wake < 0 || t < wake {
			wake = t
		}
	}
	best, bestQ := int32(-1), int32(-1)
	bestTag := 0.0
	for _, c := range h.order {
		t := &h.classes[c]
		if len(t.qps) == 0 {
			continue
		}
		if !t.strict && t.capBps > 0 {
			t.tokens += float64(now-t.lastRefill) * t.capBps / 8e9
			t.lastRefill = now
			if burst := float64(2 * 4200); t.tokens > burst {
				t.tokens = burst
			}
			if t.tokens < 0 {
				// Wait until the bucket is back to zero, if some QP of the class has something to send.
				if t.active.count > 0 {
					note(now + int64(-t.tokens*8e9/t.capBps) + 1)
				}
				continue
			}
		}
		// The round robin from t.rr over the class's active QPs (the inactive ones are skipped without a look).
		q := int32(-1)
		for k, wrapped := t.active.next(t.rr), false; ; k = t.active.next(k + 1) {
			if k < 0 {
				if wrapped || t.rr == 0 {
					break
				}
				wrapped = true
				if k = t.active.next(0); k < 0 {
					break
				}
			}
			if wrapped && k >= t.rr {
				break
			}
			cand := t.qps[k]
			qs := h.qps[cand]
			if qs.nextTx > now {
				note(qs.nextTx)
				continue
			}
			q = cand
			break
		}
		if q < 0 {
			continue
		}
		if t.strict {
			return q, c, wake
		}
		tag := max(t.finish, h.vtime)
		if best < 0 || tag < bestTag {
			best, bestQ, bestTag = c, q, tag
		}
	}
	return bestQ, best, wake
}

// setActive records whether the QP has packets to send, in the QP and in its class's active set.
func (h *host) setActive(qs *qpState, on bool) {
	qs.active = on
	if on {
		h.classes[qs.tc].active.set(qs.posInClass)
	} else {
		h.classes[qs.tc].active.clear(qs.posInClass)
	}
}

// fill moves packets from the QPs into the transmit pipeline while it has room, then transmits.
func (h *host) fill(s *sim) {
	if h.filling {
		return
	}
	h.filling = true
	var wake int64 = -1
	for h.pipe.Len() < h.pipeCap && (h.pipeCapB == 0 || h.pipeBytes < h.pipeCapB) {
		qi, ci, w := h.pick(s.now)
		wake = w
		if qi < 0 {
			break
		}
		qs := h.qps[qi]
		h.pkt = rnic.Pkt{}
		ok := qs.qp.NextPacket(s.now, &h.pkt)
		if !ok {
			h.setActive(qs, false)
			continue
		}
		t := &h.classes[ci]
		t.rr = (qs.posInClass + 1) % len(t.qps)
		if h.controlPacket(s, qs) {
			continue
		}
		slot := h.encode(s, qs, &h.pkt)
		n := len(s.frames.bufs[slot])
		if h.pkt.Opcode.IsReadRequest() && qs.holdReadReq {
			// A READ re-request after a response gap leaves after the read NAK generation delay.
			qs.holdReadReq = false
			s.q.Push(des.Event{At: max(qs.holdUntil, s.now), Kind: evHeldTx, Obj: h.id, Arg: slot})
		} else {
			h.pipe.Push(slot)
			h.pipeBytes += n
		}
		if h.pkt.Opcode.CarriesPayload() {
			qs.dataPkts++
			if h.pkt.Retransmission {
				qs.retrans++
			}
		}
		// Pacing at the QP's current (DCQCN) rate; at line rate the wire paces.
		if r := qs.qp.RateBps(); r > 0 && r < h.lineBps {
			qs.nextTx = max(qs.nextTx, s.now) + int64(float64(n+wireOverheadBytes)*8e9/r)
		}
		if !t.strict {
			tag := max(t.finish, h.vtime)
			h.vtime = tag
			t.finish = tag + float64(n)/t.weight
			if t.capBps > 0 {
				t.tokens -= float64(n)
			}
		}
	}
	h.filling = false
	h.trySend(s)
	if wake >= 0 && h.pipe.Len() < h.pipeCap && (h.kickAt <= s.now || wake < h.kickAt) {
		h.kickAt = wake
		s.q.Push(des.Event{At: wake, Kind: evHostKick, Obj: h.id})
	}
}

// controlPacket handles an ACK or NAK the QP emitted: it is held for the NIC's generation delay and then sent
// ahead of the data pipeline. It reports whether h.pkt was a control packet.
func (h *host) controlPacket(s *sim, qs *qpState) bool {
	p := &h.pkt
	if !p.Opcode.IsAck() {
		return false
	}
	tm := &h.prof.Timing
	hold := tm.AckGenerationNs
	if p.AETH.IsNAK() {
		hold = tm.NAKGenerationNs
		if qs.nakTail {
			// The gap is among the message's last packets: the slow tail path (cx4lx).
			hold = tm.NAKGenerationTailNs
			qs.nakTail = false
		}
	}
	// The profile's generation delays run from the packet's arrival; receive processing already took part.
	hold = max(hold-tm.RxProcessingNs, 0)
	slot := h.encode(s, qs, p)
	at := max(s.now+hold, qs.ctrlReadyAt)
	qs.ctrlReadyAt = at
	if at == s.now {
		h.ctrlQ.Push(slot)
		return true
	}
	s.q.Push(des.Event{At: at, Kind: evHostCtrl, Obj: h.id, Arg: slot})
	return true
}

// trySend starts the next frame on an idle wire: control packets first, then the pipeline head.
func (h *host) trySend(s *sim) {
	if h.link.busy {
		return
	}
	var slot int32
	switch {
	case h.ctrlQ.Len() > 0:
		slot = h.ctrlQ.Pop()
	case h.pipe.Len() > 0:
		slot = h.pipe.Pop()
		h.pipeBytes -= len(s.frames.bufs[slot])
	default:
		return
	}
	n := len(s.frames.bufs[slot])
	h.ctr.Inc(rnic.CtrTxPacketsPhy, 1)
	h.ctr.Inc(rnic.CtrTxBytesPhy, uint64(n))
	s.linkStart(h.link, slot)
	if !h.filling {
		h.fill(s)
	}
}

func (h *host) wireIdle(s *sim) { h.trySend(s) }

// encode builds the RoCEv2 frame of a transport packet into a new frame slot. The first packet of each kind
// (opcode, payload length) of a QP is built by roce.Packet.AppendTo and kept as a template; later ones copy
// the template and patch the per-packet fields (see icrc.go).
func (h *host) encode(s *sim, qs *qpState, p *rnic.Pkt) int32 {
	h.ipID++
	slot := s.frames.get()
	m := &s.frames.meta[slot]
	*m = *p
	m.PSN &= roce.PSNMask
	if p.Opcode != roce.CNP && !p.HasSACK { // SACK payloads are not zero: no template
		if t := qs.template(p.Opcode, p.PayloadLen); t != nil {
			s.frames.bufs[slot] = h.zops.patch(t, s.frames.bufs[slot], s.frames.tmpl[slot] == t, p, qs.tos, h.ipID)
			s.frames.pristine[slot] = true
			s.frames.tmpl[slot] = t
			return slot
		}
	}
	e := &h.enc
	e.Payload = nil
	e.NumVLANs = 0
	e.EthDst = h.peerMAC
	e.EthSrc = h.cfg.MAC
	e.Version = roce.RoCEv2
	e.IPv6 = false
	e.TOS = qs.tos
	e.TTL = 64
	e.IPID = h.ipID
	e.IPFlags = 2 // DF
	e.SrcIP, e.DstIP = qs.localIP, qs.peerIP
	e.UDPSrc, e.UDPDst = qs.udpSport, roce.UDPPort
	e.BTH = roce.BTH{Opcode: p.Opcode, SE: p.SE, MigReq: p.MigReq, PKey: 0xffff, DestQP: p.DestQP,
		AckReq: p.AckReq, PSN: p.PSN & roce.PSNMask, BECN: p.BECN}
	e.RETH, e.AETH, e.Imm = p.RETH, p.AETH, p.Imm
	e.PayloadLen = p.PayloadLen
	if p.HasSACK {
		// IRN's NAK carries the SACK PSN after its AETH (rnic.SACKPayload): real bytes, so the trace shows it.
		h.sack = rnic.SACKPayload(p.SACK)
		e.Payload = h.sack[:]
	}
	if p.Opcode == roce.CNP {
		e.TOS = h.prof.CNP.DSCP<<2 | 2
		e.UDPSrc = h.prof.CNP.UDPSrcPort
		e.BTH.MigReq, e.BTH.AckReq, e.BTH.PSN, e.BTH.BECN = false, false, 0, true
		m.MigReq, m.AckReq, m.PSN, m.BECN, m.PayloadLen = false, false, 0, true, roce.CNPPadLen
	}
	s.frames.tmpl[slot] = nil
	buf, err := e.AppendTo(s.frames.bufs[slot][:0])
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("encoding %v for QP %#x: %w", p.Opcode, qs.qpn, err)
	}
	s.frames.bufs[slot] = buf
	s.frames.pristine[slot] = err == nil
	if err == nil && p.Opcode != roce.CNP && !p.HasSACK {
		qs.addTemplate(h.zops, e, buf)
	}
	return slot
}

// template returns the QP's template for an opcode and payload length, or nil.
func (qs *qpState) template(op roce.Opcode, plen int) *template {
	for i := range qs.tmpls {
		if t := &qs.tmpls[i]; t.op == op && t.plen == plen {
			return t
		}
	}
	return nil
}

// addTemplate keeps the frame just built as a template when its extended headers are ones patch knows.
func (qs *qpState) addTemplate(zops *zeroOps, e *roce.Packet, frame []byte) {
	if e.Ext&^(roce.ExtRETH|roce.ExtAETH|roce.ExtImm) != 0 || e.IPHdrLen != roce.IPv4Len || e.NumVLANs != 0 {
		return
	}
	payOff, end := e.PayloadOffset, len(frame)-roce.ICRCLen
	if payOff > end || slices.ContainsFunc(frame[payOff:end], func(b byte) bool { return b != 0 }) {
		return // patch rebuilds the payload (and pad) as zeros
	}
	t := template{op: e.BTH.Opcode, plen: e.PayloadLen, hdr: append([]byte(nil), frame[:payOff]...), flen: len(frame),
		payOff: payOff, icrc: binary.LittleEndian.Uint32(frame[end:])}
	off := e.BTHOffset + roce.BTHLen
	if e.Has(roce.ExtRETH) {
		t.hasRETH, t.rethOff = true, off
		off += roce.RETHLen
	}
	if e.Has(roce.ExtImm) {
		t.hasImm, t.immOff = true, off
		off += roce.ImmLen
	}
	if e.Has(roce.ExtAETH) {
		t.hasAETH, t.aethOff = true, off
	}
	zops.prepare(&t)
	if len(qs.tmpls) < 8 {
		qs.tmpls = append(qs.tmpls, t)
		return
	}
	qs.tmpls[qs.nextTmpl] = t
	qs.nextTmpl = (qs.nextTmpl + 1) % len(qs.tmpls)
}

// sendCNP emits a CNP to the data sender of qs after delay.
func (h *host) sendCNP(s *sim, qs *qpState, delay int64) {
	h.ctr.Inc(rnic.CtrNPCNPSent, 1)
	p := rnic.Pkt{Opcode: roce.CNP, DestQP: qs.peerQPN, BECN: true, Msg: -1}
	slot := h.encode(s, qs, &p)
	at := max(s.now+delay, qs.ctrlReadyAt)
	qs.ctrlReadyAt = at
	if at == s.now {
		h.ctrlQ.Push(slot)
		h.trySend(s)
		return
	}
	s.q.Push(des.Event{At: at, Kind: evHostCtrl, Obj: h.id, Arg: slot})
}

// arrive is a frame's last bit reaching the NIC: port counters, slow paths, ICRC, ECN, then the receive
// pipeline towards the QP.
func (h *host) arrive(s *sim, f int32) {
	buf := s.frames.bufs[f]
	h.ctr.Inc(rnic.CtrRxPacketsPhy, 1)
	h.ctr.Inc(rnic.CtrRxBytesPhy, uint64(len(buf)))
	// The link delivers frames rxProc after their last bit arrived (the receive pipeline), so the port-level
	// checks look at the physical arrival time.
	phys := s.now - h.prof.Timing.RxProcessingNs
	if phys >= h.stallFrom && phys < h.stallUntil {
		h.ctr.Inc(rnic.CtrRxDiscardsPhy, 1)
		s.frames.put(f)
		return
	}
	m := &s.frames.meta[f]
	var srcIP netip.Addr
	if s.frames.pristine[f] {
		// Unmodified since its NIC encoded it: the transport view is already known and the ICRC is valid.
		m.CE = false
	} else {
		p := &h.dec
		if !p.Decode(buf, len(buf)) || p.Truncated {
			s.frames.put(f)
			return
		}
		if p.CheckICRC() != roce.ICRCGood {
			h.ctr.Inc(rnic.CtrRxICRCEncapsulated, 1)
			s.frames.put(f)
			return
		}
		*m = rnic.Pkt{Opcode: p.BTH.Opcode, DestQP: p.BTH.DestQP, PSN: p.BTH.PSN, AckReq: p.BTH.AckReq,
			SE: p.BTH.SE, MigReq: p.BTH.MigReq, BECN: p.BTH.BECN, AETH: p.AETH, RETH: p.RETH, Imm: p.Imm,
			PayloadLen: p.PayloadLen, CE: p.ECN() == 3, Msg: -1}
		if p.IsNAK() {
			m.SACK, m.HasSACK = rnic.ParseSACK(p.Payload)
		}
		srcIP = p.SrcIP
	}
	qi, ok := h.byQPN[m.DestQP]
	if !ok {
		s.frames.put(f)
		return
	}
	qs := h.qps[qi]
	if srcIP.IsValid() && srcIP != qs.peerIP {
		s.frames.put(f) // not from the QP's peer
		return
	}
	tm := &h.prof.Timing
	var delay int64
	op := m.Opcode
	if op.CarriesPayload() && m.CE {
		h.ctr.Inc(rnic.CtrNPECNMarked, 1)
		if h.np.OnCE(s.now, rnic.CNPKey{DstIP: qs.peerIP, QPN: qs.peerQPN}) {
			h.sendCNP(s, qs, 0)
		}
	}
	if a := &h.prof.APM; a.Enabled && !m.MigReq && op.IsRequest() &&
		(!a.FirstMessageOnly || h.inFirstMessage(qs, m.PSN)) {
		// cx5's path-migration slow path for MigReq=0 requests: one server, a bounded queue, discards past it.
		backlog, last := expire(&h.apmDone, s.now)
		if backlog >= a.QueueLimit {
			h.ctr.Inc(rnic.CtrRxDiscardsPhy, 1)
			s.frames.put(f)
			return
		}
		done := max(last, s.now) + a.ServiceNs
		h.apmDone.Push(done)
		delay += done - s.now
	}
	if op.IsAck() && m.AETH.IsNAK() && !qs.dataSink {
		delay += tm.NAKReactionMinNs
		if d := tm.NAKReactionMaxNs - tm.NAKReactionMinNs; d > 0 {
			delay += h.rng.Int64N(d + 1)
		}
	}
	at := max(s.now+delay, qs.rxReadyAt)
	qs.rxReadyAt = at
	if at == s.now {
		h.rxReady(s, f, qi)
		return
	}
	s.q.Push(des.Event{At: at, Kind: evHostRxReady, Obj: h.id, Arg: f, Aux: qi})
}

// inFirstMessage reports whether a request PSN lies in the first message of the QP's receive PSN space.
func (h *host) inFirstMessage(qs *qpState, psn roce.PSN) bool {
	d := psn.Diff(qs.rxIPSN)
	return d >= 0 && d < max(qs.ppm, 1)
}

// rxReady hands a processed packet to its QP.
func (h *host) rxReady(s *sim, f int32, qi int32) {
	qs := h.qps[qi]
	m := &s.frames.meta[f]
	h.out.Reset()
	if m.Opcode == roce.CNP {
		qs.qp.OnCNP(s.now, &h.out)
	} else {
		qs.qp.Receive(s.now, m, &h.out)
	}
	s.frames.put(f)
	h.handleOut(s, qs)
}

// handleOut applies a QP step's output: timers, completions, NAK side effects and transmit wake-ups.
func (h *host) handleOut(s *sim, qs *qpState) {
	o := &h.out
	for _, t := range o.Timers {
		k := int(t.Kind) & 7
		if t.Cancel {
			qs.timerAt[k] = -1
			continue
		}
		at := max(t.At, s.now)
		qs.timerAt[k] = at
		// At most one pending event per timer: a later deadline is picked up when the pending one fires, so
		// re-arming on every ACK does not fill the queue with stale timers.
		if qs.timerEv[k] < 0 || at < qs.timerEv[k] {
			qs.timerEv[k] = at
			s.q.Push(des.Event{At: at, Kind: evQPTimer, Obj: h.id, Arg: qs.idx, Aux: int32(k)})
		}
	}
	if o.NAKSent {
		qs.nakTail = o.NAKTail
		if h.np.OnNAK(s.now, rnic.CNPKey{DstIP: qs.peerIP, QPN: qs.peerQPN}) {
			h.sendCNP(s, qs, h.prof.Timing.RxProcessingNs)
		}
	}
	if o.ReadReissue {
		h.readGap(s, qs)
	}
	// HasWork also catches a send the step made possible without saying Wake (e.g. the next READ once the
	// previous one completed under max_rd_atomic 1).
	wake := o.Wake || (!qs.active && qs.qp.HasWork())
	// Only the requester's send completions drive the generator; the responder's receive completions do not.
	for i := 0; h.id == 0 && i < len(o.Completions); i++ {
		s.gen.complete(s, qs.conn, &o.Completions[i])
	}
	if wake {
		h.setActive(qs, true)
		h.fill(s)
	}
}

// readGap handles a gap in READ responses: the re-request is held for the read NAK generation delay, and on
// cards with the noisy-neighbor slow path (cx4lx) the gap joins a shared slow path whose backlog past a
// threshold stalls the receive pipeline (arriving packets are discarded).
func (h *host) readGap(s *sim, qs *qpState) {
	tm := &h.prof.Timing
	qs.holdReadReq = true
	qs.holdUntil = s.now + max(tm.ReadNAKGenerationNs-tm.RxProcessingNs, 0)
	if n := &h.prof.Noisy; n.Enabled {
		backlog, last := expire(&h.noisyDone, s.now)
		done := max(last, s.now) + n.ServiceNs
		h.noisyDone.Push(done)
		if backlog+1 > n.BacklogThreshold && backlog <= n.BacklogThreshold {
			// Crossing the threshold stalls the receive pipeline once; a backlog that stays high does not
			// stall it again (seed 000 §6.2.2 counted ~107 discards at i=12, about one stall at 40 Gb/s).
			if s.now >= h.stallUntil {
				h.stallFrom = s.now
			}
			h.stallUntil = max(h.stallUntil, s.now+n.StallNs)
		}
		qs.holdUntil = max(qs.holdUntil, done)
	}
}

// timer fires a QP timer unless it was cancelled or moved since; a timer moved later is re-scheduled.
func (h *host) timer(s *sim, qi int32, k int32) {
	qs := h.qps[qi]
	if qs.timerEv[k] != s.now {
		return // superseded by an earlier deadline
	}
	qs.timerEv[k] = -1
	switch at := qs.timerAt[k]; {
	case at < 0:
		return
	case at > s.now:
		qs.timerEv[k] = at
		s.q.Push(des.Event{At: at, Kind: evQPTimer, Obj: h.id, Arg: qi, Aux: k})
		return
	}
	qs.timerAt[k] = -1
	h.out.Reset()
	qs.qp.OnTimer(s.now, rnic.TimerKind(k), &h.out)
	h.handleOut(s, qs)
}
