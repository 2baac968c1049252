package analyze

import (
	"net/netip"

	"github.com/lumina-go/lumina/roce"
)

// Verbs of a connection.
const (
	VerbWrite = "write"
	VerbSend  = "send"
	VerbRead  = "read"
)

// Conn describes one connection (a QP pair) as the traffic generator reports it.
type Conn struct {
	Index         int        `json:"index"` // 0-based connection number
	Verb          string     `json:"verb"`  // write | send | read
	ReqIP         netip.Addr `json:"req_ip"`
	RespIP        netip.Addr `json:"resp_ip"`
	ReqQPN        uint32     `json:"req_qpn"`
	RespQPN       uint32     `json:"resp_qpn"`
	ReqIPSN       roce.PSN   `json:"req_ipsn"`        // initial PSN of the requester's requests
	PacketsPerMsg int        `json:"packets_per_msg"` // 0: unknown (message boundaries come from opcodes)
	NumMsgs       int        `json:"num_msgs"`        // 0: unknown (no completeness check against a total)
	MTU           int        `json:"mtu"`             // 0: unknown (READ response counts use the largest payload seen)
}

// NICInfo is what the analyzers need to know about one host's NIC. Zero values mean "unknown".
type NICInfo struct {
	Vendor         string `json:"vendor"`           // nvidia | intel | ideal (selects counter names)
	Profile        string `json:"profile"`          // profile name, e.g. cx5 or irn
	CNPScope       string `json:"cnp_scope"`        // port | dest-ip | qp; "" unknown
	CNPIntervalNs  int64  `json:"cnp_interval_ns"`  // the limiter's interval; 0 with a scope = every trigger due
	NAKTriggersCNP bool   `json:"nak_triggers_cnp"` // an out-of-order arrival (NAK) also generates a CNP
	NPEnabled      bool   `json:"np_enabled"`       // DCQCN notification point on
	RPEnabled      bool   `json:"rp_enabled"`       // DCQCN reaction point on: CNPs are handled, not ignored
}

// HostCounters is one host's NIC counters at the start and at the finish of a run, under the vendor's names.
type HostCounters struct {
	Host   string            `json:"host"`   // requester | responder
	Vendor string            `json:"vendor"` // overrides NICInfo.Vendor when set
	Start  map[string]uint64 `json:"start"`
	Finish map[string]uint64 `json:"finish"`
}

// TrafficIn is the traffic generator's own measurement of one connection.
type TrafficIn struct {
	Conn        int       `json:"conn"`   // 0-based connection number
	MCTUs       []float64 `json:"mct_us"` // message completion times
	GoodputGbps float64   `json:"goodput_gbps"`
	Class       int       `json:"class"` // ETS traffic class (queue) of the connection
	// Status is the generator's completion status: ok, or why the connection stopped (retry-exceeded, ...);
	// "" = unknown. A connection that stopped on an error cannot have a complete trace.
	Status string `json:"status"`
	// DataPackets and Retransmissions count the data packets the sender transmitted, and those of them that
	// were retransmissions, as the sender reports them (nil: unknown).
	DataPackets     *int64 `json:"data_packets,omitempty"`
	Retransmissions *int64 `json:"retransmissions,omitempty"`
}

// Metadata selects where per-packet events and times come from.
type Metadata uint8

// Metadata modes.
const (
	// MetaAuto decides from the first RoCE packet: a pcapng comment with an event (trace.ParseComment) selects
	// MetaComment, an IPv4 TTL or IPv6/GRH hop limit below 8 (an event type, never a real one) selects
	// MetaMirror, anything else MetaNone.
	MetaAuto Metadata = iota
	// MetaMirror reads Lumina's mirror encoding: TTL (hop limit) = event, destination MAC = ingress time in ns.
	MetaMirror
	// MetaComment reads "event=drop iter=2 seq=17"-style pcapng comments; the capture timestamp is the clock.
	MetaComment
	// MetaNone treats the capture as plain: every packet delivered, capture timestamps are the clock.
	MetaNone
)

// Options configure Analyze.
type Options struct {
	// IndexBase is added to 0-based connection numbers, PSN offsets and drop positions in the results (the
	// scenario's index-base: 0 or 1). Message numbers are always 1-based.
	IndexBase int
	// Conns lists the connections; nil means learn them from the trace.
	Conns []Conn
	// Requester and Responder describe the two hosts' NICs.
	Requester, Responder NICInfo
	// Counters holds each host's counter snapshots; empty means no counter check.
	Counters []HostCounters
	// Traffic is the generator's per-connection measurement; empty means MCTs are measured on the trace.
	Traffic []TrafficIn
	// IdealMCTUs is the clean reference message completion time for noisy-neighbor detection; 0 means each
	// innocent connection's own fastest message.
	IdealMCTUs float64
	// LinkGbps is the line rate, for the ETS work-conservation check (0: no ETS check).
	LinkGbps float64
	// Metadata selects the source of events and times (default MetaAuto).
	Metadata Metadata
	// MaxViolations caps the violations kept per check (the count is always exact); 0 means 100.
	MaxViolations int
}

// Analysis is the analyzers' result, serialized into analysis.json.
type Analysis struct {
	Checks          []Check          `json:"checks"`
	Retransmissions []Retransmission `json:"retransmissions"`
	Timeouts        []MessageRetries `json:"timeouts"`
	Tables          []PositionRow    `json:"tables"`
	CNP             CNPResult        `json:"cnp"`
	Counters        []CounterCheck   `json:"counters"`
	Traffic         []TrafficQP      `json:"traffic"`
	NoisyNeighbor   *NoisyNeighbor   `json:"noisy_neighbor"`
	ETS             *ETSResult       `json:"ets"`
	Connections     []Conn           `json:"connections"` // as given, or as learned from the trace
	Skipped         []Skipped        `json:"skipped"`
	Packets         int              `json:"packets"`
	RoCEPackets     int              `json:"roce_packets"`
	Metadata        string           `json:"metadata"` // mirror | comment | none: what the trace carried
	// CaptureGaps counts data PSNs a plain capture skipped without any retransmission: packets the capture
	// missed, assumed sent and delivered.
	CaptureGaps int `json:"capture_gaps"`
	// NICLosses counts recoveries for packets the trace shows delivered but the receiving NIC discarded (its
	// discard counters moved): the checkers accept the NAK or re-issue instead of reporting a violation.
	NICLosses int `json:"nic_losses"`
}

// Check is one analyzer's verdict on one connection.
type Check struct {
	Analyzer       string      `json:"analyzer"` // gbn | gbn-read | irn | cnp | noisy-neighbor | ets
	QP             int         `json:"qp"`       // connection number with the index base
	OK             bool        `json:"ok"`
	Violations     []Violation `json:"violations"`
	ViolationCount int         `json:"violation_count"` // all violations, also those beyond MaxViolations
}

// Violation is one departure from the specification.
type Violation struct {
	Packet  int    `json:"packet"` // index of the packet in the trace
	Message string `json:"message"`
}

// Triggers of a retransmission.
const (
	TriggerNACK        = "nack"
	TriggerTimeout     = "timeout"
	TriggerReadReissue = "read-reissue"
)

// Retransmission describes one lost data packet and how it was recovered. Absent values are null.
type Retransmission struct {
	QP               int      `json:"qp"`
	PSN              int64    `json:"psn"`      // from the connection's initial PSN, with the index base
	PSNAbs           uint32   `json:"psn_abs"`  // on the wire
	Msg              int      `json:"msg"`      // 1-based
	Position         int      `json:"position"` // packet within its message, with the index base
	Iter             int      `json:"iter"`     // round in which it was lost
	Event            string   `json:"event"`    // drop | corrupt | inferred (plain capture)
	Packet           int      `json:"packet"`   // trace index of the lost transmission
	RetxPacket       *int     `json:"retx_packet"`
	Trigger          *string  `json:"trigger"`
	NACKGenerationUs *float64 `json:"nack_generation_us"`
	NACKReactionUs   *float64 `json:"nack_reaction_us"`
	LatencyUs        *float64 `json:"latency_us"`
	// NextDeliveredUs is the reference Lumina's "next delivered packet delay": from the lost packet to the next
	// packet of its connection that was delivered (the out-of-order arrival); null when none came before the
	// retransmission.
	NextDeliveredUs *float64 `json:"next_delivered_us"`
}

// MessageRetries is the retransmission history of one message that needed any.
type MessageRetries struct {
	QP                 int       `json:"qp"`
	Msg                int       `json:"msg"`
	Retries            int       `json:"retries"`  // retransmission rounds of any trigger
	Timeouts           int       `json:"timeouts"` // rounds started by a timeout
	TimeoutIntervalsUs []float64 `json:"timeout_intervals_us"`
}

// PositionRow aggregates the retransmissions of packets dropped at one position within their message (the
// rows of the Lumina paper's figures 8 and 9). Means are over the retransmissions that have the value.
type PositionRow struct {
	Verb                 string   `json:"verb"`
	Position             int      `json:"position"` // with the index base
	Count                int      `json:"count"`
	NACKGenerationUsMean *float64 `json:"nack_generation_us_mean"`
	NACKReactionUsMean   *float64 `json:"nack_reaction_us_mean"`
	LatencyUsMean        *float64 `json:"latency_us_mean"`
	LatencyUsMin         *float64 `json:"latency_us_min"`
	LatencyUsMax         *float64 `json:"latency_us_max"`
	Timeouts             int      `json:"timeouts"`
}

// Skipped names a flow the checkers did not judge, and why.
type Skipped struct {
	Flow   string `json:"flow"` // "src > dst qp 0x..."
	Reason string `json:"reason"`
}

// TrafficQP is one connection's completion times and goodput.
type TrafficQP struct {
	QP          int       `json:"qp"`
	MCTUs       []float64 `json:"mct_us"`
	GoodputGbps float64   `json:"goodput_gbps"`
	Source      string    `json:"source"`           // generator | trace
	Status      string    `json:"status,omitempty"` // the generator's completion status, when known
	// DataPackets and Retransmissions as the sender reports them, when known.
	DataPackets     *int64 `json:"data_packets,omitempty"`
	Retransmissions *int64 `json:"retransmissions,omitempty"`
}

// NoisyNeighbor compares innocent connections' completion times with a baseline.
type NoisyNeighbor struct {
	InnocentQPs         []int   `json:"innocent_qps"`
	VictimQPs           []int   `json:"victim_qps"`
	InnocentMedianMCTUs float64 `json:"innocent_median_mct_us"`
	InnocentMeanMCTUs   float64 `json:"innocent_mean_mct_us"` // the paper's figure 11 reports the average
	BaselineUs          float64 `json:"baseline_us"`
	BaselineSource      string  `json:"baseline_source"` // ideal | fastest-message
	Ratio               float64 `json:"ratio"`
	Flagged             bool    `json:"flagged"` // ratio > 10
}

// ETSResult is the work-conservation verdict for two connections in different traffic classes.
type ETSResult struct {
	SlowedQP       int     `json:"slowed_qp"`
	OtherQP        int     `json:"other_qp"`
	SlowedGbps     float64 `json:"slowed_gbps"`
	OtherGbps      float64 `json:"other_gbps"`
	GuaranteeGbps  float64 `json:"guarantee_gbps"`
	WorkConserving bool    `json:"work_conserving"`
}
