package summary

import (
	"encoding/binary"
	"net/netip"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// EtherTypeMACControl carries 802.3x PAUSE and 802.1Qbb PFC frames.
const EtherTypeMACControl = 0x8808

// MAC control opcodes.
const (
	macCtlPause = 0x0001 // 802.3x PAUSE (whole link)
	macCtlPFC   = 0x0101 // 802.1Qbb per-priority flow control
)

// flowKey identifies a flow the way the guide does ("Dest QP = flow identifier"), qualified by the addresses so
// that equal QP numbers on different hosts stay apart.
type flowKey struct {
	src, dst netip.Addr
	qp       uint32
}

// flow is the per-flow state; it is the only memory that grows with the capture (one per flow).
type flow struct {
	packets, bytes      int64
	firstNs, lastNs     int64
	reqFirst, reqLast   roce.PSN // first and last request PSN seen
	respFirst, respLast roce.PSN // first and last response PSN seen
	reqMax, respMax     roce.PSN // highest request PSN / highest response PSN seen
	haveReq             bool
	haveResp            bool
	afterRead           bool // the highest request was a READ request: its responses use PSNs we cannot count
	retransmitted       int64
	gaps, missing       int64
	data, acks, ce      int64
	cnps, naks, rnrs    int64
	ops                 [4]uint64 // set of opcodes seen
	transports          uint8     // bit set of roce.Transport
	version             roce.Version
}

// Stats accumulates a capture summary packet by packet. The zero value is not ready: use NewStats.
type Stats struct {
	opts    Options
	pkt     roce.Packet
	scratch roce.ICRCScratch // the ICRC's, for the frames Add decodes itself

	packets, bytes, capBytes int64
	minNs, maxNs             int64
	clock                    trace.Unwrap48 // mirror-tagged captures stamped with the 48-bit switch clock
	haveTs                   bool
	ethernet                 int64            // Ethernet frames (kept out of the map: the hot path)
	linkTypes                map[uint32]int64 // other link types
	notDecoded               int64

	reasons    [roce.NumReasons]int64
	etherTypes map[uint16]int64 // frames with an EtherType that is neither IP nor RoCE

	roce, v1, v2, v2IPv6, truncHdr int64
	icrc                           [3]int64 // indexed by roce.ICRCStatus
	lastDecoded                    bool     // pkt holds the last frame decoded on the RoCEv2 port 4791
	opcodes                        [256]int64
	ecn                            [4]int64
	dscp                           [64]int64
	vlans                          [4096]int64
	untagged                       int64
	data, acks, cnps, rnrNaks      int64
	naks                           [32]int64
	retrans, gaps, missing         int64

	pfcFrames, pauseFrames int64
	pfcPause, pfcResume    [8]int64

	mirror       bool
	events       [256]int64
	seqFirst     uint64
	seqLast      uint64
	haveSeq      bool
	seqGaps      int64
	seqMissing   int64
	seqBackwards int64

	flows map[flowKey]*flow
	cache [flowCacheSize]flowCacheEntry
}

// flowCacheSize is the size of the direct-mapped flow cache in front of the flow map: hashing a flow key
// (two netip.Addr and a QP) costs more than comparing it.
const flowCacheSize = 64

type flowCacheEntry struct {
	key flowKey
	f   *flow
}

// NewStats returns an empty accumulator. opts.Port (0 means 4791) is the RoCEv2 UDP port; opts.SkipICRC leaves
// every ICRC unchecked (decode-only measurements).
func NewStats(opts Options) *Stats {
	if opts.Port == 0 {
		opts.Port = roce.UDPPort
	}
	s := &Stats{
		opts:       opts,
		linkTypes:  make(map[uint32]int64, 2),
		etherTypes: make(map[uint16]int64),
		flows:      make(map[flowKey]*flow),
	}
	return s
}

// SetMirrorTagged makes Add read Lumina's mirror metadata (event in the IPv4 TTL, sequence number in the source
// MAC) from every Ethernet frame and summarize it.
func (s *Stats) SetMirrorTagged(on bool) { s.mirror = on }

// Add accounts one captured packet. Packets of a link type other than Ethernet are counted, never decoded.
func (s *Stats) Add(p *trace.Packet) {
	s.lastDecoded = false
	if p.LinkType != trace.LinkTypeEthernet {
		s.countFrame(p.LinkType, p.Timestamp, len(p.Data), p.OrigLen)
		s.notDecoded++
		return
	}
	s.AddFrame(p.Data, p.OrigLen, p.Timestamp)
}

func (s *Stats) countFrame(lt uint32, ts int64, capLen, origLen int) {
	s.packets++
	if origLen < capLen {
		origLen = capLen
	}
	s.bytes += int64(origLen)
	s.capBytes += int64(capLen)
	if lt == trace.LinkTypeEthernet {
		s.ethernet++
	} else {
		s.linkTypes[lt]++
	}
	if ts != 0 {
		if !s.haveTs || ts < s.minNs {
			s.minNs = ts
		}
		if !s.haveTs || ts > s.maxNs {
			s.maxNs = ts
		}
		s.haveTs = true
	}
}

// AddFrame accounts one Ethernet frame: data is the captured bytes, origLen the length on the wire, ts the
// capture time in nanoseconds (0 if unknown).
func (s *Stats) AddFrame(data []byte, origLen int, ts int64) {
	p := &s.pkt
	decoded := p.DecodePort(data, origLen, s.opts.Port)
	s.addDecoded(data, origLen, ts, p, decoded, s.checkICRC(p, decoded))
	s.lastDecoded = s.opts.Port == roce.UDPPort
}

// checkICRC is the ICRC verdict the summary counts for a frame p holds the decoding of.
func (s *Stats) checkICRC(p *roce.Packet, decoded bool) roce.ICRCStatus {
	if !decoded || s.opts.SkipICRC || p.Truncated {
		return roce.ICRCNotCheckable
	}
	return p.CheckICRCScratch(&s.scratch)
}

// addDecoded accounts one Ethernet frame that p holds the decoding of (DecodePort on the options' port, which
// returned decoded), icrc its verdict (checkICRC): the decoding and the CRC may run on another core.
func (s *Stats) addDecoded(data []byte, origLen int, ts int64, p *roce.Packet, decoded bool, icrc roce.ICRCStatus) {
	if s.mirror && ts > 0 && ts < 1<<48 {
		// A Lumina dumper stamps each packet with the switch's 48-bit nanosecond clock, which wraps every
		// 78 hours (an epoch time is far above 2^48 ns): one timeline across the wrap, so that the duration
		// and the rates stay right.
		ts = s.clock.Extend(uint64(ts))
	}
	s.countFrame(trace.LinkTypeEthernet, ts, len(data), origLen)
	if s.mirror {
		s.addMirror(data)
	}
	if !decoded {
		s.reasons[p.Reason]++
		if p.Reason == roce.ReasonOtherEtherType {
			s.etherTypes[p.EtherType]++
			if p.EtherType == EtherTypeMACControl {
				s.addMACControl(data[p.L3Offset:])
			}
		}
		s.countVLAN(p)
		return
	}
	s.countVLAN(p)
	s.roce++
	if p.Version == roce.RoCEv1 {
		s.v1++
	} else {
		s.v2++
		if p.IPv6 {
			s.v2IPv6++
		}
	}
	s.ecn[p.ECN()]++
	s.dscp[p.DSCP()]++
	if p.Reason == roce.ReasonShortBTH {
		s.truncHdr++
	}
	s.icrc[icrc]++
	if p.BTHOffset+roce.BTHLen > len(data) {
		return // not even a whole BTH: nothing per flow to say
	}
	op := p.BTH.Opcode
	s.opcodes[op]++

	f := s.flow(p)
	f.packets++
	if origLen < len(data) {
		origLen = len(data)
	}
	f.bytes += int64(origLen)
	if f.packets == 1 {
		f.firstNs = ts
		f.version = p.Version
	}
	f.lastNs = ts
	f.ops[op>>6] |= 1 << (op & 63)
	if p.ECN() == 3 {
		f.ce++
	}
	if op == roce.CNP {
		s.cnps++
		f.cnps++
		return
	}
	f.transports |= 1 << op.Transport()
	psn := p.BTH.PSN
	switch {
	case p.Ext&roce.ExtAETH != 0 && op.IsAck():
		s.acks++
		f.acks++
		switch p.AETH.Type() {
		case roce.AckTypeNAK:
			s.naks[p.AETH.NAKCode()]++
			f.naks++
		case roce.AckTypeRNRNAK:
			s.rnrNaks++
			f.rnrs++
		}
	}
	if op.CarriesPayload() {
		s.data++
		f.data++
	}
	if !op.Valid() || op.Transport() == roce.UD || op.Transport() == roce.Vendor {
		// UD: several source QPs share a destination QP, so PSNs interleave; unknown opcodes: no PSN rule.
		return
	}
	if op.IsResponse() {
		s.trackResponse(f, op, psn)
	} else {
		s.trackRequest(f, op, psn)
	}
}

// trackRequest applies the retransmission and gap rules to a request PSN: a PSN not after the highest request
// PSN seen is a retransmission; a jump of more than one is a gap, except after a READ request, whose responses
// use PSNs (one per response packet) that the request flow does not show.
func (s *Stats) trackRequest(f *flow, op roce.Opcode, psn roce.PSN) {
	if !f.haveReq {
		f.reqMax, f.haveReq, f.afterRead = psn, true, op.IsReadRequest()
		f.reqFirst, f.reqLast = psn, psn
		return
	}
	f.reqLast = psn
	d := psn.Diff(f.reqMax)
	if d <= 0 {
		s.retrans++
		f.retransmitted++
		return
	}
	if d > 1 && !f.afterRead {
		s.gaps++
		s.missing += int64(d - 1)
		f.gaps++
		f.missing += int64(d - 1)
	}
	f.reqMax, f.afterRead = psn, op.IsReadRequest()
}

// trackResponse applies the rules to responses: a READ response whose PSN is not after the highest response PSN
// is a retransmission and a READ response that skips PSNs is a gap; ACKs only move the highest PSN forward
// (they are coalesced, so their jumps mean nothing).
func (s *Stats) trackResponse(f *flow, op roce.Opcode, psn roce.PSN) {
	if !f.haveResp {
		f.respMax, f.haveResp = psn, true
		f.respFirst, f.respLast = psn, psn
		return
	}
	f.respLast = psn
	d := psn.Diff(f.respMax)
	if !op.IsReadResponse() {
		if d > 0 {
			f.respMax = psn
		}
		return
	}
	if d <= 0 {
		s.retrans++
		f.retransmitted++
		return
	}
	if d > 1 {
		s.gaps++
		s.missing += int64(d - 1)
		f.gaps++
		f.missing += int64(d - 1)
	}
	f.respMax = psn
}

// flow finds or creates the flow of p, through a direct-mapped cache indexed by the QP and the addresses'
// low bytes.
func (s *Stats) flow(p *roce.Packet) *flow {
	k := flowKey{src: p.SrcIP, dst: p.DstIP, qp: p.BTH.DestQP}
	d, l3 := p.Data(), p.L3Offset
	var h uint32
	if p.Version == roce.RoCEv2 && !p.IPv6 {
		h = uint32(d[l3+15])<<8 ^ uint32(d[l3+19]) // last bytes of the IPv4 addresses
	} else {
		h = uint32(d[l3+23])<<8 ^ uint32(d[l3+39]) // last bytes of the IPv6 addresses or GIDs
	}
	h ^= k.qp * 0x9e3779b1
	e := &s.cache[(h>>16)%flowCacheSize]
	if e.f != nil && e.key == k {
		return e.f
	}
	f := s.flows[k]
	if f == nil {
		f = &flow{}
		s.flows[k] = f
	}
	e.key, e.f = k, f
	return f
}

func (s *Stats) countVLAN(p *roce.Packet) {
	if p.NumVLANs == 0 {
		s.untagged++
		return
	}
	// The outer tag identifies the VLAN on the wire.
	s.vlans[p.VLANs[0].ID()]++
}

// addMACControl counts a MAC control frame: 802.3x PAUSE or 802.1Qbb PFC (opcode, class-enable vector, eight
// pause quanta; a zero quantum on an enabled class means resume).
func (s *Stats) addMACControl(b []byte) {
	if len(b) < 2 {
		return
	}
	switch binary.BigEndian.Uint16(b) {
	case macCtlPause:
		s.pauseFrames++
	case macCtlPFC:
		s.pfcFrames++
		if len(b) < 4+16 {
			return
		}
		enable := binary.BigEndian.Uint16(b[2:])
		for prio := 0; prio < 8; prio++ {
			if enable&(1<<prio) == 0 {
				continue
			}
			if binary.BigEndian.Uint16(b[4+2*prio:]) == 0 {
				s.pfcResume[prio]++
			} else {
				s.pfcPause[prio]++
			}
		}
	}
}

// addMirror summarizes Lumina's metadata: events by type and the mirror sequence, whose holes are mirrored
// copies that never reached a dumper.
func (s *Stats) addMirror(data []byte) {
	m, ok := roce.DecodeMirror(data)
	if !ok {
		return
	}
	s.events[m.Event]++
	if !s.haveSeq {
		s.seqFirst, s.seqLast, s.haveSeq = m.Seq, m.Seq, true
		return
	}
	switch {
	case m.Seq == s.seqLast+1:
	case m.Seq > s.seqLast+1:
		s.seqGaps++
		s.seqMissing += int64(m.Seq - s.seqLast - 1)
	default:
		s.seqBackwards++
	}
	s.seqLast = m.Seq
}
