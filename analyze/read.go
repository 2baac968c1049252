package analyze

import (
	"sort"

	"github.com/lumina-go/lumina/roce"
)

const gbnRead = "gbn-read"

type rdRange struct {
	start, end int64
	idx        int
}

// readState is go-back-N for RDMA READ (nic-behaviors.md §1): the requester is the data sink; a gap in the
// responses makes it re-issue a READ from the first missing PSN up to the original request's end; a lost tail
// is recovered by its timeout; the responder answers each delivered request in order and restarts from the
// requested PSN on a re-issue. Several READs may be outstanding.
type readState struct {
	// Requester.
	sndNxt      int64
	ranges      []rdRange // every new request, in PSN order
	ePSN        int64     // next response PSN the requester accepts
	gap         bool
	gapReissued bool
	lastReqT    int64

	// Responder.
	queue   []rdRange // delivered requests not yet started
	qHead   int
	serving bool
	cur     int64
	curEnd  int64

	reissueGap, reissueTimeout, reissueDelivered, dupResp int
}

// read is the connection's READ state, made on first use: most connections never read, and its 144 bytes
// in every connection's state were an eighth of it.
func (cs *connState) read() *readState {
	if cs.rd == nil {
		cs.rd = &readState{}
	}
	return cs.rd
}

// responses is the number of response packets (PSNs) a READ of length bytes takes.
func (cs *connState) responses(length uint32) int64 {
	mtu := cs.c.MTU
	if mtu <= 0 {
		mtu = cs.mtuSeen
	}
	if mtu <= 0 {
		mtu = 4096 // unknown: the largest RoCE MTU gives the fewest packets, so a new request is never taken for a re-issue
	}
	n := (int64(length) + int64(mtu) - 1) / int64(mtu)
	if n < 1 {
		n = 1
	}
	return n
}

// onReadRequest handles a READ request from the requester.
func (cs *connState) onReadRequest(p *roce.Packet, pi pktInfo) {
	cs.sawRead = true
	s := cs.read()
	r := cs.rel(p.BTH.PSN)
	n := cs.responses(p.RETH.DMALen)
	if !cs.ensure(r + n - 1) {
		cs.violate(gbnRead, pi.idx, "READ request PSN %d is %d packets away from the connection's initial PSN %d",
			p.BTH.PSN, r, cs.c.ReqIPSN)
		return
	}
	if pi.ev != 0 {
		cs.events = true
	}
	if r > s.sndNxt {
		cs.violate(gbnRead, pi.idx, "READ request PSN %d skips ahead: the next new PSN is %d", cs.abs(r), cs.abs(s.sndNxt))
		s.sndNxt = r
	}
	reissue := r < s.sndNxt
	if !reissue {
		s.ranges = append(s.ranges, rdRange{start: r, end: r + n - 1, idx: pi.idx})
		s.sndNxt = r + n
		cs.curMsg++
		cs.growMsgs(cs.curMsg)
		cs.msgT0[cs.curMsg-1], cs.msgFirst[cs.curMsg-1], cs.msgLast[cs.curMsg-1] = pi.t, r, r+n-1
		for q := max(r, cs.win.base); q < r+n; q++ {
			cs.slot(q).msgOf = int32(cs.curMsg)
		}
		if cs.firstData < 0 {
			cs.firstData = pi.t
		}
	} else {
		end := r + n - 1
		k := sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i].end >= r })
		if k < len(s.ranges) && s.ranges[k].start <= r && end != s.ranges[k].end {
			rg := s.ranges[k]
			cs.violate(gbnRead, pi.idx, "re-issued READ covers PSN %d..%d but the original request (packet %d) covered PSN %d..%d",
				cs.abs(r), cs.abs(end), rg.idx, cs.abs(rg.start), cs.abs(rg.end))
		}
		trig := TriggerTimeout
		if r < s.ePSN && cs.receiverDiscarded() {
			// Responses from PSN r on passed the switch but the requester's NIC discarded them: a gap the NIC
			// saw and the trace cannot show.
			s.ePSN = r
			s.gap, s.gapReissued = true, false
			cs.a.nicLosses++
		}
		if s.gap && !s.gapReissued {
			trig = TriggerReadReissue
			s.reissueGap++
			s.gapReissued = true
		} else {
			s.reissueTimeout++
		}
		if r != s.ePSN {
			cs.violate(gbnRead, pi.idx, "re-issued READ from PSN %d but the first missing response PSN is %d",
				cs.abs(r), cs.abs(s.ePSN))
		}
		cs.a.lossOnReissue(cs, r, pi, trig, s.lastReqT)
	}
	s.lastReqT = pi.t
	if pi.delivered {
		s.queue = append(s.queue, rdRange{start: r, end: r + n - 1, idx: pi.idx})
		if reissue {
			s.reissueDelivered++
		}
	}
}

// onReadResponse handles a READ response from the responder.
func (cs *connState) onReadResponse(p *roce.Packet, pi pktInfo) {
	s := cs.read()
	if !cs.sawRead {
		return
	}
	r := cs.rel(p.BTH.PSN)
	if !cs.ensure(r) {
		cs.violate(gbnRead, pi.idx, "READ response PSN %d is %d packets away from the connection's initial PSN %d",
			p.BTH.PSN, r, cs.c.ReqIPSN)
		return
	}
	if op := p.BTH.Opcode; (op == roce.RCReadResponseFirst || op == roce.RCReadResponseMiddle) && p.PayloadLen > cs.mtuSeen {
		cs.mtuSeen = p.PayloadLen
	}
	if pi.ev != 0 {
		cs.events = true
	}
	cs.stepIter(r)
	m := int(cs.slot(r).msgOf)
	s.onResponseSeen(cs, r, pi)
	cs.a.lossOnSend(cs, r, m, pi, class{}, p.BTH.Opcode)
	cs.sent(r, pi)
	if !pi.delivered {
		return
	}
	if !cs.flag(r, slotGot) {
		cs.setFlag(r, slotGot)
		cs.bytes += int64(p.PayloadLen)
	}
	switch {
	case r == s.ePSN:
		s.ePSN++
		s.gap, s.gapReissued = false, false
		cs.completeTo(r, pi.t)
	case r > s.ePSN:
		s.gap = true
	default:
		s.dupResp++
	}
	if pi.ce {
		cs.a.cnp.trigger(cs, trigCE, pi)
	}
}

func (s *readState) onResponseSeen(cs *connState, r int64, pi pktInfo) {
	if s.serving && r == s.cur {
		s.cur++
		s.serving = s.cur <= s.curEnd
		return
	}
	for k := s.qHead; k < len(s.queue); k++ {
		if s.queue[k].start == r {
			s.cur, s.curEnd = r+1, s.queue[k].end
			s.serving = s.cur <= s.curEnd
			s.qHead = k + 1
			if s.qHead == len(s.queue) {
				s.queue, s.qHead = s.queue[:0], 0
			}
			return
		}
	}
	if s.serving {
		cs.violate(gbnRead, pi.idx, "READ response PSN %d but the responder should send PSN %d or the first PSN of a delivered request",
			cs.abs(r), cs.abs(s.cur))
	} else {
		cs.violate(gbnRead, pi.idx, "READ response PSN %d answers no delivered READ request", cs.abs(r))
	}
}

func (s *readState) finish(cs *connState, total int64, lastIdx int) {
	if cs.stoppedOnError() {
		return
	}
	want := s.sndNxt
	if total >= 0 {
		want = total
		if s.sndNxt != total {
			cs.violate(gbnRead, lastIdx, "incomplete: the requester asked for %d response packets; the connection has %d",
				s.sndNxt, total)
		}
	}
	if s.ePSN != want {
		cs.violate(gbnRead, lastIdx, "incomplete: READ responses arrived in order only up to PSN %d; expected every response up to PSN %d",
			cs.abs(s.ePSN-1), cs.abs(want-1))
	}
}
