package analyze

import (
	"slices"
	"sort"

	"github.com/lumina-go/lumina/roce"
)

// lostRec is one lost transmission of a data packet, followed until its retransmission.
type lostRec struct {
	cs       *connState
	rel      int64
	msg      int
	iter     int
	event    string
	idx      int
	t        int64
	oosT     int64 // first out-of-order arrival after the loss (NACK generation starts); -1 none
	nakT     int64 // the NAK, or the re-issued READ, seen at the switch; -1 none
	retxT    int64 // -1 not retransmitted
	retxIdx  int
	trigger  string
	pendTrig string // READ: the re-issue's trigger, applied when the response comes again
}

func (a *analyzer) newLoss(cs *connState, r int64, msg, iter int, ev string, idx int, t int64) *lostRec {
	a.retx = append(a.retx, lostRec{cs: cs, rel: r, msg: msg, iter: iter, event: ev, idx: idx, t: t,
		oosT: -1, nakT: -1, retxT: -1})
	cs.slot(r).lost = int32(len(a.retx))
	cs.events = true
	return &a.retx[len(a.retx)-1]
}

// inferLoss makes a loss record for a plain capture from the PSN's previous transmission.
func (a *analyzer) inferLoss(cs *connState, r int64) *lostRec {
	iter := cs.iter - 1
	if iter < 1 {
		iter = 1
	}
	s := cs.slot(r)
	rec := a.newLoss(cs, r, int(s.msgOf), iter, "inferred", int(s.lastIdx)-1, s.lastTx)
	if n := r + 1; cs.held(n) {
		if ns := cs.slot(n); ns.lastIdx != 0 && ns.firstTx >= rec.t {
			rec.oosT = ns.firstTx // approximation: the next PSN's first transmission followed the lost one
		}
	}
	if cs.haveNAK && cs.lastNAKRel == r && cs.lastNAKT >= rec.t {
		rec.nakT = cs.lastNAKT
	}
	return rec
}

// lossOnSend does the loss bookkeeping of one data packet (or READ response) seen at the switch: it closes the
// pending loss of the same PSN (this is its retransmission), infers losses in plain captures, opens a new loss
// when the packet is dropped or corrupted, and marks the out-of-order arrival that follows a loss.
func (a *analyzer) lossOnSend(cs *connState, r int64, m int, pi pktInfo, cl class, op roce.Opcode) {
	if cl.roundStart {
		a.countRound(cs, r, m, pi, cl.trigger)
	}
	var rec *lostRec
	if s := cs.slot(r); s.lost > 0 && s.lastIdx != 0 {
		rec = &a.retx[s.lost-1]
	} else if a.meta == MetaNone && s.lastIdx != 0 && cl.retx && cl.trigger != triggerRNR &&
		(cl.roundStart || cs.isIRN() && cl.trigger == TriggerNACK) {
		rec = a.inferLoss(cs, r)
	}
	if rec != nil {
		cs.slot(r).lost = 0
		rec.retxT, rec.retxIdx = pi.t, pi.idx
		switch {
		case rec.pendTrig != "":
			rec.trigger = rec.pendTrig
		case cl.trigger == TriggerNACK || cl.trigger == TriggerTimeout:
			rec.trigger = cl.trigger
		case cl.trigger == "" && (cs.rd == nil || cs.rd.ranges == nil):
			rec.trigger = TriggerTimeout
		}
	}
	if !pi.delivered {
		a.newLoss(cs, r, m, cs.iter, pi.ev.String(), pi.idx, pi.t)
		cs.awaitOOS = append(cs.awaitOOS, int32(len(a.retx)-1))
		return
	}
	if len(cs.awaitOOS) > 0 {
		keep := cs.awaitOOS[:0]
		for _, k := range cs.awaitOOS {
			if l := &a.retx[k]; r > l.rel {
				if l.oosT < 0 {
					l.oosT = pi.t
				}
			} else {
				keep = append(keep, k)
			}
		}
		cs.awaitOOS = keep
	}
}

// lossOnNAK notes when the NAK for a lost PSN passed the switch.
func (a *analyzer) lossOnNAK(cs *connState, r int64, pi pktInfo) {
	if !cs.held(r) {
		return // never sent, or released: no pending loss
	}
	if lost := cs.slot(r).lost; lost > 0 {
		if l := &a.retx[lost-1]; l.nakT < 0 {
			l.nakT = pi.t
		}
	}
}

// lossOnReissue notes a re-issued READ: for a gap it is the READ's "NACK"; either way it decides the trigger.
func (a *analyzer) lossOnReissue(cs *connState, r int64, pi pktInfo, trig string, prevReqT int64) {
	m := 0
	if r >= 0 && r < cs.win.end() {
		m = int(cs.slot(r).msgOf)
	}
	a.countRoundAt(cs, m, trig, pi.t-prevReqT)
	var rec *lostRec
	if !cs.held(r) {
		return // never sent, or released: no pending loss
	}
	switch s := cs.slot(r); {
	case s.lost > 0:
		rec = &a.retx[s.lost-1]
	case a.meta == MetaNone && s.lastIdx != 0:
		rec = a.inferLoss(cs, r)
	default:
		return
	}
	rec.pendTrig = trig
	if trig == TriggerReadReissue && rec.nakT < 0 {
		rec.nakT = pi.t
	}
}

// countRound records a retransmission round for the per-message retry history; a timeout's interval is the
// time since the PSN's previous transmission.
func (a *analyzer) countRound(cs *connState, r int64, m int, pi pktInfo, trig string) {
	var iv int64 = -1
	if s := cs.slot(r); trig == TriggerTimeout && s.lastIdx != 0 {
		iv = pi.t - s.lastTx
	}
	a.countRoundAt(cs, m, trig, iv)
}

func (a *analyzer) countRoundAt(cs *connState, m int, trig string, intervalNs int64) {
	if m < 1 {
		return
	}
	// Only messages with retries are kept, sorted by message; new ones nearly always go at the end.
	k := len(cs.retries)
	for k > 0 && cs.retries[k-1].Msg >= m {
		k--
	}
	if k == len(cs.retries) || cs.retries[k].Msg != m {
		cs.retries = slices.Insert(cs.retries, k, MessageRetries{QP: cs.qp(), Msg: m})
	}
	mr := &cs.retries[k]
	mr.Retries++
	if trig == TriggerTimeout {
		mr.Timeouts++
		if intervalNs >= 0 {
			mr.TimeoutIntervalsUs = append(mr.TimeoutIntervalsUs, us(intervalNs))
		}
	}
}

func us(ns int64) float64 { return float64(ns) / 1000 }

func fptr(v float64) *float64 { return &v }

// retransmissions converts the loss records into the contract's list, in trace order of the losses.
func (a *analyzer) retransmissions() []Retransmission {
	out := make([]Retransmission, 0, len(a.retx))
	base := a.opts.IndexBase
	for i := range a.retx {
		l := &a.retx[i]
		cs := l.cs
		if a.cutPackets(cs) > 0 || a.movedPackets(cs) > 0 {
			continue // not judged: its packets are not all readable
		}
		x := Retransmission{QP: cs.qp(), PSN: l.rel + int64(base), PSNAbs: cs.abs(l.rel), Msg: l.msg, Iter: l.iter,
			Event: l.event, Packet: l.idx, Position: base}
		if l.msg >= 1 && l.msg <= len(cs.msgFirst) && cs.msgFirst[l.msg-1] >= 0 {
			x.Position = int(l.rel-cs.msgFirst[l.msg-1]) + base
		}
		if l.oosT >= 0 && (l.retxT < 0 || l.oosT <= l.retxT) {
			x.NextDeliveredUs = fptr(us(l.oosT - l.t))
		}
		if l.retxT >= 0 {
			idx := l.retxIdx
			x.RetxPacket = &idx
			x.LatencyUs = fptr(us(l.retxT - l.t))
			if l.trigger != "" {
				trig := l.trigger
				x.Trigger = &trig
			}
			if (l.trigger == TriggerNACK || l.trigger == TriggerReadReissue) && l.nakT >= 0 {
				x.NACKReactionUs = fptr(us(l.retxT - l.nakT))
				if l.oosT >= 0 {
					x.NACKGenerationUs = fptr(us(l.nakT - l.oosT))
				}
			}
		}
		out = append(out, x)
	}
	return out
}

// positionTable aggregates retransmissions by verb and drop position (the paper's figures 8 and 9).
func (a *analyzer) positionTable(rs []Retransmission) []PositionRow {
	type key struct {
		verb string
		pos  int
	}
	type acc struct {
		n, ng, nr, nl, to  int
		sg, sr, sl, lo, hi float64
	}
	m := map[key]*acc{}
	for i, x := range rs {
		k := key{a.retx[i].cs.c.Verb, x.Position}
		ac := m[k]
		if ac == nil {
			ac = &acc{}
			m[k] = ac
		}
		ac.n++
		if x.NACKGenerationUs != nil {
			ac.ng++
			ac.sg += *x.NACKGenerationUs
		}
		if x.NACKReactionUs != nil {
			ac.nr++
			ac.sr += *x.NACKReactionUs
		}
		if x.LatencyUs != nil {
			v := *x.LatencyUs
			if ac.nl == 0 || v < ac.lo {
				ac.lo = v
			}
			if ac.nl == 0 || v > ac.hi {
				ac.hi = v
			}
			ac.nl++
			ac.sl += v
		}
		if x.Trigger != nil && *x.Trigger == TriggerTimeout {
			ac.to++
		}
	}
	rows := make([]PositionRow, 0, len(m))
	for k, ac := range m {
		row := PositionRow{Verb: k.verb, Position: k.pos, Count: ac.n, Timeouts: ac.to}
		if ac.ng > 0 {
			row.NACKGenerationUsMean = fptr(ac.sg / float64(ac.ng))
		}
		if ac.nr > 0 {
			row.NACKReactionUsMean = fptr(ac.sr / float64(ac.nr))
		}
		if ac.nl > 0 {
			row.LatencyUsMean = fptr(ac.sl / float64(ac.nl))
			row.LatencyUsMin, row.LatencyUsMax = fptr(ac.lo), fptr(ac.hi)
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Verb != rows[j].Verb {
			return rows[i].Verb < rows[j].Verb
		}
		return rows[i].Position < rows[j].Position
	})
	return rows
}
