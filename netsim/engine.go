package netsim

import (
	"errors"
	"fmt"
)

// evKind is the type of a scheduled event; events are plain structs so scheduling allocates nothing.
type evKind uint8

const (
	evLinkTxDone  evKind = iota + 1 // a link finished serializing its head frame
	evLinkArrive                    // a frame reaches the far end of a link
	evSwitchFwd                     // the switch pipeline releases a frame onto an egress link
	evHostRxReady                   // a received frame finished the NIC's receive processing
	evHostCtrl                      // a held control packet (ACK, NAK, CNP) is ready to transmit
	evHostKick                      // re-run a host's egress scheduler (pacing or ETS shaping expired)
	evQPTimer                       // a QP timer fires
	evHeldTx                        // a held request (READ re-request) joins the transmit pipeline
	evPost                          // the traffic generator posts work requests
)

// event is one scheduled occurrence. obj/arg/aux are interpreted by kind (link or host id, frame slot, QP index,
// timer generation...).
type event struct {
	at   int64
	seq  uint64
	obj  int32
	arg  int32
	aux  int32
	kind evKind
}

func (e *event) before(o *event) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

// eventQueue is a 4-ary min-heap on (at, seq): shallower than a binary heap, and hand-written rather than
// container/heap so that pushing a struct does not box it into an interface.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) push(e event) {
	e.seq = q.seq
	q.seq++
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	// Move the hole up instead of swapping: one copy per level.
	for i > 0 {
		p := (i - 1) / 4
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func (q *eventQueue) pop() event {
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
			if h[k].before(&h[m]) {
				m = k
			}
		}
		if !h[m].before(&last) {
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

func (q *eventQueue) len() int { return len(q.h) }

// ErrRunLimit is returned (wrapped) when a run reaches its simulated-time or event-count limit before the traffic
// finished.
var ErrRunLimit = errors.New("run limit reached")

// ErrStalled is returned (wrapped) when no event is pending but the traffic has not finished.
var ErrStalled = errors.New("simulation stalled")

// limitError describes where a run stopped.
func limitError(what string, now int64, events uint64, pending string) error {
	return fmt.Errorf("%w: %s at simulated time %d ns after %d events (%s)", ErrRunLimit, what, now, events, pending)
}
