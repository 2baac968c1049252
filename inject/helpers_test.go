package inject

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// Test frames are built with the roce encoder and checked with independent helpers below.

var (
	ipReq  = netip.MustParseAddr("10.0.0.1")
	ipResp = netip.MustParseAddr("10.0.0.2")
)

// fig2 is the connection of the paper's Figure 2.
func fig2(verb string) ConnMeta {
	return ConnMeta{Index: 0, Verb: verb, ReqIP: ipReq, RespIP: ipResp, ReqQPN: 0xfe, RespQPN: 0xea,
		ReqIPSN: 1001, RespIPSN: 3002}
}

type pkt struct {
	src, dst netip.Addr
	qpn      uint32
	op       roce.Opcode
	psn      roce.PSN
	syndrome uint8 // AETH syndrome for acknowledges
	payload  int
	tos      uint8
	migreq   bool
}

// build encodes p as a RoCEv2 frame (RoCEv1 when v1 is set).
func build(t testing.TB, p pkt) []byte {
	t.Helper()
	var r roce.Packet
	r.Version = roce.RoCEv2
	r.IPv6 = p.src.Is6()
	r.EthDst = [6]byte{2, 0, 0, 0, 0, 2}
	r.EthSrc = [6]byte{2, 0, 0, 0, 0, 1}
	r.SrcIP, r.DstIP = p.src, p.dst
	r.TOS = p.tos
	r.TTL = 64
	r.IPID = 0x1234
	r.IPFlags = 2
	r.UDPSrc = 0xc000 | uint16(p.psn&0x3fff)
	r.BTH = roce.BTH{Opcode: p.op, DestQP: p.qpn, PSN: p.psn, PKey: 0xffff, MigReq: p.migreq}
	if p.op.HasAETH() {
		r.AETH = roce.AETH{Syndrome: p.syndrome, MSN: 1}
	}
	if p.op.HasRETH() {
		r.RETH = roce.RETH{VA: 0x1000, RKey: 7, DMALen: 4096}
	}
	r.PayloadLen = p.payload
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatalf("building %+v: %v", p, err)
	}
	return b
}

// Packet constructors for the Figure 2 connection (and any other with the same addresses).
func wr(psn roce.PSN) pkt {
	return pkt{src: ipReq, dst: ipResp, qpn: 0xea, op: roce.RCWriteMiddle, psn: psn, payload: 64, tos: 2}
}
func rresp(psn roce.PSN) pkt {
	return pkt{src: ipResp, dst: ipReq, qpn: 0xfe, op: roce.RCReadResponseMiddle, psn: psn, payload: 64, tos: 2}
}
func rreq(psn roce.PSN) pkt {
	return pkt{src: ipReq, dst: ipResp, qpn: 0xea, op: roce.RCReadRequest, psn: psn, tos: 2}
}
func ack(psn roce.PSN) pkt {
	return pkt{src: ipResp, dst: ipReq, qpn: 0xfe, op: roce.RCAcknowledge, psn: psn, syndrome: roce.SyndromeACKUnlimited}
}
func nak(psn roce.PSN) pkt {
	return pkt{src: ipResp, dst: ipReq, qpn: 0xfe, op: roce.RCAcknowledge, psn: psn, syndrome: roce.SyndromePSNSeqErr}
}
func cnpFrom(src, dst netip.Addr, qpn uint32) pkt {
	return pkt{src: src, dst: dst, qpn: qpn, op: roce.CNP}
}

func newSwitch(t testing.TB, cfg Config) *Switch {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// decode decodes a frame the test expects to be RoCE.
func decode(t testing.TB, b []byte) *roce.Packet {
	t.Helper()
	p := new(roce.Packet)
	if !p.Decode(b, len(b)) {
		t.Fatalf("frame does not decode as RoCE: %v", p.Reason)
	}
	return p
}

// ipv4ChecksumOK verifies an IPv4 header the textbook way: the one's complement sum of all words is 0xffff.
func ipv4ChecksumOK(b []byte, l3 int) bool {
	ihl := int(b[l3]&0x0f) * 4
	var sum uint32
	for i := 0; i < ihl; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[l3+i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

func get48(b []byte) uint64 {
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}
