package rnic

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// Profile is one NIC model as data: every measured behavior the simulator reproduces is a parameter here, so a
// user can describe a card we have never seen by writing a file (rnic/profiles/*.yaml are the shipped ones, each
// value commented with its source). Fields marked (netsim) are applied by the NIC timing model, not by the QP.
type Profile struct {
	Name        string  `yaml:"name"`
	Vendor      string  `yaml:"vendor"` // nvidia | intel | rxe | ideal: selects the counter names
	Description string  `yaml:"description"`
	LinkGbps    float64 `yaml:"link-gbps"` // (netsim) port speed
	// MigReq is the value this NIC puts in BTH.MigReq (NVIDIA 1, E810 0).
	MigReq bool `yaml:"migreq"`
	// Transport is go-back-n (every real card) or irn (selective repeat, seed 002).
	Transport string `yaml:"transport"`
	// QPTypes are the QP types the NIC's driver can create (rc, uc, ud); empty: all three. A workload of another
	// type is refused, and a search on the profile never proposes one (creating the QP fails on that NIC).
	QPTypes []string `yaml:"qp-types,omitempty"`

	Ack      AckPolicy      `yaml:"ack"`
	Timing   Timing         `yaml:"timing"`
	Timeout  TimeoutModel   `yaml:"timeout"`
	CNP      CNPModel       `yaml:"cnp"`
	DCQCN    DCQCNParams    `yaml:"dcqcn"`
	Counters CounterModel   `yaml:"counters"`
	Noisy    NoisyNeighbor  `yaml:"noisy-neighbor"`
	APM      APMSlowPath    `yaml:"apm-slow-path"`
	ETS      ETSModel       `yaml:"ets"`
	IRN      IRNParams      `yaml:"irn"`
	Defaults RoCEParameters `yaml:"defaults"`
	// Micro is the NIC's micro-architecture (caches, PCIe, processing units, RX buffer and PFC, host
	// topology) used by netsim's workload model; nil when the profile does not describe it.
	Micro *MicroArch `yaml:"micro,omitempty"`
	// Faults is test-only fault injection (faults.go): a profile for a NIC we have not seen may carry a known
	// bug to check the checkers. Shipped profiles carry none.
	Faults []string `yaml:"faults,omitempty"`
}

// Transports.
const (
	TransportGoBackN = "go-back-n"
	TransportIRN     = "irn"
)

// ACK policy modes.
const (
	AckModeAckReq   = "ack-req"  // ACK every packet that carries AckReq
	AckModeCoalesce = "coalesce" // ACK every N accepted packets and every message's last packet
	AckModeMessage  = "message"  // ACK only the last packet of each message
	AckModeEvery    = "every"    // ACK every accepted packet
)

// AckPolicy says when the responder acknowledges and when the requester asks it to.
type AckPolicy struct {
	Mode string `yaml:"mode"`
	// Every is N for coalesce mode.
	Every int `yaml:"every"`
	// AckReqEvery: the requester sets AckReq on the last packet of every message and on every AckReqEvery-th
	// packet of a message (0: last packet only).
	AckReqEvery int `yaml:"ack-req-every"`
}

// Timing holds the NIC's processing delays in nanoseconds. (netsim) applies all of them: it delays delivering a
// packet to the QP or holds the QP's output packet; the QP logic itself is instantaneous.
type Timing struct {
	RxProcessingNs  int64 `yaml:"rx-processing-ns"` // per packet, before the transport sees it
	AckGenerationNs int64 `yaml:"ack-generation-ns"`
	// NAKGenerationNs: first out-of-order arrival -> NAK leaves (Write/Send).
	NAKGenerationNs int64 `yaml:"nak-generation-ns"`
	// NAKGenerationTailNs applies instead when the gap is within the last NAKGenerationTailPackets packets of a
	// message (cx4lx: up to ~13 us); 0 packets disables it.
	NAKGenerationTailNs      int64 `yaml:"nak-generation-tail-ns"`
	NAKGenerationTailPackets int   `yaml:"nak-generation-tail-packets"`
	// ReadNAKGenerationNs: gap in READ responses -> the re-issued READ request leaves the requester.
	ReadNAKGenerationNs int64 `yaml:"read-nak-generation-ns"`
	// NAKReactionMinNs..MaxNs: NAK reaches the sender -> first retransmitted packet (uniform in the range).
	NAKReactionMinNs int64 `yaml:"nak-reaction-min-ns"`
	NAKReactionMaxNs int64 `yaml:"nak-reaction-max-ns"`
	// Transmit pipeline depth that retransmissions queue behind (0 = none); packets or bytes, whichever is set.
	TxPipelinePackets int `yaml:"tx-pipeline-packets"`
	TxPipelineBytes   int `yaml:"tx-pipeline-bytes"`
}

// Timeout modes.
const (
	TimeoutModeScan = "scan" // non-adaptive: coarse timer, parameters below
	TimeoutModeSpec = "spec" // exactly 4.096 us * 2^timeout (the ideal NIC)
)

// TimeoutModel describes the local ACK timeout the card really applies. Factors multiply the IB minimum
// 4.096 us * 2^timeout; adaptive values were measured at timeout = ReferenceTimeout and scale with 2^(t-ref).
type TimeoutModel struct {
	Mode string `yaml:"mode"`
	// Non-adaptive: the first timeout after progress is uniform in [FirstMinFactor, FirstMaxFactor] x minimum,
	// later ones LaterFactor x minimum.
	FirstMinFactor float64 `yaml:"first-min-factor"`
	FirstMaxFactor float64 `yaml:"first-max-factor"`
	LaterFactor    float64 `yaml:"later-factor"`
	// Adaptive retransmission (NVIDIA). Supported says the card has the mode at all.
	AdaptiveSupported bool  `yaml:"adaptive-supported"`
	ReferenceTimeout  uint8 `yaml:"reference-timeout"`
	ReferenceRetryCnt uint8 `yaml:"reference-retry-cnt"`
	// FirstMessageNs are the successive timeouts of the first message that times out; past the end the last
	// value doubles up to LaterNs.
	FirstMessageNs []int64 `yaml:"first-message-ns"`
	// NextMessageFirstNs[i] is the first timeout of the (i+2)-th message that times out; the last repeats.
	NextMessageFirstNs []int64 `yaml:"next-message-first-ns"`
	// LaterNs is every further timeout of the 2nd and later messages.
	LaterNs int64 `yaml:"later-ns"`
	// MaxRetries[i] is the retry limit of the (i+1)-th message that times out, measured at ReferenceRetryCnt;
	// the limit applied is MaxRetries[i] + (retry_cnt - ReferenceRetryCnt). The last entry repeats.
	MaxRetries []int `yaml:"max-retries"`
	// RetryCnt7Infinite: retry_cnt 7 means retry forever (Soft-RoCE's completer never decrements it; the IB
	// spec gives 7 that meaning for rnr_retry only).
	RetryCnt7Infinite bool `yaml:"retry-cnt-7-infinite,omitempty"`
	// ReadGapWaitsForTimer: a gap in READ responses is not acted on; the READ is re-issued from its first
	// missing PSN only when the retransmit timer fires (Soft-RoCE on kernel 7.3, measured).
	ReadGapWaitsForTimer bool `yaml:"read-gap-waits-for-timer,omitempty"`
}

// CNP limiter scopes.
const (
	ScopePort   = "port"
	ScopeDestIP = "dest-ip"
	ScopeQP     = "qp"
)

// CNPModel is the notification point's CNP generation.
type CNPModel struct {
	// None: the NIC has no notification point at all (Soft-RoCE): CE marks and NAKs never produce a CNP,
	// whatever dcqcn-np-enable says.
	None                 bool   `yaml:"none,omitempty"`
	Scope                string `yaml:"scope"`
	IntervalNs           int64  `yaml:"interval-ns"`
	IntervalConfigurable bool   `yaml:"interval-configurable"` // false: min-time-between-cnps is ignored
	NAKTriggersCNP       bool   `yaml:"nak-triggers-cnp"`
	DSCP                 uint8  `yaml:"dscp"`
	UDPSrcPort           uint16 `yaml:"udp-src-port"`
}

// DCQCNParams are the reaction point's parameters (NVIDIA firmware names in comments).
type DCQCNParams struct {
	RateReduceMonitorPeriodNs int64   `yaml:"rate-reduce-monitor-period-ns"` // rate_reduce_monitor_period
	TimeResetNs               int64   `yaml:"time-reset-ns"`                 // rpg_time_reset
	ByteReset                 int64   `yaml:"byte-reset"`                    // rpg_byte_reset
	G                         float64 `yaml:"g"`                             // dce_tcp_g (1019/1024)
	AlphaPeriodNs             int64   `yaml:"alpha-period-ns"`               // dce_tcp_rtt
	InitialAlpha              float64 `yaml:"initial-alpha"`                 // initial_alpha_value / 1023
	AIRateMbps                float64 `yaml:"ai-rate-mbps"`                  // rpg_ai_rate
	HAIRateMbps               float64 `yaml:"hai-rate-mbps"`                 // rpg_hai_rate
	MinDecFac                 float64 `yaml:"min-dec-fac"`                   // rpg_min_dec_fac (fraction kept at most cut)
	MinRateMbps               float64 `yaml:"min-rate-mbps"`                 // rpg_min_rate
	Threshold                 int     `yaml:"threshold"`                     // rpg_threshold (F): fast-recovery stages
	RateOnFirstCNPMbps        float64 `yaml:"rate-on-first-cnp-mbps"`        // rate_to_set_on_first_cnp (0 = cut)
}

// CounterModel lists the vendor's counter bugs, by name (see CounterBug* constants).
type CounterModel struct {
	Bugs []string `yaml:"bugs"`
}

// Counter bugs the profiles can carry.
const (
	BugCNPSentStuck        = "cnp-sent-stuck"           // e810: cnpSent never increases
	BugImpliedNAKStuckZero = "implied-nak-seq-err-zero" // cx4lx: implied_nak_seq_err stays 0
)

// NoisyNeighbor (netsim) is a shared slow path for READ-gap handling (cx4lx): each event takes ServiceNs; when
// more than BacklogThreshold events wait, the receive pipeline stalls for StallNs and arriving packets are
// discarded (rx_discards_phy).
type NoisyNeighbor struct {
	Enabled          bool  `yaml:"enabled"`
	ServiceNs        int64 `yaml:"service-ns"`
	BacklogThreshold int   `yaml:"backlog-threshold"`
	StallNs          int64 `yaml:"stall-ns"`
}

// APMSlowPath (netsim) is the receive slow path for packets with MigReq=0 on a QP's first message (cx5): each
// packet takes ServiceNs; past QueueLimit waiting packets, arrivals are discarded (rx_discards_phy).
type APMSlowPath struct {
	Enabled          bool  `yaml:"enabled"`
	ServiceNs        int64 `yaml:"service-ns"`
	QueueLimit       int   `yaml:"queue-limit"`
	FirstMessageOnly bool  `yaml:"first-message-only"`
}

// ETSModel (netsim) says whether the egress scheduler lends a queue's unused share to the others.
type ETSModel struct {
	WorkConserving bool `yaml:"work-conserving"`
}

// IRNParams are the selective-repeat transport's parameters (used when Transport is irn).
type IRNParams struct {
	BDPPackets      int   `yaml:"bdp-packets"`
	RTOLowNs        int64 `yaml:"rto-low-ns"`
	RTOHighNs       int64 `yaml:"rto-high-ns"`
	RTOLowThreshold int   `yaml:"rto-low-threshold"`
	ReadAcks        bool  `yaml:"read-acks"`
}

// RoCEParameters are the per-host switches a scenario's roce-parameters section overrides.
type RoCEParameters struct {
	DCQCNRPEnable   bool `yaml:"dcqcn-rp-enable"`
	DCQCNNPEnable   bool `yaml:"dcqcn-np-enable"`
	AdaptiveRetrans bool `yaml:"adaptive-retrans"`
	SlowRestart     bool `yaml:"slow-restart"`
}

//go:embed profiles/*.yaml
var profileFS embed.FS

// aliases are the reference implementation's NIC type names (scenario spec: any case).
var aliases = map[string]string{"cx4": "cx4lx", "cx5": "cx5", "cx6": "cx6dx", "e810": "e810"}

// ProfileNames returns the names of the embedded profiles, sorted.
func ProfileNames() []string {
	ents, err := profileFS.ReadDir("profiles")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// LoadProfile returns an embedded profile by name (case-insensitive; the reference's CX4/CX5/CX6/E810 work too)
// or, for a name ending in .yaml or .yml, the user's profile file. Unknown keys and invalid values are errors
// naming the file and line.
func LoadProfile(nameOrPath string) (*Profile, error) {
	low := strings.ToLower(nameOrPath)
	if strings.HasSuffix(low, ".yaml") || strings.HasSuffix(low, ".yml") {
		data, err := os.ReadFile(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("reading nic profile: %w", err)
		}
		return ParseProfile(nameOrPath, data)
	}
	name := low
	if a, ok := aliases[name]; ok {
		name = a
	}
	data, err := profileFS.ReadFile("profiles/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("unknown nic profile %q: want one of %s or a path to a .yaml file",
			nameOrPath, strings.Join(ProfileNames(), ", "))
	}
	return ParseProfile("rnic/profiles/"+name+".yaml", data)
}

// ProfileError is a problem in a profile file, positioned at the offending key when known.
type ProfileError struct {
	File string
	Line int // 0 when unknown
	Key  string
	Msg  string
}

func (e *ProfileError) Error() string {
	pos := e.File
	if e.Line > 0 {
		pos = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Key != "" {
		return fmt.Sprintf("%s: %s: %s", pos, e.Key, e.Msg)
	}
	return pos + ": " + e.Msg
}

// ParseProfile decodes and validates a profile; file names the source in errors.
func ParseProfile(file string, data []byte) (*Profile, error) {
	var p Profile
	if err := yaml.UnmarshalWithOptions(data, &p, yaml.Strict()); err != nil {
		pe := &ProfileError{File: filepath.ToSlash(file), Msg: err.Error()}
		var ye yaml.Error
		if errors.As(err, &ye) {
			pe.Msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				pe.Line = tk.Position.Line
			}
		}
		return nil, pe
	}
	if err := p.validate(); err != nil {
		err.File = filepath.ToSlash(file)
		err.Line = keyLine(data, err.Key)
		return nil, err
	}
	return &p, nil
}

// keyLine finds the line of a dotted key path (e.g. "timing.nak-generation-ns") in the document, 0 if absent.
func keyLine(data []byte, key string) int {
	if key == "" {
		return 0
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return 0
	}
	path, err := yaml.PathString("$." + key)
	if err != nil {
		return 0
	}
	n, err := path.FilterFile(f)
	if err != nil || n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

func verr(key, format string, a ...any) *ProfileError {
	return &ProfileError{Key: key, Msg: fmt.Sprintf(format, a...)}
}

// validate checks ranges and enumerations; it reports the first problem with the key that holds it.
func (p *Profile) validate() *ProfileError {
	for _, check := range []func() *ProfileError{p.validateBasics, p.validateTiming, p.validateTimeout, p.validateCNP,
		p.validateDCQCN, p.validateBehaviours} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateBasics checks the identity, link speed, transport and ACK policy.
func (p *Profile) validateBasics() *ProfileError {
	if p.Name == "" {
		return verr("name", "missing: want the profile's name")
	}
	switch p.Vendor {
	case "nvidia", "intel", "rxe", "ideal", "broadcom":
	default:
		return verr("vendor", "%q: want nvidia, intel, rxe, broadcom or ideal", p.Vendor)
	}
	if !(p.LinkGbps > 0) || p.LinkGbps > 1600 {
		return verr("link-gbps", "%v: want a speed in (0, 1600]", p.LinkGbps)
	}
	switch p.Transport {
	case TransportGoBackN, TransportIRN:
	default:
		return verr("transport", "%q: want go-back-n or irn", p.Transport)
	}
	switch p.Ack.Mode {
	case AckModeAckReq, AckModeMessage, AckModeEvery:
	case AckModeCoalesce:
		if p.Ack.Every < 1 {
			return verr("ack.every", "%d: coalesce mode needs every >= 1", p.Ack.Every)
		}
	default:
		return verr("ack.mode", "%q: want ack-req, coalesce, message or every", p.Ack.Mode)
	}
	if p.Ack.AckReqEvery < 0 {
		return verr("ack.ack-req-every", "%d: want >= 0", p.Ack.AckReqEvery)
	}
	if p.QPTypes != nil && len(p.QPTypes) == 0 {
		return verr("qp-types", "empty: want a list of rc, uc and ud (leave it out for all three)")
	}
	for i, t := range p.QPTypes {
		if !slices.Contains(AllQPTypes, t) {
			return verr(fmt.Sprintf("qp-types[%d]", i), "%q: want rc, uc or ud", t)
		}
		if slices.Contains(p.QPTypes[:i], t) {
			return verr(fmt.Sprintf("qp-types[%d]", i), "%q is listed twice", t)
		}
	}
	return nil
}

// AllQPTypes are the QP types a profile may list (its default: all of them).
var AllQPTypes = []string{"rc", "uc", "ud"}

// SupportedQPTypes returns the QP types the NIC can create, in rc, uc, ud order.
func (p *Profile) SupportedQPTypes() []string {
	if len(p.QPTypes) == 0 {
		return slices.Clone(AllQPTypes)
	}
	return slices.DeleteFunc(slices.Clone(AllQPTypes), func(t string) bool { return !slices.Contains(p.QPTypes, t) })
}

// SupportsQPType reports whether the NIC can create a QP of the type.
func (p *Profile) SupportsQPType(t string) bool { return slices.Contains(p.SupportedQPTypes(), t) }

// CheckQPType returns an error naming the field (qp_type) and the profile when the NIC cannot create QPs of the
// type, nil otherwise.
func (p *Profile) CheckQPType(t string) error {
	if p.SupportsQPType(t) {
		return nil
	}
	return fmt.Errorf("qp_type %s: profile %s cannot create %s QPs (its qp-types: %s)", t, p.Name,
		strings.ToUpper(t), strings.Join(p.SupportedQPTypes(), ", "))
}

// validateTiming checks the NIC delays.
func (p *Profile) validateTiming() *ProfileError {
	t := &p.Timing
	for _, f := range []struct {
		k string
		v int64
	}{{"rx-processing-ns", t.RxProcessingNs}, {"ack-generation-ns", t.AckGenerationNs},
		{"nak-generation-ns", t.NAKGenerationNs}, {"nak-generation-tail-ns", t.NAKGenerationTailNs},
		{"read-nak-generation-ns", t.ReadNAKGenerationNs}, {"nak-reaction-min-ns", t.NAKReactionMinNs},
		{"nak-reaction-max-ns", t.NAKReactionMaxNs}, {"nak-generation-tail-packets", int64(t.NAKGenerationTailPackets)},
		{"tx-pipeline-packets", int64(t.TxPipelinePackets)}, {"tx-pipeline-bytes", int64(t.TxPipelineBytes)}} {
		if f.v < 0 {
			return verr("timing."+f.k, "%d: want >= 0", f.v)
		}
	}
	if t.NAKReactionMaxNs < t.NAKReactionMinNs {
		return verr("timing.nak-reaction-max-ns", "%d is below nak-reaction-min-ns %d", t.NAKReactionMaxNs, t.NAKReactionMinNs)
	}
	return nil
}

// validateTimeout checks the retransmission timeout model, spec or scan, and adaptive retransmission.
func (p *Profile) validateTimeout() *ProfileError {
	to := &p.Timeout
	switch to.Mode {
	case TimeoutModeSpec:
	case TimeoutModeScan:
		if !(to.FirstMinFactor >= 1) || to.FirstMaxFactor < to.FirstMinFactor || !(to.LaterFactor >= 1) {
			return verr("timeout.first-min-factor", "factors %v..%v, later %v: want 1 <= first-min <= first-max and later >= 1",
				to.FirstMinFactor, to.FirstMaxFactor, to.LaterFactor)
		}
	default:
		return verr("timeout.mode", "%q: want scan or spec", to.Mode)
	}
	if to.AdaptiveSupported {
		if to.ReferenceTimeout < 1 || to.ReferenceTimeout > 31 {
			return verr("timeout.reference-timeout", "%d: want 1..31", to.ReferenceTimeout)
		}
		if len(to.FirstMessageNs) == 0 || len(to.NextMessageFirstNs) == 0 || len(to.MaxRetries) == 0 {
			return verr("timeout.first-message-ns", "adaptive mode needs first-message-ns, next-message-first-ns and max-retries")
		}
		for _, v := range append(append([]int64{to.LaterNs}, to.FirstMessageNs...), to.NextMessageFirstNs...) {
			if v <= 0 {
				return verr("timeout.first-message-ns", "%d: adaptive timeouts must be > 0", v)
			}
		}
		for _, v := range to.MaxRetries {
			if v < 0 || v > 64 {
				return verr("timeout.max-retries", "%d: want 0..64", v)
			}
		}
	} else if p.Defaults.AdaptiveRetrans {
		return verr("defaults.adaptive-retrans", "true, but timeout.adaptive-supported is false")
	}
	return nil
}

// validateCNP checks the CNP generator.
func (p *Profile) validateCNP() *ProfileError {
	switch p.CNP.Scope {
	case ScopePort, ScopeDestIP, ScopeQP:
	default:
		return verr("cnp.scope", "%q: want port, dest-ip or qp", p.CNP.Scope)
	}
	if p.CNP.IntervalNs < 0 {
		return verr("cnp.interval-ns", "%d: want >= 0", p.CNP.IntervalNs)
	}
	if p.CNP.DSCP > 63 {
		return verr("cnp.dscp", "%d: want 0..63", p.CNP.DSCP)
	}
	return nil
}

// validateDCQCN checks the reaction point's parameters.
func (p *Profile) validateDCQCN() *ProfileError {
	d := &p.DCQCN
	switch {
	case d.RateReduceMonitorPeriodNs <= 0:
		return verr("dcqcn.rate-reduce-monitor-period-ns", "%d: want > 0", d.RateReduceMonitorPeriodNs)
	case d.TimeResetNs <= 0:
		return verr("dcqcn.time-reset-ns", "%d: want > 0", d.TimeResetNs)
	case d.ByteReset <= 0:
		return verr("dcqcn.byte-reset", "%d: want > 0", d.ByteReset)
	case !(d.G > 0 && d.G < 1):
		return verr("dcqcn.g", "%v: want 0 < g < 1", d.G)
	case d.AlphaPeriodNs <= 0:
		return verr("dcqcn.alpha-period-ns", "%d: want > 0", d.AlphaPeriodNs)
	case !(d.InitialAlpha >= 0 && d.InitialAlpha <= 1):
		return verr("dcqcn.initial-alpha", "%v: want 0..1", d.InitialAlpha)
	case !(d.MinDecFac > 0 && d.MinDecFac <= 1):
		return verr("dcqcn.min-dec-fac", "%v: want 0 < f <= 1", d.MinDecFac)
	case !(d.MinRateMbps > 0) || d.MinRateMbps > p.LinkGbps*1000:
		return verr("dcqcn.min-rate-mbps", "%v: want > 0 and below the link speed", d.MinRateMbps)
	case d.AIRateMbps < 0 || d.HAIRateMbps < 0 || math.IsNaN(d.AIRateMbps) || math.IsNaN(d.HAIRateMbps):
		return verr("dcqcn.ai-rate-mbps", "%v / %v: want >= 0", d.AIRateMbps, d.HAIRateMbps)
	case d.Threshold < 1:
		return verr("dcqcn.threshold", "%d: want >= 1", d.Threshold)
	case d.RateOnFirstCNPMbps < 0:
		return verr("dcqcn.rate-on-first-cnp-mbps", "%v: want >= 0", d.RateOnFirstCNPMbps)
	}
	return nil
}

// validateBehaviours checks the modeled quirks (counter bugs, noisy neighbor, APM slow path, faults), the
// micro-architecture section and IRN.
func (p *Profile) validateBehaviours() *ProfileError {
	for i, b := range p.Counters.Bugs {
		switch b {
		case BugCNPSentStuck, BugImpliedNAKStuckZero:
		default:
			return verr(fmt.Sprintf("counters.bugs[%d]", i), "%q: want %s or %s", b, BugCNPSentStuck, BugImpliedNAKStuckZero)
		}
	}
	if p.Noisy.Enabled && (p.Noisy.ServiceNs <= 0 || p.Noisy.BacklogThreshold < 1 || p.Noisy.StallNs < 0) {
		return verr("noisy-neighbor", "enabled with service-ns %d, backlog-threshold %d, stall-ns %d: want > 0, >= 1, >= 0",
			p.Noisy.ServiceNs, p.Noisy.BacklogThreshold, p.Noisy.StallNs)
	}
	if p.APM.Enabled && (p.APM.ServiceNs <= 0 || p.APM.QueueLimit < 1) {
		return verr("apm-slow-path", "enabled with service-ns %d, queue-limit %d: want > 0 and >= 1",
			p.APM.ServiceNs, p.APM.QueueLimit)
	}
	if err := p.validateFaults(); err != nil {
		return err
	}
	if p.Micro != nil {
		if err := p.Micro.validate(); err != nil {
			return err
		}
	}
	if p.Transport == TransportIRN {
		i := &p.IRN
		if i.BDPPackets < 1 || i.RTOLowNs <= 0 || i.RTOHighNs < i.RTOLowNs || i.RTOLowThreshold < 0 {
			return verr("irn", "bdp-packets %d, rto-low-ns %d, rto-high-ns %d, rto-low-threshold %d: want >= 1, > 0, >= rto-low, >= 0",
				i.BDPPackets, i.RTOLowNs, i.RTOHighNs, i.RTOLowThreshold)
		}
	}
	return nil
}

// LineRateBps is the link speed in bits per second.
func (p *Profile) LineRateBps() float64 { return p.LinkGbps * 1e9 }

// HasBug reports whether the profile carries the named counter bug.
func (p *Profile) HasBug(name string) bool {
	for _, b := range p.Counters.Bugs {
		if b == name {
			return true
		}
	}
	return false
}

// CNPInterval returns the NP limiter interval: the configured min-time-between-cnps (us, negative = unset) when
// the card lets users configure it, else the profile's fixed value.
func (p *Profile) CNPInterval(configuredUs float64) int64 {
	if p.CNP.IntervalConfigurable && configuredUs >= 0 {
		return int64(configuredUs * 1000)
	}
	return p.CNP.IntervalNs
}

// MicroArch (netsim workload model) is what Collie's anomalies depend on inside an RDMA subsystem (seeds/003
// figure 1, spec/nic-microarchitecture.md): every resource a request crosses, as parameters. Times in ns,
// bandwidths in Gb/s, sizes in bytes.
type MicroArch struct {
	// MaxMpps is the NIC's packet-rate limit (the "packets/s limit" low throughput is judged against).
	MaxMpps float64 `yaml:"max-mpps"`
	// MaxMppsPerQP is the message rate one QP reaches (its WQEs go through the NIC in order): the packets/s
	// limit of a workload with n QPs per direction is at most n times this (0: no per-QP bound).
	MaxMppsPerQP float64    `yaml:"max-mpps-per-qp"`
	PCIe         MicroPCIe  `yaml:"pcie"`
	Tx           MicroTx    `yaml:"tx"`
	Rx           MicroRx    `yaml:"rx"`
	Cache        MicroCache `yaml:"cache"`
	Host         MicroHost  `yaml:"host"`
}

// MicroPCIe is the NIC's PCIe link: DMA reads (WQE fetches, cache misses, payload) share the read channel and
// its outstanding-read tags; DMA writes (received payload) use the write channel.
type MicroPCIe struct {
	ReadGbps            float64 `yaml:"read-gbps"`
	WriteGbps           float64 `yaml:"write-gbps"`
	ReadLatencyNs       int64   `yaml:"read-latency-ns"`
	WriteLatencyNs      int64   `yaml:"write-latency-ns"`
	MaxOutstandingReads int     `yaml:"max-outstanding-reads"`
	// ReadRequestBytes splits payload reads into PCIe read requests (max read request size); each holds a tag.
	ReadRequestBytes int `yaml:"read-request-bytes"`
	// RelaxedOrdering off: a DMA write may not pass DMA read completions issued before it.
	RelaxedOrdering bool `yaml:"relaxed-ordering"`
	// OrderedShortRequests narrows what relaxed ordering off holds back: the DMA engine keeps its requests in
	// one order, so the write of a message received whole in one packet (a short request) waits behind the
	// payload reads queued before it that still wait for a read tag (until earlier reads' completions return
	// one), and the writes after it wait behind it; longer messages' writes stream past waiting reads (PCIe lets
	// posted writes pass read requests) but not past an earlier write. false: every write waits for the
	// completions of the payload reads issued before it.
	OrderedShortRequests bool `yaml:"ordered-short-requests"`
	// RxReadQueueBytes > 0: a QP-context read of the receive path waits in one DMA read queue behind the
	// payload reads the transmit path queued, up to this many bytes of them, and the packet processor waits
	// with it; 0: context, translation and WQE reads are arbitrated ahead of payload reads.
	RxReadQueueBytes int `yaml:"rx-read-queue-bytes"`
	// RxReadQueueRelease: a queued context read of received data holds its rx.qpc-miss-slot only while it waits
	// in the queue; issued, its round trip runs on rx.data-qpc-miss-slots like the other reads of received data
	// (false: it holds the qpc-miss-slot until its data is back).
	RxReadQueueRelease bool `yaml:"rx-read-queue-release"`
	// RxReadQueueBatch > 0: a context read of the receive path queues behind payload reads (rx-read-queue-bytes)
	// only when the applications post batches of at least this many WQEs: a doorbell announcing more WQEs than
	// one WQE read holds has its later WQE reads, with which context reads are arbitrated, queued between its
	// payload reads; a smaller doorbell's WQEs are all read before its payload (0: every batch).
	RxReadQueueBatch int `yaml:"rx-read-queue-batch"`
	// WriteTLPBytes is the header each DMA write TLP (at most 256 B of payload) carries: write-gbps being the
	// payload rate of full TLPs, a shorter one takes its payload and this header at the link's raw rate (0: the
	// write channel carries payload at write-gbps whatever the TLP size).
	WriteTLPBytes int `yaml:"write-tlp-bytes"`
	// OrderedShortBytes > 0: with ordered-short-requests, the short requests are the messages of at most this
	// many bytes whatever the MTU: the receive DMA gathers such a message's packets into one write, which waits
	// as a one-packet message's does, and streams a longer message's packets as they come even when it arrives
	// in one packet (0: a short request is a message received whole in one packet).
	OrderedShortBytes int `yaml:"ordered-short-bytes"`
	// OrderedLongReads: with ordered-short-requests, a short request's write waits only behind the queued
	// payload reads of long messages (LongReadBytes and more); the reads of short messages do not hold it
	// (false: behind any payload read waiting for a tag).
	OrderedLongReads bool `yaml:"ordered-long-reads"`
	// OrderedLongBytes > 0: with ordered-long-reads, the long messages whose queued payload reads hold a short
	// request's write back are those of at least this many bytes (0: of more than ordered-short-bytes).
	OrderedLongBytes int `yaml:"ordered-long-bytes"`
	// OrderedMinSGE > 0: with ordered-short-requests, a short request's write waits only in a workload whose
	// WQEs gather at least this many SGEs (0: any).
	OrderedMinSGE int `yaml:"ordered-min-sge"`
}

// LongReadBytes is the size from which a message is long for ordered-long-reads: ordered-long-bytes, or else
// more than ordered-short-bytes.
func (p *MicroPCIe) LongReadBytes() int {
	if p.OrderedLongBytes > 0 {
		return p.OrderedLongBytes
	}
	return p.OrderedShortBytes + 1
}

// MicroTx is the transmit path: doorbell, WQE fetch, processing units, transmit buffer.
type MicroTx struct {
	DoorbellNs   int64 `yaml:"doorbell-ns"`    // doorbell handling (one serial engine)
	WQEBaseBytes int   `yaml:"wqe-base-bytes"` // WQE size without data segments
	WQESGEBytes  int   `yaml:"wqe-sge-bytes"`  // per scatter-gather entry
	Units        int   `yaml:"units"`          // processing units: WQEs in flight in the transmit pipeline
	WQENs        int64 `yaml:"wqe-ns"`         // unit time per WQE
	SGENs        int64 `yaml:"sge-ns"`         // unit time per SGE
	BufferBytes  int   `yaml:"buffer-bytes"`   // packetized bytes waiting for the wire; units wait past it
	// PktNs is the shared packet processor's time per transmitted packet (0: transmit does not use it).
	PktNs int64 `yaml:"pkt-ns"`
	// LoopbackGbps limits traffic between QPs of the same NIC through its internal switch (0: no limit).
	LoopbackGbps float64 `yaml:"loopback-gbps"`
	// LoopbackXoffBytes: loopback frames wait while the receive buffer holds this much, so traffic from the
	// wire keeps the receive path (0: they wait only at the port's XOFF, competing with the wire).
	LoopbackXoffBytes int `yaml:"loopback-xoff-bytes"`
	// RCDoorbellBurst: the transmit scheduler serves an RC QP for the WQEs one doorbell announced (its batch, up
	// to one WQE read of 16), back to back, before the next QP's turn (false: one WQE per QP in turn).
	RCDoorbellBurst bool `yaml:"rc-doorbell-burst"`
	// AckEveryPackets: the RC responder acknowledges every N packets and every message's last packet.
	AckEveryPackets int `yaml:"ack-every-packets"`
	// StagingBytes is the on-chip packet staging memory of a NIC that interleaves its connections packet by
	// packet: every connection with data in flight holds one packet per SGE stream on the sending NIC and one
	// packet on the receiving NIC. When they need more than this, the staged packets of a share 1 -
	// staging/demand are evicted before use and read again over PCIe (0: no such memory is modelled).
	StagingBytes int `yaml:"staging-bytes"`
	// BurstWQEs > 0: a unit takes the WQEs one doorbell announced (the post list, up to this many) as one
	// burst: one QP-context lookup for all of them, their translations looked up together (the misses read in
	// parallel), then each WQE parsed; 0: one WQE per unit, each with its own lookups one after another.
	BurstWQEs int `yaml:"burst-wqes"`
	// StagingMinSGE > 0: only packets gathered from at least this many SGEs are staged; the engine assembles
	// packets of fewer SGEs on the fly from their reads, so their connections hold no transmit staging and read
	// nothing again (0: every connection stages).
	StagingMinSGE int `yaml:"staging-min-sge"`
	// StagingMinMTU > 0: only packets of a path MTU of at least this many bytes are staged; smaller packets are
	// assembled on the fly like those of few SGEs (0: every MTU stages).
	StagingMinMTU int `yaml:"staging-min-mtu"`
	// DoorbellCoalesce: the doorbells one QP's application rings back to back (several post lists at once: the
	// initial fill of its queue, or the room a cumulative ACK frees) cost the doorbell engine one doorbell; the
	// later ones only move the producer index it holds (false: doorbell-ns each).
	DoorbellCoalesce bool `yaml:"doorbell-coalesce"`
	// LookupWait lists the kinds of work request, as transport-opcode ("rc-write", "ud-send", ...), whose
	// processing unit waits for its QP-context and translation misses (empty: every kind). The other kinds'
	// lookups run beside the unit: it takes its next WQE once this one is parsed, the misses are read and
	// counted all the same, and the payload read starts when they are back.
	LookupWait []string `yaml:"lookup-wait"`
}

// WQEKinds are the work-request kinds tx.lookup-wait names: a transport and an opcode it supports.
var WQEKinds = []string{"rc-write", "rc-send", "rc-read", "uc-write", "uc-send", "ud-send"}

// MicroRx is the receive path: RX buffer and PFC thresholds, the shared packet processor's cost per packet
// kind, the receive-WQE cache.
type MicroRx struct {
	BufferBytes  int   `yaml:"buffer-bytes"`
	XoffBytes    int   `yaml:"xoff-bytes"`
	XonBytes     int   `yaml:"xon-bytes"`
	PausePrio    int   `yaml:"pause-priority"`
	WriteNs      int64 `yaml:"write-ns"`       // RC/UC WRITE packet
	SendNs       int64 `yaml:"send-ns"`        // RC/UC SEND packet
	UDNs         int64 `yaml:"ud-ns"`          // UD SEND packet
	ReadReqNs    int64 `yaml:"read-req-ns"`    // READ request at the responder
	ReadRespNs   int64 `yaml:"read-resp-ns"`   // READ response packet at the requester
	AckNs        int64 `yaml:"ack-ns"`         // ACK/NAK received
	AckGenNs     int64 `yaml:"ack-gen-ns"`     // ACK generation (same unit)
	SGENs        int64 `yaml:"sge-ns"`         // per scatter entry of a message's first packet
	WQECacheSize int   `yaml:"wqe-cache"`      // receive WQEs the NIC caches (all QPs)
	WQEBytes     int   `yaml:"wqe-bytes"`      // receive WQE size per SGE
	PrefetchMin  int   `yaml:"prefetch-min"`   // WQEs prefetched per receive doorbell at least
	PrefetchMax  int   `yaml:"prefetch-max"`   // and at most
	PrefetchDiv  int   `yaml:"prefetch-div"`   // the prefetch is wq-depth / prefetch-div within [min, max]
	MissSlots    int   `yaml:"miss-slots"`     // messages that can wait for a receive-WQE fetch
	MissFetch    int   `yaml:"miss-fetch"`     // WQEs a demand fetch reads
	FetchSlots   int   `yaml:"fetch-slots"`    // receive-WQE fetches in flight at once (prefetch and demand)
	QPCMissSlots int   `yaml:"qpc-miss-slots"` // QP-context misses of received packets handled at once
	NAKDelayNs   int64 `yaml:"nak-delay-ns"`   // RC: drop -> the sender goes back (NAK generation and reaction)
	// ReadRespSGENs is the processor's time per scatter entry of a READ response message's first packet: the
	// requester scatters the response into its own READ WQE's SGE list, which the processor walks when the
	// response starts, where a received SEND's entries come with the receive WQE the WQE path already fetched
	// (0: only sge-ns, for every message).
	ReadRespSGENs int64 `yaml:"read-resp-sge-ns"`
	// ReadRespFirstNs, when set, is the processor's time for the first packet of a READ response message
	// (a single-packet response included), read-resp-ns being the time of each later one: a later packet's
	// place in the requester's buffer is found by walking the READ WQE's scatter list to the packet's offset
	// (PSN distance times the MTU), the first starts at its head (0: read-resp-ns for every packet).
	ReadRespFirstNs int64 `yaml:"read-resp-first-ns"`
	// ReadRespSpanBytes, when set with ReadRespFirstNs: the first packet's walk of the scatter list places the
	// response's first read-resp-span-bytes, so its later packets inside them cost read-resp-first-ns too; only
	// those beyond walk the list to their offset (read-resp-ns) (0: every later packet walks).
	ReadRespSpanBytes int `yaml:"read-resp-span-bytes"`
	// DataQPCMissSlots: QP-context misses of received WRITE/SEND data handled at once, when the NIC fetches the
	// contexts of received data apart from those of READ responses (0: qpc-miss-slots for every packet).
	DataQPCMissSlots int `yaml:"data-qpc-miss-slots"`
	// ReadRespContextDataSlots: with data-qpc-miss-slots, the context miss of a READ response message's first
	// packet is fetched on those slots too, as received WRITE/SEND data's, unless its QP's read state is looked
	// up packet by packet (read-resp-per-packet-qpc applies): those lookups, the first packet's included, stay on
	// qpc-miss-slots (false: every READ-response miss does).
	ReadRespContextDataSlots bool `yaml:"read-resp-context-data-slots"`
	// RCDataNs is an RC data packet's extra time on the packet processor over a UC one (PSN and acknowledgement
	// state), added to write-ns or send-ns.
	RCDataNs int64 `yaml:"rc-data-ns"`
	// RCStateEntries is how many QPs' RC transport state (PSNs, acknowledgement and retransmission state) the
	// shared packet processor keeps at hand; on a NIC with more QPs, their frames interleave and every RC data
	// frame, sent or received, costs it RCStateMissNs more to swap its QP's state in (0 entries: not modelled).
	RCStateEntries int   `yaml:"rc-state-entries"`
	RCStateMissNs  int64 `yaml:"rc-state-miss-ns"`
	// RCStateBatch > 0: the swap costs RCStateMissNs only when a QP's state carries a full WQE read-ahead, i.e.
	// when its doorbells announce at least this many WQEs at once (one WQE read takes up to 16); with smaller
	// batches only the PSN state moves and the swap is hidden (0: every batch).
	RCStateBatch int `yaml:"rc-state-batch"`
	// RCStateSenderOnly: the swap costs rc-state-miss-ns only on a NIC that transmits RC data (WRITE/SEND data or
	// READ responses) itself, whose state slots then hold QPs carrying a WQE read-ahead; on a NIC that only
	// receives RC data the slots hold receive state alone and the swap is hidden (false: on every NIC).
	RCStateSenderOnly bool `yaml:"rc-state-sender-only"`
	// ReadRespPerPacketQPC: every READ response packet needs its QP's context (read state), not only a
	// message's first; with the responses of more QPs than the context cache holds in flight (the responder
	// interleaves its QPs packet by packet) each such packet misses.
	ReadRespPerPacketQPC bool `yaml:"read-resp-per-packet-qpc"`
	// ReadRespQPCBatch: with read-resp-per-packet-qpc, only when a doorbell announces at least this many READs
	// (its batch, up to one WQE read of 16): the QP's read state for that many READs in flight together
	// outgrows what the first packet's context fetch brings in (0: every batch).
	ReadRespQPCBatch int `yaml:"read-resp-qpc-batch"`
	// ReadRespQPCMaxMTU > 0: with read-resp-per-packet-qpc, only at an MTU of at most this many bytes; the
	// placement of larger packets covers the read-state lookup (0: every MTU).
	ReadRespQPCMaxMTU int `yaml:"read-resp-qpc-max-mtu"`
	// MissFetchParked: a demand fetch reads at least as many WQEs as the QP has messages waiting for one (the
	// first frames parked; a message's later frames need none), within prefetch-max, so a QP's backlog waits
	// for one PCIe read, not one per message.
	MissFetchParked bool `yaml:"miss-fetch-parked"`
	// RCStateReadResp: a READ response frame the responder transmits swaps its QP's RC state in too
	// (rc-state-entries), as WRITE/SEND data frames do (false: only WRITE/SEND data).
	RCStateReadResp bool `yaml:"rc-state-read-resp"`
	// FetchWQENs > 0: the receive-WQE fetcher spends this long on every WQE it reads (prefetch or demand), one
	// WQE after another, besides the PCIe read.
	FetchWQENs int64 `yaml:"fetch-wqe-ns"`
	// BufferCellBytes > 0: the RX buffer is allocated in cells of this size, a frame taking whole cells (0: its
	// bytes).
	BufferCellBytes int `yaml:"buffer-cell-bytes"`
	// FetchEngines > 1: the receive-WQE fetcher parses this many fetches at once, each at fetch-wqe-ns a WQE
	// (0 or 1: one fetch after another).
	FetchEngines int `yaml:"fetch-engines"`
	// EvictWQENs > 0: every receive WQE the cache evicts unused holds its eviction port this long, and a fetch
	// completes only once the evictions before it are done.
	EvictWQENs int64 `yaml:"evict-wqe-ns"`
	// MissFetchDiv > 0: a demand fetch reads wq-depth / miss-fetch-div WQEs, within [miss-fetch, prefetch-max]
	// (0: miss-fetch WQEs).
	MissFetchDiv int `yaml:"miss-fetch-div"`
	// MissFetchBytes > 0: a demand fetch reads no more WQEs than the receive buffers of this many bytes hold,
	// each WQE posting a buffer of the workload's largest message (UD: at most the MTU), at least one (0: no
	// bound beyond prefetch-max).
	MissFetchBytes int `yaml:"miss-fetch-bytes"`
	// PrefetchDepthDiv > 0: a receive doorbell reads ahead no more than wq-depth / prefetch-depth-div WQEs, at
	// least one (0: prefetch-min..prefetch-max alone, whatever the depth).
	PrefetchDepthDiv int `yaml:"prefetch-depth-div"`
	// PrefetchLongDepth > 0: only a queue of at least this depth is read ahead wq-depth / prefetch-div WQEs; a
	// shorter one reads its doorbell's batch, at least prefetch-min (0: every queue by its depth).
	PrefetchLongDepth int `yaml:"prefetch-long-depth"`
	// WholeQPCache: the receive-WQE cache holds QPs rather than WQEs: making room evicts a QP's WQEs all at
	// once, and a receive doorbell prefetches only for a QP in the cache (the others are read on demand when
	// their next message arrives).
	WholeQPCache bool `yaml:"whole-qp-cache"`
	// WQEResident: every posted receive WQE is on the NIC when a message needs it, so receive-WQE lookups
	// never miss and no receive WQE is read over PCIe (false: the wqe-cache and its prefetch and miss paths).
	WQEResident bool `yaml:"wqe-resident"`
	// DemandFetchSlots > 0: a message that finds no cached receive WQE has its WQEs read by the receive
	// pipeline itself, this many such reads at once, instead of waiting for one of the prefetcher's
	// fetch-slots (0: demand and prefetch share fetch-slots).
	DemandFetchSlots int `yaml:"demand-fetch-slots"`
	// PrefetchDropBusy: a receive doorbell's prefetch that finds every fetch-slot busy is dropped instead of
	// waiting in line (a prefetch is a hint); the QP's WQEs are then read on demand when its next message
	// needs one.
	PrefetchDropBusy bool `yaml:"prefetch-drop-busy"`
	// DropBeforeFetch: a message that misses the receive-WQE cache while every miss-slot is taken is dropped
	// before a WQE read starts for it (false: the read starts, and fills the cache for no one).
	DropBeforeFetch bool `yaml:"drop-before-fetch"`
	// ColdMissFetch > 0: a message that misses the receive-WQE cache while no other frame of its QP waits for a
	// WQE reads this many WQEs (its own, and a few after it); miss-fetch is then what a QP whose frames pile up
	// behind a miss reads (0: every demand fetch reads miss-fetch).
	ColdMissFetch int `yaml:"cold-miss-fetch"`
	// PrefetchGrow > 1: a QP whose messages wait behind a receive-WQE miss (it ran dry under load) has its
	// read-ahead multiplied by this, up to prefetch-max, while half of that read-ahead (what a QP keeps on the
	// NIC, refilled at half) for every receive queue of the host fits the cache (0 or 1: the read-ahead stays
	// max(batch, depth / prefetch-div, prefetch-min)).
	PrefetchGrow int `yaml:"prefetch-grow"`
	// ShortQueuesResident: a receive queue whose read-ahead (its doorbell's batch, at least prefetch-min) stays
	// below prefetch-max has its WQEs on the NIC whenever a message needs one, as with wqe-resident: the
	// prefetch of each repost lands before the messages that use it. Only a long queue's read-ahead
	// (prefetch-long-depth, wq-depth / prefetch-div) or a batch of prefetch-max WQEs on a queue of at least
	// large-batch-depth takes the wqe-cache and its miss paths (false: every queue does).
	ShortQueuesResident bool `yaml:"short-queues-resident"`
	// LargeBatchDepth > 0: with short-queues-resident, a queue read ahead by prefetch-max WQEs (a batch that
	// large) but shorter than this keeps up too (0: none read ahead by prefetch-max does).
	LargeBatchDepth int `yaml:"large-batch-depth"`
	// MaxMpps > 0: received frames other than ACKs start on the packet processor at most this many million
	// per second, the NIC's packet rate on its receive side as max-mpps is on its transmit side (0: only the
	// processor's time per frame bounds them).
	MaxMpps float64 `yaml:"max-mpps"`
	// CQEBytes > 0: a received SEND message's completion entry, written to host memory after its last
	// packet's data (0: completions are not modelled).
	CQEBytes int `yaml:"cqe-bytes"`
	// WQECacheQPTypes lists the QP types ("rc", "uc", "ud") whose receive queues take the wqe-cache and its
	// prefetch and miss paths; the others' receive WQEs are on the NIC whenever a message needs one, as with
	// wqe-resident (empty: every type's).
	WQECacheQPTypes []string `yaml:"wqe-cache-qp-types"`
	// RCWQECacheMaxMTU > 0: an RC receive queue takes the wqe-cache only at MTUs up to this; at larger ones
	// its WQEs are on the NIC (0: at any MTU).
	RCWQECacheMaxMTU int `yaml:"rc-wqe-cache-max-mtu"`
	// RCWQECacheBytes > 0: the wqe-cache holds this many bytes of RC receive WQEs (wqe-bytes per SGE each), so
	// RC queues of fewer SGEs fit more WQEs (0: wqe-cache WQEs, whatever their SGEs).
	RCWQECacheBytes int `yaml:"rc-wqe-cache-bytes"`
}

// MicroCache is the NIC's context caches: QP contexts and memory translation entries; a miss is a PCIe read.
type MicroCache struct {
	QPCEntries   int `yaml:"qpc-entries"`
	QPCBytes     int `yaml:"qpc-bytes"`
	MTTEntries   int `yaml:"mtt-entries"`
	MTTPageBytes int `yaml:"mtt-page-bytes"`
	MTTBytes     int `yaml:"mtt-bytes"`
	// MTTResident: every memory translation the workload registered is resident on the NIC, so translation
	// lookups never miss (false: mtt-entries cached, a miss is a PCIe read of mtt-bytes).
	MTTResident bool `yaml:"mtt-resident"`
}

// MicroHost is the host topology around the NIC: payload in remote-socket or GPU memory changes DMA latency,
// and its bandwidth is capped by the path (one budget shared by reads and writes, unless duplex-path or a GPU
// write budget gives writes their own).
type MicroHost struct {
	RemoteNUMALatencyNs  int64   `yaml:"remote-numa-latency-ns"`
	RemoteNUMAGbps       float64 `yaml:"remote-numa-gbps"`
	GPUSameSwitchLatency int64   `yaml:"gpu-same-switch-latency-ns"`
	GPUSameSwitchGbps    float64 `yaml:"gpu-same-switch-gbps"`
	// GPUSameSwitchWriteGbps, when set, is the bandwidth of the NIC's posted writes into GPU memory under the
	// same switch, on a budget of their own (reads keep gpu-same-switch-gbps); 0: writes share the read budget.
	GPUSameSwitchWriteGbps float64 `yaml:"gpu-same-switch-write-gbps"`
	GPUCrossSwitchLatency  int64   `yaml:"gpu-cross-switch-latency-ns"`
	GPUCrossSwitchGbps     float64 `yaml:"gpu-cross-switch-gbps"`
	// GPUCrossSwitchWriteGbps, when set, gives the writes into GPU memory across the root complex a budget of
	// their own, as GPUSameSwitchWriteGbps does (0: they share gpu-cross-switch-gbps with the reads).
	GPUCrossSwitchWriteGbps float64 `yaml:"gpu-cross-switch-write-gbps"`
	// DuplexPath: the path carries DMA reads (toward the NIC) and writes (toward memory) each at its bandwidth,
	// as a full-duplex link does (false: one budget shared by both, as on a host whose path is its bottleneck);
	// a GPU write budget above, when set, takes precedence for its path.
	DuplexPath bool `yaml:"duplex-path"`
	// PathTLPBytes is what each TLP adds on the host path to remote-socket or GPU memory besides its payload
	// (header and framing), a TLP carrying at most pathTLPPayload bytes (0: the path carries payload only).
	PathTLPBytes int `yaml:"path-tlp-bytes"`
	// GPUSameSwitchWriteTLPNs is the time the root complex takes to forward each TLP of the NIC's posted writes
	// into GPU memory under the same switch, on top of gpu-same-switch-write-gbps (0: none).
	GPUSameSwitchWriteTLPNs int64 `yaml:"gpu-same-switch-write-tlp-ns"`
}

func (m *MicroArch) validate() *ProfileError {
	pos := []struct {
		k string
		v float64
	}{{"max-mpps", m.MaxMpps}, {"pcie.read-gbps", m.PCIe.ReadGbps}, {"pcie.write-gbps", m.PCIe.WriteGbps},
		{"pcie.max-outstanding-reads", float64(m.PCIe.MaxOutstandingReads)},
		{"pcie.read-request-bytes", float64(m.PCIe.ReadRequestBytes)}, {"tx.units", float64(m.Tx.Units)},
		{"tx.buffer-bytes", float64(m.Tx.BufferBytes)}, {"tx.ack-every-packets", float64(m.Tx.AckEveryPackets)},
		{"rx.buffer-bytes", float64(m.Rx.BufferBytes)}, {"rx.xoff-bytes", float64(m.Rx.XoffBytes)},
		{"rx.wqe-cache", float64(m.Rx.WQECacheSize)}, {"rx.prefetch-min", float64(m.Rx.PrefetchMin)},
		{"rx.prefetch-max", float64(m.Rx.PrefetchMax)}, {"rx.prefetch-div", float64(m.Rx.PrefetchDiv)},
		{"rx.miss-slots", float64(m.Rx.MissSlots)}, {"rx.miss-fetch", float64(m.Rx.MissFetch)},
		{"rx.fetch-slots", float64(m.Rx.FetchSlots)}, {"rx.qpc-miss-slots", float64(m.Rx.QPCMissSlots)},
		{"cache.qpc-entries", float64(m.Cache.QPCEntries)}, {"cache.mtt-entries", float64(m.Cache.MTTEntries)},
		{"cache.mtt-page-bytes", float64(m.Cache.MTTPageBytes)},
		{"host.remote-numa-gbps", m.Host.RemoteNUMAGbps}, {"host.gpu-same-switch-gbps", m.Host.GPUSameSwitchGbps},
		{"host.gpu-cross-switch-gbps", m.Host.GPUCrossSwitchGbps}}
	for _, f := range pos {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return verr("micro."+f.k, "%v: want > 0", f.v)
		}
	}
	nonneg := []struct {
		k string
		v int64
	}{{"pcie.read-latency-ns", m.PCIe.ReadLatencyNs}, {"pcie.write-latency-ns", m.PCIe.WriteLatencyNs},
		{"pcie.rx-read-queue-bytes", int64(m.PCIe.RxReadQueueBytes)},
		{"pcie.write-tlp-bytes", int64(m.PCIe.WriteTLPBytes)},
		{"pcie.ordered-short-bytes", int64(m.PCIe.OrderedShortBytes)},
		{"pcie.ordered-long-bytes", int64(m.PCIe.OrderedLongBytes)},
		{"pcie.ordered-min-sge", int64(m.PCIe.OrderedMinSGE)},
		{"pcie.rx-read-queue-batch", int64(m.PCIe.RxReadQueueBatch)},
		{"tx.doorbell-ns", m.Tx.DoorbellNs}, {"tx.wqe-base-bytes", int64(m.Tx.WQEBaseBytes)},
		{"tx.wqe-sge-bytes", int64(m.Tx.WQESGEBytes)}, {"tx.loopback-xoff-bytes", int64(m.Tx.LoopbackXoffBytes)},
		{"tx.staging-bytes", int64(m.Tx.StagingBytes)}, {"tx.burst-wqes", int64(m.Tx.BurstWQEs)},
		{"tx.staging-min-sge", int64(m.Tx.StagingMinSGE)}, {"tx.staging-min-mtu", int64(m.Tx.StagingMinMTU)},
		{"tx.wqe-ns", m.Tx.WQENs}, {"tx.sge-ns", m.Tx.SGENs},
		{"tx.pkt-ns", m.Tx.PktNs}, {"rx.xon-bytes", int64(m.Rx.XonBytes)}, {"rx.write-ns", m.Rx.WriteNs},
		{"rx.send-ns", m.Rx.SendNs}, {"rx.ud-ns", m.Rx.UDNs}, {"rx.read-req-ns", m.Rx.ReadReqNs},
		{"rx.read-resp-ns", m.Rx.ReadRespNs}, {"rx.ack-ns", m.Rx.AckNs}, {"rx.ack-gen-ns", m.Rx.AckGenNs},
		{"rx.sge-ns", m.Rx.SGENs}, {"rx.wqe-bytes", int64(m.Rx.WQEBytes)}, {"rx.nak-delay-ns", m.Rx.NAKDelayNs},
		{"rx.read-resp-sge-ns", m.Rx.ReadRespSGENs}, {"rx.read-resp-first-ns", m.Rx.ReadRespFirstNs},
		{"rx.read-resp-span-bytes", int64(m.Rx.ReadRespSpanBytes)},
		{"rx.data-qpc-miss-slots", int64(m.Rx.DataQPCMissSlots)}, {"rx.fetch-wqe-ns", m.Rx.FetchWQENs},
		{"rx.fetch-engines", int64(m.Rx.FetchEngines)}, {"rx.evict-wqe-ns", m.Rx.EvictWQENs},
		{"rx.buffer-cell-bytes", int64(m.Rx.BufferCellBytes)},
		{"rx.miss-fetch-div", int64(m.Rx.MissFetchDiv)}, {"rx.miss-fetch-bytes", int64(m.Rx.MissFetchBytes)},
		{"rx.prefetch-depth-div", int64(m.Rx.PrefetchDepthDiv)}, {"rx.prefetch-long-depth", int64(m.Rx.PrefetchLongDepth)},
		{"rx.demand-fetch-slots", int64(m.Rx.DemandFetchSlots)}, {"rx.rc-data-ns", m.Rx.RCDataNs},
		{"rx.cold-miss-fetch", int64(m.Rx.ColdMissFetch)}, {"rx.large-batch-depth", int64(m.Rx.LargeBatchDepth)},
		{"rx.cqe-bytes", int64(m.Rx.CQEBytes)}, {"rx.rc-wqe-cache-max-mtu", int64(m.Rx.RCWQECacheMaxMTU)},
		{"rx.rc-wqe-cache-bytes", int64(m.Rx.RCWQECacheBytes)},
		{"rx.prefetch-grow", int64(m.Rx.PrefetchGrow)},
		{"rx.rc-state-entries", int64(m.Rx.RCStateEntries)}, {"rx.rc-state-miss-ns", m.Rx.RCStateMissNs},
		{"rx.rc-state-batch", int64(m.Rx.RCStateBatch)}, {"rx.read-resp-qpc-batch", int64(m.Rx.ReadRespQPCBatch)},
		{"rx.read-resp-qpc-max-mtu", int64(m.Rx.ReadRespQPCMaxMTU)},
		{"cache.qpc-bytes", int64(m.Cache.QPCBytes)}, {"cache.mtt-bytes", int64(m.Cache.MTTBytes)},
		{"host.remote-numa-latency-ns", m.Host.RemoteNUMALatencyNs},
		{"host.gpu-same-switch-latency-ns", m.Host.GPUSameSwitchLatency},
		{"host.gpu-cross-switch-latency-ns", m.Host.GPUCrossSwitchLatency},
		{"host.path-tlp-bytes", int64(m.Host.PathTLPBytes)},
		{"host.gpu-same-switch-write-tlp-ns", m.Host.GPUSameSwitchWriteTLPNs}}
	for _, f := range nonneg {
		if f.v < 0 {
			return verr("micro."+f.k, "%d: want >= 0", f.v)
		}
	}
	for i, k := range m.Tx.LookupWait {
		if !slices.Contains(WQEKinds, k) {
			return verr("micro.tx.lookup-wait", "entry %d, %q: want one of %s", i, k, strings.Join(WQEKinds, ", "))
		}
	}
	for i, k := range m.Rx.WQECacheQPTypes {
		if k != "rc" && k != "uc" && k != "ud" {
			return verr("micro.rx.wqe-cache-qp-types", "entry %d, %q: want one of rc, uc, ud", i, k)
		}
	}
	switch {
	case m.MaxMppsPerQP < 0 || math.IsNaN(m.MaxMppsPerQP) || math.IsInf(m.MaxMppsPerQP, 0):
		return verr("micro.max-mpps-per-qp", "%v: want >= 0 (0: no per-QP bound)", m.MaxMppsPerQP)
	case m.Host.GPUCrossSwitchWriteGbps < 0 || math.IsNaN(m.Host.GPUCrossSwitchWriteGbps) || math.IsInf(m.Host.GPUCrossSwitchWriteGbps, 0):
		return verr("micro.host.gpu-cross-switch-write-gbps", "%v: want >= 0 (0: writes share gpu-cross-switch-gbps)", m.Host.GPUCrossSwitchWriteGbps)
	case m.Host.GPUSameSwitchWriteGbps < 0 || math.IsNaN(m.Host.GPUSameSwitchWriteGbps) || math.IsInf(m.Host.GPUSameSwitchWriteGbps, 0):
		return verr("micro.host.gpu-same-switch-write-gbps", "%v: want >= 0 (0: writes share gpu-same-switch-gbps)", m.Host.GPUSameSwitchWriteGbps)
	case m.Tx.LoopbackGbps < 0 || math.IsNaN(m.Tx.LoopbackGbps):
		return verr("micro.tx.loopback-gbps", "%v: want >= 0 (0: no limit)", m.Tx.LoopbackGbps)
	case m.Rx.RCWQECacheBytes > 0 && m.Rx.WQEBytes <= 0:
		return verr("micro.rx.rc-wqe-cache-bytes", "%d needs rx.wqe-bytes > 0 (the bytes of a receive WQE's SGE), got %d",
			m.Rx.RCWQECacheBytes, m.Rx.WQEBytes)
	case m.PCIe.OrderedLongBytes > 0 && m.PCIe.OrderedLongBytes <= m.PCIe.OrderedShortBytes:
		return verr("micro.pcie.ordered-long-bytes", "%d: want more than pcie.ordered-short-bytes (%d): a message is short or long, not both",
			m.PCIe.OrderedLongBytes, m.PCIe.OrderedShortBytes)
	case m.Rx.PausePrio < 0 || m.Rx.PausePrio > 7:
		return verr("micro.rx.pause-priority", "%d: want 0..7", m.Rx.PausePrio)
	case m.Rx.XonBytes > m.Rx.XoffBytes || m.Rx.XoffBytes > m.Rx.BufferBytes:
		return verr("micro.rx.xoff-bytes", "xon %d, xoff %d, buffer %d: want xon <= xoff <= buffer",
			m.Rx.XonBytes, m.Rx.XoffBytes, m.Rx.BufferBytes)
	case m.Rx.MaxMpps < 0 || math.IsNaN(m.Rx.MaxMpps) || math.IsInf(m.Rx.MaxMpps, 0):
		return verr("micro.rx.max-mpps", "%v: want >= 0 (0: no bound)", m.Rx.MaxMpps)
	case m.Rx.PrefetchMin > m.Rx.PrefetchMax:
		return verr("micro.rx.prefetch-min", "%d is above prefetch-max %d", m.Rx.PrefetchMin, m.Rx.PrefetchMax)
	}
	return nil
}

// Check validates the micro-architecture section alone (a profile's micro values changed in code: the
// calibration benchmark's candidates).
func (m *MicroArch) Check() error {
	if e := m.validate(); e != nil {
		return e
	}
	return nil
}
