// Package des is the discrete-event core the simulators share (the packet simulator in netsim and the NIC
// micro-architecture model in micro): events in a total order (time, then insertion sequence) and a growable
// FIFO. Nothing here reads a clock: time is whatever integer the simulator counts in.
package des

import (
	"errors"
	"math/bits"
)

// ErrRunLimit is returned (wrapped) when a run reaches its simulated-time or event-count limit before the
// traffic finished.
var ErrRunLimit = errors.New("run limit reached")

// SplitMix64 is a bijective mixer: nearby seeds give unrelated sub-seeds, nearby keys unrelated hashes.
func SplitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Event is one scheduled occurrence. Obj, Arg and Aux are interpreted by Kind, which each simulator defines
// (a link or host id, a frame slot, a QP index, a timer generation...).
type Event struct {
	At   int64 // when, in the simulator's time unit
	Seq  uint64
	Obj  int32
	Arg  int32
	Aux  int32
	Kind uint8
}

// Before is the total order of events: time, then insertion sequence.
func (e *Event) Before(o *Event) bool {
	return e.At < o.At || (e.At == o.At && e.Seq < o.Seq)
}

// Queue holds the scheduled events: a 4-ary min-heap on (at, seq), shallower than a binary heap and
// hand-written rather than container/heap so that pushing a struct does not box it into an interface; beside
// it, optional FIFO lanes (PushLane) for the events a simulator schedules in time order anyway (a fixed delay
// after now, the end of a serial resource's next job), which cost one comparison to take instead of a walk
// down the heap. Pop takes the first event of the heap and the lanes' heads by the same total order, so the
// order is the same whichever way events were pushed.
type Queue struct {
	h     []Event
	seq   uint64
	lanes []Ring[Event] // each in (at, seq) order
	n     int           // events in the lanes
	busy  uint64        // bit i: lane i holds events
}

// Lanes gives the queue n FIFO lanes (at most 64), numbered 0 to n-1 for PushLane; it must be called while
// the queue is empty.
func (q *Queue) Lanes(n int) {
	if q.Len() > 0 || n > 64 {
		panic("des: Lanes on a queue holding events, or more than 64")
	}
	q.lanes = make([]Ring[Event], n)
}

// Push schedules e, stamping its insertion sequence.
func (q *Queue) Push(e Event) {
	e.Seq = q.seq
	q.seq++
	q.push(e)
}

// PushLane schedules e in lane l when it comes after everything that lane holds, and in the heap otherwise:
// a lane stays in order whatever its users push, and a lane's events are taken in the same order as the heap's.
func (q *Queue) PushLane(l int, e Event) {
	e.Seq = q.seq
	q.seq++
	ln := &q.lanes[l]
	if ln.size > 0 && e.At < ln.Back().At {
		q.push(e)
		return
	}
	ln.Push(e)
	q.n++
	q.busy |= 1 << l
}

func (q *Queue) push(e Event) {
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	// Move the hole up instead of swapping: one copy per level.
	for i > 0 {
		p := (i - 1) / 4
		if !e.Before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// Pop removes and returns the first event; the queue must not be empty.
func (q *Queue) Pop() Event {
	if q.n > 0 {
		best := -1
		var b *Event
		if len(q.h) > 0 {
			b = &q.h[0]
		}
		for m := q.busy; m != 0; m &= m - 1 {
			i := bits.TrailingZeros64(m)
			ln := &q.lanes[i]
			if f := &ln.buf[ln.head]; b == nil || f.Before(b) {
				b, best = f, i
			}
		}
		if best >= 0 {
			ln := &q.lanes[best]
			e := ln.Pop()
			if ln.size == 0 {
				q.busy &^= 1 << best
			}
			q.n--
			return e
		}
	}
	h := q.h
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	q.h = h
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if h[k].Before(&h[m]) {
				m = k
			}
		}
		if !h[m].Before(&last) {
			break
		}
		h[i] = h[m]
		i = m
	}
	if n > 0 {
		h[i] = last
	}
	return top
}

// Len is the number of scheduled events.
func (q *Queue) Len() int { return len(q.h) + q.n }

// Ring is a growable FIFO, a ring of a power-of-two size.
type Ring[T any] struct {
	buf        []T
	head, size int
}

// Push appends v.
func (r *Ring[T]) Push(v T) {
	if r.size == len(r.buf) {
		n := make([]T, max(2*len(r.buf), 8))
		for i := 0; i < r.size; i++ {
			n[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = n, 0
	}
	r.buf[(r.head+r.size)&(len(r.buf)-1)] = v
	r.size++
}

// Pop removes and returns the oldest element; the ring must not be empty.
func (r *Ring[T]) Pop() T {
	v := r.buf[r.head]
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.size--
	return v
}

// Front returns the oldest element without removing it; the ring must not be empty.
func (r *Ring[T]) Front() T { return r.buf[r.head] }

// Back returns the newest element without removing it; the ring must not be empty.
func (r *Ring[T]) Back() T { return r.buf[(r.head+r.size-1)&(len(r.buf)-1)] }

// Len is the number of elements.
func (r *Ring[T]) Len() int { return r.size }
