package analyze

// ackOrder is the acknowledgement rule the go-back-N and IRN checkers share: an ACK never covers more than the
// receiver has in order, and acknowledgements never go backwards.
type ackOrder struct {
	lastAck int64 // highest PSN acknowledged (explicitly, or implicitly by a NAK); -1 before any
	anyAck  bool
}

// onAck checks a positive ACK covering r; ePSN is the receiver's next expected PSN and receiver how the
// checker names it in messages.
func (o *ackOrder) onAck(cs *connState, checker, receiver string, ePSN, r int64, pi pktInfo) {
	// A plain capture's order across directions is not the wire's (a host records its own transmissions
	// late), and it may miss packets: only a switch trace can prove an ACK ran ahead of the data.
	if r >= ePSN && cs.a.meta != MetaNone {
		cs.violate(checker, pi.idx, "ACK for PSN %d but the %s had received in order only up to PSN %d",
			cs.abs(r), receiver, cs.abs(ePSN-1))
	}
	o.cover(cs, checker, r, pi, "ACK", r)
}

// cover checks that an acknowledgement does not go backwards; r is the PSN covered (a NAK covers the one
// before its own PSN), kind and psn name the packet in the message.
func (o *ackOrder) cover(cs *connState, checker string, r int64, pi pktInfo, kind string, psn int64) {
	if o.anyAck && r < o.lastAck {
		cs.violate(checker, pi.idx, "%s for PSN %d goes backwards: the previous ACK covered PSN %d", kind, cs.abs(psn), cs.abs(o.lastAck))
	}
	if r > o.lastAck {
		o.lastAck = r
	}
	o.anyAck = true
}
