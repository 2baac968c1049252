package roce

// Opcode is the BTH opcode: bits 7..5 select the transport, bits 4..0 the operation (IBTA vol. 1 §9.2.1).
//
//	 7   6   5   4   3   2   1   0
//	+-----------+-------------------+
//	| transport |     operation     |
//	+-----------+-------------------+
type Opcode uint8

// Transport is the service type encoded in an opcode's top three bits.
type Transport uint8

// Transports, by the opcode's top three bits. CNP (100b) is RoCEv2's congestion notification (annex A17).
const (
	RC     Transport = 0
	UC     Transport = 1
	RD     Transport = 2
	UD     Transport = 3
	CNPTr  Transport = 4
	XRC    Transport = 5
	Vendor Transport = 6 // 110b and 111b: manufacturer specific
)

func (t Transport) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case RD:
		return "RD"
	case UD:
		return "UD"
	case CNPTr:
		return "CNP"
	case XRC:
		return "XRC"
	}
	return "vendor"
}

// Operation codes (the low five bits).
const (
	OpSendFirst                 = 0x00
	OpSendMiddle                = 0x01
	OpSendLast                  = 0x02
	OpSendLastImm               = 0x03
	OpSendOnly                  = 0x04
	OpSendOnlyImm               = 0x05
	OpWriteFirst                = 0x06
	OpWriteMiddle               = 0x07
	OpWriteLast                 = 0x08
	OpWriteLastImm              = 0x09
	OpWriteOnly                 = 0x0a
	OpWriteOnlyImm              = 0x0b
	OpReadRequest               = 0x0c
	OpReadResponseFirst         = 0x0d
	OpReadResponseMiddle        = 0x0e
	OpReadResponseLast          = 0x0f
	OpReadResponseOnly          = 0x10
	OpAcknowledge               = 0x11
	OpAtomicAcknowledge         = 0x12
	OpCompareSwap               = 0x13
	OpFetchAdd                  = 0x14
	OpResync                    = 0x15
	OpSendLastInvalidate        = 0x16
	OpSendOnlyInvalidate        = 0x17
	OpFlush                     = 0x1c
	OpAtomicWrite               = 0x1d
	opInvalid                   = 0xff
	numOps                      = 32
	transportShift              = 5
	opMask               uint8  = 0x1f
	cnpOpcode            Opcode = 0x81
)

// Frequently used full opcodes.
const (
	RCSendFirst          Opcode = OpSendFirst
	RCSendMiddle         Opcode = OpSendMiddle
	RCSendLast           Opcode = OpSendLast
	RCSendLastImm        Opcode = OpSendLastImm
	RCSendOnly           Opcode = OpSendOnly
	RCSendOnlyImm        Opcode = OpSendOnlyImm
	RCWriteFirst         Opcode = OpWriteFirst
	RCWriteMiddle        Opcode = OpWriteMiddle
	RCWriteLast          Opcode = OpWriteLast
	RCWriteLastImm       Opcode = OpWriteLastImm
	RCWriteOnly          Opcode = OpWriteOnly
	RCWriteOnlyImm       Opcode = OpWriteOnlyImm
	RCReadRequest        Opcode = OpReadRequest
	RCReadResponseFirst  Opcode = OpReadResponseFirst
	RCReadResponseMiddle Opcode = OpReadResponseMiddle
	RCReadResponseLast   Opcode = OpReadResponseLast
	RCReadResponseOnly   Opcode = OpReadResponseOnly
	RCAcknowledge        Opcode = OpAcknowledge
	RCAtomicAcknowledge  Opcode = OpAtomicAcknowledge
	RCCompareSwap        Opcode = OpCompareSwap
	RCFetchAdd           Opcode = OpFetchAdd
	CNP                  Opcode = cnpOpcode
)

// MakeOpcode combines a transport and an operation.
func MakeOpcode(t Transport, op uint8) Opcode { return Opcode(uint8(t)<<transportShift | op&opMask) }

// Transport returns the opcode's service type.
func (o Opcode) Transport() Transport {
	t := Transport(o >> transportShift)
	if t > XRC {
		return Vendor
	}
	return t
}

// Op returns the operation bits (the low five bits).
func (o Opcode) Op() uint8 { return uint8(o) & opMask }

// header presence bits, per operation.
const (
	hRETH uint16 = 1 << iota
	hImm
	hIETH
	hAETH
	hAtomicETH
	hAtomicAckETH
	hValid // the operation is defined for RC (and, by the table below, possibly others)
)

var opInfo = [numOps]struct {
	name  string
	flags uint16
}{
	OpSendFirst:          {"SEND First", hValid},
	OpSendMiddle:         {"SEND Middle", hValid},
	OpSendLast:           {"SEND Last", hValid},
	OpSendLastImm:        {"SEND Last with Immediate", hValid | hImm},
	OpSendOnly:           {"SEND Only", hValid},
	OpSendOnlyImm:        {"SEND Only with Immediate", hValid | hImm},
	OpWriteFirst:         {"RDMA WRITE First", hValid | hRETH},
	OpWriteMiddle:        {"RDMA WRITE Middle", hValid},
	OpWriteLast:          {"RDMA WRITE Last", hValid},
	OpWriteLastImm:       {"RDMA WRITE Last with Immediate", hValid | hImm},
	OpWriteOnly:          {"RDMA WRITE Only", hValid | hRETH},
	OpWriteOnlyImm:       {"RDMA WRITE Only with Immediate", hValid | hRETH | hImm},
	OpReadRequest:        {"RDMA READ Request", hValid | hRETH},
	OpReadResponseFirst:  {"RDMA READ Response First", hValid | hAETH},
	OpReadResponseMiddle: {"RDMA READ Response Middle", hValid},
	OpReadResponseLast:   {"RDMA READ Response Last", hValid | hAETH},
	OpReadResponseOnly:   {"RDMA READ Response Only", hValid | hAETH},
	OpAcknowledge:        {"Acknowledge", hValid | hAETH},
	OpAtomicAcknowledge:  {"ATOMIC Acknowledge", hValid | hAETH | hAtomicAckETH},
	OpCompareSwap:        {"CmpSwap", hValid | hAtomicETH},
	OpFetchAdd:           {"FetchAdd", hValid | hAtomicETH},
	OpResync:             {"RESYNC", hValid},
	OpSendLastInvalidate: {"SEND Last with Invalidate", hValid | hIETH},
	OpSendOnlyInvalidate: {"SEND Only with Invalidate", hValid | hIETH},
	OpFlush:              {"FLUSH", hValid | hRETH},
	OpAtomicWrite:        {"ATOMIC WRITE", hValid | hRETH},
}

// Valid reports whether the opcode is defined for its transport (IBTA vol. 1 table 35, plus CNP 0x81 of annex
// A17 and the FLUSH/ATOMIC WRITE operations of release 1.5).
func (o Opcode) Valid() bool { return validOpcodes[o] }

// validOpcodes is valid for every opcode: Valid is on every decoded packet's path.
var validOpcodes = func() (t [256]bool) {
	for i := range t {
		t[i] = Opcode(i).valid()
	}
	return t
}()

func (o Opcode) valid() bool {
	if o == CNP {
		return true
	}
	op := o.Op()
	if opInfo[op].flags&hValid == 0 {
		return false
	}
	switch o.Transport() {
	case RC, XRC:
		return op != OpResync
	case UC:
		return op <= OpWriteOnlyImm
	case RD:
		return op <= OpResync && op != OpFlush && op != OpAtomicWrite
	case UD:
		return op == OpSendOnly || op == OpSendOnlyImm
	}
	return false
}

// String returns the name Wireshark-style users expect, e.g. "RC RDMA WRITE First", "CNP", or
// "Unknown (0xNN)" for an undefined opcode.
func (o Opcode) String() string {
	if o == CNP {
		return "CNP"
	}
	if !o.Valid() {
		return unknownNames[o]
	}
	return names[o]
}

var names, unknownNames [256]string

func init() {
	const hexdig = "0123456789abcdef"
	for i := 0; i < 256; i++ {
		o := Opcode(i)
		unknownNames[i] = "Unknown (0x" + string(hexdig[i>>4]) + string(hexdig[i&15]) + ")"
		if o.Valid() && o != CNP {
			names[i] = o.Transport().String() + " " + opInfo[o.Op()].name
		}
	}
}

func (o Opcode) flags() uint16 {
	if o == CNP || !o.Valid() {
		return 0
	}
	return opInfo[o.Op()].flags
}

// HasRETH reports whether packets with this opcode carry an RDMA extended transport header.
func (o Opcode) HasRETH() bool { return o.flags()&hRETH != 0 }

// HasImm reports whether packets with this opcode carry immediate data.
func (o Opcode) HasImm() bool { return o.flags()&hImm != 0 }

// HasIETH reports whether packets with this opcode carry an invalidate extended transport header.
func (o Opcode) HasIETH() bool { return o.flags()&hIETH != 0 }

// HasAETH reports whether packets with this opcode carry an ACK extended transport header.
func (o Opcode) HasAETH() bool { return o.flags()&hAETH != 0 }

// HasAtomicETH reports whether packets with this opcode carry an atomic extended transport header.
func (o Opcode) HasAtomicETH() bool { return o.flags()&hAtomicETH != 0 }

// HasAtomicAckETH reports whether packets with this opcode carry an atomic ACK extended transport header.
func (o Opcode) HasAtomicAckETH() bool { return o.flags()&hAtomicAckETH != 0 }

// IsResponse reports whether the opcode is sent by a responder (ACKs and READ/atomic responses).
func (o Opcode) IsResponse() bool {
	op := o.Op()
	return o.Valid() && o != CNP && op >= OpReadResponseFirst && op <= OpAtomicAcknowledge
}

// IsRequest reports whether the opcode is a request (sent by a requester).
func (o Opcode) IsRequest() bool { return o.Valid() && o != CNP && !o.IsResponse() }

// HasDETH reports whether packets with this opcode carry a datagram extended transport header: every UD
// packet and every RD request.
func (o Opcode) HasDETH() bool {
	switch o.Transport() {
	case UD:
		return o.Valid()
	case RD:
		return o.IsRequest()
	}
	return false
}

// HasRDETH reports whether packets with this opcode carry a reliable datagram extended transport header.
func (o Opcode) HasRDETH() bool { return o.Transport() == RD && o.Valid() }

// HasXRCETH reports whether packets with this opcode carry an XRC extended transport header (requests only).
func (o Opcode) HasXRCETH() bool { return o.Transport() == XRC && o.IsRequest() }

// IsAck reports whether the opcode is an Acknowledge (ACK, NAK or RNR NAK; the AETH says which).
func (o Opcode) IsAck() bool { return o.Valid() && o != CNP && o.Op() == OpAcknowledge }

// IsReadRequest reports whether the opcode is an RDMA READ request.
func (o Opcode) IsReadRequest() bool { return o.Valid() && o != CNP && o.Op() == OpReadRequest }

// IsReadResponse reports whether the opcode is an RDMA READ response (first, middle, last or only).
func (o Opcode) IsReadResponse() bool {
	op := o.Op()
	return o.Valid() && o != CNP && op >= OpReadResponseFirst && op <= OpReadResponseOnly
}

// IsSend reports whether the opcode is a SEND of any kind.
func (o Opcode) IsSend() bool {
	op := o.Op()
	return o.Valid() && o != CNP && (op <= OpSendOnlyImm || op == OpSendLastInvalidate || op == OpSendOnlyInvalidate)
}

// IsWrite reports whether the opcode is an RDMA WRITE of any kind.
func (o Opcode) IsWrite() bool {
	op := o.Op()
	return o.Valid() && o != CNP && op >= OpWriteFirst && op <= OpWriteOnlyImm
}

// CarriesPayload reports whether the opcode is a data-bearing packet: SEND, WRITE and READ responses.
func (o Opcode) CarriesPayload() bool { return o.IsSend() || o.IsWrite() || o.IsReadResponse() }

// IsFirst reports whether the opcode starts a message (First or Only).
func (o Opcode) IsFirst() bool {
	switch o.Op() {
	case OpSendFirst, OpSendOnly, OpSendOnlyImm, OpWriteFirst, OpWriteOnly, OpWriteOnlyImm,
		OpReadResponseFirst, OpReadResponseOnly, OpSendOnlyInvalidate:
		return o.Valid() && o != CNP
	}
	return false
}

// IsLast reports whether the opcode ends a message (Last or Only).
func (o Opcode) IsLast() bool {
	switch o.Op() {
	case OpSendLast, OpSendLastImm, OpSendOnly, OpSendOnlyImm, OpWriteLast, OpWriteLastImm, OpWriteOnly,
		OpWriteOnlyImm, OpReadResponseLast, OpReadResponseOnly, OpSendLastInvalidate, OpSendOnlyInvalidate:
		return o.Valid() && o != CNP
	}
	return false
}
