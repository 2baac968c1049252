package scenario

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/goccy/go-yaml"
)

// WriteEffective writes the scenario as YAML with every default filled in, the seed and the index base:
// the file a results directory keeps, which loads back to an equal Scenario (positions aside).
func (s *Scenario) WriteEffective(w io.Writer) (err error) {
	// The encoder panics on shapes it cannot write (e.g. non-string MapSlice keys); report that instead.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("encoding effective scenario: %v", r)
		}
	}()
	out, err := yaml.Marshal(s.effective())
	if err != nil {
		return fmt.Errorf("encoding effective scenario: %w", err)
	}
	header := "# effective scenario: every default filled in; events expanded to one entry per connection\n"
	if s.Path != "" {
		header += "# from " + s.Path + "\n"
	}
	if _, err := io.WriteString(w, header); err != nil {
		return fmt.Errorf("writing effective scenario: %w", err)
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("writing effective scenario: %w", err)
	}
	return nil
}

// kv is one key of an ordered mapping; keys are strings because the encoder accepts no other kind.
type kv = yaml.MapItem

func (s *Scenario) effective() yaml.MapSlice {
	t := s.Traffic
	var conns any = t.NumConnections
	if t.Verb == VerbSendRead {
		conns = strconv.Itoa(t.NumSendQPs) + "," + strconv.Itoa(t.NumReadQPs)
	}
	traffic := yaml.MapSlice{
		{Key: "num-connections", Value: conns},
		{Key: "rdma-verb", Value: t.Verb},
		{Key: "num-msgs-per-qp", Value: t.NumMsgsPerQP},
		{Key: "mtu", Value: t.MTU},
		{Key: "message-size", Value: t.MessageSize},
		{Key: "multi-gid", Value: t.MultiGID},
		{Key: "barrier-sync", Value: t.BarrierSync},
		{Key: "tx-depth", Value: t.TxDepth},
		{Key: "min-retransmit-timeout", Value: t.MinRetransmitTimeout},
		{Key: "max-retransmit-retry", Value: t.MaxRetransmitRetry},
		{Key: "rnr-retry", Value: t.RNRRetry},
		{Key: "dscp-list", Value: nonNil(t.DSCPList)},
	}
	if t.InitialPSN != nil {
		traffic = append(traffic, kv{Key: "initial-psn", Value: *t.InitialPSN})
	}
	n := s.Network
	network := yaml.MapSlice{
		{Key: "link-gbps", Value: n.LinkGbps},
		{Key: "propagation-ns", Value: n.PropagationNs},
		{Key: "switch-latency-ns", Value: n.SwitchLatencyNs},
		{Key: "dumpers", Value: n.Dumpers},
		{Key: "dumper-weights", Value: nonNil(n.DumperWeights)},
		{Key: "snap-len", Value: n.SnapLen},
		{Key: "event-table-capacity", Value: n.EventTableCapacity},
		{Key: "run-timeout-ms", Value: n.RunTimeoutMs},
		{Key: "switch-clock-start-ns", Value: n.SwitchClockStartNs},
	}
	events := make([]any, 0, len(s.Events))
	for _, e := range s.Events {
		events = append(events, e.effective())
	}
	expects := make([]any, 0, len(s.Expect))
	for _, e := range s.Expect {
		expects = append(expects, e.effective())
	}
	out := yaml.MapSlice{
		{Key: "testbed", Value: s.Testbed},
		{Key: "seed", Value: s.Seed},
		{Key: "index-base", Value: s.IndexBase},
		{Key: "rewrite-udp-dst-port", Value: s.RewriteUDPDstPort},
		{Key: "requester", Value: s.Requester.effective()},
		{Key: "responder", Value: s.Responder.effective()},
		{Key: "traffic", Value: traffic},
		{Key: "network", Value: network},
		{Key: "events", Value: events},
		{Key: "expect", Value: expects},
	}
	if s.Workload != nil {
		out = append(out, kv{Key: "workload", Value: s.Workload.effective()})
	}
	return s.effectiveRemote(out)
}

func nonNil(l []int) []int {
	if l == nil {
		return []int{}
	}
	return l
}

func (h Host) effective() yaml.MapSlice {
	ips := make([]string, len(h.NIC.IPList))
	for i, p := range h.NIC.IPList {
		ips[i] = p.String()
	}
	nic := yaml.MapSlice{{Key: "type", Value: h.NIC.Type}, {Key: "ip-list", Value: ips}}
	if h.NIC.PrioDSCPMap != nil {
		m := yaml.MapSlice{}
		for _, p := range slices.Sorted(maps.Keys(h.NIC.PrioDSCPMap)) {
			m = append(m, kv{Key: strconv.Itoa(p), Value: nonNil(h.NIC.PrioDSCPMap[p])})
		}
		nic = append(nic, kv{Key: "prio-dscp-map", Value: m})
	}
	if h.NIC.ETS != nil {
		m := yaml.MapSlice{}
		for _, dscp := range slices.Sorted(maps.Keys(h.NIC.ETS.DSCPToTC)) {
			m = append(m, kv{Key: strconv.Itoa(dscp), Value: h.NIC.ETS.DSCPToTC[dscp]})
		}
		classes := make([]any, len(h.NIC.ETS.Classes))
		for i, c := range h.NIC.ETS.Classes {
			if c.Strict {
				classes[i] = yaml.MapSlice{{Key: "tc", Value: c.TC}, {Key: "strict", Value: true}}
			} else {
				classes[i] = yaml.MapSlice{{Key: "tc", Value: c.TC}, {Key: "weight", Value: c.Weight}}
			}
		}
		nic = append(nic, kv{Key: "ets", Value: yaml.MapSlice{{Key: "dscp-to-tc", Value: m}, {Key: "traffic-classes", Value: classes}}})
	}
	r := h.RoCEParameters
	roce := yaml.MapSlice{
		{Key: "dcqcn-rp-enable", Value: r.DCQCNRPEnable},
		{Key: "dcqcn-np-enable", Value: r.DCQCNNPEnable},
	}
	if r.MinTimeBetweenCNPsUs != nil {
		roce = append(roce, kv{Key: "min-time-between-cnps", Value: *r.MinTimeBetweenCNPsUs})
	}
	roce = append(roce, kv{Key: "adaptive-retrans", Value: r.AdaptiveRetrans}, kv{Key: "slow-restart", Value: r.SlowRestart})
	if r.DCQCNEnable != nil {
		roce = append(roce, kv{Key: "dcqcn-enable", Value: *r.DCQCNEnable})
	}
	return yaml.MapSlice{{Key: "nic", Value: nic}, {Key: "roce-parameters", Value: roce}}
}

func (e Event) effective() yaml.MapSlice {
	m := yaml.MapSlice{{Key: "qpn", Value: e.QP}}
	if e.Packet == PacketData || e.Packet == PacketReadReq {
		if e.PSNAll {
			m = append(m, kv{Key: "psn", Value: "all"})
		} else {
			m = append(m, kv{Key: "psn", Value: e.PSN})
		}
		if e.Iter == 0 {
			m = append(m, kv{Key: "iter", Value: "all"})
		} else {
			m = append(m, kv{Key: "iter", Value: e.Iter})
		}
		if e.Msg != nil {
			m = append(m, kv{Key: "msg", Value: *e.Msg})
		}
		if e.EveryMsg {
			m = append(m, kv{Key: "every-msg", Value: true})
		}
		if e.Every > 0 {
			m = append(m, kv{Key: "every", Value: e.Every})
		}
	} else {
		m = append(m, kv{Key: "nth", Value: e.Nth})
	}
	m = append(m, kv{Key: "type", Value: e.Type}, kv{Key: "packet", Value: e.Packet})
	switch e.Type {
	case EventDelay:
		m = append(m, kv{Key: "delay-us", Value: e.DelayUs})
	case EventReorder:
		m = append(m, kv{Key: "behind", Value: e.Behind})
	case EventDuplicate:
		m = append(m, kv{Key: "copies", Value: e.Copies})
	case EventRewrite:
		m = append(m, kv{Key: "field", Value: e.Field}, kv{Key: "value", Value: e.Value})
	}
	return m
}

func (e Expectation) effective() yaml.MapSlice {
	switch e.Kind {
	case ExpectIntegrity:
		return yaml.MapSlice{{Key: "integrity", Value: e.Integrity}}
	case ExpectCheck:
		m := yaml.MapSlice{{Key: "check", Value: e.Check}}
		if e.QP != nil {
			m = append(m, kv{Key: "qp", Value: *e.QP})
		}
		return m
	}
	m := yaml.MapSlice{{Key: "path", Value: e.Path}}
	var op any
	switch e.Op {
	case OpEquals, OpNotEquals:
		op = e.Want
	case OpMin:
		op = e.Lo
	case OpMax:
		op = e.Hi
	case OpBetween:
		op = []float64{e.Lo, e.Hi}
	case OpCount:
		op = e.Count
	case OpApprox:
		var tol any = e.Tolerance
		if e.Relative {
			tol = fmtNum(e.Tolerance) + "%"
		}
		op = yaml.MapSlice{{Key: "value", Value: e.Approx}, {Key: "tolerance", Value: tol}}
	}
	return append(m, kv{Key: e.Op, Value: op})
}
