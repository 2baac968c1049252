package roce

// PSN is a 24-bit packet sequence number. Comparisons use serial-number arithmetic modulo 2^24 (IBTA vol. 1
// §9.7.1): a PSN is "after" another when it lies less than 2^23 ahead of it.
type PSN uint32

// PSNMask keeps the low 24 bits.
const PSNMask = 1<<24 - 1

// Add returns p advanced by n (n may be negative), modulo 2^24.
func (p PSN) Add(n int) PSN { return PSN((int64(p) + int64(n)) & PSNMask) }

// Diff returns the signed distance p - q in the range [-2^23, 2^23).
func (p PSN) Diff(q PSN) int {
	d := (int32(p) - int32(q)) & PSNMask
	if d >= 1<<23 {
		d -= 1 << 24
	}
	return int(d)
}

// Less reports whether p comes before q.
func (p PSN) Less(q PSN) bool { return p.Diff(q) < 0 }

// LessEq reports whether p comes before q or equals it.
func (p PSN) LessEq(q PSN) bool { return p.Diff(q) <= 0 }
