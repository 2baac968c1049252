package trace

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits applied to every capture whatever its headers say, so hostile input
// cannot make a reader allocate without bound.
const (
	// MaxCapLen is the largest captured length accepted for one packet
	// (Wireshark's limit for most link types).
	MaxCapLen = 256 * 1024
	// MaxBlockLen is the largest pcapng block accepted.
	MaxBlockLen = 16 * 1024 * 1024
)

// Link types (LINKTYPE_* values from the tcpdump registry) this project meets.
const (
	LinkTypeNull       uint32 = 0
	LinkTypeEthernet   uint32 = 1
	LinkTypeRaw        uint32 = 101
	LinkTypeLinuxSLL   uint32 = 113
	LinkTypeERF        uint32 = 197
	LinkTypeIPv4       uint32 = 228
	LinkTypeIPv6       uint32 = 229
	LinkTypeInfiniBand uint32 = 247
	LinkTypeLinuxSLL2  uint32 = 276
)

// LinkTypeName names a link type for reports, e.g. "ethernet" or "erf";
// unknown values print as "linktype-N".
func LinkTypeName(lt uint32) string {
	switch lt {
	case LinkTypeNull:
		return "null"
	case LinkTypeEthernet:
		return "ethernet"
	case LinkTypeRaw:
		return "raw-ip"
	case LinkTypeLinuxSLL:
		return "linux-sll"
	case LinkTypeERF:
		return "erf"
	case LinkTypeIPv4:
		return "ipv4"
	case LinkTypeIPv6:
		return "ipv6"
	case LinkTypeInfiniBand:
		return "infiniband"
	case LinkTypeLinuxSLL2:
		return "linux-sll2"
	}
	return "linktype-" + strconv.FormatUint(uint64(lt), 10)
}

// Packet is one captured packet.
//
// A Reader reuses the Packet and the memory behind Data: both are valid only
// until the next call to Next. Copy what must outlive it.
type Packet struct {
	Data      []byte // captured bytes, len(Data) == CapLen
	CapLen    int    // bytes captured
	OrigLen   int    // bytes on the wire (may be less than CapLen, see Reader docs)
	Timestamp int64  // nanoseconds since the Unix epoch (0 for pcapng simple packet blocks)
	LinkType  uint32 // LINKTYPE_* of the packet's interface
	Interface int    // interface number in the file (0 for pcap), see File.Interfaces
	Comment   string // pcapng opt_comment values joined by "\n", or ""
	Index     int    // 0-based index in its file (in the merged trace for a Merger)
	Offset    int64  // byte offset of the packet's record (or block) in its file
}

// Reader is a stream of packets. Next returns io.EOF after the last packet.
// The returned *Packet and its Data are valid until the next call to Next.
type Reader interface {
	Next() (*Packet, error)
}

// FormatError reports malformed capture data: which file, the byte offset of
// the offending header, record or block, and what was wrong.
type FormatError struct {
	File   string
	Offset int64
	Msg    string
	cut    bool // the file ends inside the record: what a killed capture tool leaves
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: byte offset %d: %s", e.File, e.Offset, e.Msg)
}

// IOError wraps a failure of the underlying reader (not of the format) with
// the file name and the offset at which reading failed.
type IOError struct {
	File   string
	Offset int64
	Err    error
}

func (e *IOError) Error() string {
	return fmt.Sprintf("%s: byte offset %d: reading: %v", e.File, e.Offset, e.Err)
}

func (e *IOError) Unwrap() error { return e.Err }

// errShort is returned by the buffered source when the stream ends before the
// requested bytes; callers turn it into a FormatError naming what was cut.
var errShort = errors.New("short read")

// source is a minimal buffered reader that hands out slices of its own buffer
// (zero-copy) and tracks the file offset. The buffer only grows when a record
// needs more than it holds, and then only as far as data really arrives, so a
// lying length field cannot force a large allocation.
type source struct {
	r     io.Reader
	buf   []byte
	rpos  int   // next unread byte in buf
	wpos  int   // end of valid data in buf
	base  int64 // file offset of buf[0]
	eof   bool
	err   error // sticky non-EOF read error
	empty int   // consecutive (0, nil) reads
	// get and retired are File.SetBuffers': when set, the source never writes into a buffer it handed bytes
	// out of; it moves on to a buffer from get instead.
	get     func(min int) []byte
	retired func(old []byte)
}

const initialBuffer = 64 * 1024

func newSource(r io.Reader) *source {
	return &source{r: r, buf: make([]byte, initialBuffer)}
}

// offset is the file offset of the next unread byte.
func (s *source) offset() int64 { return s.base + int64(s.rpos) }

// moveToPooled moves the unread data into a buffer of at least size bytes from get (File.SetBuffers) and
// hands the old buffer to retired: the source never writes into a buffer whose bytes it handed out.
func (s *source) moveToPooled(size int) {
	nb := s.get(size)
	if len(nb) < size {
		nb = make([]byte, size)
	}
	m := copy(nb, s.buf[s.rpos:s.wpos])
	old := s.buf
	s.base += int64(s.rpos)
	s.buf, s.rpos, s.wpos = nb, 0, m
	s.retired(old)
}

// peek returns the next n bytes without consuming them. It returns errShort
// (with whatever is available) if the stream ends first, or an I/O error.
func (s *source) peek(n int) ([]byte, error) {
	for s.wpos-s.rpos < n {
		if s.err != nil {
			return s.buf[s.rpos:s.wpos], s.err
		}
		if s.eof {
			return s.buf[s.rpos:s.wpos], errShort
		}
		if s.get != nil && s.rpos+n > len(s.buf) {
			// No room after the unread data: move it to a new buffer (the old one keeps what was handed out),
			// growing as the in-place path does, only as far as data arrives.
			size := len(s.buf)
			if n > size {
				size = min(n, 2*size)
			}
			s.moveToPooled(size)
		}
		if s.rpos > 0 && s.rpos+n > len(s.buf) {
			// Slide unread data to the front before reading more.
			copy(s.buf, s.buf[s.rpos:s.wpos])
			s.wpos -= s.rpos
			s.base += int64(s.rpos)
			s.rpos = 0
		}
		if s.wpos == len(s.buf) {
			// Full of real data and still short: double, capped at what is needed.
			size := 2 * len(s.buf)
			if size > n {
				size = n
			}
			if s.get != nil {
				// Under SetBuffers the larger buffer comes from get too, so that its owner counts it.
				s.moveToPooled(size)
			} else {
				nb := make([]byte, size)
				copy(nb, s.buf[:s.wpos])
				s.buf = nb
			}
		}
		s.fill(len(s.buf))
	}
	return s.buf[s.rpos : s.rpos+n], nil
}

// fill reads once into s.buf[s.wpos:end], recording the end of the stream or a failure.
func (s *source) fill(end int) {
	m, err := s.r.Read(s.buf[s.wpos:end])
	s.wpos += m
	switch {
	case err == io.EOF:
		s.eof = true
	case err != nil:
		s.err = err
	case m == 0:
		// Guard against readers that return (0, nil) forever, as bufio does.
		s.empty++
		if s.empty > 100 {
			s.err = io.ErrNoProgress
		}
	default:
		s.empty = 0
	}
}

// skip consumes n bytes that peek has made available.
func (s *source) skip(n int) { s.rpos += n }

// discardRoom is the least room discard reads into in the current buffer under SetBuffers before it moves to
// a new one.
const discardRoom = 4 << 10

// discard consumes n bytes that may not fit the buffer (unknown pcapng blocks).
func (s *source) discard(n int) error {
	if s.get != nil {
		return s.discardKeeping(n)
	}
	for n > 0 {
		chunk := n
		if chunk > len(s.buf) {
			chunk = len(s.buf)
		}
		if _, err := s.peek(chunk); err != nil {
			return err
		}
		s.skip(chunk)
		n -= chunk
	}
	return nil
}

// discardKeeping is discard under SetBuffers. The bytes before rpos may lie in packets handed out, the ones
// from rpos on never were (a block is handed out whole, then skipped), so the discarded bytes are read into
// the current buffer from rpos on, over and over: a block of any length moves to a new buffer at most once
// (when less than discardRoom is left), instead of once per buffer's length.
func (s *source) discardKeeping(n int) error {
	mark := s.rpos // from here on, the buffer holds nothing handed out
	for n > 0 {
		if k := min(s.wpos-s.rpos, n); k > 0 {
			s.rpos += k
			n -= k
			if s.rpos == s.wpos {
				// All consumed: the room from mark on is free again.
				s.base += int64(s.rpos - mark)
				s.rpos, s.wpos = mark, mark
			}
			continue
		}
		if s.err != nil {
			return s.err
		}
		if s.eof {
			return errShort
		}
		if len(s.buf)-s.rpos < discardRoom {
			// Too little room left: move to a new buffer (peek's way), whose bytes are all unread.
			if _, err := s.peek(min(n, len(s.buf))); err != nil {
				return err
			}
			mark = s.rpos
			continue
		}
		s.fill(s.rpos + min(n, len(s.buf)-s.rpos))
	}
	return nil
}
