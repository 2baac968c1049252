package roce

import (
	"encoding/binary"
	"net/netip"
)

// Version says how a RoCE packet is carried.
type Version uint8

// RoCE encapsulations.
const (
	NotRoCE Version = iota
	RoCEv1          // Ethernet + GRH (EtherType 0x8915)
	RoCEv2          // Ethernet + IPv4/IPv6 + UDP 4791
)

func (v Version) String() string {
	switch v {
	case RoCEv1:
		return "RoCEv1"
	case RoCEv2:
		return "RoCEv2"
	}
	return "not RoCE"
}

// Reason names why a frame is not decoded as RoCE, so that a capture summary can count and name what it skipped.
type Reason uint8

// Reasons a frame is not RoCE (or not completely decodable).
const (
	ReasonNone           Reason = iota
	ReasonShortEthernet         // shorter than an Ethernet header (after VLAN tags)
	ReasonARP                   // ARP
	ReasonOtherEtherType        // neither IPv4, IPv6 nor RoCEv1
	ReasonShortIP               // truncated or malformed IPv4/IPv6 header
	ReasonIPFragment            // an IPv4 fragment
	ReasonNotUDP                // IP but not UDP (TCP, ICMP, ...)
	ReasonOtherUDPPort          // UDP, but not to the RoCEv2 port
	ReasonShortUDP              // truncated or malformed UDP header
	ReasonShortBTH              // truncated before the end of the BTH or its extended headers
	ReasonBadGRH                // RoCEv1 frame whose GRH is malformed
	numReasons
)

var reasonNames = [numReasons]string{"", "short ethernet frame", "ARP", "other ethertype", "malformed IP header",
	"IP fragment", "IP non-UDP", "UDP non-RoCE port", "malformed UDP header", "truncated transport header",
	"malformed GRH"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// NumReasons is the number of Reason values (for arrays indexed by Reason).
const NumReasons = int(numReasons)

// ExtFlags records which extended transport headers a packet carries.
type ExtFlags uint16

// Extended headers.
const (
	ExtRDETH ExtFlags = 1 << iota
	ExtDETH
	ExtXRCETH
	ExtRETH
	ExtAtomicETH
	ExtImm
	ExtIETH
	ExtAETH
	ExtAtomicAckETH
)

// VLAN is one 802.1Q/802.1ad tag.
type VLAN struct {
	TPID uint16
	TCI  uint16
}

// ID returns the VLAN identifier; PCP the priority code point.
func (v VLAN) ID() uint16 { return v.TCI & 0x0fff }

// PCP returns the 802.1p priority.
func (v VLAN) PCP() uint8 { return uint8(v.TCI >> 13) }

// Packet is a decoded RoCE frame. Decode overwrites every field; slices alias the decoded buffer.
// A Packet is meant to be reused across frames: decoding allocates nothing.
type Packet struct {
	EthDst, EthSrc [6]byte
	VLANs          [2]VLAN
	NumVLANs       int
	EtherType      uint16 // after the VLAN tags

	Version Version
	IPv6    bool // RoCEv2 over IPv6 (RoCEv1 always has a GRH, which is IPv6-shaped)
	// TOS is the IPv4 type of service byte, or the IPv6/GRH traffic class: DSCP in the top 6 bits, ECN in the low 2.
	TOS        uint8
	TTL        uint8 // IPv4 TTL, IPv6 hop limit, GRH hop limit
	IPID       uint16
	IPFlags    uint8  // IPv4 flags (bit 1 = DF)
	FlowLabel  uint32 // IPv6 / GRH
	IPTotLen   int    // IPv4 total length, or IPv6 payload length + 40
	IPHdrLen   int
	IPChecksum uint16
	NextHdr    uint8 // GRH next header (0x1b for IBA transport)
	SrcIP      netip.Addr
	DstIP      netip.Addr

	UDPSrc, UDPDst, UDPLen, UDPChecksum uint16

	BTH          BTH
	Ext          ExtFlags
	RETH         RETH
	AETH         AETH
	AtomicETH    AtomicETH
	AtomicAckETH uint64
	Imm          uint32
	IETH         uint32
	DETH         DETH
	RDETH        uint32 // EE context
	XRCETH       uint32 // XRC SRQ number

	// Payload is the captured part of the payload (may be shorter than PayloadLen if the capture was truncated).
	Payload []byte
	// PayloadLen is the payload length the headers declare (excluding pad bytes and the ICRC).
	PayloadLen int
	// ICRC is the invariant CRC as a number (the wire carries it little-endian). Valid only if !Truncated.
	ICRC uint32
	// Truncated reports that the capture does not contain the whole packet, so the ICRC cannot be checked.
	Truncated bool

	L3Offset      int // start of the IP header or GRH
	BTHOffset     int
	PayloadOffset int

	// Reason says why the frame is not RoCE (Version == NotRoCE) or, for a RoCE frame, ReasonShortBTH if the
	// transport headers were cut by the capture length.
	Reason Reason

	data    []byte
	origLen int
	end     int // offset just past the ICRC, per the network headers
	// No ICRC scratch buffer here: a Packet stays small (decoded packets handed between cores move less
	// memory), and copies of it share nothing. ComputeICRC takes one from a pool, ComputeICRCScratch the
	// caller's.
}

// icrcScratch is the size of the buffer the ICRC gathers headers and the first payload bytes in.
const icrcScratch = 256

// ICRCScratch is the memory an ICRC computation gathers headers and the first payload bytes in
// (CheckICRCScratch): one per goroutine serves any number of packets.
type ICRCScratch [icrcScratch]byte

// DSCP returns the differentiated services code point.
func (p *Packet) DSCP() uint8 { return p.TOS >> 2 }

// ECN returns the ECN field: 0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
func (p *Packet) ECN() uint8 { return p.TOS & 3 }

// Data returns the frame the packet was decoded from.
func (p *Packet) Data() []byte { return p.data }

// OrigLen returns the frame's length on the wire.
func (p *Packet) OrigLen() int { return p.origLen }

// Has reports whether the packet carries the extended header.
func (p *Packet) Has(f ExtFlags) bool { return p.Ext&f != 0 }

// IsNAK reports whether the packet is an Acknowledge carrying a NAK (any code).
func (p *Packet) IsNAK() bool { return p.BTH.Opcode.IsAck() && p.Ext&ExtAETH != 0 && p.AETH.IsNAK() }

// IsRNRNAK reports whether the packet is an RNR NAK.
func (p *Packet) IsRNRNAK() bool {
	return p.BTH.Opcode.IsAck() && p.Ext&ExtAETH != 0 && p.AETH.Type() == AckTypeRNRNAK
}

// IsPlainACK reports whether the packet is a positive Acknowledge.
func (p *Packet) IsPlainACK() bool {
	return p.BTH.Opcode.IsAck() && p.Ext&ExtAETH != 0 && p.AETH.Type() == AckTypeACK
}

// IsCNP reports whether the packet is a RoCEv2 congestion notification packet.
func (p *Packet) IsCNP() bool { return p.Version != NotRoCE && p.BTH.Opcode == CNP }

// Decode decodes an Ethernet frame. data is the captured bytes, origLen the frame's length on the wire (use
// len(data) when the capture is complete). The RoCEv2 UDP port is 4791; see DecodePort for another.
// It returns false when the frame is not RoCE: p.Reason says why. A RoCE frame whose transport headers were cut
// by the capture returns true with Reason == ReasonShortBTH and only the headers that fit decoded.
func (p *Packet) Decode(data []byte, origLen int) bool { return p.DecodePort(data, origLen, UDPPort) }

// DecodePort is Decode with the RoCEv2 UDP destination port given (e.g. Lumina's RSS rewrite port).
func (p *Packet) DecodePort(data []byte, origLen int, port uint16) bool {
	p.data = data
	if origLen < len(data) {
		origLen = len(data)
	}
	p.origLen = origLen
	p.Version = NotRoCE
	p.Reason = ReasonNone
	p.NumVLANs = 0
	p.VLANs = [2]VLAN{}
	p.Ext = 0
	p.Payload = nil
	p.PayloadLen = 0
	p.ICRC = 0
	p.Truncated = false
	p.IPv6 = false
	p.L3Offset, p.BTHOffset, p.PayloadOffset, p.end = 0, 0, 0, 0
	p.BTH = BTH{}

	if len(data) < EthernetLen {
		p.Reason = ReasonShortEthernet
		return false
	}
	copy(p.EthDst[:], data[0:6])
	copy(p.EthSrc[:], data[6:12])
	off := 12
	et := binary.BigEndian.Uint16(data[off:])
	for (et == EtherTypeVLAN || et == EtherTypeQinQ || et == EtherTypeQinQ2) && p.NumVLANs < len(p.VLANs) {
		if len(data) < off+2+VLANLen {
			p.Reason = ReasonShortEthernet
			return false
		}
		p.VLANs[p.NumVLANs] = VLAN{TPID: et, TCI: binary.BigEndian.Uint16(data[off+2:])}
		p.NumVLANs++
		off += VLANLen
		et = binary.BigEndian.Uint16(data[off:])
	}
	p.EtherType = et
	off += 2
	p.L3Offset = off
	switch et {
	case EtherTypeIPv4:
		return p.decodeIPv4(data, off, port)
	case EtherTypeIPv6:
		return p.decodeIPv6(data, off, port)
	case EtherTypeRoCEv1:
		return p.decodeGRH(data, off)
	case EtherTypeARP:
		p.Reason = ReasonARP
	default:
		p.Reason = ReasonOtherEtherType
	}
	return false
}

func (p *Packet) decodeIPv4(d []byte, off int, port uint16) bool {
	if len(d) < off+IPv4Len || d[off]>>4 != 4 {
		p.Reason = ReasonShortIP
		return false
	}
	ihl := int(d[off]&0x0f) * 4
	if ihl < IPv4Len || len(d) < off+ihl {
		p.Reason = ReasonShortIP
		return false
	}
	p.IPHdrLen = ihl
	p.TOS = d[off+1]
	p.IPTotLen = int(binary.BigEndian.Uint16(d[off+2:]))
	p.IPID = binary.BigEndian.Uint16(d[off+4:])
	fl := binary.BigEndian.Uint16(d[off+6:])
	p.IPFlags = uint8(fl >> 13)
	p.TTL = d[off+8]
	p.IPChecksum = binary.BigEndian.Uint16(d[off+10:])
	p.SrcIP = netip.AddrFrom4([4]byte(d[off+12 : off+16]))
	p.DstIP = netip.AddrFrom4([4]byte(d[off+16 : off+20]))
	if p.IPTotLen < ihl {
		p.Reason = ReasonShortIP
		return false
	}
	if fl&0x3fff != 0 { // MF set or a non-zero fragment offset
		p.Reason = ReasonIPFragment
		return false
	}
	if d[off+9] != 17 {
		p.Reason = ReasonNotUDP
		return false
	}
	return p.decodeUDP(d, off+ihl, off+p.IPTotLen, port)
}

func (p *Packet) decodeIPv6(d []byte, off int, port uint16) bool {
	if len(d) < off+IPv6Len || d[off]>>4 != 6 {
		p.Reason = ReasonShortIP
		return false
	}
	p.IPv6 = true
	p.IPHdrLen = IPv6Len
	vtf := binary.BigEndian.Uint32(d[off:])
	p.TOS = uint8(vtf >> 20)
	p.FlowLabel = vtf & 0xfffff
	p.IPTotLen = int(binary.BigEndian.Uint16(d[off+4:])) + IPv6Len
	p.TTL = d[off+7]
	p.SrcIP = netip.AddrFrom16([16]byte(d[off+8 : off+24]))
	p.DstIP = netip.AddrFrom16([16]byte(d[off+24 : off+40]))
	if d[off+6] != 17 {
		p.Reason = ReasonNotUDP
		return false
	}
	return p.decodeUDP(d, off+IPv6Len, off+p.IPTotLen, port)
}

func (p *Packet) decodeUDP(d []byte, off, end int, port uint16) bool {
	if len(d) < off+UDPLen {
		p.Reason = ReasonShortUDP
		return false
	}
	p.UDPSrc = binary.BigEndian.Uint16(d[off:])
	p.UDPDst = binary.BigEndian.Uint16(d[off+2:])
	p.UDPLen = binary.BigEndian.Uint16(d[off+4:])
	p.UDPChecksum = binary.BigEndian.Uint16(d[off+6:])
	if p.UDPDst != port {
		p.Reason = ReasonOtherUDPPort
		return false
	}
	if int(p.UDPLen) < UDPLen+BTHLen+ICRCLen || off+int(p.UDPLen) > end {
		p.Reason = ReasonShortUDP
		return false
	}
	p.Version = RoCEv2
	return p.decodeTransport(d, off+UDPLen, off+int(p.UDPLen))
}

func (p *Packet) decodeGRH(d []byte, off int) bool {
	if len(d) < off+GRHLen || d[off]>>4 != 6 {
		p.Reason = ReasonBadGRH
		return false
	}
	p.IPv6 = false
	p.IPHdrLen = GRHLen
	vtf := binary.BigEndian.Uint32(d[off:])
	p.TOS = uint8(vtf >> 20)
	p.FlowLabel = vtf & 0xfffff
	payLen := int(binary.BigEndian.Uint16(d[off+4:]))
	p.IPTotLen = payLen + GRHLen
	p.NextHdr = d[off+6]
	p.TTL = d[off+7]
	p.SrcIP = netip.AddrFrom16([16]byte(d[off+8 : off+24]))
	p.DstIP = netip.AddrFrom16([16]byte(d[off+24 : off+40]))
	if p.NextHdr != 0x1b || payLen < BTHLen+ICRCLen {
		p.Reason = ReasonBadGRH
		return false
	}
	p.Version = RoCEv1
	return p.decodeTransport(d, off+GRHLen, off+GRHLen+payLen)
}

// decodeTransport decodes the BTH and its extended headers in [off, end) of d, where end is where the ICRC ends
// according to the network headers (it may lie beyond the captured bytes).
func (p *Packet) decodeTransport(d []byte, off, end int) bool {
	p.BTHOffset = off
	p.end = end
	if len(d) < off+BTHLen {
		p.Reason = ReasonShortBTH
		p.Truncated = true
		return true
	}
	p.BTH.decode(d[off:])
	op := p.BTH.Opcode
	off += BTHLen
	need := func(n int) bool {
		if len(d) < off+n || off+n > end-ICRCLen {
			p.Reason = ReasonShortBTH
			p.Truncated = true
			return false
		}
		return true
	}
	if op.HasRDETH() {
		if !need(RDETHLen) {
			return true
		}
		p.RDETH = get24(d[off+1:])
		p.Ext |= ExtRDETH
		off += RDETHLen
	}
	if op.HasDETH() {
		if !need(DETHLen) {
			return true
		}
		p.DETH = DETH{QKey: binary.BigEndian.Uint32(d[off:]), SrcQP: get24(d[off+5:])}
		p.Ext |= ExtDETH
		off += DETHLen
	}
	if op.HasXRCETH() {
		if !need(XRCETHLen) {
			return true
		}
		p.XRCETH = get24(d[off+1:])
		p.Ext |= ExtXRCETH
		off += XRCETHLen
	}
	if op.HasRETH() {
		if !need(RETHLen) {
			return true
		}
		p.RETH = RETH{VA: binary.BigEndian.Uint64(d[off:]), RKey: binary.BigEndian.Uint32(d[off+8:]),
			DMALen: binary.BigEndian.Uint32(d[off+12:])}
		p.Ext |= ExtRETH
		off += RETHLen
	}
	if op.HasAtomicETH() {
		if !need(AtomicETHLen) {
			return true
		}
		p.AtomicETH = AtomicETH{VA: binary.BigEndian.Uint64(d[off:]), RKey: binary.BigEndian.Uint32(d[off+8:]),
			SwapAdd: binary.BigEndian.Uint64(d[off+12:]), Compare: binary.BigEndian.Uint64(d[off+20:])}
		p.Ext |= ExtAtomicETH
		off += AtomicETHLen
	}
	if op.HasImm() {
		if !need(ImmLen) {
			return true
		}
		p.Imm = binary.BigEndian.Uint32(d[off:])
		p.Ext |= ExtImm
		off += ImmLen
	}
	if op.HasIETH() {
		if !need(IETHLen) {
			return true
		}
		p.IETH = binary.BigEndian.Uint32(d[off:])
		p.Ext |= ExtIETH
		off += IETHLen
	}
	if op.HasAETH() {
		if !need(AETHLen) {
			return true
		}
		p.AETH = AETH{Syndrome: d[off], MSN: get24(d[off+1:])}
		p.Ext |= ExtAETH
		off += AETHLen
	}
	if op.HasAtomicAckETH() {
		if !need(AtomicAckETHLen) {
			return true
		}
		p.AtomicAckETH = binary.BigEndian.Uint64(d[off:])
		p.Ext |= ExtAtomicAckETH
		off += AtomicAckETHLen
	}
	p.PayloadOffset = off
	plen := end - ICRCLen - off - int(p.BTH.PadCount)
	if plen < 0 {
		plen = 0
	}
	p.PayloadLen = plen
	capEnd := off + plen
	if capEnd > len(d) {
		capEnd = len(d)
	}
	p.Payload = d[off:capEnd]
	if len(d) < end {
		p.Truncated = true
		return true
	}
	p.ICRC = binary.LittleEndian.Uint32(d[end-ICRCLen:])
	return true
}
