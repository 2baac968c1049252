package netsim

import "math/bits"

// activeSet is the set of a class's QP positions whose QP has packets (qpState.active), for the round robin in
// host.pick: finding the next active QP from a position costs O(1 + n/4096) instead of a scan over every QP of
// the class, so idle QPs cost nothing per packet (issue 17: tens of thousands of QPs in linear time).
type activeSet struct {
	words []uint64 // bit p: position p is active
	sum   []uint64 // bit w: words[w] != 0
	n     int      // positions
	count int      // active positions
}

func (a *activeSet) grow(n int) {
	a.n = n
	for len(a.words) < (n+63)/64 {
		a.words = append(a.words, 0)
	}
	for len(a.sum) < (len(a.words)+63)/64 {
		a.sum = append(a.sum, 0)
	}
}

func (a *activeSet) set(p int) {
	w := p >> 6
	if a.words[w]&(1<<(p&63)) != 0 {
		return
	}
	a.words[w] |= 1 << (p & 63)
	a.sum[w>>6] |= 1 << (w & 63)
	a.count++
}

func (a *activeSet) clear(p int) {
	w := p >> 6
	if a.words[w]&(1<<(p&63)) == 0 {
		return
	}
	a.words[w] &^= 1 << (p & 63)
	if a.words[w] == 0 {
		a.sum[w>>6] &^= 1 << (w & 63)
	}
	a.count--
}

// next returns the first active position >= p, or -1.
func (a *activeSet) next(p int) int {
	if p >= a.n {
		return -1
	}
	w := p >> 6
	if m := a.words[w] >> (p & 63); m != 0 {
		return p + bits.TrailingZeros64(m)
	}
	// The next non-empty word after w, through the summary.
	w++
	for s := w >> 6; s < len(a.sum); s++ {
		m := a.sum[s]
		if s == w>>6 {
			m &^= 1<<(w&63) - 1
		}
		if m != 0 {
			wi := s<<6 + bits.TrailingZeros64(m)
			return wi<<6 + bits.TrailingZeros64(a.words[wi])
		}
	}
	return -1
}
