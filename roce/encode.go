package roce

import (
	"encoding/binary"
	"errors"
)

// Errors returned by AppendTo.
var (
	ErrEncodeNoAddr    = errors.New("roce: encode: source and destination IP must be set and of the same family")
	ErrEncodeTooLarge  = errors.New("roce: encode: packet exceeds 65535 bytes")
	ErrEncodeNotRoCE   = errors.New("roce: encode: Version must be RoCEv1 or RoCEv2")
	ErrEncodeBadOpcode = errors.New("roce: encode: opcode is not defined for its transport")
)

// AppendTo encodes the packet described by p and appends the frame to buf, returning the extended buffer.
//
// It uses p's Ethernet addresses and VLAN tags, Version (RoCEv1 or RoCEv2), IPv6, TOS, TTL, IPID, IPFlags,
// FlowLabel, SrcIP, DstIP, UDPSrc, UDPDst (0 means 4791), the BTH, and the extended headers that the opcode
// requires (the Ext flags are set from the opcode, not read). The payload is p.Payload if it is not nil, else
// p.PayloadLen zero bytes; a CNP always carries its 16 reserved zero bytes. The BTH pad count, all lengths, the
// IPv4 header checksum and the ICRC are computed. The UDP checksum is 0, as RoCEv2 NICs send it.
// After AppendTo, p describes the new frame exactly as Decode would (p.Payload aliases the appended bytes).
func (p *Packet) AppendTo(buf []byte) ([]byte, error) {
	if p.Version != RoCEv1 && p.Version != RoCEv2 {
		return buf, ErrEncodeNotRoCE
	}
	op := p.BTH.Opcode
	if !op.Valid() {
		return buf, ErrEncodeBadOpcode
	}
	if p.Version == RoCEv2 && (!p.SrcIP.IsValid() || !p.DstIP.IsValid() || p.SrcIP.Is4() != p.DstIP.Is4() ||
		p.SrcIP.Is4() == p.IPv6) {
		return buf, ErrEncodeNoAddr
	}
	plen := p.PayloadLen
	if p.Payload != nil {
		plen = len(p.Payload)
	}
	if op == CNP {
		plen = CNPPadLen
	}
	p.PayloadLen = plen
	pad := (4 - plen%4) % 4
	p.BTH.PadCount = uint8(pad)

	ext, extLen := extHeaders(op)
	p.Ext = ext
	tlen := BTHLen + extLen + plen + pad + ICRCLen

	l2 := EthernetLen + VLANLen*p.NumVLANs
	var l3len int
	switch {
	case p.Version == RoCEv1:
		l3len = GRHLen
	case p.IPv6:
		l3len = IPv6Len + UDPLen
	default:
		l3len = IPv4Len + UDPLen
	}
	total := l2 + l3len + tlen
	if l3len+tlen > 65535 {
		return buf, ErrEncodeTooLarge
	}
	start := len(buf)
	buf = grow(buf, total)
	d := buf[start:]
	clear(d)

	copy(d[0:6], p.EthDst[:])
	copy(d[6:12], p.EthSrc[:])
	off := 12
	for i := 0; i < p.NumVLANs; i++ {
		binary.BigEndian.PutUint16(d[off:], p.VLANs[i].TPID)
		binary.BigEndian.PutUint16(d[off+2:], p.VLANs[i].TCI)
		off += VLANLen
	}
	l3 := off + 2
	p.L3Offset = l3
	bth := p.encodeL3(d, l3, tlen)
	binary.BigEndian.PutUint16(d[off:], p.EtherType)
	if p.Version == RoCEv2 {
		u := bth - UDPLen
		if p.UDPDst == 0 {
			p.UDPDst = UDPPort
		}
		p.UDPLen = uint16(UDPLen + tlen)
		p.UDPChecksum = 0
		binary.BigEndian.PutUint16(d[u:], p.UDPSrc)
		binary.BigEndian.PutUint16(d[u+2:], p.UDPDst)
		binary.BigEndian.PutUint16(d[u+4:], p.UDPLen)
	}
	p.BTHOffset = bth
	p.BTH.encode(d[bth:])
	o := bth + BTHLen
	o = p.encodeExt(d, o, ext)
	p.PayloadOffset = o
	if p.Payload != nil && op != CNP {
		copy(d[o:], p.Payload)
	}
	p.Payload = d[o : o+plen]
	end := o + plen + pad + ICRCLen
	p.data = d
	p.origLen = len(d)
	p.end = end
	p.Truncated = false
	p.Reason = ReasonNone
	sc := scratchPool.Get().(*ICRCScratch)
	p.ICRC = icrc(sc[:0], d, p.Version, p.IPv6, l3, p.IPHdrLen, bth, end)
	scratchPool.Put(sc)
	binary.LittleEndian.PutUint32(d[end-ICRCLen:], p.ICRC)
	return buf, nil
}

// extHeaders returns the extended transport headers an opcode carries and their length in bytes.
func extHeaders(op Opcode) (ext ExtFlags, n int) {
	add := func(cond bool, f ExtFlags, l int) {
		if cond {
			ext |= f
			n += l
		}
	}
	add(op.HasRDETH(), ExtRDETH, RDETHLen)
	add(op.HasDETH(), ExtDETH, DETHLen)
	add(op.HasXRCETH(), ExtXRCETH, XRCETHLen)
	add(op.HasRETH(), ExtRETH, RETHLen)
	add(op.HasAtomicETH(), ExtAtomicETH, AtomicETHLen)
	add(op.HasImm(), ExtImm, ImmLen)
	add(op.HasIETH(), ExtIETH, IETHLen)
	add(op.HasAETH(), ExtAETH, AETHLen)
	add(op.HasAtomicAckETH(), ExtAtomicAckETH, AtomicAckETHLen)
	return ext, n
}

// encodeL3 writes the network header (GRH for RoCEv1, IPv6 or IPv4 with the UDP header's place after it) at
// l3 for a transport of tlen bytes, and returns the BTH's offset.
func (p *Packet) encodeL3(d []byte, l3, tlen int) (bth int) {
	switch {
	case p.Version == RoCEv1:
		p.EtherType = EtherTypeRoCEv1
		p.IPHdrLen = GRHLen
		p.NextHdr = 0x1b
		binary.BigEndian.PutUint32(d[l3:], 6<<28|uint32(p.TOS)<<20|p.FlowLabel&0xfffff)
		binary.BigEndian.PutUint16(d[l3+4:], uint16(tlen))
		d[l3+6] = 0x1b
		d[l3+7] = p.TTL
		s, t := p.SrcIP.As16(), p.DstIP.As16()
		copy(d[l3+8:], s[:])
		copy(d[l3+24:], t[:])
		p.IPTotLen = GRHLen + tlen
		bth = l3 + GRHLen
	case p.IPv6:
		p.EtherType = EtherTypeIPv6
		p.IPHdrLen = IPv6Len
		binary.BigEndian.PutUint32(d[l3:], 6<<28|uint32(p.TOS)<<20|p.FlowLabel&0xfffff)
		binary.BigEndian.PutUint16(d[l3+4:], uint16(UDPLen+tlen))
		d[l3+6] = 17
		d[l3+7] = p.TTL
		s, t := p.SrcIP.As16(), p.DstIP.As16()
		copy(d[l3+8:], s[:])
		copy(d[l3+24:], t[:])
		p.IPTotLen = IPv6Len + UDPLen + tlen
		bth = l3 + IPv6Len + UDPLen
	default:
		p.EtherType = EtherTypeIPv4
		p.IPHdrLen = IPv4Len
		d[l3] = 0x45
		d[l3+1] = p.TOS
		p.IPTotLen = IPv4Len + UDPLen + tlen
		binary.BigEndian.PutUint16(d[l3+2:], uint16(p.IPTotLen))
		binary.BigEndian.PutUint16(d[l3+4:], p.IPID)
		binary.BigEndian.PutUint16(d[l3+6:], uint16(p.IPFlags&7)<<13)
		d[l3+8] = p.TTL
		d[l3+9] = 17
		s, t := p.SrcIP.As4(), p.DstIP.As4()
		copy(d[l3+12:], s[:])
		copy(d[l3+16:], t[:])
		p.IPChecksum = IPv4Checksum(d[l3 : l3+IPv4Len])
		binary.BigEndian.PutUint16(d[l3+10:], p.IPChecksum)
		bth = l3 + IPv4Len + UDPLen
	}
	return bth
}

// encodeExt writes the extended transport headers ext names from offset o and returns the offset after them.
func (p *Packet) encodeExt(d []byte, o int, ext ExtFlags) int {
	if ext&ExtRDETH != 0 {
		put24(d[o+1:], p.RDETH)
		o += RDETHLen
	}
	if ext&ExtDETH != 0 {
		binary.BigEndian.PutUint32(d[o:], p.DETH.QKey)
		put24(d[o+5:], p.DETH.SrcQP)
		o += DETHLen
	}
	if ext&ExtXRCETH != 0 {
		put24(d[o+1:], p.XRCETH)
		o += XRCETHLen
	}
	if ext&ExtRETH != 0 {
		binary.BigEndian.PutUint64(d[o:], p.RETH.VA)
		binary.BigEndian.PutUint32(d[o+8:], p.RETH.RKey)
		binary.BigEndian.PutUint32(d[o+12:], p.RETH.DMALen)
		o += RETHLen
	}
	if ext&ExtAtomicETH != 0 {
		binary.BigEndian.PutUint64(d[o:], p.AtomicETH.VA)
		binary.BigEndian.PutUint32(d[o+8:], p.AtomicETH.RKey)
		binary.BigEndian.PutUint64(d[o+12:], p.AtomicETH.SwapAdd)
		binary.BigEndian.PutUint64(d[o+20:], p.AtomicETH.Compare)
		o += AtomicETHLen
	}
	if ext&ExtImm != 0 {
		binary.BigEndian.PutUint32(d[o:], p.Imm)
		o += ImmLen
	}
	if ext&ExtIETH != 0 {
		binary.BigEndian.PutUint32(d[o:], p.IETH)
		o += IETHLen
	}
	if ext&ExtAETH != 0 {
		d[o] = p.AETH.Syndrome
		put24(d[o+1:], p.AETH.MSN)
		o += AETHLen
	}
	if ext&ExtAtomicAckETH != 0 {
		binary.BigEndian.PutUint64(d[o:], p.AtomicAckETH)
		o += AtomicAckETHLen
	}
	return o
}

// IPv4Checksum returns the header checksum of an IPv4 header whose checksum field is ignored.
func IPv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
