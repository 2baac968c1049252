package trace

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strings"
)

// Format is a capture container format.
type Format int

// Capture formats recognised from the file's magic number.
const (
	FormatPcap Format = iota + 1
	FormatPcapng
)

func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapng:
		return "pcapng"
	}
	return fmt.Sprintf("format(%d)", int(f))
}

// Interface describes one capture interface: the single implicit one of a
// pcap file, or a pcapng Interface Description Block.
type Interface struct {
	LinkType uint32
	SnapLen  uint32 // 0 means no limit
	Name     string // pcapng if_name, "" if absent
	Section  int    // 0-based pcapng section holding the interface
	// TsResolution is the timestamp unit: "1e-6", "1e-9", "2^-20"...
	TsResolution string
	TsOffset     int64 // if_tsoffset in seconds, added to every timestamp
}

// maxInterfaces bounds the interface table a hostile pcapng can grow.
const maxInterfaces = 4096

// maxIfName bounds how much of an if_name is kept.
const maxIfName = 256

// tsUnit converts raw timestamp units of one interface to nanoseconds.
type tsUnit struct {
	binary bool  // 2^-exp seconds, else 10^-exp seconds
	exp    uint8 // exponent
	offset int64 // seconds to add (if_tsoffset)
}

var pow10 = [...]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// ns converts units to nanoseconds since the epoch; false if the result does
// not fit an int64.
func (u tsUnit) ns(units uint64) (int64, bool) {
	var v uint64
	switch {
	case u.binary:
		hi, lo := bits.Mul64(units, 1e9)
		switch {
		case u.exp == 0:
			if hi != 0 {
				return 0, false
			}
			v = lo
		case u.exp < 64:
			if hi>>u.exp != 0 {
				return 0, false
			}
			v = lo>>u.exp | hi<<(64-u.exp)
		default:
			v = hi >> (u.exp - 64)
		}
	case u.exp <= 9:
		hi, lo := bits.Mul64(units, pow10[9-u.exp])
		if hi != 0 {
			return 0, false
		}
		v = lo
	default:
		v = units / pow10[u.exp-9]
	}
	if v > 1<<63-1 {
		return 0, false
	}
	t := int64(v)
	if u.offset != 0 {
		// Guard the offset arithmetic against overflow on hostile values.
		const maxSec = math.MaxInt64 / 1_000_000_000
		if u.offset > maxSec || u.offset < -maxSec {
			return 0, false
		}
		off := u.offset * 1_000_000_000
		if off > 0 && t > math.MaxInt64-off {
			return 0, false
		}
		t += off
	}
	return t, true
}

func (u tsUnit) String() string {
	if u.binary {
		return fmt.Sprintf("2^-%d", u.exp)
	}
	return fmt.Sprintf("1e-%d", u.exp)
}

// File reads a pcap or pcapng capture as a stream. It implements Reader.
//
// Each file is read in one pass through a buffer that grows only to the size
// of the largest record (at most MaxBlockLen), so any capture size is fine.
// Policies for irregular but readable input, chosen to match what capture
// tools really write:
//   - a captured length larger than the original length is tolerated (Lumina's
//     dumper sets orig_len from the IP length, which is shorter than a padded
//     minimum-size frame) and reported as is;
//   - a captured length larger than the snap length is tolerated (writers often
//     leave the snap length at 0 or stale); only lengths above MaxCapLen are
//     errors;
//   - unknown pcapng block types and options are skipped.
type File struct {
	name   string
	src    *source
	closer io.Closer
	format Format
	be     bool // big-endian fields in the current pcap file / pcapng section
	err    error

	// pcap
	nano     bool
	linkType uint32
	snapLen  uint32

	// pcapng
	ifaces      []Interface
	units       []tsUnit
	section     int // current section number
	sections    int // sections seen
	sectionBase int // index in ifaces of the current section's interface 0

	pkt   Packet
	note  []byte // scratch for joining a packet's comments
	index int
	cut   *Truncation
}

// Open opens a capture file, detecting pcap or pcapng from its magic number.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening capture: %w", err)
	}
	r, err := NewReader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader reads a capture from r; name is used in error messages.
func NewReader(r io.Reader, name string) (*File, error) {
	return newFile(newSource(r), name)
}

// SetBuffers makes the File keep the packets it returns valid beyond the next call of Next: it no longer reuses
// its read buffer but, when it needs room, takes a new one from get (of at least min bytes; a shorter one is
// replaced by an allocation), copies the bytes not yet consumed over and hands the old buffer to retired. The
// Data of a packet points into the buffer that was current when Next returned it, and stays valid as long as
// the caller does not reuse that buffer (after retired, once the packets in it are done with). Call it before
// reading packets.
func (f *File) SetBuffers(get func(min int) []byte, retired func(old []byte)) {
	f.src.get, f.src.retired = get, retired
}

func newFile(src *source, name string) (*File, error) {
	f := &File{name: name, src: src}
	b, err := f.src.peek(4)
	if err != nil {
		if err == errShort {
			return nil, f.formatErr(0, "file too short for a capture header (%d bytes, want at least 4)", len(b))
		}
		return nil, f.ioErr(err)
	}
	switch m := binary.LittleEndian.Uint32(b); m {
	case 0xa1b2c3d4, 0xa1b23c4d:
		err = f.readPcapHeader(false, m == 0xa1b23c4d)
	case 0xd4c3b2a1, 0x4d3cb2a1:
		err = f.readPcapHeader(true, m == 0x4d3cb2a1)
	case 0x0a0d0d0a:
		f.format = FormatPcapng
		err = f.readPcapngHeader()
	default:
		msg := fmt.Sprintf("unknown magic number %02x %02x %02x %02x: not a pcap or pcapng file", b[0], b[1], b[2], b[3])
		if b[0] == 0x1f && b[1] == 0x8b {
			msg += " (gzip-compressed; decompress it first)"
		}
		return nil, &FormatError{File: name, Offset: 0, Msg: msg}
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Close closes the underlying file when the File came from Open.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer.Close()
	f.closer = nil
	if err != nil {
		return fmt.Errorf("closing %s: %w", f.name, err)
	}
	return nil
}

// Name is the file name given to Open or NewReader.
func (f *File) Name() string { return f.name }

// Format is the container format.
func (f *File) Format() Format { return f.format }

// Nanosecond reports whether a pcap file stores nanosecond timestamps (false
// for pcapng, whose resolution is per interface).
func (f *File) Nanosecond() bool { return f.nano }

// Interfaces returns the interfaces seen so far (pcapng declares them as the
// file goes on). Packet.Interface indexes this list: interfaces are numbered
// across all sections in order of appearance, which equals the pcapng
// interface ID in a single-section file.
func (f *File) Interfaces() []Interface {
	if f.format == FormatPcap {
		res := "1e-6"
		if f.nano {
			res = "1e-9"
		}
		return []Interface{{LinkType: f.linkType, SnapLen: f.snapLen, TsResolution: res}}
	}
	return append([]Interface(nil), f.ifaces...)
}

// LinkType returns the link type of interface iface, false if it is unknown.
func (f *File) LinkType(iface int) (uint32, bool) {
	if f.format == FormatPcap {
		return f.linkType, iface == 0
	}
	if iface < 0 || iface >= len(f.ifaces) {
		return 0, false
	}
	return f.ifaces[iface].LinkType, true
}

// Next returns the next packet, io.EOF at the end of the capture, or an error
// naming the byte offset of a malformed record. Packets before a malformed
// record are all delivered; after an error Next keeps returning it. A capture
// that ends inside its last record ends with io.EOF after the last whole
// packet, and Truncated says so.
func (f *File) Next() (*Packet, error) {
	if f.err != nil {
		return nil, f.err
	}
	var p *Packet
	var err error
	if f.format == FormatPcap {
		p, err = f.nextPcap()
	} else {
		p, err = f.nextPcapng()
	}
	if err != nil {
		if fe, ok := err.(*FormatError); ok && fe.cut {
			f.cut = &Truncation{Offset: fe.Offset, Packets: f.index, Detail: fe.Msg}
			err = io.EOF
		}
		f.err = err
		return nil, err
	}
	p.Index = f.index
	f.index++
	return p, nil
}

func (f *File) formatErr(off int64, format string, args ...any) error {
	return &FormatError{File: f.name, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (f *File) ioErr(err error) error {
	return &IOError{File: f.name, Offset: f.src.offset(), Err: err}
}

// shortErr turns a short read of want bytes at off into a FormatError saying
// what was cut.
func (f *File) shortErr(err error, off int64, what string, want, got int) error {
	if err != errShort {
		return f.ioErr(err)
	}
	return &FormatError{File: f.name, Offset: off, cut: true,
		Msg: fmt.Sprintf("truncated %s: need %d bytes, file ends after %d", what, want, got)}
}

// Truncation says where a capture ends inside a record: the packets before it were all delivered, the cut
// one is not.
type Truncation struct {
	// Offset is the byte offset of the cut record.
	Offset int64 `json:"offset"`
	// Packets is how many whole packets came before it.
	Packets int `json:"packets"`
	// Detail says what was cut, e.g. "truncated packet 41: need 1090 bytes, file ends after 200".
	Detail string `json:"detail"`
}

// Truncated returns where the capture is cut short (a capture tool killed mid-write leaves its last record
// incomplete), or nil. Next ends such a capture with io.EOF after its last whole packet, as tshark reads it
// ("cut short in the middle of a packet"); callers report the cut so that the shortfall is never silent.
func (f *File) Truncated() *Truncation { return f.cut }

func (f *File) u16(b []byte) uint16 {
	if f.be {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (f *File) u32(b []byte) uint32 {
	if f.be {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

// ---- pcap ----

const pcapHeaderLen, pcapRecordLen = 24, 16

func (f *File) readPcapHeader(be, nano bool) error {
	f.format, f.be, f.nano = FormatPcap, be, nano
	h, err := f.src.peek(pcapHeaderLen)
	if err != nil {
		return f.shortErr(err, 0, "pcap file header", pcapHeaderLen, len(h))
	}
	major, minor := f.u16(h[4:]), f.u16(h[6:])
	if major != 2 {
		return f.formatErr(4, "unsupported pcap version %d.%d (want 2.x)", major, minor)
	}
	f.snapLen = f.u32(h[16:])
	// The upper bits of the link-type field carry FCS information, not the type.
	f.linkType = f.u32(h[20:]) & 0xffff
	f.src.skip(pcapHeaderLen)
	return nil
}

func (f *File) nextPcap() (*Packet, error) {
	off := f.src.offset()
	h, err := f.src.peek(pcapRecordLen)
	if err != nil {
		if err == errShort && len(h) == 0 {
			return nil, io.EOF
		}
		return nil, f.shortErr(err, off, "pcap record header", pcapRecordLen, len(h))
	}
	capLen, origLen := f.u32(h[8:]), f.u32(h[12:])
	if capLen > MaxCapLen {
		return nil, f.formatErr(off, "packet %d: captured length %d exceeds the maximum %d", f.index, capLen, MaxCapLen)
	}
	n := pcapRecordLen + int(capLen)
	rec, err := f.src.peek(n)
	if err != nil {
		return nil, f.shortErr(err, off, fmt.Sprintf("packet %d", f.index), n, len(rec))
	}
	sec, frac := int64(f.u32(rec[0:])), int64(f.u32(rec[4:]))
	if !f.nano {
		frac *= 1000
	}
	p := &f.pkt
	*p = Packet{
		Data:      rec[pcapRecordLen:n:n],
		CapLen:    int(capLen),
		OrigLen:   int(origLen),
		Timestamp: sec*1e9 + frac,
		LinkType:  f.linkType,
		Offset:    off,
	}
	f.src.skip(n)
	return p, nil
}

// ---- pcapng ----

const (
	blockSHB = 0x0a0d0d0a
	blockIDB = 0x00000001
	blockOPB = 0x00000002
	blockSPB = 0x00000003
	blockEPB = 0x00000006

	optEnd      = 0
	optComment  = 1
	optIfName   = 2
	optTsResol  = 9
	optTsOffset = 14
)

func (f *File) readPcapngHeader() error {
	// The first block must be a section header; parse it like any other.
	off := f.src.offset()
	b, err := f.src.peek(12)
	if err != nil {
		return f.shortErr(err, off, "pcapng section header", 12, len(b))
	}
	return f.readSHB(off)
}

// readSHB reads a Section Header Block at off, whose first 12 bytes are
// available, and starts a new section.
func (f *File) readSHB(off int64) error {
	b, _ := f.src.peek(12)
	switch binary.LittleEndian.Uint32(b[8:]) {
	case 0x1a2b3c4d:
		f.be = false
	case 0x4d3c2b1a:
		f.be = true
	default:
		return f.formatErr(off+8, "section header byte-order magic %02x %02x %02x %02x is not 1a2b3c4d in either byte order", b[8], b[9], b[10], b[11])
	}
	blk, err := f.block(off, 28)
	if err != nil {
		return err
	}
	body := blk[8 : len(blk)-4]
	if major := f.u16(body[4:]); major != 1 {
		return f.formatErr(off+12, "unsupported pcapng version %d.%d (want 1.x)", major, f.u16(body[6:]))
	}
	f.section = f.sections
	f.sections++
	f.sectionBase = len(f.ifaces)
	f.src.skip(len(blk))
	return nil
}

// block validates the length fields of the block at off and returns it whole.
// min is the smallest valid total length for its type.
func (f *File) block(off int64, min int) ([]byte, error) {
	h, _ := f.src.peek(8)
	typ, blen := f.u32(h), f.u32(h[4:]) // h is stale after the next peek, which may move the buffer
	if err := f.checkBlockLen(off, blen, min); err != nil {
		return nil, err
	}
	blk, err := f.src.peek(int(blen))
	if err != nil {
		return nil, f.shortErr(err, off, fmt.Sprintf("block of type 0x%08x", typ), int(blen), len(blk))
	}
	if tail := f.u32(blk[blen-4:]); tail != blen {
		return nil, f.formatErr(off+int64(blen)-4, "block trailing length %d does not match leading length %d", tail, blen)
	}
	return blk, nil
}

func (f *File) checkBlockLen(off int64, blen uint32, min int) error {
	switch {
	case blen < uint32(min):
		return f.formatErr(off+4, "block length %d is too small (minimum %d for this block type)", blen, min)
	case blen%4 != 0:
		return f.formatErr(off+4, "block length %d is not a multiple of 4", blen)
	case blen > MaxBlockLen:
		return f.formatErr(off+4, "block length %d exceeds the maximum %d", blen, MaxBlockLen)
	}
	return nil
}

func (f *File) nextPcapng() (*Packet, error) {
	for {
		off := f.src.offset()
		h, err := f.src.peek(12)
		if err != nil {
			if err == errShort && len(h) == 0 {
				return nil, io.EOF
			}
			if err != errShort || len(h) < 8 {
				return nil, f.shortErr(err, off, "block header", 12, len(h))
			}
			// 8..11 bytes: let block() report the cut with the declared length.
		}
		typ := f.u32(h)
		switch typ {
		case blockSHB:
			if len(h) < 12 {
				return nil, f.shortErr(errShort, off, "pcapng section header", 12, len(h))
			}
			if err := f.readSHB(off); err != nil {
				return nil, err
			}
		case blockIDB:
			if err := f.readIDB(off); err != nil {
				return nil, err
			}
		case blockEPB, blockOPB, blockSPB:
			p, err := f.readPacketBlock(off, typ)
			if err != nil {
				return nil, err
			}
			return p, nil
		default:
			blen := f.u32(h[4:])
			if err := f.checkBlockLen(off, blen, 12); err != nil {
				return nil, err
			}
			// Skip without buffering the whole block, then check its trailer.
			if err := f.src.discard(int(blen) - 4); err != nil {
				return nil, f.shortErr(err, off, fmt.Sprintf("block of type 0x%08x", typ), int(blen), int(f.src.offset()-off)+len(f.src.buf[f.src.rpos:f.src.wpos]))
			}
			t, err := f.src.peek(4)
			if err != nil {
				return nil, f.shortErr(err, off, fmt.Sprintf("block of type 0x%08x", typ), int(blen), int(blen)-4+len(t))
			}
			if tail := f.u32(t); tail != blen {
				return nil, f.formatErr(off+int64(blen)-4, "block trailing length %d does not match leading length %d", tail, blen)
			}
			f.src.skip(4)
		}
	}
}

// options walks a pcapng option list. It returns the next option, or done at
// opt_endofopt or the end of the list; a malformed option gives a FormatError
// at its offset.
type options struct {
	f   *File
	b   []byte
	off int64 // file offset of b[0]
}

func (o *options) next() (code uint16, val []byte, done bool, err error) {
	if len(o.b) < 4 {
		// A missing opt_endofopt or 1-3 stray bytes are tolerated.
		return 0, nil, true, nil
	}
	code, n := o.f.u16(o.b), int(o.f.u16(o.b[2:]))
	if code == optEnd {
		return 0, nil, true, nil
	}
	padded := (n + 3) &^ 3
	if 4+padded > len(o.b) {
		return 0, nil, true, o.f.formatErr(o.off, "option %d: length %d overruns its block (%d bytes left)", code, n, len(o.b)-4)
	}
	val = o.b[4 : 4+n]
	o.b = o.b[4+padded:]
	o.off += int64(4 + padded)
	return code, val, false, nil
}

func (f *File) readIDB(off int64) error {
	blk, err := f.block(off, 20)
	if err != nil {
		return err
	}
	if len(f.ifaces) >= maxInterfaces {
		return f.formatErr(off, "more than %d interfaces", maxInterfaces)
	}
	body := blk[8 : len(blk)-4]
	iface := Interface{
		LinkType: uint32(f.u16(body)),
		SnapLen:  f.u32(body[4:]),
		Section:  f.section,
	}
	unit := tsUnit{exp: 6}
	opts := options{f: f, b: body[8:], off: off + 16}
	for {
		optOff := opts.off
		code, val, done, err := opts.next()
		if err != nil {
			return err
		}
		if done {
			break
		}
		switch code {
		case optIfName:
			if len(val) > maxIfName {
				val = val[:maxIfName]
			}
			iface.Name = strings.TrimRight(string(val), "\x00")
		case optTsResol:
			if len(val) != 1 {
				return f.formatErr(optOff, "if_tsresol has length %d, want 1", len(val))
			}
			unit.binary, unit.exp = val[0]&0x80 != 0, val[0]&0x7f
			if !unit.binary && unit.exp > 19 {
				return f.formatErr(optOff, "if_tsresol 10^-%d is beyond the supported 10^-19", unit.exp)
			}
		case optTsOffset:
			if len(val) != 8 {
				return f.formatErr(optOff, "if_tsoffset has length %d, want 8", len(val))
			}
			if f.be {
				unit.offset = int64(binary.BigEndian.Uint64(val))
			} else {
				unit.offset = int64(binary.LittleEndian.Uint64(val))
			}
		}
	}
	iface.TsResolution = unit.String()
	iface.TsOffset = unit.offset
	f.ifaces = append(f.ifaces, iface)
	f.units = append(f.units, unit)
	f.src.skip(len(blk))
	return nil
}

func (f *File) readPacketBlock(off int64, typ uint32) (*Packet, error) {
	min := 32 // EPB and OPB: 28 bytes of fixed fields + 4 trailer
	if typ == blockSPB {
		min = 16
	}
	blk, err := f.block(off, min)
	if err != nil {
		return nil, err
	}
	body := blk[8 : len(blk)-4]
	nIf := len(f.ifaces) - f.sectionBase
	p := &f.pkt
	*p = Packet{Offset: off}
	var ifid int
	var data []byte
	var optStart int
	if typ == blockSPB {
		if nIf == 0 {
			return nil, f.formatErr(off, "packet %d: simple packet block before any interface description", f.index)
		}
		origLen := f.u32(body)
		n := len(body) - 4
		if uint64(origLen) < uint64(n) {
			n = int(origLen)
		}
		if snap := f.ifaces[f.sectionBase].SnapLen; snap != 0 && uint64(snap) < uint64(n) {
			n = int(snap)
		}
		if n > MaxCapLen {
			return nil, f.formatErr(off, "packet %d: captured length %d exceeds the maximum %d", f.index, n, MaxCapLen)
		}
		p.OrigLen = int(origLen)
		data = body[4 : 4+n]
		optStart = len(body)
	} else {
		var hi, lo, capLen, origLen uint32
		if typ == blockEPB {
			ifid = int(f.u32(body))
		} else {
			ifid = int(f.u16(body))
		}
		hi, lo = f.u32(body[4:]), f.u32(body[8:])
		capLen, origLen = f.u32(body[12:]), f.u32(body[16:])
		if ifid >= nIf {
			return nil, f.formatErr(off+8, "packet %d: interface ID %d but the section declares %d interfaces", f.index, ifid, nIf)
		}
		if capLen > MaxCapLen {
			return nil, f.formatErr(off+20, "packet %d: captured length %d exceeds the maximum %d", f.index, capLen, MaxCapLen)
		}
		if uint64(capLen) > uint64(len(body)-20) {
			return nil, f.formatErr(off+20, "packet %d: captured length %d overruns the block (%d bytes of data room)", f.index, capLen, len(body)-20)
		}
		units := uint64(hi)<<32 | uint64(lo)
		ts, ok := f.units[f.sectionBase+ifid].ns(units)
		if !ok {
			return nil, f.formatErr(off+12, "packet %d: timestamp %d in units of %s s does not fit int64 nanoseconds", f.index, units, f.units[f.sectionBase+ifid])
		}
		p.Timestamp = ts
		p.OrigLen = int(origLen)
		data = body[20 : 20+capLen]
		optStart = 20 + int((capLen+3)&^3)
		if optStart > len(body) {
			optStart = len(body)
		}
	}
	p.Interface = f.sectionBase + ifid
	p.LinkType = f.ifaces[p.Interface].LinkType
	p.Data = data[:len(data):len(data)]
	p.CapLen = len(data)
	opts := options{f: f, b: body[optStart:], off: off + 8 + int64(optStart)}
	// The comments joined by "\n" (an empty one before any other is left out), made a string once, not once
	// per comment: first is the text while it is one comment, note once it is more.
	var first []byte
	note, joined := f.note[:0], false
	for {
		code, val, done, err := opts.next()
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		switch {
		case code != optComment:
		case joined:
			note = append(append(note, '\n'), val...)
		case len(first) == 0:
			first = val
		default:
			note = append(append(append(note, first...), '\n'), val...)
			joined = true
		}
	}
	if joined {
		p.Comment = string(note)
		f.note = note[:0]
	} else if len(first) > 0 {
		p.Comment = string(first)
	}
	f.src.skip(len(blk))
	return p, nil
}
