package micro

import "github.com/lumina-go/lumina/internal/des"

// setAssoc is an 8-way set-associative cache of keys with LRU replacement in each set, the shape of a NIC's
// context caches. Lookups allocate nothing; a cyclic access pattern wider than the cache misses every time,
// as it does in hardware.
type setAssoc struct {
	sets  uint64
	tags  []uint64 // key+1; 0 = empty
	stamp []uint64
	clock uint64
}

const cacheWays = 8

func newSetAssoc(entries int) setAssoc {
	sets := max(uint64(entries)/cacheWays, 1)
	n := sets * cacheWays
	return setAssoc{sets: sets, tags: make([]uint64, n), stamp: make([]uint64, n)}
}

// lookup reports whether key is cached and inserts it (evicting its set's least recently used entry) if not.
func (c *setAssoc) lookup(key uint64) bool {
	c.clock++
	base := des.SplitMix64(key) % c.sets * cacheWays
	victim := base
	for i := base; i < base+cacheWays; i++ {
		if c.tags[i] == key+1 {
			c.stamp[i] = c.clock
			return true
		}
		if c.stamp[i] < c.stamp[victim] {
			victim = i
		}
	}
	c.tags[victim] = key + 1
	c.stamp[victim] = c.clock
	return false
}

// heap64 is a multiset of times (the completion times of outstanding PCIe reads) that yields its least: a FIFO
// of the times pushed in order, which most are (the read channel books them one after another), and a binary
// min-heap of the others.
type heap64 struct {
	h    []int64
	ring des.Ring[int64]
}

func (q *heap64) Len() int { return len(q.h) + q.ring.Len() }

func (q *heap64) Push(v int64) {
	if q.ring.Len() == 0 || v >= q.ring.Back() {
		q.ring.Push(v)
		return
	}
	q.h = append(q.h, v)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if q.h[p] <= v {
			break
		}
		q.h[i] = q.h[p]
		i = p
	}
	q.h[i] = v
}

// Pop removes and returns the least time; q must not be empty.
func (q *heap64) Pop() int64 {
	if q.ring.Len() > 0 && (len(q.h) == 0 || q.ring.Front() <= q.h[0]) {
		return q.ring.Pop()
	}
	top := q.h[0]
	n := len(q.h) - 1
	last := q.h[n]
	q.h = q.h[:n]
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && q.h[c+1] < q.h[c] {
			c++
		}
		if q.h[c] >= last {
			break
		}
		q.h[i] = q.h[c]
		i = c
	}
	if n > 0 {
		q.h[i] = last
	}
	return top
}
