package trace

import "github.com/lumina-go/lumina/roce"

// Unwrap48 extends the 48-bit mirror timestamps of a trace, which wrap to 0 every 2^48 ns (about 78 hours of
// switch clock), into one int64 timeline: each timestamp is placed at the signed 48-bit distance from the
// previous one, so a wrap goes forward and a small step back (copies from different pipes) stays a small step
// back. The first timestamp is taken as is. The zero value is ready to use.
type Unwrap48 struct {
	have bool
	last uint64
	ext  int64
}

// Extend returns ts (its low 48 bits) on the unwrapped timeline.
func (u *Unwrap48) Extend(ts uint64) int64 {
	ts &= roce.MirrorMax
	if !u.have {
		u.have, u.last, u.ext = true, ts, int64(ts)
		return u.ext
	}
	d := int64((ts - u.last) & roce.MirrorMax)
	if d >= 1<<47 {
		d -= 1 << 48
	}
	u.ext += d
	u.last = ts
	return u.ext
}
