package resultsdir

import (
	"net/netip"

	"github.com/lumina-go/lumina/inject"
)

// ConnRecord is one connection in connections.json (indices 0-based inside; QP is the scenario's numbering).
type ConnRecord struct {
	QP            int        `json:"qp"`
	Verb          string     `json:"verb"`
	RequesterIP   netip.Addr `json:"requester_ip"`
	ResponderIP   netip.Addr `json:"responder_ip"`
	RequesterQPN  uint32     `json:"requester_qpn"`
	ResponderQPN  uint32     `json:"responder_qpn"`
	RequesterIPSN uint32     `json:"requester_ipsn"`
	ResponderIPSN uint32     `json:"responder_ipsn"`
	PacketsPerMsg int        `json:"packets_per_msg"`
	NumMsgs       int        `json:"num_msgs"`
	MTU           int        `json:"mtu"`
}

// TrafficRecord is one connection in traffic.json.
type TrafficRecord struct {
	QP              int       `json:"qp"`
	Verb            string    `json:"verb"`
	Status          string    `json:"status"`
	Posted          int       `json:"messages_posted"`
	Completed       int       `json:"messages_completed"`
	MCTUs           []float64 `json:"mct_us"`
	GoodputGbps     float64   `json:"goodput_gbps"`
	DataPackets     uint64    `json:"data_packets"`
	Retransmissions uint64    `json:"retransmissions"`
}

// HostCounters is one host in counters.json.
type HostCounters struct {
	NIC    string            `json:"nic"`
	Vendor string            `json:"vendor"`
	Start  map[string]uint64 `json:"start"`
	Finish map[string]uint64 `json:"finish"`
}

// CountersFile is counters.json.
type CountersFile struct {
	Requester HostCounters   `json:"requester"`
	Responder HostCounters   `json:"responder"`
	Switch    SwitchCounters `json:"switch"`
}

// SwitchCounters are the switch's per-port counters in counters.json.
type SwitchCounters struct {
	Ports    []inject.PortCounters `json:"ports"`
	Mirrored uint64                `json:"mirrored"`
	RxRoCE   uint64                `json:"rx_roce"`
	Injector *inject.Counters      `json:"injector,omitempty"`
}

// WorkloadAnalysis is a workload run's result: the NICs' pause, the goodput against the profile's limits and
// the symptom Collie's monitor would report. Throughput counts whole wire frames the receiver placed in memory.
type WorkloadAnalysis struct {
	WindowUs float64 `json:"window_us"`
	// LimitGbps and LimitMpps are what the workload can reach: the line rate and the packets/s limit for its
	// frame sizes, each at most what the workload keeps in flight can carry (InFlightGbps, InFlightMpps: its
	// outstanding work requests over one unloaded round trip, or what one of its QPs alone carries at its depth
	// times the QPs where that is less, for a workload below 95% of its limits). A workload too shallow to fill
	// the link is slow by its own design, not the NIC's, so the search and `lumina run` judge against these
	// alike.
	LimitGbps    float64 `json:"limit_gbps"`
	LimitMpps    float64 `json:"limit_mpps"`
	InFlightGbps float64 `json:"in_flight_gbps"`
	InFlightMpps float64 `json:"in_flight_mpps"`
	// PauseRatio is the larger of the two NICs' pause duration ratios (tx_prioN_pause_duration / window).
	PauseRatio float64 `json:"pause_duration_ratio"`
	// GoodputGbps and GoodputMpps are the busier direction's; LimitShare the larger of their shares of the
	// limits (1 = at a limit).
	GoodputGbps float64 `json:"goodput_gbps"`
	GoodputMpps float64 `json:"goodput_mpps"`
	LimitShare  float64 `json:"limit_share"`
	// Symptom is pause, low-throughput or none.
	Symptom string         `json:"symptom"`
	Hosts   []WorkloadHost `json:"hosts"`
	// Published, when both NICs are one of Collie's subsystems (search/collie), lists the anomalies Collie
	// publishes for it whose conditions hold at the workload, with the symptom it reports ([] none); absent on
	// any other NIC.
	Published *[]PublishedAnomaly `json:"published,omitempty"`
}

// PublishedAnomaly is one of Collie's published anomalies (seeds/003, table 2): its number, the symptom the paper
// reports and its title.
type PublishedAnomaly struct {
	ID      int    `json:"id"`
	Symptom string `json:"symptom"`
	Title   string `json:"title"`
}

// WorkloadHost is one NIC's view: goodput it sent and received, its pause ratio and counters per second.
type WorkloadHost struct {
	Host       string            `json:"host"` // requester (host A) or responder (host B)
	NIC        string            `json:"nic"`
	PauseRatio float64           `json:"pause_duration_ratio"`
	TxGbps     float64           `json:"tx_goodput_gbps"`
	RxGbps     float64           `json:"rx_goodput_gbps"`
	TxMpps     float64           `json:"tx_goodput_mpps"`
	RxMpps     float64           `json:"rx_goodput_mpps"`
	Counters   map[string]uint64 `json:"counters_per_second"`
}
