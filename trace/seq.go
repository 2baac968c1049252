package trace

import (
	"fmt"

	"github.com/lumina-go/lumina/roce"
)

// SeqSpace is the range of a wrapping mirror sequence number: it counts Min,
// Min+1, ..., Max, then wraps to Min. The zero value means Seq48.
type SeqSpace struct {
	Min, Max uint64
}

// Sequence spaces in use.
var (
	// Seq48 is the full 48-bit source-MAC field: 0 .. 2^48-1.
	Seq48 = SeqSpace{Min: 0, Max: roce.MirrorMax}
	// SeqLumina31 is the reference switch's register, which counts from 1 and
	// wraps 0x7fffffff -> 1.
	SeqLumina31 = SeqSpace{Min: 1, Max: 0x7fffffff}
)

func (s SeqSpace) norm() SeqSpace {
	if s.Max == 0 && s.Min == 0 {
		return Seq48
	}
	return s
}

// Validate checks that the space is non-empty and fits 48 bits.
func (s SeqSpace) Validate() error {
	s = s.norm()
	if s.Min >= s.Max || s.Max > roce.MirrorMax {
		return fmt.Errorf("sequence space %d..%d: want Min < Max <= 2^48-1", s.Min, s.Max)
	}
	return nil
}

// Contains reports whether v is a sequence number of the space.
func (s SeqSpace) Contains(v uint64) bool {
	s = s.norm()
	return v >= s.Min && v <= s.Max
}

// Next is the sequence number after v.
func (s SeqSpace) Next(v uint64) uint64 {
	s = s.norm()
	if v >= s.Max {
		return s.Min
	}
	return v + 1
}

// Diff is the serial-number distance from a to b (RFC 1982 style): positive
// when b comes after a, taking the shorter way around the wrap. Both must be
// in the space.
func (s SeqSpace) Diff(a, b uint64) int64 {
	s = s.norm()
	period := s.Max - s.Min + 1
	d := b - a
	if b < a {
		d = period - (a - b)
	}
	if d > period/2 {
		return int64(d) - int64(period)
	}
	return int64(d)
}

// Less reports whether a comes before b.
func (s SeqSpace) Less(a, b uint64) bool { return s.Diff(a, b) > 0 }
