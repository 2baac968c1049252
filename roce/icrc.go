package roce

import (
	"encoding/binary"
	"hash/crc32"
)

// ICRCStatus is the verdict on a packet's invariant CRC.
type ICRCStatus uint8

// ICRC verdicts. A truncated capture is NotCheckable, never Bad.
const (
	ICRCNotCheckable ICRCStatus = iota
	ICRCGood
	ICRCBad
)

func (s ICRCStatus) String() string {
	switch s {
	case ICRCGood:
		return "good"
	case ICRCBad:
		return "bad"
	}
	return "not checkable"
}

// crcAfterLRH is the CRC-32 state after the 8 bytes of ones that stand in for the InfiniBand LRH (annex A17.8).
var crcAfterLRH = crc32.Update(0, crc32.IEEETable, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// ComputeICRC computes the invariant CRC of a decoded RoCE packet whose bytes are complete. Variant fields
// are masked with ones: IPv4 TOS, TTL and header checksum; IPv6/GRH traffic class, flow label and hop limit; the
// UDP checksum; the BTH's FECN/BECN/reserved byte. It returns false if the packet is not RoCE or truncated.
func (p *Packet) ComputeICRC() (uint32, bool) {
	if p.Version == NotRoCE || p.Truncated || p.end == 0 || p.end > len(p.data) {
		return 0, false
	}
	return icrc(p.scratch[:0], p.data, p.Version, p.IPv6, p.L3Offset, p.IPHdrLen, p.BTHOffset, p.end), true
}

// icrc computes the invariant CRC of frame d, whose network header starts at l3 (ipHdrLen bytes long), whose BTH
// starts at bth and whose ICRC ends at end. s is scratch space of at least icrcScratch bytes: the masked headers
// and the first payload bytes are gathered there so that the CRC runs as one long update (short updates miss
// the carry-less-multiply fast path and cost as much as a kilobyte of payload).
func icrc(s, d []byte, v Version, ipv6 bool, l3, ipHdrLen, bth, end int) uint32 {
	if v == RoCEv2 && !ipv6 {
		s = append(s, d[l3:l3+ipHdrLen]...)
		s[1] = 0xff // TOS
		s[8] = 0xff // TTL
		s[10], s[11] = 0xff, 0xff
	} else { // IPv6 header or GRH: version kept, traffic class + flow label + hop limit masked
		s = append(s, d[l3:l3+IPv6Len]...)
		s[0] |= 0x0f
		s[1], s[2], s[3] = 0xff, 0xff, 0xff
		s[7] = 0xff
	}
	if v == RoCEv2 {
		u := l3 + ipHdrLen
		s = append(s, d[u:u+UDPLen]...)
		s[len(s)-2], s[len(s)-1] = 0xff, 0xff
	}
	s = append(s, d[bth:bth+BTHLen]...)
	s[len(s)-BTHLen+4] = 0xff
	rest := d[bth+BTHLen : end-ICRCLen]
	n := min(len(rest), cap(s)-len(s))
	s = append(s, rest[:n]...)
	crc := crc32.Update(crcAfterLRH, crc32.IEEETable, s)
	return crc32.Update(crc, crc32.IEEETable, rest[n:])
}

// CheckICRC verifies the packet's invariant CRC.
func (p *Packet) CheckICRC() ICRCStatus {
	want, ok := p.ComputeICRC()
	if !ok {
		return ICRCNotCheckable
	}
	if want == p.ICRC {
		return ICRCGood
	}
	return ICRCBad
}

// FixICRC recomputes the ICRC of a decoded packet and writes it into the frame (little-endian, as on the wire).
// It reports whether the frame was complete enough to do so.
func (p *Packet) FixICRC() bool {
	crc, ok := p.ComputeICRC()
	if !ok {
		return false
	}
	binary.LittleEndian.PutUint32(p.data[p.end-ICRCLen:], crc)
	p.ICRC = crc
	return true
}
