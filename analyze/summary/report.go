package summary

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// Report is the summary of one or more captures. Its JSON field names are the contract of
// spec/scenario-and-cli.md (`lumina analyze --json`); fields beyond the contract are additions.
type Report struct {
	Files []FileInfo `json:"files"`
	// Order is how the files were merged: "file" (a single file, in file order), "time" or "mirror-seq";
	// "stream" when packets were fed to Stats directly.
	Order string `json:"order"`

	Packets     int64   `json:"packets"`
	Bytes       int64   `json:"bytes"`          // frame bytes on the wire (original lengths)
	CapBytes    int64   `json:"captured_bytes"` // bytes present in the capture
	FirstNs     int64   `json:"first_ns"`       // earliest timestamp, ns since the epoch (0: none)
	LastNs      int64   `json:"last_ns"`
	DurationS   float64 `json:"duration_s"`
	PacketsPerS float64 `json:"packets_per_s"` // 0 when the duration is 0
	Gbps        float64 `json:"gbps"`          // wire bytes * 8 / duration

	LinkTypes []LinkTypeCount `json:"link_types"`
	// NotDecoded counts packets of non-Ethernet link types: counted, never decoded.
	NotDecoded int64 `json:"not_decoded"`
	// NotRoCE counts Ethernet frames that are not RoCE, by reason (roce.Reason names).
	NotRoCE map[string]int64 `json:"not_roce"`
	// OtherEtherTypes counts frames whose EtherType is neither IP nor RoCEv1, keyed "0x8808".
	OtherEtherTypes map[string]int64 `json:"other_ethertypes"`

	RoCEPackets int64 `json:"roce_packets"`
	RoCEv1      int64 `json:"roce_v1"`
	RoCEv2      int64 `json:"roce_v2"`
	RoCEv2IPv6  int64 `json:"roce_v2_ipv6"`
	// TruncatedHeaders counts RoCE packets whose transport headers the capture cut.
	TruncatedHeaders int64 `json:"truncated_headers"`

	ICRC    ICRCCounts    `json:"icrc"`
	Opcodes []OpcodeCount `json:"opcodes"`
	ECN     ECNCounts     `json:"ecn"`
	DSCP    IntCounts     `json:"dscp"`
	// VLANs counts frames by outer VLAN id; Untagged the frames without a tag.
	VLANs    IntCounts `json:"vlans"`
	Untagged int64     `json:"untagged"`

	DataPackets int64 `json:"data_packets"` // SEND, WRITE and READ response packets
	ACKs        int64 `json:"acks"`         // Acknowledge packets (ACK, NAK, RNR NAK)
	CNPs        int64 `json:"cnps"`
	// CEPerCNP is CE-marked RoCE packets per CNP (null without CNPs): the guide's "CE to CNP ratio".
	CEPerCNP *float64         `json:"ce_per_cnp"`
	NAKs     map[string]int64 `json:"naks"`
	RNRNAKs  int64            `json:"rnr_naks"`

	Retransmitted int64 `json:"retransmitted"`
	Gaps          int64 `json:"gaps"`
	MissingPSNs   int64 `json:"missing_psns"`

	PFC    PFCCounts      `json:"pfc"`
	Mirror *MirrorSummary `json:"mirror,omitempty"`
	Flows  []Flow         `json:"flows"`
	Health []Health       `json:"health"`
	// Warnings say what the summary could not do (no Ethernet, no RoCE, truncated capture...).
	Warnings []string `json:"warnings"`
	// Integrity is the integrity check of Lumina dumps (merged by mirror sequence number); absent for other
	// captures.
	Integrity *Integrity `json:"integrity,omitempty"`

	topFlows int // Options.TopFlows, for WriteText
}

// FileInfo describes one input file.
type FileInfo struct {
	Path    string `json:"path"`
	Format  string `json:"format"`
	Packets int64  `json:"packets"`
	// Truncated, when set, says the file ends in the middle of a record (a capture tool stopped mid-write):
	// its whole packets were analyzed, the cut one was not.
	Truncated *trace.Truncation `json:"truncated,omitempty"`
}

// LinkTypeCount counts packets of one link type.
type LinkTypeCount struct {
	LinkType uint32 `json:"link_type"`
	Name     string `json:"name"`
	Packets  int64  `json:"packets"`
	Decoded  bool   `json:"decoded"`
}

// ICRCCounts are the ICRC verdicts of RoCE packets.
type ICRCCounts struct {
	Good int64 `json:"good"`
	Bad  int64 `json:"bad"`
	// NotCheckable counts packets the capture truncated (or all, when the check was skipped).
	NotCheckable int64 `json:"not_checkable"`
	Checked      bool  `json:"checked"` // false when Options.SkipICRC
}

// OpcodeCount counts one BTH opcode.
type OpcodeCount struct {
	Opcode uint8  `json:"opcode"`
	Name   string `json:"name"`
	Count  int64  `json:"count"`
}

// ECNCounts is the ECN distribution of RoCE packets.
type ECNCounts struct {
	NotECT int64 `json:"not_ect"`
	ECT0   int64 `json:"ect0"`
	ECT1   int64 `json:"ect1"`
	CE     int64 `json:"ce"`
}

// PFCCounts counts MAC control frames (EtherType 0x8808).
type PFCCounts struct {
	PFCFrames   int64         `json:"pfc_frames"`   // 802.1Qbb, opcode 0x0101
	PauseFrames int64         `json:"pause_frames"` // 802.3x, opcode 0x0001
	Priorities  []PFCPriority `json:"priorities"`   // only priorities that appear
}

// PFCPriority counts, for one priority, PFC frames that pause it (quanta > 0) and that resume it (quanta 0).
type PFCPriority struct {
	Priority int   `json:"priority"`
	Pause    int64 `json:"pause"`
	Resume   int64 `json:"resume"`
}

// MirrorSummary summarizes Lumina's mirror metadata when the capture is tagged.
type MirrorSummary struct {
	Events   map[string]int64 `json:"events"` // by roce.EventType name
	FirstSeq uint64           `json:"first_seq"`
	LastSeq  uint64           `json:"last_seq"`
	// SeqGaps counts holes in the sequence (SeqMissing numbers in all): mirrored copies no dumper recorded.
	SeqGaps    int64 `json:"seq_gaps"`
	SeqMissing int64 `json:"seq_missing"`
	// SeqBackwards counts packets whose sequence number went back.
	SeqBackwards int64 `json:"seq_backwards"`
}

// Flow is the summary of one flow: the packets from Src to Dst addressed to destination QP DestQP.
type Flow struct {
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	DestQP  uint32 `json:"dest_qp"`
	Packets int64  `json:"packets"`
	Bytes   int64  `json:"bytes"`
	// FirstPSN and LastPSN are the PSNs of the flow's first and last request (SEND, WRITE, READ request,
	// atomic), or of its first and last response when it carries none. An RC QP pair talks both ways, so one
	// flow key may carry requests in one PSN space and responses (ACKs, READ responses) in the other's.
	FirstPSN uint32 `json:"first_psn"`
	LastPSN  uint32 `json:"last_psn"`
	// RespFirstPSN and RespLastPSN are the first and last response PSN (null without responses).
	RespFirstPSN  *uint32  `json:"resp_first_psn"`
	RespLastPSN   *uint32  `json:"resp_last_psn"`
	Retransmitted int64    `json:"retransmitted"`
	Gaps          int64    `json:"gaps"`
	MissingPSNs   int64    `json:"missing_psns"`
	Version       string   `json:"version"`   // RoCEv1 or RoCEv2
	Transport     string   `json:"transport"` // RC, UC, UD... joined by "+" when mixed
	Data          int64    `json:"data"`
	ACKs          int64    `json:"acks"`
	NAKs          int64    `json:"naks"`
	RNRNAKs       int64    `json:"rnr_naks"`
	CE            int64    `json:"ce"`
	CNPs          int64    `json:"cnps"`
	Opcodes       []string `json:"opcodes"` // distinct opcode names, by opcode
	FirstNs       int64    `json:"first_ns"`
	LastNs        int64    `json:"last_ns"`

	src, dst netip.Addr // for ordering
}

// Verdict is a health grade.
type Verdict string

// Health grades, as the guide's "Performance Indicators" table names them.
const (
	VerdictOK      Verdict = "ok"
	VerdictWarn    Verdict = "warn"
	VerdictProblem Verdict = "problem"
)

// Health is one graded indicator.
type Health struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	Value   float64 `json:"value"`
	Detail  string  `json:"detail"`
}

// Thresholds of the health verdicts. CE rate: the guide's (< 5% good, 5-15% warning, > 15% problem). The guide
// grades CNP rate and PFC only as low/medium/high and near 0/occasional/frequent; the numbers are ours.
const (
	CEWarn        = 0.05  // CE-marked share of RoCE packets at which the CE rate is a warning
	CEProblem     = 0.15  // ... and above which it is a problem
	CNPWarn       = 0.01  // CNPs per data packet: below is "low"
	CNPProblem    = 0.05  // at or above is "high"
	PFCOccasional = 0.001 // pause frames per frame: up to this share is "occasional" (warning), above "frequent"
)

// Report builds the report of what was added so far. It may be called at any time.
func (s *Stats) Report() *Report {
	r := &Report{
		Packets:          s.packets,
		Bytes:            s.bytes,
		CapBytes:         s.capBytes,
		NotDecoded:       s.notDecoded,
		NotRoCE:          map[string]int64{},
		OtherEtherTypes:  map[string]int64{},
		RoCEPackets:      s.roce,
		RoCEv1:           s.v1,
		RoCEv2:           s.v2,
		RoCEv2IPv6:       s.v2IPv6,
		TruncatedHeaders: s.truncHdr,
		ICRC: ICRCCounts{Good: s.icrc[roce.ICRCGood], Bad: s.icrc[roce.ICRCBad],
			NotCheckable: s.icrc[roce.ICRCNotCheckable], Checked: !s.opts.SkipICRC},
		ECN:           ECNCounts{NotECT: s.ecn[0], ECT1: s.ecn[1], ECT0: s.ecn[2], CE: s.ecn[3]},
		Untagged:      s.untagged,
		DataPackets:   s.data,
		ACKs:          s.acks,
		CNPs:          s.cnps,
		NAKs:          map[string]int64{},
		RNRNAKs:       s.rnrNaks,
		Retransmitted: s.retrans,
		Gaps:          s.gaps,
		MissingPSNs:   s.missing,
		Opcodes:       []OpcodeCount{},
		Flows:         []Flow{},
		Warnings:      []string{},
		LinkTypes:     []LinkTypeCount{},
		Files:         []FileInfo{},
		Order:         "stream",
		topFlows:      s.opts.TopFlows,
	}
	if s.haveTs {
		r.FirstNs, r.LastNs = s.minNs, s.maxNs
		r.DurationS = float64(s.maxNs-s.minNs) / 1e9
		if r.DurationS > 0 {
			r.PacketsPerS = float64(s.packets) / r.DurationS
			r.Gbps = float64(s.bytes) * 8 / r.DurationS / 1e9
		}
	}
	s.addLinkTypes(r)
	s.addDistributions(r)
	r.PFC = s.pfcCounts()
	r.Mirror = s.mirrorSummary()
	if len(s.flows) > 0 { // no flows stay a null list
		r.Flows = make([]Flow, 0, len(s.flows))
	}
	for k, f := range s.flows {
		r.Flows = append(r.Flows, makeFlow(k, f))
	}
	slices.SortFunc(r.Flows, compareFlows)
	r.Health = s.health()
	r.Warnings = append(r.Warnings, s.warnings()...)
	return r
}

// addLinkTypes counts the packets of each link type, Ethernet (the one decoded) included.
func (s *Stats) addLinkTypes(r *Report) {
	if s.ethernet > 0 {
		r.LinkTypes = append(r.LinkTypes, LinkTypeCount{LinkType: trace.LinkTypeEthernet,
			Name: LinkTypeDisplay(trace.LinkTypeEthernet), Packets: s.ethernet, Decoded: true})
	}
	for lt, n := range s.linkTypes {
		r.LinkTypes = append(r.LinkTypes, LinkTypeCount{LinkType: lt, Name: LinkTypeDisplay(lt), Packets: n,
			Decoded: lt == trace.LinkTypeEthernet})
	}
	slices.SortFunc(r.LinkTypes, func(a, b LinkTypeCount) int { return cmp.Compare(a.LinkType, b.LinkType) })
}

// addDistributions adds the counts by kind: undecoded reasons, EtherTypes, opcodes, DSCP, VLANs, NAK codes, and
// the CE-to-CNP ratio.
func (s *Stats) addDistributions(r *Report) {
	for i, n := range s.reasons {
		if n > 0 && roce.Reason(i) != roce.ReasonNone && roce.Reason(i) != roce.ReasonShortBTH {
			r.NotRoCE[roce.Reason(i).String()] = n
		}
	}
	for et, n := range s.etherTypes {
		r.OtherEtherTypes[fmt.Sprintf("0x%04x", et)] = n
	}
	for op, n := range s.opcodes {
		if n > 0 {
			r.Opcodes = append(r.Opcodes, OpcodeCount{Opcode: uint8(op), Name: roce.Opcode(op).String(), Count: n})
		}
	}
	for v, n := range s.dscp {
		if n > 0 {
			r.DSCP = append(r.DSCP, IntCount{Key: v, Count: n})
		}
	}
	for v, n := range s.vlans {
		if n > 0 {
			r.VLANs = append(r.VLANs, IntCount{Key: v, Count: n})
		}
	}
	for c := roce.NAKCode(0); c <= roce.NAKInvalidRDRequest; c++ {
		r.NAKs[c.String()] = s.naks[c]
	}
	for c, n := range s.naks {
		if n > 0 {
			r.NAKs[roce.NAKCode(c).String()] = n
		}
	}
	if s.cnps > 0 {
		v := float64(s.ecn[3]) / float64(s.cnps)
		r.CEPerCNP = &v
	}
}

// pfcCounts is the PFC section: frames, pauses and the priorities that paused or resumed.
func (s *Stats) pfcCounts() PFCCounts {
	c := PFCCounts{PFCFrames: s.pfcFrames, PauseFrames: s.pauseFrames, Priorities: []PFCPriority{}}
	for prio := 0; prio < 8; prio++ {
		if s.pfcPause[prio]+s.pfcResume[prio] > 0 {
			c.Priorities = append(c.Priorities, PFCPriority{Priority: prio, Pause: s.pfcPause[prio],
				Resume: s.pfcResume[prio]})
		}
	}
	return c
}

// mirrorSummary is the Lumina metadata section, or nil when the capture carries none.
func (s *Stats) mirrorSummary() *MirrorSummary {
	if !s.mirror {
		return nil
	}
	m := &MirrorSummary{Events: map[string]int64{}, FirstSeq: s.seqFirst, LastSeq: s.seqLast,
		SeqGaps: s.seqGaps, SeqMissing: s.seqMissing, SeqBackwards: s.seqBackwards}
	for e, n := range s.events {
		if n > 0 {
			m.Events[roce.EventType(e).String()] = n
		}
	}
	return m
}

func makeFlow(k flowKey, f *flow) Flow {
	fl := Flow{src: k.src, dst: k.dst, Src: k.src.String(), Dst: k.dst.String(), DestQP: k.qp, Packets: f.packets, Bytes: f.bytes,
		Retransmitted: f.retransmitted, Gaps: f.gaps,
		MissingPSNs: f.missing, Version: f.version.String(), Data: f.data, ACKs: f.acks, NAKs: f.naks,
		RNRNAKs: f.rnrs, CE: f.ce, CNPs: f.cnps, FirstNs: f.firstNs, LastNs: f.lastNs, Opcodes: []string{}}
	switch {
	case f.haveReq:
		fl.FirstPSN, fl.LastPSN = uint32(f.reqFirst), uint32(f.reqLast)
	case f.haveResp:
		fl.FirstPSN, fl.LastPSN = uint32(f.respFirst), uint32(f.respLast)
	}
	if f.haveResp {
		a, b := uint32(f.respFirst), uint32(f.respLast)
		fl.RespFirstPSN, fl.RespLastPSN = &a, &b
	}
	var tr []string
	for t := roce.RC; t <= roce.Vendor; t++ {
		if f.transports&(1<<t) != 0 {
			tr = append(tr, t.String())
		}
	}
	if len(tr) == 0 && f.cnps > 0 {
		tr = append(tr, "CNP")
	}
	fl.Transport = strings.Join(tr, "+")
	for op := 0; op < 256; op++ {
		if f.ops[op>>6]&(1<<(op&63)) != 0 {
			fl.Opcodes = append(fl.Opcodes, roce.Opcode(op).String())
		}
	}
	return fl
}

// compareFlows orders flows by source, destination (numerically, IPv4 before IPv6) and destination QP: a
// stable order for diffs of JSON output.
func compareFlows(a, b Flow) int {
	if c := a.src.Compare(b.src); c != 0 {
		return c
	}
	if c := a.dst.Compare(b.dst); c != 0 {
		return c
	}
	return cmp.Compare(a.DestQP, b.DestQP)
}

// health grades the guide's indicators and the transport-level ones.
func (s *Stats) health() []Health {
	var h []Health
	if s.roce > 0 {
		ce := float64(s.ecn[3]) / float64(s.roce)
		v := VerdictOK
		switch {
		case ce > CEProblem:
			v = VerdictProblem
		case ce >= CEWarn:
			v = VerdictWarn
		}
		h = append(h, Health{Name: "ce-rate", Verdict: v, Value: ce, Detail: fmt.Sprintf(
			"CE rate %s (%d of %d RoCE packets; good < 5%%, warning 5-15%%, problem > 15%%)", pct(ce), s.ecn[3], s.roce)})
	}
	if s.data > 0 {
		rate, level := float64(s.cnps)/float64(s.data), "low"
		v := VerdictOK
		switch {
		case rate >= CNPProblem:
			v, level = VerdictProblem, "high"
		case rate >= CNPWarn:
			v, level = VerdictWarn, "medium"
		}
		h = append(h, Health{Name: "cnp-rate", Verdict: v, Value: rate, Detail: fmt.Sprintf(
			"CNP rate %s: %s (%d CNPs per %d data packets; low < 1%%, medium 1-5%%, high >= 5%%)", pct(rate), level, s.cnps, s.data)})
	}
	if s.ecn[3] > 0 && s.cnps == 0 {
		h = append(h, Health{Name: "ce-without-cnp", Verdict: VerdictWarn, Value: float64(s.ecn[3]), Detail: fmt.Sprintf(
			"%d CE-marked packets but no CNP: is the notification point enabled, is the return path captured?", s.ecn[3])})
	}
	pauses := s.pfcFrames + s.pauseFrames
	if s.ethernet > 0 {
		rate := float64(pauses) / float64(s.packets)
		v, level := VerdictOK, "none"
		switch {
		case rate > PFCOccasional:
			v, level = VerdictProblem, "frequent"
		case pauses > 0:
			v, level = VerdictWarn, "occasional"
		}
		h = append(h, Health{Name: "pfc", Verdict: v, Value: float64(pauses), Detail: fmt.Sprintf(
			"pause frames %s: %s (%d of %d frames: %d PFC, %d 802.3x; good: none, occasional: up to 0.1%%, frequent: above 0.1%%)",
			pct(rate), level, pauses, s.packets, s.pfcFrames, s.pauseFrames)})
	}
	if s.roce > 0 && !s.opts.SkipICRC {
		checked := s.icrc[roce.ICRCGood] + s.icrc[roce.ICRCBad]
		v := VerdictOK
		if s.icrc[roce.ICRCBad] > 0 {
			v = VerdictProblem
		}
		bad := 0.0
		if checked > 0 {
			bad = float64(s.icrc[roce.ICRCBad]) / float64(checked)
		}
		h = append(h, Health{Name: "icrc", Verdict: v, Value: bad, Detail: fmt.Sprintf(
			"ICRC bad on %d of %d checked packets (%s)", s.icrc[roce.ICRCBad], checked, pct(bad))})
	}
	if s.roce > 0 {
		var naks int64
		for _, n := range s.naks {
			naks += n
		}
		v := VerdictOK
		if s.retrans+s.gaps+naks+s.rnrNaks > 0 {
			v = VerdictWarn
		}
		h = append(h, Health{Name: "loss-recovery", Verdict: v, Value: float64(s.retrans), Detail: fmt.Sprintf(
			"%d retransmitted, %d PSN gaps (%d PSNs missing), %d NAKs, %d RNR NAKs", s.retrans, s.gaps, s.missing,
			naks, s.rnrNaks)})
	}
	return h
}

func (s *Stats) warnings() []string {
	var w []string
	if s.packets == 0 {
		return append(w, "the capture holds no packets")
	}
	if s.notDecoded > 0 {
		var parts []string
		var lts []uint32
		for lt := range s.linkTypes {
			lts = append(lts, lt)
		}
		slices.Sort(lts)
		for _, lt := range lts {
			parts = append(parts, fmt.Sprintf("%s: %d packets, not decoded", LinkTypeDisplay(lt), s.linkTypes[lt]))
		}
		msg := strings.Join(parts, "; ")
		if s.ethernet == 0 {
			msg = "no Ethernet packets, so no RoCE can be decoded (" + msg + "); lumina decodes RoCE over Ethernet only"
		} else {
			msg += " (only Ethernet is decoded)"
		}
		w = append(w, msg)
	}
	if s.roce == 0 && s.ethernet > 0 {
		w = append(w, fmt.Sprintf("no RoCE packets among %d Ethernet frames (RoCEv2 UDP port %d, RoCEv1 EtherType 0x8915)",
			s.ethernet, s.opts.Port))
	}
	if s.cnps > 0 && s.data == 0 {
		w = append(w, fmt.Sprintf("%d CNPs but no data packets: the CNP rate cannot be graded (is the data direction captured?)", s.cnps))
	}
	if n := s.icrc[roce.ICRCNotCheckable]; n > 0 && !s.opts.SkipICRC {
		w = append(w, fmt.Sprintf("%d RoCE packets are cut short in the capture (snap length or a truncating capture tool): their ICRC is not checkable", n))
	}
	if s.truncHdr > 0 {
		w = append(w, fmt.Sprintf("%d RoCE packets lack complete transport headers", s.truncHdr))
	}
	if s.mirror && s.seqBackwards > 0 {
		w = append(w, fmt.Sprintf("%d packets go back in mirror sequence", s.seqBackwards))
	}
	return w
}

// LinkTypeDisplay names a link type for people, e.g. "Ethernet (1)", "ERF (197)".
func LinkTypeDisplay(lt uint32) string {
	name := ""
	switch lt {
	case trace.LinkTypeEthernet:
		name = "Ethernet"
	case trace.LinkTypeERF:
		name = "ERF"
	case trace.LinkTypeInfiniBand:
		name = "InfiniBand"
	case trace.LinkTypeRaw:
		name = "raw IP"
	case trace.LinkTypeLinuxSLL:
		name = "Linux cooked"
	case trace.LinkTypeLinuxSLL2:
		name = "Linux cooked v2"
	case trace.LinkTypeNull:
		name = "BSD loopback"
	case trace.LinkTypeIPv4:
		name = "IPv4"
	case trace.LinkTypeIPv6:
		name = "IPv6"
	default:
		name = "link type"
	}
	return name + " (" + strconv.FormatUint(uint64(lt), 10) + ")"
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }
