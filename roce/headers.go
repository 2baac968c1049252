package roce

import "encoding/binary"

// Header sizes in bytes.
const (
	EthernetLen     = 14
	VLANLen         = 4
	IPv4Len         = 20
	IPv6Len         = 40
	GRHLen          = 40
	UDPLen          = 8
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ImmLen          = 4
	IETHLen         = 4
	DETHLen         = 8
	RDETHLen        = 4
	XRCETHLen       = 4
	ICRCLen         = 4
	CNPPadLen       = 16 // CNPs carry 16 reserved bytes (annex A17.9.3)
	UDPPort         = 4791
)

// EtherTypes.
const (
	EtherTypeIPv4   = 0x0800
	EtherTypeIPv6   = 0x86dd
	EtherTypeRoCEv1 = 0x8915
	EtherTypeVLAN   = 0x8100
	EtherTypeQinQ   = 0x88a8
	EtherTypeQinQ2  = 0x9100
	EtherTypeARP    = 0x0806
)

// BTH is the base transport header (12 bytes).
//
//	byte 0: opcode
//	byte 1: SE(1) MigReq(1) PadCount(2) TVer(4)
//	bytes 2-3: P_Key
//	byte 4: FECN(1) BECN(1) reserved(6)   (RoCEv2 annex A17.9.1)
//	bytes 5-7: destination QP
//	byte 8: AckReq(1) reserved(7)
//	bytes 9-11: PSN
type BTH struct {
	Opcode   Opcode
	SE       bool
	MigReq   bool
	PadCount uint8
	TVer     uint8
	PKey     uint16
	FECN     bool
	BECN     bool
	Resv6    uint8
	DestQP   uint32
	AckReq   bool
	Resv7    uint8
	PSN      PSN
}

func (b *BTH) decode(d []byte) {
	b.Opcode = Opcode(d[0])
	b.SE = d[1]&0x80 != 0
	b.MigReq = d[1]&0x40 != 0
	b.PadCount = d[1] >> 4 & 3
	b.TVer = d[1] & 0x0f
	b.PKey = binary.BigEndian.Uint16(d[2:])
	b.FECN = d[4]&0x80 != 0
	b.BECN = d[4]&0x40 != 0
	b.Resv6 = d[4] & 0x3f
	b.DestQP = uint32(d[5])<<16 | uint32(d[6])<<8 | uint32(d[7])
	b.AckReq = d[8]&0x80 != 0
	b.Resv7 = d[8] & 0x7f
	b.PSN = PSN(uint32(d[9])<<16 | uint32(d[10])<<8 | uint32(d[11]))
}

func (b *BTH) encode(d []byte) {
	d[0] = byte(b.Opcode)
	d[1] = b2u(b.SE)<<7 | b2u(b.MigReq)<<6 | (b.PadCount&3)<<4 | b.TVer&0x0f
	binary.BigEndian.PutUint16(d[2:], b.PKey)
	d[4] = b2u(b.FECN)<<7 | b2u(b.BECN)<<6 | b.Resv6&0x3f
	put24(d[5:], b.DestQP)
	d[8] = b2u(b.AckReq)<<7 | b.Resv7&0x7f
	put24(d[9:], uint32(b.PSN))
}

// RETH is the RDMA extended transport header (16 bytes).
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// AtomicETH is the atomic extended transport header (28 bytes).
type AtomicETH struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// DETH is the datagram extended transport header (8 bytes).
type DETH struct {
	QKey  uint32
	SrcQP uint32
}

// AETH is the ACK extended transport header: an 8-bit syndrome and a 24-bit message sequence number.
type AETH struct {
	Syndrome uint8
	MSN      uint32
}

// AckType is the class of an AETH syndrome (bits 6..5).
type AckType uint8

// AETH syndrome classes (IBTA vol. 1 §9.7.5.1).
const (
	AckTypeACK      AckType = 0
	AckTypeRNRNAK   AckType = 1
	AckTypeReserved AckType = 2
	AckTypeNAK      AckType = 3
)

func (t AckType) String() string {
	switch t {
	case AckTypeACK:
		return "ACK"
	case AckTypeRNRNAK:
		return "RNR NAK"
	case AckTypeNAK:
		return "NAK"
	}
	return "reserved"
}

// NAKCode is the low five bits of a NAK syndrome.
type NAKCode uint8

// NAK codes (IBTA vol. 1 table 45).
const (
	NAKPSNSequenceError     NAKCode = 0
	NAKInvalidRequest       NAKCode = 1
	NAKRemoteAccessError    NAKCode = 2
	NAKRemoteOperationalErr NAKCode = 3
	NAKInvalidRDRequest     NAKCode = 4
)

// String returns the code's name as used in reports and JSON.
func (c NAKCode) String() string {
	switch c {
	case NAKPSNSequenceError:
		return "psn-sequence-error"
	case NAKInvalidRequest:
		return "invalid-request"
	case NAKRemoteAccessError:
		return "remote-access-error"
	case NAKRemoteOperationalErr:
		return "remote-operational-error"
	case NAKInvalidRDRequest:
		return "invalid-rd-request"
	}
	return "reserved-" + string(rune('0'+c/10)) + string(rune('0'+c%10))
}

// Syndromes for building AETHs.
const (
	// SyndromeACKUnlimited is an ACK with the "invalid credit" code 31 that NICs send when end-to-end credits
	// are not used.
	SyndromeACKUnlimited uint8 = 0x1f
	// SyndromePSNSeqErr is the NAK sent on a PSN sequence error (0x60).
	SyndromePSNSeqErr uint8 = 0x60
)

// Type returns the syndrome's class.
func (a AETH) Type() AckType { return AckType(a.Syndrome >> 5 & 3) }

// Credit returns the credit count of an ACK (31 means credits are not used).
func (a AETH) Credit() uint8 { return a.Syndrome & 0x1f }

// RNRTimer returns the RNR NAK timer code (see RNRTimerNs).
func (a AETH) RNRTimer() uint8 { return a.Syndrome & 0x1f }

// NAKCode returns the NAK code of a NAK.
func (a AETH) NAKCode() NAKCode { return NAKCode(a.Syndrome & 0x1f) }

// IsNAK reports whether the AETH is a NAK (not an RNR NAK).
func (a AETH) IsNAK() bool { return a.Type() == AckTypeNAK }

// rnrTimerUs is the minimum RNR NAK timer field encoding in microseconds (IBTA vol. 1 table 46). Code 0 is 655.36 ms.
var rnrTimerUs = [32]float64{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520}

// RNRTimerNs returns the RNR NAK timer that a 5-bit code stands for, in nanoseconds.
func RNRTimerNs(code uint8) int64 { return int64(rnrTimerUs[code&0x1f] * 1000) }

// TimeoutNs returns the local ACK timeout that an IB timeout exponent t stands for: 4.096 us * 2^t; 0 means
// infinite and returns 0.
func TimeoutNs(t uint8) int64 {
	if t == 0 || t > 31 {
		return 0
	}
	return 4096 << t
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func put24(d []byte, v uint32) { d[0], d[1], d[2] = byte(v>>16), byte(v>>8), byte(v) }

func get24(d []byte) uint32 { return uint32(d[0])<<16 | uint32(d[1])<<8 | uint32(d[2]) }
