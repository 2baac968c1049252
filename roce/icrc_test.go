package roce

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"testing"
	"unsafe"
)

// refICRC is the ICRC as annex A17.8 defines it, in one CRC over a masked copy of the covered bytes: 8 bytes of
// ones for the LRH, the IPv4 header (TOS, TTL, checksum masked) or the IPv6 header / GRH (traffic class, flow
// label, hop limit masked), the UDP header (checksum masked), the BTH (FECN/BECN/reserved byte masked) and the
// rest up to the ICRC.
func refICRC(p *Packet, frame []byte) uint32 {
	b := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	l3 := p.L3Offset
	if p.Version == RoCEv2 && !p.IPv6 {
		h := append([]byte(nil), frame[l3:l3+p.IPHdrLen]...)
		h[1], h[8], h[10], h[11] = 0xff, 0xff, 0xff, 0xff
		b = append(b, h...)
	} else {
		h := append([]byte(nil), frame[l3:l3+IPv6Len]...)
		h[0] |= 0x0f
		h[1], h[2], h[3], h[7] = 0xff, 0xff, 0xff, 0xff
		b = append(b, h...)
	}
	if p.Version == RoCEv2 {
		u := append([]byte(nil), frame[l3+p.IPHdrLen:l3+p.IPHdrLen+UDPLen]...)
		u[6], u[7] = 0xff, 0xff
		b = append(b, u...)
	}
	bth := append([]byte(nil), frame[p.BTHOffset:p.BTHOffset+BTHLen]...)
	bth[4] = 0xff
	b = append(b, bth...)
	b = append(b, frame[p.BTHOffset+BTHLen:p.end-ICRCLen]...)
	return crc32.ChecksumIEEE(b)
}

// The ICRC, computed in updates of whole 16-byte blocks after a lead of zero bytes, is the annex's CRC of the
// masked bytes for every length around the gathering's boundaries, every header kind and IPv4 options; and
// the encoder writes it.
func TestICRCMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	var q Packet
	var dirty ICRCScratch
	for i := range dirty {
		dirty[i] = byte(i*7 + 1)
	}
	for ln := 0; ln <= 1100; ln++ {
		for kind := 0; kind < 3; kind++ {
			p := randomPacket(r)
			p.BTH.Opcode = RCWriteMiddle
			if kind == 2 {
				p.Version = RoCEv1
			} else {
				p.Version, p.IPv6 = RoCEv2, kind == 1
			}
			if kind == 0 {
				p.SrcIP, p.DstIP = netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
			} else {
				p.SrcIP, p.DstIP = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
			}
			p.Payload, p.PayloadLen = nil, ln
			frame, err := p.AppendTo(nil)
			if err != nil {
				t.Fatalf("length %d kind %d: %v", ln, kind, err)
			}
			if !q.Decode(frame, len(frame)) {
				t.Fatalf("length %d kind %d: not decoded", ln, kind)
			}
			want := refICRC(&q, frame)
			if got, ok := q.ComputeICRC(); !ok || got != want || q.ICRC != want {
				t.Fatalf("length %d kind %d: ICRC %08x (ok %v), encoded %08x, want %08x", ln, kind, got, ok, q.ICRC, want)
			}
			// With the caller's scratch, left dirty by the packet before: the same CRC and verdict.
			if got, ok := q.ComputeICRCScratch(&dirty); !ok || got != want || q.CheckICRCScratch(&dirty) != ICRCGood {
				t.Fatalf("length %d kind %d: ICRC with a scratch %08x (ok %v), want %08x", ln, kind, got, ok, want)
			}
			if kind == 0 && ln%7 == 0 {
				// The same packet with IPv4 options (4 to 40 bytes): the masked header is longer.
				o := 4 * (1 + ln/7%10)
				l3 := q.L3Offset
				g := append(append(append([]byte(nil), frame[:l3+IPv4Len]...), make([]byte, o)...), frame[l3+IPv4Len:]...)
				g[l3] = 0x40 | byte((IPv4Len+o)/4)
				binary.BigEndian.PutUint16(g[l3+2:], binary.BigEndian.Uint16(g[l3+2:])+uint16(o))
				if !q.Decode(g, len(g)) || q.IPHdrLen != IPv4Len+o {
					t.Fatalf("length %d, %d option bytes: not decoded (header %d)", ln, o, q.IPHdrLen)
				}
				if got, _ := q.ComputeICRC(); got != refICRC(&q, g) {
					t.Fatalf("length %d, %d option bytes: ICRC %08x, want %08x", ln, o, got, refICRC(&q, g))
				}
			}
		}
	}
}

// crcLead[k] leads through k zero bytes to the state after the LRH's ones.
func TestICRCLeadStates(t *testing.T) {
	for k, c := range crcLead {
		if got := crc32.Update(c, crc32.IEEETable, make([]byte, k)); got != crcAfterLRH {
			t.Fatalf("lead %d: %08x, want %08x", k, got, crcAfterLRH)
		}
	}
}

// A Packet carries no ICRC buffer (copies share nothing, and the decodings the analyzer's pipeline hands
// between cores stay small), and a bad ICRC is told from a good one with the caller's scratch as without.
func TestPacketKeepsNoScratch(t *testing.T) {
	if n := unsafe.Sizeof(Packet{}); n >= unsafe.Sizeof(ICRCScratch{})+200 {
		t.Fatalf("Packet is %d bytes: it holds an ICRC scratch buffer again", n)
	}
	r := rand.New(rand.NewPCG(5, 6))
	p := randomPacket(r)
	p.Version, p.IPv6, p.BTH.Opcode = RoCEv2, false, RCWriteMiddle
	p.SrcIP, p.DstIP = netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	p.Payload, p.PayloadLen = nil, 700
	frame, err := p.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	var q Packet
	var s ICRCScratch
	for _, flip := range []bool{false, true} {
		if flip {
			frame[len(frame)-100] ^= 0x10
		}
		if !q.Decode(frame, len(frame)) {
			t.Fatal("not decoded")
		}
		want := ICRCGood
		if flip {
			want = ICRCBad
		}
		if got, gotS := q.CheckICRC(), q.CheckICRCScratch(&s); got != want || gotS != want {
			t.Errorf("payload flipped %v: CheckICRC %v, with a scratch %v, want %v", flip, got, gotS, want)
		}
	}
}
