// Package scenario reads, validates and writes Lumina scenario files: the two hosts, the traffic between
// them, the events the switch injects and what the test expects. It accepts the reference Lumina
// configuration unchanged (hardware-only keys are recorded and ignored), fills in every default, reports
// every problem with FILE:LINE:COL and the dotted key path, and evaluates `expect:` entries against an
// analysis document. It is pure data handling: no clock, no I/O beyond reading the file in Load.
package scenario

import (
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/lumina-go/lumina/roce"
)

// Format names the dialect a scenario file was written in.
const (
	// FormatLumina is the reference implementation's conf/example.yml format (qpn/psn count from 0).
	FormatLumina = "lumina"
	// FormatLuminaGo is this project's format (the paper's Listing 2 counts qpn/psn from 1).
	FormatLuminaGo = "lumina-go"
)

// Defaults that are not zero values. They are written into the effective scenario.
const (
	DefaultSeed               = 1
	DefaultRewriteUDPDstPort  = 9741
	DefaultNICType            = "cx5"
	DefaultNumConnections     = 1
	DefaultNumMsgsPerQP       = 1
	DefaultMTU                = 1024
	DefaultMessageSize        = 10240 // the paper's Listing 2: ten 1 KB packets per message
	DefaultTxDepth            = 1
	DefaultMinRetransmitTO    = 14 // 4.096 us * 2^14 = 67 ms, the reference example's value
	DefaultMaxRetransmitRetry = 7
	DefaultRNRRetry           = 7
	DefaultPropagationNs      = 100
	DefaultSwitchLatencyNs    = 300
	DefaultDumpers            = 2
	DefaultSnapLen            = 128
	DefaultEventTableCapacity = 8192 // the reference P4 inject_event_table size
	DefaultRunTimeoutMs       = 10000
)

// Scenario is one test with every default filled in. Field tags carry the file's key names.
type Scenario struct {
	// Format is the dialect detected from the file (FormatLumina or FormatLuminaGo); it only chose the
	// index-base default and is not written to the effective scenario.
	Format string `json:"-" yaml:"-"`
	// Testbed is where the test runs: sim (default), netns, rxe-vm or remote.
	Testbed string `json:"testbed" yaml:"testbed"`
	// Seed derives everything random (QPNs, initial PSNs, tie-breaks).
	Seed uint64 `json:"seed" yaml:"seed"`
	// IndexBase is 0 or 1: the number of the first connection, packet, message and nth packet.
	IndexBase int `json:"index-base" yaml:"index-base"`
	// RewriteUDPDstPort is the UDP destination port the switch writes into mirrored copies (RSS spreading).
	RewriteUDPDstPort int `json:"rewrite-udp-dst-port" yaml:"rewrite-udp-dst-port"`

	Requester Host    `json:"requester" yaml:"requester"`
	Responder Host    `json:"responder" yaml:"responder"`
	Traffic   Traffic `json:"traffic" yaml:"traffic"`
	Network   Network `json:"network" yaml:"network"`
	// Events are the expanded injection intents of traffic.data-pkt-events followed by the top-level
	// events list, one entry per connection, in file order.
	Events []Event `json:"events" yaml:"events"`
	// Expect lists what the test asserts; a scenario with expectations is a test case.
	Expect []Expectation `json:"expect" yaml:"expect"`
	// Workload, when set, replaces the traffic generator by a Collie-style workload on the NIC
	// micro-architecture model (workload.go).
	Workload *Workload `json:"workload,omitempty" yaml:"workload,omitempty"`

	// Remote is where each role runs for testbed: remote (nil for every other testbed).
	Remote *Remote `json:"remote,omitempty" yaml:"-"`

	// IgnoredKeys records each accepted hardware-only key as "FILE:LINE:COL: key.path".
	IgnoredKeys []string `json:"-" yaml:"-"`
	// Path is the file the scenario was loaded from (the name given to Parse).
	Path string `json:"-" yaml:"-"`
}

// Host is the requester or the responder.
type Host struct {
	NIC            NIC            `json:"nic" yaml:"nic"`
	RoCEParameters RoCEParameters `json:"roce-parameters" yaml:"roce-parameters"`
}

// NIC describes the card under test and its addresses.
type NIC struct {
	// Type is a profile name (cx4lx, cx5, cx6dx, e810, ideal, irn) or a profile file path (.yaml/.yml,
	// relative paths are relative to the scenario file: see Scenario.ResolvePath).
	Type string `json:"type" yaml:"type"`
	// IPList holds the host's addresses; connection i uses IPList[i % len] when multi-gid is on.
	IPList []netip.Prefix `json:"ip-list" yaml:"ip-list"`
	// PrioDSCPMap maps a priority (0..7) to the DSCP values it carries (the reference's prio-dscp-map).
	PrioDSCPMap map[int][]int `json:"prio-dscp-map,omitempty" yaml:"prio-dscp-map,omitempty"`
	// ETS is the egress scheduling of the NIC; nil means one class for everything.
	ETS *ETS `json:"ets,omitempty" yaml:"ets,omitempty"`
}

// ETS is enhanced transmission selection: DSCP values map to traffic classes, each class gets a weight or
// strict priority.
type ETS struct {
	DSCPToTC map[int]int    `json:"dscp-to-tc" yaml:"dscp-to-tc"`
	Classes  []TrafficClass `json:"traffic-classes" yaml:"traffic-classes"`
}

// TrafficClass is one ETS queue: Weight (1..100, relative) or Strict priority, never both.
type TrafficClass struct {
	TC     int  `json:"tc" yaml:"tc"`
	Weight int  `json:"weight,omitempty" yaml:"weight,omitempty"`
	Strict bool `json:"strict,omitempty" yaml:"strict,omitempty"`
}

// RoCEParameters are the NIC's congestion-control and loss-recovery settings.
type RoCEParameters struct {
	DCQCNRPEnable bool `json:"dcqcn-rp-enable" yaml:"dcqcn-rp-enable"`
	DCQCNNPEnable bool `json:"dcqcn-np-enable" yaml:"dcqcn-np-enable"`
	// MinTimeBetweenCNPsUs is the NP's CNP limiter interval in microseconds; nil = the profile's default.
	MinTimeBetweenCNPsUs *float64 `json:"min-time-between-cnps,omitempty" yaml:"min-time-between-cnps,omitempty"`
	AdaptiveRetrans      bool     `json:"adaptive-retrans" yaml:"adaptive-retrans"`
	SlowRestart          bool     `json:"slow-restart" yaml:"slow-restart"`
	// DCQCNEnable is Intel's single switch for both sides; nil = not set.
	DCQCNEnable *bool `json:"dcqcn-enable,omitempty" yaml:"dcqcn-enable,omitempty"`
}

// Verbs accepted by traffic.rdma-verb.
const (
	VerbWrite    = "write"
	VerbSend     = "send"
	VerbRead     = "read"
	VerbSendRead = "send_read"
)

// Traffic is what the traffic generator runs.
type Traffic struct {
	// NumConnections is the number of QPs (key num-connections, alias num-qps). For send_read it is
	// NumSendQPs + NumReadQPs; the send QPs come first.
	NumConnections int    `json:"num-connections" yaml:"num-connections"`
	NumSendQPs     int    `json:"num-send-qps,omitempty" yaml:"num-send-qps,omitempty"`
	NumReadQPs     int    `json:"num-read-qps,omitempty" yaml:"num-read-qps,omitempty"`
	Verb           string `json:"rdma-verb" yaml:"rdma-verb"`
	NumMsgsPerQP   int    `json:"num-msgs-per-qp" yaml:"num-msgs-per-qp"`
	MTU            int    `json:"mtu" yaml:"mtu"`
	MessageSize    int    `json:"message-size" yaml:"message-size"`
	MultiGID       bool   `json:"multi-gid" yaml:"multi-gid"`
	BarrierSync    bool   `json:"barrier-sync" yaml:"barrier-sync"`
	TxDepth        int    `json:"tx-depth" yaml:"tx-depth"`
	// MinRetransmitTimeout is the IB timeout exponent t: 4.096 us * 2^t (0 = infinite).
	MinRetransmitTimeout int `json:"min-retransmit-timeout" yaml:"min-retransmit-timeout"`
	MaxRetransmitRetry   int `json:"max-retransmit-retry" yaml:"max-retransmit-retry"`
	RNRRetry             int `json:"rnr-retry" yaml:"rnr-retry"`
	// DSCPList gives connection i the DSCP DSCPList[i % len]; empty = the NIC profile's default.
	DSCPList []int `json:"dscp-list" yaml:"dscp-list"`
	// InitialPSN, when set, is the requester's initial PSN on every connection (else drawn from the seed): a
	// value just below 2^24 makes the PSNs wrap during the run.
	InitialPSN *int `json:"initial-psn,omitempty" yaml:"initial-psn,omitempty"`
}

// PacketsPerMessage is ceil(message-size / mtu), at least 1.
func (t Traffic) PacketsPerMessage() int {
	return roce.PacketsPerMessage(t.MessageSize, t.MTU)
}

// PacketsPerConnection is the number of data packets one connection sends without retransmissions.
func (t Traffic) PacketsPerConnection() int {
	return t.PacketsPerMessage() * max(t.NumMsgsPerQP, 1)
}

// IsReadQP tells whether the connection with 0-based index i issues READs.
func (t Traffic) IsReadQP(i int) bool {
	switch t.Verb {
	case VerbRead:
		return true
	case VerbSendRead:
		return i >= t.NumSendQPs
	}
	return false
}

// Network is the simulated testbed around the NICs. Every field has a default.
type Network struct {
	// LinkGbps is the link speed; 0 means the NIC profile's speed.
	LinkGbps        float64 `json:"link-gbps" yaml:"link-gbps"`
	PropagationNs   int64   `json:"propagation-ns" yaml:"propagation-ns"`
	SwitchLatencyNs int64   `json:"switch-latency-ns" yaml:"switch-latency-ns"`
	// Dumpers is the number of packet dumpers; DumperWeights (len == Dumpers) spreads mirrored packets by
	// weighted round robin.
	Dumpers            int   `json:"dumpers" yaml:"dumpers"`
	DumperWeights      []int `json:"dumper-weights" yaml:"dumper-weights"`
	SnapLen            int   `json:"snap-len" yaml:"snap-len"`
	EventTableCapacity int   `json:"event-table-capacity" yaml:"event-table-capacity"`
	// RunTimeoutMs bounds the run in simulated time.
	RunTimeoutMs int64 `json:"run-timeout-ms" yaml:"run-timeout-ms"`
	// SwitchClockStartNs is the switch's 48-bit clock at the start of the run (0..2^48-1): a value near 2^48
	// makes the mirror timestamps wrap during the run.
	SwitchClockStartNs int64 `json:"switch-clock-start-ns" yaml:"switch-clock-start-ns"`
}

// Event types.
const (
	EventDrop      = "drop"
	EventECN       = "ecn"
	EventCorrupt   = "corrupt"
	EventDelay     = "delay"
	EventReorder   = "reorder"
	EventDuplicate = "duplicate"
	EventRewrite   = "rewrite"
)

// Packet kinds an event can target.
const (
	PacketData    = "data"
	PacketAck     = "ack"
	PacketNak     = "nak"
	PacketCNP     = "cnp"
	PacketReadReq = "read-req"
)

// Event is one injection intent on one connection. Indices (QP, PSN, Msg, Nth) use the scenario's index
// base; Iter always starts at 1.
//
// For data and read-req packets the target is packet PSN of the connection counted from its initial PSN
// (or, with Msg set, counted within message Msg; with EveryMsg, within every message), and only in round
// Iter: a connection's round starts at 1 and goes up by one each time a data packet arrives at the switch
// whose PSN is not larger than the previous one's (modulo 2^24). With Every > 0 the packets PSN+Every,
// PSN+2*Every, ... of the same scope are targeted too. For ack, nak and cnp the target is the Nth such
// packet of the connection.
type Event struct {
	QP       int    `json:"qpn" yaml:"qpn"`
	PSN      int    `json:"psn" yaml:"psn"`
	PSNAll   bool   `json:"psn-all,omitempty" yaml:"-"` // psn: all (every packet of the scope)
	Iter     int    `json:"iter" yaml:"iter"`           // 0: every round (written iter: all)
	Msg      *int   `json:"msg,omitempty" yaml:"msg,omitempty"`
	EveryMsg bool   `json:"every-msg,omitempty" yaml:"every-msg,omitempty"`
	Every    int    `json:"every,omitempty" yaml:"every,omitempty"`
	Type     string `json:"type" yaml:"type"`
	Packet   string `json:"packet" yaml:"packet"`
	Nth      int    `json:"nth,omitempty" yaml:"nth,omitempty"`
	// DelayUs (delay) holds the packet back this many microseconds.
	DelayUs float64 `json:"delay-us,omitempty" yaml:"delay-us,omitempty"`
	// Behind (reorder) releases the packet after the next Behind packets of the same direction.
	Behind int `json:"behind,omitempty" yaml:"behind,omitempty"`
	// Copies (duplicate) is the number of extra copies sent.
	Copies int `json:"copies,omitempty" yaml:"copies,omitempty"`
	// Field and Value (rewrite) set a header field: migreq, dscp, ecn, se or pad.
	Field string `json:"field,omitempty" yaml:"field,omitempty"`
	Value int    `json:"value,omitempty" yaml:"value,omitempty"`

	// Line and Col locate the entry in the scenario file (0 when built in code).
	Line int `json:"-" yaml:"-"`
	Col  int `json:"-" yaml:"-"`
}

// ZeroBased converts an index written with the scenario's base (qp, psn, msg, nth) to a 0-based one.
func (s *Scenario) ZeroBased(i int) int { return i - s.IndexBase }

// WithSeed replaces the seed (the --seed flag); everything random derives from it.
func (s *Scenario) WithSeed(seed uint64) { s.Seed = seed }

// ProfileRef is what a NIC type names for rnic.LoadProfile: a profile name as it is, or a profile file
// (.yaml, .yml) relative to the scenario file's directory.
func (s *Scenario) ProfileRef(typ string) string {
	if strings.HasSuffix(typ, ".yaml") || strings.HasSuffix(typ, ".yml") {
		return s.ResolvePath(typ)
	}
	return typ
}

// ResolvePath returns p relative to the scenario file's directory when p is relative (profile files).
func (s *Scenario) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) || s.Path == "" {
		return p
	}
	return filepath.Join(filepath.Dir(s.Path), p)
}
