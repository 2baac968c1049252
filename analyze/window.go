package analyze

import "sort"

// Per-PSN state lives in a sliding window so that the analyzers' memory stays flat in the capture's size: only
// PSNs at or above a floor that can still be referenced are kept (the oldest PSN not yet acknowledged to the
// data sender, less windowSlack), and the rest is released.

// windowSlack is how far below the oldest unacknowledged PSN the per-PSN state is kept: late duplicates,
// retransmissions of PSNs acknowledged a moment ago and plain captures that record a host's own packets late
// still find their PSN's history. 4096 PSNs cost 128 KiB per connection.
const windowSlack = 4096

// maxWindow bounds the window even when nothing is ever acknowledged (a capture without the ACK direction, a
// mispaired learned connection): an RC requester may have up to 2^23 PSNs outstanding, but a NIC's send queue
// keeps far fewer than 2^16 in flight. Beyond it the oldest PSNs are released as if acknowledged; the window
// then holds at most about 2*maxWindow slots (4 MiB).
const maxWindow = 1 << 16

// warmSlots is how many slots grow clears ahead of the window's end at once (2 KiB).
const warmSlots = 64

// psnSlot is what the analyzers know about one PSN.
type psnSlot struct {
	firstTx, lastTx int64
	lastIdx         int32 // trace index + 1 of the latest transmission; 0 = never sent
	msgOf           int32 // 1-based message
	lost            int32 // index + 1 into analyzer.retx of the pending loss of this PSN
	flags           uint8
}

const (
	slotGot    uint8 = 1 << iota // delivered at least once (goodput counts each PSN once)
	slotSacked                   // IRN: selectively acknowledged to the sender
	slotRcvd                     // IRN: held by the receiver
)

// psnWindow holds the slots of rels base..base+len(slots)-1.
type psnWindow struct {
	base  int64
	slots []psnSlot
	// old is handed out for released rels: such a PSN was acknowledged long ago, so it reads as delivered and
	// received, never pending a loss, and whatever is written to it is forgotten.
	old psnSlot
	// warm is the end of the slots grow cleared ahead (len(slots) <= warm <= cap(slots), or less after a
	// release): the next slots' memory, brought into the cache in one burst.
	warm int
}

// end is the first rel past the window.
func (w *psnWindow) end() int64 { return w.base + int64(len(w.slots)) }

// grow extends the window to hold rel r (r >= end); before the slice reallocates it first drops the dead prefix
// below the floor in place, so a connection in steady state allocates nothing.
func (cs *connState) grow(r int64) {
	w := &cs.win
	for w.end() <= r {
		if len(w.slots) == cap(w.slots) {
			w.release(max(cs.floor(), r+1-cs.a.maxWin))
		}
		if n := len(w.slots); n >= w.warm && n < cap(w.slots) {
			// Clear the next run of slots beyond the end at once (what append would write, one slot at a time):
			// their memory comes into the cache in one burst rather than as a cache miss in every packet.
			w.warm = min(n+warmSlots, cap(w.slots))
			clear(w.slots[n:w.warm])
		}
		w.slots = append(w.slots, psnSlot{})
	}
}

// release drops the slots below floor when they are at least half the window (amortized O(1) per PSN).
func (w *psnWindow) release(floor int64) {
	dead := floor - w.base
	if dead <= 0 || dead < int64(len(w.slots))/2 {
		return
	}
	if dead >= int64(len(w.slots)) {
		// Everything held is dead: restart the window at the floor.
		w.base, w.slots, w.warm = floor, w.slots[:0], 0
		return
	}
	// The slots past the moved ones are not cleared here: grow clears them just before they are used (append
	// would write them anyway), when their memory is wanted in the cache.
	n := copy(w.slots, w.slots[dead:])
	w.slots, w.warm = w.slots[:n], n
	w.base = floor
}

// floor is the lowest rel the connection's analyzers may still need, less the slack.
func (cs *connState) floor() int64 {
	low := min(cs.gbn.una, cs.irn.una)
	if cs.sawRead {
		s := cs.read()
		low = s.ePSN
		if s.serving {
			low = min(low, s.cur)
		}
		for _, q := range s.queue[s.qHead:] {
			low = min(low, q.start)
		}
	}
	return low - cs.a.slack
}

// slot returns the state of rel r (0 <= r < end, see ensure); a released rel gets the shared "acknowledged
// long ago" slot, which still knows its message.
func (cs *connState) slot(r int64) *psnSlot {
	w := &cs.win
	if r >= w.base {
		return &w.slots[r-w.base]
	}
	w.old = psnSlot{msgOf: int32(cs.msgAt(r)), flags: slotGot | slotRcvd}
	return &w.old
}

// held says whether rel r is inside the window (neither released nor beyond what was sent).
func (cs *connState) held(r int64) bool { return r >= cs.win.base && r < cs.win.end() }

// msgAt finds the message of a released rel from the per-message first PSNs (0: none).
func (cs *connState) msgAt(r int64) int {
	if ppm := cs.c.PacketsPerMsg; ppm > 0 {
		if m := int(r/int64(ppm)) + 1; m <= len(cs.msgT0) && cs.msgT0[m-1] >= 0 {
			return m
		}
		return 0
	}
	// Messages are numbered in PSN order, so msgFirst is increasing.
	m := sort.Search(len(cs.msgFirst), func(i int) bool { return cs.msgFirst[i] > r })
	if m > 0 && (cs.msgLast[m-1] < 0 || r <= cs.msgLast[m-1]) {
		return m
	}
	return 0
}

// flag tests a slot flag of rel r; released rels read as delivered and received (never selectively acked:
// the cumulative ACK covers them).
func (cs *connState) flag(r int64, f uint8) bool {
	if r < 0 || r >= cs.win.end() {
		return false
	}
	if r < cs.win.base {
		return f&(slotGot|slotRcvd) != 0
	}
	return cs.win.slots[r-cs.win.base].flags&f != 0
}

// setFlag sets a slot flag of rel r when r is held; other rels have nothing to remember.
func (cs *connState) setFlag(r int64, f uint8) {
	if cs.held(r) {
		cs.win.slots[r-cs.win.base].flags |= f
	}
}
