// Package lab describes a Lumina lab as plain data: two hosts with their NIC profiles and addresses, the
// cables, the switch logic's constructor, the dumpers and the traffic; and what a run in it reports. The
// simulator (netsim) and the real-packet testbed (live) both run a lab.Config and return a lab.Result, so the
// live testbed needs nothing of the simulator.
package lab

import (
	"net/netip"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// Config is one run as plain data; package testbed builds it from a scenario.
type Config struct {
	Seed      uint64
	Requester HostConfig
	Responder HostConfig
	Link      LinkConfig
	// SwitchLatencyNs is the switch pipeline latency (ingress to egress); Lumina's Tofino adds < 0.4 us.
	// DefaultSwitchLatencyNs (with Link.PropagationNs = DefaultPropagationNs) is the paper's testbed, in which
	// the latencies measured at the switch land in the published ranges.
	SwitchLatencyNs int64
	Traffic         TrafficConfig
	// NewSwitch builds the switch logic from the connections' runtime metadata. It is called once, after the
	// metadata exchange and before any traffic (the paper's barrier). Nil means DefaultSwitch.
	NewSwitch func(conns []inject.ConnMeta) (inject.Logic, error)
	// Dumpers is the number of dumpers (for DefaultSwitch); Dump receives every mirrored frame, which is only
	// valid during the call. Nil discards.
	Dumpers int
	Dump    func(dumper int, tsNs int64, frame []byte)
	// RunLimitNs bounds simulated time (0: 100 s); MaxEvents bounds the number of events (0: 2^32).
	RunLimitNs int64
	MaxEvents  uint64
	// Progress, if not nil, is called every ProgressEvery events (0: 1 M) with the simulated time.
	Progress      func(simNs int64, events uint64)
	ProgressEvery uint64
	// SetupProgress, if not nil, hears how many of the run's connections (QP pairs) are set up, every 1,024
	// and once all are, before any traffic: the progress of a run with tens of thousands of QPs from its start.
	SetupProgress func(conns, total int)

	// ForceIPSN, if not nil, gives the requester-side initial PSN of connection i (e.g. near 2^24 to exercise
	// PSN wrap) instead of the seeded random one.
	ForceIPSN func(conn int) (roce.PSN, bool)
}

// HostConfig describes one host and its NIC.
type HostConfig struct {
	Profile *rnic.Profile
	// IPs are the host's addresses (GIDs); with Traffic.MultiGID connection i uses IPs[i % len(IPs)].
	IPs []netip.Addr
	MAC [6]byte
	// RoCE parameters (scenario roce-parameters).
	AdaptiveRetrans, SlowRestart, DCQCNRPEnable, DCQCNNPEnable bool
	// MinTimeBetweenCNPsNs overrides the profile's CNP interval when the card lets users configure it.
	MinTimeBetweenCNPsNs *int64
	ETS                  ETSConfig
}

// ETSConfig is the NIC's egress scheduling: DSCP -> traffic class, and per class strict priority or an ETS
// weight. With no classes every packet is in one work-conserving class.
type ETSConfig struct {
	DSCPToTC map[int]int
	Classes  []TrafficClass
}

// TrafficClass is one egress class. Strict classes are served first (higher TC first); the others share the
// rest by weight.
type TrafficClass struct {
	TC     int
	Weight int
	Strict bool
}

// LinkConfig is the cables between each host and the switch (both directions alike). Links serialize at Gbps
// (counting Ethernet's preamble, FCS and inter-frame gap), then delay by PropagationNs; they never drop.
type LinkConfig struct {
	Gbps          float64 // 0: the slower of the two NICs' link speeds
	PropagationNs int64   // DefaultPropagationNs for direct cables
	// LossProb is the probability that a frame is lost on a cable (each direction, each cable; 0 = lossless).
	// A frame lost between a host and the switch is not mirrored.
	LossProb float64
}

// TrafficConfig is Lumina's traffic generator configuration.
type TrafficConfig struct {
	Verb         string // write | send | read | send_read
	NumConns     int
	NumSendConns int // send_read: the first NumSendConns connections send, the next NumReadConns read
	NumReadConns int
	MsgsPerConn  int
	MsgSize      int
	MTU          int
	TxDepth      int // outstanding work requests per QP
	Barrier      bool
	MultiGID     bool
	DSCPList     []int
	Timeout      uint8
	RetryCnt     uint8
	RNRRetry     uint8
	// RecvWQEs is the number of receive WQEs posted per SEND connection (0: one per message).
	RecvWQEs int
}

// Result is what a run produced.
type Result struct {
	Conns    []inject.ConnMeta
	PerConn  []ConnResult
	Counters struct {
		Requester, Responder CounterSnapshot
	}
	// SwitchPorts are the switch's per-port RoCE counters (0 = requester side).
	SwitchPorts [2]inject.PortCounters
	// Switch is the switch logic's own counters when it exposes them (Counters() method), else nil.
	Switch any
	// FlushedFrames counts frames the switch logic still held at the end.
	FlushedFrames int
	// LinkLosses counts frames lost on the cables (LinkConfig.LossProb).
	LinkLosses uint64
	EndNs      int64
	Events     uint64
}

// CounterSnapshot is a NIC's counters at the start and at the end of the traffic, with vendor names.
type CounterSnapshot struct {
	Start, Finish []rnic.Counter
}

// ConnResult is one connection's outcome as the traffic generator sees it.
type ConnResult struct {
	Verb string
	// MCTNs is each completed message's completion time (post to completion), in completion order.
	MCTNs []int64
	// GoodputGbps is completed bytes / (last completion - first post).
	GoodputGbps float64
	Status      string
	Completed   int
	Posted      int
	// FirstPostNs and LastCompletionNs bound the connection's activity.
	FirstPostNs, LastCompletionNs int64
	// DataPackets counts data packets the data sender put on the wire; Retransmissions those of them that
	// were retransmissions.
	DataPackets, Retransmissions uint64
}
