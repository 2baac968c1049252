package netsim

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// The NIC model encodes each data packet by patching a frame that roce.Packet.AppendTo built for the same QP,
// opcode and payload length, and recomputes the ICRC without reading the zero payload: CRC-32 is linear, so
// running the register over n zero bytes is a fixed 32x32 matrix over GF(2), computed once per length. Tests
// check every frame against roce's own ICRC.

// gf2 is a 32x32 bit matrix: column i is the image of bit i.
type gf2 [32]uint32

func (m *gf2) times(v uint32) uint32 {
	var s uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			s ^= m[i]
		}
	}
	return s
}

// mul returns m∘a (apply a, then m).
func (m *gf2) mul(a *gf2) gf2 {
	var r gf2
	for i := range a {
		r[i] = m.times(a[i])
	}
	return r
}

// byteTable applies a gf2 operator a byte of the input at a time: four lookups instead of 32 steps.
type byteTable [4][256]uint32

func (m *gf2) table() *byteTable {
	var t byteTable
	for b := 0; b < 4; b++ {
		for v := 0; v < 256; v++ {
			t[b][v] = m.times(uint32(v) << (8 * b))
		}
	}
	return &t
}

func (t *byteTable) times(v uint32) uint32 {
	return t[0][v&0xff] ^ t[1][v>>8&0xff] ^ t[2][v>>16&0xff] ^ t[3][v>>24]
}

// zeroOps caches, per number of zero bytes, the operator that advances the raw CRC register over them.
type zeroOps struct {
	byteOp gf2
	ops    map[int]*byteTable
	// deltas and layouts: the ICRC-delta tables by the number of bytes after the changed one, and the
	// templates' shared layouts (prepare).
	deltas  map[int]*[256]uint32
	layouts map[layoutKey]*layout
	sc      [128]byte // scratch for the masked headers (a local array would escape through crc32.Update)
}

func newZeroOps() *zeroOps {
	var bit gf2 // one zero bit through the reflected IEEE register: shift right, xor the polynomial on a carry
	bit[0] = crc32.IEEE
	for i := 1; i < 32; i++ {
		bit[i] = 1 << (i - 1)
	}
	b2 := bit.mul(&bit)
	b4 := b2.mul(&b2)
	z := &zeroOps{byteOp: b4.mul(&b4), ops: map[int]*byteTable{}, deltas: map[int]*[256]uint32{},
		layouts: map[layoutKey]*layout{}}
	return z
}

// op returns the operator for n zero bytes (binary exponentiation of the one-byte operator).
func (z *zeroOps) op(n int) *byteTable {
	if m, ok := z.ops[n]; ok {
		return m
	}
	var r gf2
	for i := range r {
		r[i] = 1 << i
	}
	sq := z.byteOp
	for k := n; k > 0; k >>= 1 {
		if k&1 != 0 {
			r = sq.mul(&r)
		}
		sq = sq.mul(&sq)
	}
	t := r.table()
	z.ops[n] = t
	return t
}

// extend continues a finished CRC-32 (crc32.Update style) over n zero bytes.
func (z *zeroOps) extend(crc uint32, n int) uint32 {
	if n == 0 {
		return crc
	}
	return ^z.op(n).times(^crc)
}

// crcAfterLRH is the CRC after the 8 bytes of ones standing for the InfiniBand LRH (RoCEv2 annex A17.8).
var crcAfterLRH = crc32.Update(0, crc32.IEEETable, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// icrcZeroPayload computes the ICRC of an untagged IPv4 RoCEv2 frame d whose payload (from payOff to the ICRC,
// pad included) is all zeros, with the variant fields masked as the ICRC requires.
func (z *zeroOps) icrcZeroPayload(d []byte, payOff int) uint32 {
	const l3 = roce.EthernetLen
	const bth = l3 + roce.IPv4Len + roce.UDPLen
	sc := &z.sc
	n := copy(sc[:], d[l3:payOff])
	sc[1] = 0xff // TOS
	sc[8] = 0xff // TTL
	sc[10], sc[11] = 0xff, 0xff
	sc[roce.IPv4Len+6], sc[roce.IPv4Len+7] = 0xff, 0xff // UDP checksum
	sc[bth-l3+4] = 0xff                                 // BTH FECN/BECN/reserved
	crc := crc32.Update(crcAfterLRH, crc32.IEEETable, sc[:n])
	return z.extend(crc, len(d)-roce.ICRCLen-payOff)
}

// template is a frame AppendTo built for one (opcode, payload length) of a QP, with the offsets to patch. It
// keeps the headers only: the rest of the frame is the zero payload (and pad) and the ICRC, icrc.
type template struct {
	op                       roce.Opcode
	plen                     int
	hdr                      []byte // the frame's bytes before the payload
	flen                     int    // the frame's length
	payOff                   int
	hasRETH, hasAETH, hasImm bool
	rethOff, aethOff, immOff int
	icrc                     uint32
	lay                      *layout
}

// layout is what a template's ICRC patching needs and every template of the same shape shares (one per frame
// length and header layout in a run, not one per QP): the ICRC is linear in the frame bytes, so a changed byte
// at pos[i] changes it by delta[i][old^new].
type layout struct {
	pos   []int
	delta []*[256]uint32
}

type layoutKey struct {
	flen, rethOff, aethOff, immOff int // 0: absent
}

// prepare finds or builds the template's layout: the ICRC-delta tables for every byte patch may change (and
// the ICRC covers).
func (z *zeroOps) prepare(t *template) {
	const l3 = roce.EthernetLen
	const bth = l3 + roce.IPv4Len + roce.UDPLen
	key := layoutKey{flen: t.flen}
	if t.hasRETH {
		key.rethOff = t.rethOff
	}
	if t.hasAETH {
		key.aethOff = t.aethOff
	}
	if t.hasImm {
		key.immOff = t.immOff
	}
	if l, ok := z.layouts[key]; ok {
		t.lay = l
		return
	}
	l := &layout{}
	l.pos = append(l.pos, l3+4, l3+5, bth+1, bth+8, bth+9, bth+10, bth+11)
	add := func(off, n int) {
		for i := 0; i < n; i++ {
			l.pos = append(l.pos, off+i)
		}
	}
	if t.hasRETH {
		add(t.rethOff, roce.RETHLen)
	}
	if t.hasAETH {
		add(t.aethOff, roce.AETHLen)
	}
	if t.hasImm {
		add(t.immOff, roce.ImmLen)
	}
	l.delta = make([]*[256]uint32, len(l.pos))
	end := t.flen - roce.ICRCLen
	for i, p := range l.pos {
		l.delta[i] = z.deltaTable(end - p - 1)
	}
	z.layouts[key] = l
	t.lay = l
}

// deltaTable returns the ICRC change of each value of a byte followed by n more bytes up to the ICRC.
func (z *zeroOps) deltaTable(n int) *[256]uint32 {
	if d, ok := z.deltas[n]; ok {
		return d
	}
	d := new([256]uint32)
	op := z.op(n)
	for v := 0; v < 256; v++ {
		d[v] = op.times(crc32.IEEETable[v])
	}
	z.deltas[n] = d
	return d
}

// patch writes the per-packet fields of p (with the IPv4 TOS and identification) into a copy of the template
// in dst and fixes the IPv4 checksum and the ICRC. same says dst still holds an unmodified frame of t.
func (z *zeroOps) patch(t *template, dst []byte, same bool, p *rnic.Pkt, tos uint8, ipID uint16) []byte {
	var d []byte
	if same && cap(dst) >= t.flen {
		// dst still holds a frame of this template: only the headers need rewriting.
		d = dst[:t.flen]
		copy(d[:t.payOff], t.hdr)
	} else {
		d = append(dst[:0], t.hdr...)
		if cap(d) >= t.flen {
			d = d[:t.flen]
			clear(d[t.payOff:])
		} else {
			d = append(d, make([]byte, t.flen-t.payOff)...)
		}
	}
	const l3 = roce.EthernetLen
	const bth = l3 + roce.IPv4Len + roce.UDPLen
	if d[l3+1] != tos {
		d[l3+1] = tos
		binary.BigEndian.PutUint16(d[l3+4:], ipID)
		binary.BigEndian.PutUint16(d[l3+10:], roce.IPv4Checksum(d[l3:l3+roce.IPv4Len]))
	} else {
		old := binary.BigEndian.Uint16(d[l3+4:])
		binary.BigEndian.PutUint16(d[l3+4:], ipID)
		ck := binary.BigEndian.Uint16(d[l3+10:])
		binary.BigEndian.PutUint16(d[l3+10:], csumUpdate(ck, old, ipID))
	}
	d[bth+1] = d[bth+1]&0x3f | b2u(p.SE)<<7 | b2u(p.MigReq)<<6
	d[bth+4] = b2u(p.BECN) << 6
	d[bth+8] = b2u(p.AckReq) << 7
	psn := p.PSN & roce.PSNMask
	d[bth+9], d[bth+10], d[bth+11] = byte(psn>>16), byte(psn>>8), byte(psn)
	d[bth+5], d[bth+6], d[bth+7] = byte(p.DestQP>>16), byte(p.DestQP>>8), byte(p.DestQP)
	if t.hasRETH {
		binary.BigEndian.PutUint64(d[t.rethOff:], p.RETH.VA)
		binary.BigEndian.PutUint32(d[t.rethOff+8:], p.RETH.RKey)
		binary.BigEndian.PutUint32(d[t.rethOff+12:], p.RETH.DMALen)
	}
	if t.hasAETH {
		d[t.aethOff] = p.AETH.Syndrome
		d[t.aethOff+1], d[t.aethOff+2], d[t.aethOff+3] = byte(p.AETH.MSN>>16), byte(p.AETH.MSN>>8), byte(p.AETH.MSN)
	}
	if t.hasImm {
		binary.BigEndian.PutUint32(d[t.immOff:], p.Imm)
	}
	crc := t.icrc
	if d[bth+5] != t.hdr[bth+5] || d[bth+6] != t.hdr[bth+6] || d[bth+7] != t.hdr[bth+7] {
		crc = z.icrcZeroPayload(d, t.payOff) // a byte without a delta table changed
	} else {
		for i, p := range t.lay.pos {
			if x := d[p] ^ t.hdr[p]; x != 0 {
				crc ^= t.lay.delta[i][x]
			}
		}
	}
	binary.LittleEndian.PutUint32(d[len(d)-roce.ICRCLen:], crc)
	return d
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// csumUpdate is the incremental update of an Internet checksum when one 16-bit word changes (RFC 1624 eq. 3).
func csumUpdate(ck, old, new uint16) uint16 {
	sum := uint32(^ck) + uint32(^old) + uint32(new)
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	return ^uint16(sum)
}
