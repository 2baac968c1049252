package analyze

import (
	"slices"
	"sort"
)

// trafficResults gives per-connection MCTs and goodput: the generator's numbers when given, else measured on
// the trace (first transmission of a message's first packet -> the ACK, or the in-order READ response, that
// completes it; goodput = payload delivered / (last completion - first data packet)).
func (a *analyzer) trafficResults() []TrafficQP {
	out := make([]TrafficQP, 0, max(len(a.opts.Traffic), len(a.conns)))
	if len(a.opts.Traffic) > 0 {
		for _, t := range a.opts.Traffic {
			mct := t.MCTUs
			if mct == nil {
				mct = []float64{}
			}
			out = append(out, TrafficQP{QP: t.Conn + a.opts.IndexBase, MCTUs: mct, GoodputGbps: t.GoodputGbps, Source: "generator",
				Status: t.Status, DataPackets: t.DataPackets, Retransmissions: t.Retransmissions})
		}
		return out
	}
	for _, cs := range a.conns {
		if cs.firstData < 0 {
			continue
		}
		tq := TrafficQP{QP: cs.qp(), MCTUs: []float64{}, Source: "trace"}
		for m := range cs.msgDone {
			if cs.msgDone[m] >= 0 && cs.msgT0[m] >= 0 {
				tq.MCTUs = append(tq.MCTUs, us(cs.msgDone[m]-cs.msgT0[m]))
			}
		}
		if cs.lastDone > cs.firstData {
			tq.GoodputGbps = float64(cs.bytes*8) / float64(cs.lastDone-cs.firstData)
		}
		out = append(out, tq)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// noisyNeighbor compares the completion times of innocent connections (no event, no loss, no CE mark, no NAK)
// with a baseline: Options.IdealMCTUs, or the median of each innocent connection's fastest message. A ratio
// above 10 flags a noisy neighbor. It needs at least one victim and one innocent connection.
func (a *analyzer) noisyNeighbor(tr []TrafficQP) *NoisyNeighbor {
	byQP := make(map[int]*TrafficQP, len(tr))
	for i := range tr {
		byQP[tr[i].QP] = &tr[i]
	}
	nn := &NoisyNeighbor{InnocentQPs: []int{}, VictimQPs: []int{}}
	var all, fastest []float64
	for _, cs := range a.conns {
		if cs.events {
			nn.VictimQPs = append(nn.VictimQPs, cs.qp())
			continue
		}
		t, ok := byQP[cs.qp()]
		if !ok || len(t.MCTUs) == 0 {
			continue
		}
		nn.InnocentQPs = append(nn.InnocentQPs, cs.qp())
		all = append(all, t.MCTUs...)
		fastest = append(fastest, slices.Min(t.MCTUs))
	}
	if len(nn.VictimQPs) == 0 || len(nn.InnocentQPs) == 0 {
		return nil
	}
	nn.InnocentMedianMCTUs = median(all)
	for _, v := range all {
		nn.InnocentMeanMCTUs += v / float64(len(all))
	}
	nn.BaselineUs, nn.BaselineSource = a.opts.IdealMCTUs, "ideal"
	if nn.BaselineUs <= 0 {
		nn.BaselineUs, nn.BaselineSource = median(fastest), "fastest-message"
	}
	if nn.BaselineUs > 0 {
		nn.Ratio = nn.InnocentMedianMCTUs / nn.BaselineUs
	}
	nn.Flagged = nn.Ratio > 10
	return nn
}

// ets checks work conservation for two connections in different traffic classes with equal guarantees: when
// one is slowed (it saw CE marks or losses), the other should take the spare bandwidth, i.e. exceed its
// guaranteed share (half the line rate) by a clear margin (5% of the line rate).
func (a *analyzer) ets(tr []TrafficQP) *ETSResult {
	if a.opts.LinkGbps <= 0 || len(a.opts.Traffic) != 2 || a.opts.Traffic[0].Class == a.opts.Traffic[1].Class {
		return nil
	}
	slowed, other := -1, -1
	for i, t := range a.opts.Traffic {
		if t.Conn >= 0 && t.Conn < len(a.conns) && a.conns[t.Conn].events {
			slowed = i
		} else {
			other = i
		}
	}
	if slowed < 0 || other < 0 {
		return nil
	}
	res := &ETSResult{SlowedQP: tr[slowed].QP, OtherQP: tr[other].QP, SlowedGbps: tr[slowed].GoodputGbps,
		OtherGbps: tr[other].GoodputGbps, GuaranteeGbps: a.opts.LinkGbps / 2}
	spare := res.GuaranteeGbps - res.SlowedGbps
	res.WorkConserving = spare < 0.05*a.opts.LinkGbps || res.OtherGbps > res.GuaranteeGbps+0.05*a.opts.LinkGbps
	return res
}
