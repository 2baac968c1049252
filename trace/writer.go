package trace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// errClosed is returned by writers used after Close.
var errClosed = errors.New("writer is closed")

// PcapWriterOptions configures a PcapWriter.
type PcapWriterOptions struct {
	Nanosecond bool   // nanosecond timestamps (magic a1b23c4d); else microseconds
	SnapLen    uint32 // packets longer than this are truncated; 0 means 262144
	LinkType   uint32 // 0 means LinkTypeEthernet
}

// PcapWriter writes a little-endian pcap file. It buffers its output; call
// Flush or Close when done.
type PcapWriter struct {
	w      *bufio.Writer
	opts   PcapWriterOptions
	hdr    [pcapRecordLen]byte
	closed bool
}

// NewPcapWriter writes the pcap file header to w and returns a writer.
func NewPcapWriter(w io.Writer, opts PcapWriterOptions) (*PcapWriter, error) {
	if opts.SnapLen == 0 {
		opts.SnapLen = MaxCapLen
	}
	if opts.LinkType == 0 {
		opts.LinkType = LinkTypeEthernet
	}
	pw := &PcapWriter{w: bufio.NewWriterSize(w, 64*1024), opts: opts}
	var h [pcapHeaderLen]byte
	magic := uint32(0xa1b2c3d4)
	if opts.Nanosecond {
		magic = 0xa1b23c4d
	}
	binary.LittleEndian.PutUint32(h[0:], magic)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], opts.SnapLen)
	binary.LittleEndian.PutUint32(h[20:], opts.LinkType)
	if _, err := pw.w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("writing pcap header: %w", err)
	}
	return pw, nil
}

// WritePacket appends one packet captured at ts (ns since the epoch). data is
// truncated to the snap length; origLen is the length on the wire, or 0 for
// len(data).
func (pw *PcapWriter) WritePacket(ts int64, data []byte, origLen int) error {
	if pw.closed {
		return errClosed
	}
	if ts < 0 || ts/1e9 > math.MaxUint32 {
		return fmt.Errorf("writing pcap packet: timestamp %d ns is outside the pcap range (0 to 2^32 s)", ts)
	}
	if origLen == 0 {
		origLen = len(data)
	}
	if origLen < 0 || int64(origLen) > math.MaxUint32 {
		return fmt.Errorf("writing pcap packet: original length %d out of range", origLen)
	}
	if len(data) > int(pw.opts.SnapLen) {
		data = data[:pw.opts.SnapLen]
	}
	frac := ts % 1e9
	if !pw.opts.Nanosecond {
		frac /= 1000
	}
	binary.LittleEndian.PutUint32(pw.hdr[0:], uint32(ts/1e9))
	binary.LittleEndian.PutUint32(pw.hdr[4:], uint32(frac))
	binary.LittleEndian.PutUint32(pw.hdr[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(pw.hdr[12:], uint32(origLen))
	if _, err := pw.w.Write(pw.hdr[:]); err != nil {
		return fmt.Errorf("writing pcap packet: %w", err)
	}
	if _, err := pw.w.Write(data); err != nil {
		return fmt.Errorf("writing pcap packet: %w", err)
	}
	return nil
}

// Available is how many bytes the writer buffers before it writes to the underlying writer: a caller that
// calls Flush when a record (16 bytes of header plus its data) would not fit makes every write to the
// underlying writer end at a record boundary.
func (pw *PcapWriter) Available() int { return pw.w.Available() }

// Flush writes buffered data to the underlying writer.
func (pw *PcapWriter) Flush() error {
	if err := pw.w.Flush(); err != nil {
		return fmt.Errorf("flushing pcap: %w", err)
	}
	return nil
}

// Close flushes; it does not close the underlying writer.
func (pw *PcapWriter) Close() error {
	if pw.closed {
		return nil
	}
	pw.closed = true
	return pw.Flush()
}

// InterfaceSpec describes an interface for PcapngWriter.
type InterfaceSpec struct {
	LinkType uint32 // 0 means LinkTypeEthernet
	SnapLen  uint32 // 0 means no limit
	Name     string // if_name, optional
}

// PcapngWriterOptions configures a PcapngWriter.
type PcapngWriterOptions struct {
	UserAppl   string // shb_userappl; "" means "lumina"
	Comment    string // section comment, optional
	Interfaces []InterfaceSpec
}

// PcapngWriter writes a little-endian pcapng file: one section, interfaces
// with nanosecond timestamps (if_tsresol = 9), and Enhanced Packet Blocks with
// an optional comment. It buffers its output; call Flush or Close when done.
type PcapngWriter struct {
	w      *bufio.Writer
	snap   []uint32
	scr    [32]byte
	closed bool
}

// NewPcapngWriter writes the section header and interface descriptions.
func NewPcapngWriter(w io.Writer, opts PcapngWriterOptions) (*PcapngWriter, error) {
	pw := &PcapngWriter{w: bufio.NewWriterSize(w, 64*1024)}
	appl := opts.UserAppl
	if appl == "" {
		appl = "lumina"
	}
	if len(appl) > math.MaxUint16 || len(opts.Comment) > math.MaxUint16 {
		return nil, errors.New("writing pcapng header: user application or comment longer than 65535 bytes")
	}
	optLen := optSize(len(appl)) + optSize(len(opts.Comment)) + 4
	if opts.Comment == "" {
		optLen -= optSize(0)
	}
	pw.blockStart(blockSHB, 16+optLen)
	var b [16]byte
	binary.LittleEndian.PutUint32(b[0:], 0x1a2b3c4d)
	binary.LittleEndian.PutUint16(b[4:], 1)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], math.MaxUint64) // section length unknown
	pw.w.Write(b[:])
	if opts.Comment != "" {
		pw.option(optComment, opts.Comment)
	}
	pw.option(4, appl) // shb_userappl
	pw.optionEnd()
	pw.blockEnd(16 + optLen)
	for _, spec := range opts.Interfaces {
		if _, err := pw.AddInterface(spec); err != nil {
			return nil, err
		}
	}
	if err := pw.w.Flush(); err != nil {
		return nil, fmt.Errorf("writing pcapng header: %w", err)
	}
	return pw, nil
}

// optSize is the encoded size of an option with an n-byte value.
func optSize(n int) int { return 4 + (n+3)&^3 }

func (pw *PcapngWriter) blockStart(typ uint32, bodyLen int) {
	binary.LittleEndian.PutUint32(pw.scr[0:], typ)
	binary.LittleEndian.PutUint32(pw.scr[4:], uint32(12+bodyLen))
	pw.w.Write(pw.scr[:8])
}

func (pw *PcapngWriter) blockEnd(bodyLen int) {
	binary.LittleEndian.PutUint32(pw.scr[0:], uint32(12+bodyLen))
	pw.w.Write(pw.scr[:4])
}

var zeros [4]byte

func (pw *PcapngWriter) option(code uint16, val string) {
	binary.LittleEndian.PutUint16(pw.scr[0:], code)
	binary.LittleEndian.PutUint16(pw.scr[2:], uint16(len(val)))
	pw.w.Write(pw.scr[:4])
	pw.w.WriteString(val)
	pw.w.Write(zeros[:(4-len(val)%4)%4])
}

func (pw *PcapngWriter) optionBytes(code uint16, val []byte) {
	binary.LittleEndian.PutUint16(pw.scr[0:], code)
	binary.LittleEndian.PutUint16(pw.scr[2:], uint16(len(val)))
	pw.w.Write(pw.scr[:4])
	pw.w.Write(val)
	pw.w.Write(zeros[:(4-len(val)%4)%4])
}

func (pw *PcapngWriter) optionEnd() { pw.w.Write(zeros[:4]) }

// AddInterface appends an Interface Description Block and returns the new
// interface's ID.
func (pw *PcapngWriter) AddInterface(spec InterfaceSpec) (int, error) {
	if pw.closed {
		return 0, errClosed
	}
	if len(spec.Name) > math.MaxUint16 {
		return 0, fmt.Errorf("adding pcapng interface: name of %d bytes is too long", len(spec.Name))
	}
	lt := spec.LinkType
	if lt == 0 {
		lt = LinkTypeEthernet
	}
	if lt > math.MaxUint16 {
		return 0, fmt.Errorf("adding pcapng interface: link type %d does not fit 16 bits", lt)
	}
	body := 8 + optSize(1) + 4
	if spec.Name != "" {
		body += optSize(len(spec.Name))
	}
	pw.blockStart(blockIDB, body)
	binary.LittleEndian.PutUint16(pw.scr[0:], uint16(lt))
	binary.LittleEndian.PutUint16(pw.scr[2:], 0)
	binary.LittleEndian.PutUint32(pw.scr[4:], spec.SnapLen)
	pw.w.Write(pw.scr[:8])
	if spec.Name != "" {
		pw.option(optIfName, spec.Name)
	}
	pw.option(optTsResol, "\x09") // nanoseconds
	pw.optionEnd()
	pw.blockEnd(body)
	pw.snap = append(pw.snap, spec.SnapLen)
	return len(pw.snap) - 1, nil
}

// WritePacket appends an Enhanced Packet Block for interface iface captured at
// ts (ns since the epoch). data is truncated to the interface's snap length;
// origLen is the length on the wire, or 0 for len(data). A non-empty comment
// is stored as opt_comment.
func (pw *PcapngWriter) WritePacket(iface int, ts int64, data []byte, origLen int, comment string) error {
	return writeEPB(pw, iface, ts, data, origLen, comment)
}

// WritePacketBytes is WritePacket with the comment in a byte slice, not kept after the call: a writer that builds
// each packet's comment in a buffer of its own allocates nothing per packet.
func (pw *PcapngWriter) WritePacketBytes(iface int, ts int64, data []byte, origLen int, comment []byte) error {
	return writeEPB(pw, iface, ts, data, origLen, comment)
}

func writeEPB[C string | []byte](pw *PcapngWriter, iface int, ts int64, data []byte, origLen int, comment C) error {
	if pw.closed {
		return errClosed
	}
	if iface < 0 || iface >= len(pw.snap) {
		return fmt.Errorf("writing pcapng packet: interface %d not declared (have %d)", iface, len(pw.snap))
	}
	if ts < 0 {
		return fmt.Errorf("writing pcapng packet: negative timestamp %d ns", ts)
	}
	if origLen == 0 {
		origLen = len(data)
	}
	if snap := pw.snap[iface]; snap != 0 && len(data) > int(snap) {
		data = data[:snap]
	}
	if len(data) > MaxCapLen {
		return fmt.Errorf("writing pcapng packet: %d bytes exceed the maximum %d", len(data), MaxCapLen)
	}
	if origLen < 0 || int64(origLen) > math.MaxUint32 {
		return fmt.Errorf("writing pcapng packet: original length %d out of range", origLen)
	}
	if len(comment) > math.MaxUint16 {
		return fmt.Errorf("writing pcapng packet: comment of %d bytes exceeds 65535", len(comment))
	}
	body := 20 + (len(data)+3)&^3
	if len(comment) > 0 {
		body += optSize(len(comment)) + 4
	}
	pw.blockStart(blockEPB, body)
	binary.LittleEndian.PutUint32(pw.scr[0:], uint32(iface))
	binary.LittleEndian.PutUint32(pw.scr[4:], uint32(uint64(ts)>>32))
	binary.LittleEndian.PutUint32(pw.scr[8:], uint32(ts))
	binary.LittleEndian.PutUint32(pw.scr[12:], uint32(len(data)))
	binary.LittleEndian.PutUint32(pw.scr[16:], uint32(origLen))
	pw.w.Write(pw.scr[:20])
	pw.w.Write(data)
	pw.w.Write(zeros[:(4-len(data)%4)%4])
	if len(comment) > 0 {
		switch c := any(comment).(type) {
		case string:
			pw.option(optComment, c)
		case []byte:
			pw.optionBytes(optComment, c)
		}
		pw.optionEnd()
	}
	pw.blockEnd(body)
	// bufio.Writer keeps the first error; report it as soon as it happens.
	if _, err := pw.w.Write(nil); err != nil {
		return fmt.Errorf("writing pcapng packet: %w", err)
	}
	return nil
}

// Flush writes buffered data to the underlying writer.
// Buffered is how many bytes the writer holds that it has not written to the underlying writer yet.
func (pw *PcapngWriter) Buffered() int { return pw.w.Buffered() }

func (pw *PcapngWriter) Flush() error {
	if err := pw.w.Flush(); err != nil {
		return fmt.Errorf("flushing pcapng: %w", err)
	}
	return nil
}

// Close flushes; it does not close the underlying writer.
func (pw *PcapngWriter) Close() error {
	if pw.closed {
		return nil
	}
	pw.closed = true
	return pw.Flush()
}
