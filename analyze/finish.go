package analyze

import (
	"fmt"
	"sort"
)

var metaNames = [...]string{MetaAuto: "none", MetaMirror: "mirror", MetaComment: "comment", MetaNone: "none"}

// finish closes every state machine and assembles the analysis. The result is a copy of a.res, not a pointer
// into the analyzer: the caller keeps the analysis (e.g. while it writes the report) and the analyzer, with
// every connection's state, its maps and indexes, is garbage as soon as Analyze returns.
func (a *analyzer) finish() *Analysis {
	res := &a.res
	res.Metadata = metaNames[a.meta]
	for _, cs := range a.conns {
		total := int64(-1)
		if cs.c.PacketsPerMsg > 0 && cs.c.NumMsgs > 0 {
			total = int64(cs.c.PacketsPerMsg) * int64(cs.c.NumMsgs)
		}
		switch {
		case a.cutPackets(cs) > 0:
			res.Skipped = append(res.Skipped, Skipped{Flow: connFlow(cs), Reason: fmt.Sprintf(
				"the capture cut the transport headers of %d of its packets (snap length too short): not judged", a.cutPackets(cs))})
		case a.movedPackets(cs) > 0:
			res.Skipped = append(res.Skipped, Skipped{Flow: connFlow(cs), Reason: fmt.Sprintf(
				"delay, reorder or duplicate events changed the delivery of %d of its packets after the switch saw them: the checkers, which read the switch's order, do not judge it", a.movedPackets(cs))})
		case cs.sawRead && cs.sawWS:
			res.Skipped = append(res.Skipped, Skipped{Flow: connFlow(cs), Reason: "mixes READ with SEND/WRITE on one QP: not checked"})
		case !cs.sawRead && !cs.sawWS:
			res.Skipped = append(res.Skipped, Skipped{Flow: connFlow(cs), Reason: "no SEND, WRITE or READ packets (atomics are not checked)"})
		case cs.learned && !cs.respKnown:
			res.Skipped = append(res.Skipped, Skipped{Flow: connFlow(cs), Reason: "the capture holds no responses for this connection"})
		case cs.sawRead:
			cs.read().finish(cs, total, a.lastIdx)
			a.keep(cs, gbnRead)
		case cs.isIRN():
			cs.irn.finish(cs, total, a.lastIdx)
			a.keep(cs, irn)
		default:
			cs.gbn.finish(cs, total, a.lastIdx)
			a.keep(cs, gbn)
		}
	}
	res.CNP = a.cnp.result(a)
	for _, cs := range a.conns {
		if c := cs.viol["cnp"]; c != nil {
			a.checks = append(a.checks, c)
		}
	}
	res.Retransmissions = a.retransmissions()
	res.Tables = a.positionTable(res.Retransmissions)
	res.Timeouts = []MessageRetries{}
	for _, cs := range a.conns {
		for _, mr := range cs.retries {
			if mr.Retries > 0 {
				if mr.TimeoutIntervalsUs == nil {
					mr.TimeoutIntervalsUs = []float64{}
				}
				res.Timeouts = append(res.Timeouts, mr)
			}
		}
	}
	res.Counters = a.counterChecks()
	if a.movedTotal > 0 && a.cutTotal == 0 && len(res.Counters) > 0 {
		res.Counters = []CounterCheck{}
		res.Skipped = append(res.Skipped, Skipped{Flow: "counters", Reason: fmt.Sprintf(
			"delay, reorder or duplicate events changed the delivery of %d packets after the switch saw them: the counters cannot be compared with the trace", a.movedTotal)})
	}
	if a.cutTotal > 0 && len(res.Counters) > 0 {
		// The trace-implied counts would miss the cut packets: no counter verdict.
		res.Counters = []CounterCheck{}
		res.Skipped = append(res.Skipped, Skipped{Flow: "counters", Reason: fmt.Sprintf(
			"the capture cut the transport headers of %d packets (snap length too short): the counters cannot be compared with the trace", a.cutTotal)})
	}
	res.Traffic = a.trafficResults()
	res.NoisyNeighbor = a.noisyNeighbor(res.Traffic)
	if nn := res.NoisyNeighbor; nn != nil {
		for _, q := range nn.InnocentQPs {
			c := &Check{Analyzer: "noisy-neighbor", QP: q, OK: !nn.Flagged, Violations: []Violation{}}
			if nn.Flagged {
				c.ViolationCount = 1
				c.Violations = append(c.Violations, Violation{Packet: a.lastIdx, Message: fmt.Sprintf(
					"innocent connections' median completion time %.1f us is %.1fx the %s baseline %.1f us (more than 10x)",
					nn.InnocentMedianMCTUs, nn.Ratio, nn.BaselineSource, nn.BaselineUs)})
			}
			a.checks = append(a.checks, c)
		}
	}
	res.ETS = a.ets(res.Traffic)
	if e := res.ETS; e != nil {
		c := &Check{Analyzer: "ets", QP: e.OtherQP, OK: e.WorkConserving, Violations: []Violation{}}
		if !e.WorkConserving {
			c.ViolationCount = 1
			c.Violations = append(c.Violations, Violation{Packet: a.lastIdx, Message: fmt.Sprintf(
				"not work-conserving: QP %d was slowed to %.2f Gb/s but QP %d stayed at %.2f Gb/s, within its %.2f Gb/s guarantee",
				e.SlowedQP, e.SlowedGbps, e.OtherQP, e.OtherGbps, e.GuaranteeGbps)})
		}
		a.checks = append(a.checks, c)
	}
	sort.SliceStable(a.checks, func(i, j int) bool {
		if a.checks[i].QP != a.checks[j].QP {
			return a.checks[i].QP < a.checks[j].QP
		}
		return a.checks[i].Analyzer < a.checks[j].Analyzer
	})
	res.NICLosses = a.nicLosses
	res.Checks = make([]Check, 0, len(a.checks))
	for _, c := range a.checks {
		c.OK = c.OK || c.ViolationCount == 0
		if c.ViolationCount > 0 {
			c.OK = false
		}
		sort.SliceStable(c.Violations, func(i, j int) bool { return c.Violations[i].Packet < c.Violations[j].Packet })
		res.Checks = append(res.Checks, *c)
	}
	res.Connections = make([]Conn, 0, len(a.conns))
	for _, cs := range a.conns {
		res.Connections = append(res.Connections, cs.c)
	}
	if res.Skipped == nil {
		res.Skipped = []Skipped{}
	}
	out := *res
	return &out
}

// connFlow names a connection in a skip record; it is made only for the connections skipped (a string per
// connection was most of finish's garbage on a trace of 65,536 connections).
func connFlow(cs *connState) string {
	return fmt.Sprintf("%s > %s qp 0x%06x", cs.c.ReqIP, cs.c.RespIP, cs.c.RespQPN)
}

// keep adds a connection's check for one analyzer, creating an empty (passing) one if it found nothing.
// cutPackets counts the packets of either direction of a connection whose transport headers the capture cut.
func (a *analyzer) cutPackets(cs *connState) int {
	if a.cut == nil {
		return a.cutUnknown
	}
	return a.cut[flowKey{cs.c.RespIP, cs.c.RespQPN}] + a.cut[flowKey{cs.c.ReqIP, cs.c.ReqQPN}] + a.cutUnknown
}

// movedPackets counts the packets of either direction of a connection that a delay, reorder or duplicate event
// touched.
func (a *analyzer) movedPackets(cs *connState) int {
	if a.moved == nil {
		return 0
	}
	return a.moved[flowKey{cs.c.RespIP, cs.c.RespQPN}] + a.moved[flowKey{cs.c.ReqIP, cs.c.ReqQPN}]
}

func (a *analyzer) keep(cs *connState, name string) {
	c := cs.viol[name]
	if c == nil {
		c = &Check{Analyzer: name, QP: cs.qp(), Violations: []Violation{}}
	}
	a.checks = append(a.checks, c)
}
