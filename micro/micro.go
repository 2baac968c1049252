package micro

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
)

// Workload values (scenario.Workload's Direction and Memory).
const (
	DirUni      = "uni"
	DirBi       = "bi"
	DirLoopback = "loopback"

	MemLocal          = "local"
	MemRemoteNUMA     = "remote-numa"
	MemGPUSameSwitch  = "gpu-same-switch"
	MemGPUCrossSwitch = "gpu-cross-switch"
)

// Validate checks a workload; errors name the dimension and the accepted values.
// validateWorkload checks a workload against what the model can run.
func validateWorkload(w *scenario.Workload) error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	switch w.QPType {
	case "rc", "uc", "ud":
	default:
		bad("qp_type %q: want rc, uc or ud", w.QPType)
	}
	switch w.Opcode {
	case "send", "write", "read":
	default:
		bad("opcode %q: want send, write or read", w.Opcode)
	}
	if (w.QPType == "ud" && w.Opcode != "send") || (w.QPType == "uc" && w.Opcode == "read") {
		bad("opcode %s on a %s QP: UD carries only send, UC send or write", w.Opcode, w.QPType)
	}
	if w.NumQPs < 1 || w.NumQPs > 65536 {
		bad("num_qps %d: want 1..65536", w.NumQPs)
	}
	switch w.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		bad("mtu %d: want 256, 512, 1024, 2048 or 4096", w.MTU)
	}
	if w.WQEBatch < 1 || w.WQEBatch > 1024 {
		bad("wqe_batch %d: want 1..1024", w.WQEBatch)
	}
	if w.SGE < 1 || w.SGE > 32 {
		bad("sge %d: want 1..32", w.SGE)
	}
	if w.WQDepth < 1 || w.WQDepth > 32768 {
		bad("wq_depth %d: want 1..32768", w.WQDepth)
	} else if w.WQDepth < w.WQEBatch {
		bad("wq_depth %d is below wqe_batch %d: a batch must fit in the queue", w.WQDepth, w.WQEBatch)
	}
	if w.NumMRs < 1 || w.NumMRs > 1<<20 {
		bad("num_mrs %d: want 1..1048576", w.NumMRs)
	}
	if w.MRSize < 1 || w.MRSize > 1<<34 {
		bad("mr_size %d: want 1..2^34 bytes", w.MRSize)
	}
	if len(w.MsgSizes) == 0 || len(w.MsgSizes) > 64 {
		bad("msg_sizes has %d entries: want 1..64", len(w.MsgSizes))
	}
	for i, s := range w.MsgSizes {
		if s < 1 || s > 1<<30 {
			bad("msg_sizes[%d] = %d: want 1..2^30 bytes", i, s)
		}
	}
	switch w.Direction {
	case DirUni, DirBi, DirLoopback:
	default:
		bad("direction %q: want uni, bi or loopback", w.Direction)
	}
	switch w.Memory {
	case MemLocal, MemRemoteNUMA, MemGPUSameSwitch, MemGPUCrossSwitch:
	default:
		bad("memory %q: want local, remote-numa, gpu-same-switch or gpu-cross-switch", w.Memory)
	}
	if len(errs) > 0 {
		return errors.New("invalid workload: " + strings.Join(errs, "; "))
	}
	return nil
}

// WorkloadConfig is one run of the micro-architecture model: two hosts (A = 0, B = 1) with the given NIC
// profiles (both need a micro section), one switch, one workload, measured over a window in steady state.
type WorkloadConfig struct {
	Seed     uint64
	Profiles [2]*rnic.Profile
	Workload scenario.Workload
	// LinkGbps is the cable speed (0: the slower NIC's link-gbps); PropagationNs and SwitchLatencyNs as in
	// Config (0: DefaultPropagationNs, DefaultSwitchLatencyNs).
	LinkGbps        float64
	PropagationNs   int64
	SwitchLatencyNs int64
	// SwitchXoffBytes is the switch's per-ingress PFC threshold (0: 256 KB): past it the switch pauses the
	// sending NIC, so a NIC that pauses the switch slows its peer instead of losing packets.
	SwitchXoffBytes int
	// WarmupNs runs before the window opens (0: 200 us); MeasureNs is the window (0: 500 us).
	WarmupNs, MeasureNs int64
	// MaxEvents bounds the run (0: 50 M).
	MaxEvents uint64
}

// WorkloadResult is what one workload run measured inside the window.
type WorkloadResult struct {
	WindowNs int64
	// Hosts are A (0) and B (1).
	Hosts [2]MicroStats
	// LimitGbps is the line rate; LimitMpps the packets/s limit for this workload's packet sizes and QPs (the
	// lowest of the NIC's packet rate, its per-QP message rate times the QPs per direction, and the line rate
	// in packets of the workload's mean wire size).
	LimitGbps, LimitMpps float64
	// WindowGbps and WindowMpps bound what the workload itself can carry: its outstanding work requests
	// (QPs x queue depth, READs capped at the QP's read limit) over one unloaded round trip of a message
	// (WindowRTTNs: the model itself, one connection with one message in flight). For a workload below 95% of
	// both limits, the round trip is the longer one that one of its QPs alone, at its depth and batch, runs
	// at, where that leaves its QPs short of the line limits (a QP overlaps its messages only as far as its own
	// pipeline lets it). A workload that keeps too little in flight to fill the link is slow by design, not
	// because of the NIC.
	WindowGbps, WindowMpps float64
	WindowRTTNs            float64
	Events                 uint64
}

// Collie's anomaly thresholds (seeds/003 §5.2, spec/nic-microarchitecture.md), which `lumina run` of a
// workload and the search's default monitor both apply: a pause duration ratio above AnomalyPauseRatio, or
// throughput more than AnomalyLowFraction below both the bits/s and the packets/s Limits without pause.
const (
	AnomalyPauseRatio  = 0.001
	AnomalyLowFraction = 0.2
)

// Judged is what lumina run of a workload and the trigger tests judge: the worse pause ratio of the two NICs and
// the busier host's goodput (the larger of its transmitted and received, bits/s and packets/s apart).
func (r *WorkloadResult) Judged() (pause, gbps, mpps float64) {
	for i := range r.Hosts {
		h := &r.Hosts[i]
		pause = max(pause, r.PauseRatio(i))
		gbps = max(gbps, r.Gbps(h.GoodTxBytes), r.Gbps(h.GoodRxBytes))
		mpps = max(mpps, r.Mpps(h.GoodTxPackets), r.Mpps(h.GoodRxPackets))
	}
	return pause, gbps, mpps
}

// Thresholds are an anomaly monitor's: a pause duration ratio above Pause, or throughput more than Low (a
// fraction) below both limits without pause. DefaultThresholds are Collie's.
type Thresholds struct{ Pause, Low float64 }

// DefaultThresholds are AnomalyPauseRatio and AnomalyLowFraction.
var DefaultThresholds = Thresholds{Pause: AnomalyPauseRatio, Low: AnomalyLowFraction}

// Classify is the one comparison behind every anomaly verdict (lumina run of a workload, the search's
// monitor, the calibration benchmark): "pause", "low-throughput" or "" (normal) for a measured pause ratio and
// throughput (bits/s and packets/s of the direction the caller judges) against the limits. Without a limit
// (0) low throughput cannot be judged and is not reported.
func (t Thresholds) Classify(pauseRatio, gbps, mpps, limitGbps, limitMpps float64) string {
	if pauseRatio > t.Pause {
		return "pause"
	}
	if limitGbps <= 0 || limitMpps <= 0 {
		return ""
	}
	if bar := 1 - t.Low; gbps < bar*limitGbps && mpps < bar*limitMpps {
		return "low-throughput"
	}
	return ""
}

// Limits are what the workload can reach on this subsystem: the NIC's and the line's limits, and no more than
// what the workload keeps in flight can carry. Throughput is judged against these (Collie's monitor: low when
// more than 20% below both), by `lumina run` of a workload and by the search alike.
func (r *WorkloadResult) Limits() (gbps, mpps float64) {
	return min(r.LimitGbps, r.WindowGbps), min(r.LimitMpps, r.WindowMpps)
}

// MicroStats are one NIC's counters over the window. Bytes count whole wire frames (with preamble and
// inter-frame gap), so a saturated link shows its line rate.
type MicroStats struct {
	TxBytes, TxPackets uint64 // every frame the NIC transmitted (data, requests, ACKs)
	RxBytes, RxPackets uint64 // every frame the NIC received, loopback included
	// GoodTx*: data frames this NIC sent that the receiver accepted (placed in memory); GoodRx*: data frames
	// this NIC accepted. Drops and go-back-N discards are not counted.
	GoodTxBytes, GoodTxPackets uint64
	GoodRxBytes, GoodRxPackets uint64
	// TxPauseNs is how long this NIC paused its switch port (tx_prioN_pause_duration); RxPauseNs how long
	// the switch paused it.
	TxPauseNs, RxPauseNs int64
	PausePrio            int
	// Diagnostic counters.
	RxWQECacheMiss     uint64 // receive-WQE lookups that missed the cache
	QPCCacheMiss       uint64 // QP-context lookups that missed
	MTTCacheMiss       uint64 // memory-translation lookups that missed
	RxOutOfBuffer      uint64 // messages dropped for want of a ready receive WQE
	RxDiscards         uint64 // frames dropped at a full RX buffer
	NAKs               uint64 // RC go-back-N restarts this NIC requested
	PCIeBackPressureNs int64  // time DMA reads waited for a PCIe read tag
	// StagingRefetchBytes: payload read again because its packet staging was evicted (tx.staging-bytes).
	StagingRefetchBytes uint64
	RxBufferMaxBytes    int
	RxBufferAvgBytes    float64
}

// Counters returns the statistics under vendor counter names (mlx5 ethtool names where they exist; the
// diagnostic ones follow Collie's NeoHost descriptions), per second of window, except occupancy in bytes.
// Pause durations are in microseconds per second, back-pressure in nanoseconds per second.
func (m *MicroStats) Counters(windowNs int64) []rnic.Counter {
	return m.counters(func(v float64) uint64 {
		if windowNs <= 0 {
			return 0
		}
		return uint64(math.Round(v * 1e9 / float64(windowNs)))
	})
}

// Totals returns the same counters as window totals (pause in microseconds, back-pressure in nanoseconds).
func (m *MicroStats) Totals() []rnic.Counter {
	return m.counters(func(v float64) uint64 { return uint64(math.Round(v)) })
}

func (m *MicroStats) counters(per func(float64) uint64) []rnic.Counter {
	p := fmt.Sprint(m.PausePrio)
	return []rnic.Counter{
		{Name: "tx_vport_rdma_unicast_bytes", Value: per(float64(m.TxBytes))},
		{Name: "tx_vport_rdma_unicast_packets", Value: per(float64(m.TxPackets))},
		{Name: "rx_vport_rdma_unicast_bytes", Value: per(float64(m.RxBytes))},
		{Name: "rx_vport_rdma_unicast_packets", Value: per(float64(m.RxPackets))},
		{Name: "tx_prio" + p + "_pause_duration", Value: per(float64(m.TxPauseNs) / 1000)},
		{Name: "rx_prio" + p + "_pause_duration", Value: per(float64(m.RxPauseNs) / 1000)},
		{Name: "rx_wqe_cache_miss", Value: per(float64(m.RxWQECacheMiss))},
		{Name: "qpc_cache_miss", Value: per(float64(m.QPCCacheMiss))},
		{Name: "mtt_cache_miss", Value: per(float64(m.MTTCacheMiss))},
		{Name: "rx_out_of_buffer", Value: per(float64(m.RxOutOfBuffer))},
		{Name: "rx_discards_phy", Value: per(float64(m.RxDiscards))},
		{Name: "packet_seq_err", Value: per(float64(m.NAKs))},
		{Name: "pcie_internal_back_pressure", Value: per(float64(m.PCIeBackPressureNs))},
		{Name: "tx_staging_refetch_bytes", Value: per(float64(m.StagingRefetchBytes))},
		{Name: "rx_buffer_max_bytes", Value: uint64(m.RxBufferMaxBytes)},
		{Name: "rx_buffer_avg_bytes", Value: uint64(math.Round(m.RxBufferAvgBytes))},
	}
}

// PauseRatio is the fraction of the window this NIC paused its port.
func (r *WorkloadResult) PauseRatio(host int) float64 {
	if r.WindowNs <= 0 {
		return 0
	}
	return float64(r.Hosts[host].TxPauseNs) / float64(r.WindowNs)
}

// Gbps converts window bytes to Gb/s; Mpps window packets to millions per second.
func (r *WorkloadResult) Gbps(bytes uint64) float64 {
	if r.WindowNs <= 0 {
		return 0
	}
	return float64(bytes) * 8 / float64(r.WindowNs)
}

// Mpps converts a window packet count to millions of packets per second.
func (r *WorkloadResult) Mpps(pkts uint64) float64 {
	if r.WindowNs <= 0 {
		return 0
	}
	return float64(pkts) * 1e3 / float64(r.WindowNs)
}
