package inject

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/lumina-go/lumina/roce"
)

// Verdict is what the switch does with one frame. Process fills it; the caller owns it and everything in it.
//
// Process reuses the storage of v.Forward and v.Mirror (it appends to v.Forward[:0] and v.Mirror[:0]), so a
// caller that passes the same Verdict every time allocates nothing, and one that needs to keep a mirrored copy
// beyond the next call passes a Verdict with a fresh Mirror buffer (or copies it). The switch keeps no reference
// to any of it.
type Verdict struct {
	// Forward lists the frames to transmit on OutPort, in order: usually just the frame given to Process
	// (modified in place by ecn, corrupt and rewrite); none when it is dropped or held for reordering; extra
	// copies when duplicating; held frames released behind it. Every frame other than the one given to Process
	// is a new buffer.
	Forward [][]byte
	OutPort int   // the port Forward leaves by (the other host port); -1 for a frame on an invalid port
	DelayNs int64 // extra latency of Forward[0] for a delay event (0 otherwise)
	// Mirror is the mirrored copy with Lumina's metadata; empty for non-RoCE frames, which are not mirrored.
	Mirror []byte
	Dumper int    // the dumper that receives Mirror; -1 when nothing is mirrored
	Seq    uint64 // the mirror sequence number written into Mirror (0 when nothing is mirrored)
	Event  roce.EventType
	// Iter is the packet's ITER for data and read-req packets of a known connection (0 otherwise).
	Iter    int
	Conn    int    // connection index; -1 when the packet belongs to no known connection
	Matched string // Intent.Source of the matching entry ("" if none, or if the intent had no Source)
	RoCE    bool   // the frame decoded as RoCE (non-RoCE frames are forwarded unchanged and not mirrored)
}

// Held is a frame released by Flush: a reordered frame whose followers never came.
type Held struct {
	OutPort int
	Frame   []byte
	HeldNs  int64 // how long it was held, from its arrival to the Flush
}

// Counters are the switch's counters, as the reference's per-port RoCE counters plus what this switch adds.
// TX counts the frames Process and Flush hand out for transmission (Forward), at the time they are handed out:
// a frame the caller then delays is counted before it leaves.
type Counters struct {
	RxRoCE            []uint64          `json:"rx_roce"`     // RoCE frames received, per port
	TxRoCE            []uint64          `json:"tx_roce"`     // RoCE frames forwarded out of each port
	RxNonRoCE         []uint64          `json:"rx_non_roce"` // other frames received (forwarded unchanged), per port
	Mirrored          uint64            `json:"mirrored"`
	MirroredPerDumper []uint64          `json:"mirrored_per_dumper"`
	Dropped           uint64            `json:"dropped"`
	Events            map[string]uint64 `json:"events"` // applied actions by name
	Held              int               `json:"held"`   // reordered frames still held
	BadPort           uint64            `json:"bad_port"`
	MirrorErrors      uint64            `json:"mirror_errors"` // RoCE frames whose mirror copy could not be built
}

// PortCounters are a switch's per-port RoCE counters (Lumina's ingress/egress counter tables), as the simulated
// and the live switch report them in counters.json.
type PortCounters struct {
	RxRoCE   uint64 `json:"rx_roce"`
	TxRoCE   uint64 `json:"tx_roce"`
	Mirrored uint64 `json:"mirrored"` // mirrored copies of frames that entered on this port
}

type counters struct {
	rxRoCE, txRoCE, rxOther []uint64
	mirrored                uint64
	perDumper               []uint64
	dropped                 uint64
	badPort                 uint64
	mirrorErr               uint64
	events                  [roce.NumEvents]uint64
}

func (c *counters) init(ports, dumpers int) {
	c.rxRoCE = make([]uint64, ports)
	c.txRoCE = make([]uint64, ports)
	c.rxOther = make([]uint64, ports)
	c.perDumper = make([]uint64, dumpers)
}

// held is a frame kept back by a reorder event until `left` more RoCE frames of its direction have been forwarded.
type held struct {
	buf   []byte
	in    int
	left  int
	since int64
}

// Switch is the event injector's state: the installed table, per-connection ITER and Nth counters, reordered
// frames held back, the mirror sequence number and the counters. It is not safe for concurrent use; a driver
// with several ingress queues serializes calls, as the reference's per-pipe registers require.
type Switch struct {
	meta    []ConnMeta
	conns   []connState
	connMap map[connKey]connRef
	table   map[key]int32
	entries []entry
	rewrite uint16
	clock   uint64 // Config.ClockStartNs
	rng     rand.PCG
	wrr     WRR
	c       counters
	seq     uint64
	pkt     roce.Packet
	held    []held
}

// Process handles one frame entering the switch on inPort (0 = requester side, 1 = responder side) at time now
// (ns). In order, as the reference's ingress pipeline: decode; count; classify the packet to a connection and
// kind; update ITER (data and read-req) or the Nth counter (ack, nak, cnp); look the packet up; apply the
// action; mirror the packet with its metadata; release reordered frames whose followers have now passed.
//
// ITER: a connection's data direction starts at round 1 with "last PSN" = initial PSN - 1, and goes up by one
// each time a data packet arrives whose PSN is not larger than the last one's (serial arithmetic modulo 2^24);
// every data packet, dropped or not, then becomes the last. Unlike the reference P4 program, which resets ITER
// at the first packet of each message (so its ITER counts rounds within a message), ITER here counts rounds
// over the whole connection, as the paper and our scenario contract define it. READ requests have their own
// round, which goes up when a request's PSN is not larger than the last PSN seen on the connection in either
// direction (the last request or the last READ response), so a re-issued request always starts a new round.
// ACKs, NAKs and CNPs carry no round of their own: an intent's Iter on them matches the connection's data ITER
// when the packet passes. ACKs and NAKs are counted from the responder (the only RC side that sends them; RNR
// NAKs count as neither), CNPs from the data receiver (the responder, or the requester of a READ connection).
//
// Actions: ecn sets CE unconditionally, even on Not-ECT packets, as the reference does. A reordered frame is
// held (copied) and released behind the Behind-th RoCE frame forwarded after it from the same ingress port;
// dropped, held and non-RoCE frames do not count, and a duplicated frame counts once. Flush releases what is
// still held when traffic ends.
func (s *Switch) Process(now int64, inPort int, frame []byte, v *Verdict) {
	*v = Verdict{Forward: v.Forward[:0], Mirror: v.Mirror[:0], OutPort: -1, Dumper: -1, Conn: -1}
	if inPort < 0 || inPort >= len(s.c.rxRoCE) {
		s.c.badPort++
		return
	}
	out := 1 - inPort
	v.OutPort = out
	p := &s.pkt
	if !p.Decode(frame, len(frame)) {
		s.c.rxOther[inPort]++
		v.Forward = append(v.Forward, frame)
		return
	}
	v.RoCE = true
	s.c.rxRoCE[inPort]++

	e := s.classify(p, v)
	act := roce.EventNone
	if e != nil {
		act = e.Action
		e.Hits++
		v.Matched = e.Source
		v.Event = act
		s.c.events[act]++
	}
	forward := true
	switch act {
	case roce.EventDrop:
		forward = false
		s.c.dropped++
	case roce.EventECN:
		setTOS(frame, p, p.TOS|3)
	case roce.EventCorrupt:
		corrupt(frame, p)
	case roce.EventDelay:
		v.DelayNs = e.delayNs
	case roce.EventReorder:
		forward = false
	case roce.EventRewrite:
		rewrite(frame, p, e.field, e.value)
	}
	// The mirror copy is taken after the action so that ECN and rewrite show what was sent on, and before
	// any drop or hold; for corrupt the copy is restored (see mirror).
	s.mirror(now, frame, p, act, v)

	if act == roce.EventReorder {
		// The caller's buffer may be reused as soon as Process returns, so a held frame is copied.
		s.held = append(s.held, held{buf: append([]byte(nil), frame...), in: inPort, left: e.behind, since: now})
	}
	if forward {
		v.Forward = append(v.Forward, frame)
		if act == roce.EventDuplicate {
			for range e.copies {
				v.Forward = append(v.Forward, append([]byte(nil), frame...))
			}
		}
		s.release(inPort, v)
	}
	s.c.txRoCE[out] += uint64(len(v.Forward))
}

// classify finds the packet's connection and kind, updates ITER or the Nth counter, and looks up the table.
func (s *Switch) classify(p *roce.Packet, v *Verdict) *entry {
	if len(p.Data()) < p.BTHOffset+roce.BTHLen {
		return nil // the BTH itself is cut: nothing to match on
	}
	ref, ok := s.connMap[connKey{src: p.SrcIP.As16(), dst: p.DstIP.As16(), qpn: p.BTH.DestQP}]
	if !ok {
		return nil
	}
	v.Conn = ref.conn
	cs := &s.conns[ref.conn]
	op := p.BTH.Opcode
	psn := p.BTH.PSN
	k := key{conn: uint32(ref.conn)}
	switch {
	case op == roce.CNP:
		if ref.dir != cs.cnpDir {
			return nil
		}
		k.kind = KindCNP
	case op.IsAck():
		if ref.dir != dirRespToReq {
			return nil
		}
		switch {
		case p.IsPlainACK():
			k.kind = KindAck
		case p.IsNAK():
			k.kind = KindNAK
		default:
			return nil // RNR NAKs and reserved syndromes are neither
		}
	case cs.read && ref.dir == dirReqToResp && op.IsReadRequest():
		last := cs.reqLast
		if last.Less(cs.dataLast) {
			last = cs.dataLast
		}
		cs.reqIter = roce.NextIter(cs.reqIter, last, psn)
		cs.reqLast = psn
		v.Iter = cs.reqIter
		k.kind, k.seq, k.iter = KindReadReq, uint32(psn), uint32(cs.reqIter)
		return s.lookup(k)
	case cs.read && ref.dir == dirRespToReq && op.IsReadResponse(),
		!cs.read && ref.dir == dirReqToResp && (op.IsSend() || op.IsWrite()):
		cs.dataIter = roce.NextIter(cs.dataIter, cs.dataLast, psn)
		cs.dataLast = psn
		v.Iter = cs.dataIter
		k.kind, k.seq, k.iter = KindData, uint32(psn), uint32(cs.dataIter)
		if cs.msgStart != nil {
			if e := s.lookupMsgIter(cs, psn, k); e != nil {
				return e
			}
		}
		return s.lookup(k)
	default:
		return nil
	}
	n := &cs.nth[k.kind-KindAck]
	k.seq = *n
	*n++
	k.iter = uint32(cs.dataIter)
	return s.lookup(k)
}

// lookupMsgIter records when a message starts and matches message-relative entries: the round counted from the
// one in which the message's first packet first arrived.
func (s *Switch) lookupMsgIter(cs *connState, psn roce.PSN, k key) *entry {
	off := psn.Diff(cs.ipsn)
	if off < 0 {
		return nil
	}
	m := off / cs.ppm
	if m >= len(cs.msgStart) {
		return nil
	}
	if off%cs.ppm == 0 && cs.msgStart[m] == 0 {
		cs.msgStart[m] = int32(cs.dataIter)
	}
	if cs.msgStart[m] == 0 {
		return nil
	}
	k.rel = true
	k.iter = uint32(cs.dataIter - int(cs.msgStart[m]) + 1)
	if i, ok := s.table[k]; ok {
		return &s.entries[i]
	}
	return nil
}

// lookup matches the exact round first, then the any-round entry.
func (s *Switch) lookup(k key) *entry {
	if len(s.table) == 0 {
		return nil
	}
	if i, ok := s.table[k]; ok {
		return &s.entries[i]
	}
	k.iter = 0
	if i, ok := s.table[k]; ok {
		return &s.entries[i]
	}
	return nil
}

// mirror builds the mirrored copy in v.Mirror: Lumina's metadata (roce.EncodeMirror: event in the IPv4 TTL,
// sequence number in the source MAC, ingress time mod 2^48 ns in the destination MAC) and, with a rewrite port,
// the reference's RSS rewrite (roce.RewriteRSS). What the copy shows: ECN-marked packets show CE (the
// reference's dumper forces CE on event 2 too), rewritten packets their rewritten headers, corrupted packets the
// original valid bytes (the reference flips the IP ID back on the copy), the rest the packet as received.
// IPv6 and RoCEv1 frames carry the event in the hop limit, have no IP checksum to fix and are not RSS-rewritten
// (the dumper's undo, roce.UndoRSS, handles IPv4 only).
func (s *Switch) mirror(now int64, frame []byte, p *roce.Packet, act roce.EventType, v *Verdict) {
	m := append(v.Mirror[:0], frame...)
	if act == roce.EventCorrupt {
		corrupt(m, p) // corrupt is its own inverse
	}
	seq := s.seq%roce.MirrorMax + 1 // 1 .. 2^48-1, then back to 1
	ts := (s.clock + uint64(now)) & roce.MirrorMax
	if isIPv4(p) {
		if err := roce.EncodeMirror(m, roce.Mirror{Event: act, Seq: seq, TimestampNs: ts}); err != nil {
			s.c.mirrorErr++
			v.Mirror = m[:0]
			return
		}
		if s.rewrite != 0 {
			if err := roce.RewriteRSS(m, s.rewrite, uint16(s.rng.Uint64())); err != nil {
				s.c.mirrorErr++
				v.Mirror = m[:0]
				return
			}
		}
	} else {
		if err := roce.EncodeMirrorNoChecksum(m, p.L3Offset, roce.Mirror{Event: act, Seq: seq, TimestampNs: ts}); err != nil {
			s.c.mirrorErr++
			v.Mirror = m[:0]
			return
		}
	}
	s.seq = seq
	v.Mirror = m
	v.Seq = seq
	v.Dumper = s.wrr.Next()
	s.c.mirrored++
	s.c.perDumper[v.Dumper]++
}

// release hands out held frames of the same direction whose followers have now all been forwarded.
func (s *Switch) release(in int, v *Verdict) {
	n := 0
	for _, h := range s.held {
		if h.in == in {
			h.left--
			if h.left == 0 {
				v.Forward = append(v.Forward, h.buf)
				continue
			}
		}
		s.held[n] = h
		n++
	}
	clear(s.held[n:])
	s.held = s.held[:n]
}

// Flush releases every held (reordered) frame, in the order they were held: the end of traffic, or a driver's
// idle timeout, came before the frames they were to be reordered behind. The frames are the caller's.
func (s *Switch) Flush(now int64) []Held {
	if len(s.held) == 0 {
		return nil
	}
	out := make([]Held, len(s.held))
	for i, h := range s.held {
		out[i] = Held{OutPort: 1 - h.in, Frame: h.buf, HeldNs: now - h.since}
		s.c.txRoCE[1-h.in]++
	}
	clear(s.held)
	s.held = s.held[:0]
	return out
}

// Counters returns a snapshot of the counters.
func (s *Switch) Counters() Counters {
	c := Counters{
		RxRoCE:            append([]uint64(nil), s.c.rxRoCE...),
		TxRoCE:            append([]uint64(nil), s.c.txRoCE...),
		RxNonRoCE:         append([]uint64(nil), s.c.rxOther...),
		Mirrored:          s.c.mirrored,
		MirroredPerDumper: append([]uint64(nil), s.c.perDumper...),
		Dropped:           s.c.dropped,
		Events:            make(map[string]uint64, roce.NumEvents-1),
		Held:              len(s.held),
		BadPort:           s.c.badPort,
		MirrorErrors:      s.c.mirrorErr,
	}
	for a := roce.EventDrop; int(a) < roce.NumEvents; a++ {
		c.Events[a.String()] = s.c.events[a]
	}
	return c
}

func isIPv4(p *roce.Packet) bool { return p.Version == roce.RoCEv2 && !p.IPv6 }

// setTOS writes the IPv4 TOS (fixing the header checksum) or the IPv6/GRH traffic class. The ICRC masks both,
// so it stays valid.
func setTOS(b []byte, p *roce.Packet, tos uint8) {
	l3 := p.L3Offset
	if isIPv4(p) {
		b[l3+1] = tos
		binary.BigEndian.PutUint16(b[l3+10:], roce.IPv4Checksum(b[l3:l3+p.IPHdrLen]))
		return
	}
	b[l3] = b[l3]&0xf0 | tos>>4
	b[l3+1] = b[l3+1]&0x0f | tos<<4
}

// corrupt makes the ICRC fail while every header stays valid, so the packet reaches the NIC and is counted as
// an ICRC error there. IPv4: the reference's trick, inverting the IP identification (covered by the ICRC) and
// fixing the IP checksum. IPv6 and RoCEv1 have no such field, so the ICRC itself is inverted. Applying it twice
// restores the frame.
func corrupt(b []byte, p *roce.Packet) {
	l3 := p.L3Offset
	if isIPv4(p) {
		b[l3+4] ^= 0xff
		b[l3+5] ^= 0xff
		binary.BigEndian.PutUint16(b[l3+10:], roce.IPv4Checksum(b[l3:l3+p.IPHdrLen]))
		return
	}
	if o := p.PayloadOffset + p.PayloadLen + int(p.BTH.PadCount); !p.Truncated && o+roce.ICRCLen <= len(b) {
		for i := o; i < o+roce.ICRCLen; i++ {
			b[i] ^= 0xff
		}
	}
}

// rewrite sets a header field. BTH byte 1 (SE, MigReq, pad count) is covered by the ICRC, which is recomputed if
// it was valid (a packet that arrived with a bad ICRC keeps a bad one); TOS fields are masked from it.
func rewrite(b []byte, p *roce.Packet, f rewriteField, val uint8) {
	bth := p.BTHOffset + 1
	switch f {
	case fieldDSCP:
		setTOS(b, p, val<<2|p.TOS&3)
		return
	case fieldECN:
		setTOS(b, p, p.TOS&^3|val)
		return
	}
	good := p.CheckICRC() == roce.ICRCGood
	switch f {
	case fieldMigReq:
		b[bth] = b[bth]&^0x40 | val<<6
	case fieldSE:
		b[bth] = b[bth]&^0x80 | val<<7
	case fieldPad:
		b[bth] = b[bth]&^0x30 | val<<4
	}
	if good {
		p.FixICRC()
	}
}
