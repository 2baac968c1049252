package roce

import (
	"encoding/binary"
	"hash/crc32"
	"sync"
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
	s := scratchPool.Get().(*ICRCScratch)
	crc, ok := p.ComputeICRCScratch(s)
	scratchPool.Put(s)
	return crc, ok
}

// scratchPool holds the gathering buffers of the ICRC computations that bring none (ComputeICRC, Encode).
var scratchPool = sync.Pool{New: func() any { return new(ICRCScratch) }}

// ComputeICRCScratch is ComputeICRC gathering in s (a loop over many packets keeps one per goroutine).
func (p *Packet) ComputeICRCScratch(s *ICRCScratch) (uint32, bool) {
	if p.Version == NotRoCE || p.Truncated || p.end == 0 || p.end > len(p.data) {
		return 0, false
	}
	return icrc(s[:0], p.data, p.Version, p.IPv6, p.L3Offset, p.IPHdrLen, p.BTHOffset, p.end), true
}

// icrc computes the invariant CRC of frame d, whose network header starts at l3 (ipHdrLen bytes long), whose BTH
// starts at bth and whose ICRC ends at end. s is scratch space of at least icrcScratch bytes: the masked headers
// and the first payload bytes are gathered there so that the CRC runs as long updates. Each update is a multiple
// of 16 bytes and at least 64, all of which the carry-less-multiply path of hash/crc32 takes (it leaves a
// length's last len%16 bytes, and any update under 64 bytes, to a table loop that costs as much as a few hundred
// bytes of CLMUL): the first payload bytes gathered are as many as leave the rest a multiple of 16, and the
// gathered block starts with the k zero bytes that make it one too, from the CRC state crcLead[k] that those
// zeros take to crcAfterLRH (exact: a CRC's state moves through zero bytes by an invertible map).
func icrc(s, d []byte, v Version, ipv6 bool, l3, ipHdrLen, bth, end int) uint32 {
	h := BTHLen // the masked headers' length
	if v == RoCEv2 && !ipv6 {
		h += ipHdrLen
	} else {
		h += IPv6Len
	}
	if v == RoCEv2 {
		h += UDPLen
	}
	rest := d[bth+BTHLen : end-ICRCLen]
	r := len(rest)
	var n, k int // payload bytes gathered, zero bytes leading
	if t := (max(h+r, 64) + 15) &^ 15; t <= cap(s) {
		n, k = r, t-h-r // everything in one update
	} else {
		n = min(cap(s)-h-15, r-64)
		n -= (n - r) & 15 // the rest, r-n >= 64, a multiple of 16
		k = -(h + n) & 15
	}
	s = append(s, zeros[:k]...)
	if v == RoCEv2 && !ipv6 {
		s = append(s, d[l3:l3+ipHdrLen]...)
		s[k+1] = 0xff // TOS
		s[k+8] = 0xff // TTL
		s[k+10], s[k+11] = 0xff, 0xff
	} else { // IPv6 header or GRH: version kept, traffic class + flow label + hop limit masked
		s = append(s, d[l3:l3+IPv6Len]...)
		s[k] |= 0x0f
		s[k+1], s[k+2], s[k+3] = 0xff, 0xff, 0xff
		s[k+7] = 0xff
	}
	if v == RoCEv2 {
		u := l3 + ipHdrLen
		s = append(s, d[u:u+UDPLen]...)
		s[len(s)-2], s[len(s)-1] = 0xff, 0xff
	}
	s = append(s, d[bth:bth+BTHLen]...)
	s[len(s)-BTHLen+4] = 0xff
	s = append(s, rest[:n]...)
	crc := crc32.Update(crcLead[k], crc32.IEEETable, s)
	if n == r {
		return crc
	}
	return crc32.Update(crc, crc32.IEEETable, rest[n:])
}

// icrcLeadMax bounds the zero bytes icrc puts before the headers: up to 15 to round a length up to a multiple of
// 16, and up to 64 - 40 (the shortest headers: IPv4, UDP, BTH) to make a short packet's one update 64 bytes.
const icrcLeadMax = 32

var zeros [icrcLeadMax]byte

// crcLead[k] is the CRC-32 state (as hash/crc32.Update takes and returns it) from which k zero bytes lead to
// crcAfterLRH.
var crcLead = leadStates(crcAfterLRH)

// leadStates returns, for k = 0 .. icrcLeadMax-1, the state from which k zero bytes lead to the state want. One
// zero byte takes the register x (hash/crc32's state inverted) to tab[x&0xff] ^ x>>8, whose top byte is the
// top byte of tab[x&0xff]; the top bytes of the table's 256 entries differ, so the step back is unique.
func leadStates(want uint32) [icrcLeadMax]uint32 {
	tab := crc32.IEEETable
	var byTop [256]byte
	for i, e := range tab {
		byTop[e>>24] = byte(i)
	}
	var out [icrcLeadMax]uint32
	x := ^want
	for k := range out {
		out[k] = ^x
		i := byTop[x>>24]
		x = (x^tab[i])<<8 | uint32(i)
	}
	return out
}

// CheckICRC verifies the packet's invariant CRC.
func (p *Packet) CheckICRC() ICRCStatus {
	return p.icrcStatus(p.ComputeICRC())
}

// CheckICRCScratch is CheckICRC gathering in s (a loop over many packets keeps one per goroutine).
func (p *Packet) CheckICRCScratch(s *ICRCScratch) ICRCStatus {
	return p.icrcStatus(p.ComputeICRCScratch(s))
}

func (p *Packet) icrcStatus(want uint32, ok bool) ICRCStatus {
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
