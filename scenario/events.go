package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

var (
	eventKeys   = []string{"qpn", "psn", "iter", "msg", "every-msg", "every", "type", "packet", "nth", "delay-us", "behind", "copies", "field", "value"}
	eventTypes  = []string{EventDrop, EventECN, EventCorrupt, "bit-error", EventDelay, EventReorder, EventDuplicate, EventRewrite}
	packetKinds = []string{PacketData, PacketAck, PacketNak, PacketCNP, PacketReadReq}
	// typeKeys names the keys that belong to one event type only.
	typeKeys = map[string]string{"delay-us": EventDelay, "behind": EventReorder, "copies": EventDuplicate, "field": EventRewrite, "value": EventRewrite}
	// rewriteFields are the header fields a rewrite event may set, with their largest value.
	rewriteFields = map[string]int{"migreq": 1, "dscp": 63, "ecn": 3, "se": 1, "pad": 3}
)

const (
	maxIter     = 1 << 16
	maxNth      = 1 << 24
	maxDelayUs  = 1e7
	maxBehind   = 1024
	maxCopies   = 16
	rewriteList = "migreq, dscp, ecn, se, pad"
)

// events validates and expands every event entry, in order.
func (d *decoder) events(s *Scenario, vals []val) {
	seen := map[evKey]int{}
	overflow := false
	for _, v := range vals {
		evs, ok := d.event(v, s)
		if !ok {
			continue
		}
		if len(s.Events)+len(evs) > s.Network.EventTableCapacity {
			if !overflow {
				d.errv(v, "the events expand to more than %d entries; expected at most network.event-table-capacity (%d)", s.Network.EventTableCapacity, s.Network.EventTableCapacity)
			}
			overflow = true
			continue
		}
		for _, e := range evs {
			k := eventKey(e)
			if line, dup := seen[k]; dup {
				d.errv(v, "qpn %d: the same event is already given at line %d; expected each event once", e.QP, line)
				continue
			}
			seen[k] = e.Line
			s.Events = append(s.Events, e)
		}
	}
}

// evKey is an event without its position, comparable by value (Msg by its number, not its pointer).
type evKey struct {
	e   Event
	msg int // *Msg+1, 0 = no msg
}

func eventKey(e Event) evKey {
	k := evKey{e: e}
	k.e.Line, k.e.Col, k.e.Msg = 0, 0, nil
	if e.Msg != nil {
		k.msg = *e.Msg + 1
	}
	return k
}

// indexIn reads an index with the scenario's base: count values from base.
func (d *decoder) indexIn(v val, base, count int) (int, bool) {
	x, ok := intOf(v.n)
	if !ok {
		d.errv(v, "%s is not an integer; expected an integer in %d..%d (index-base %d)", show(v.n), base, base+count-1, base)
		return 0, false
	}
	if x < int64(base) || x > int64(base+count-1) {
		d.errv(v, "%d is outside %d..%d (index-base %d)", x, base, base+count-1, base)
		return 0, false
	}
	return int(x), true
}

// event validates one entry and expands it to one Event per connection it names.
func (d *decoder) event(v val, s *Scenario) ([]Event, bool) {
	fields, ok := d.fields(v)
	if !ok {
		return nil, false
	}
	good := true
	by := map[string]field{}
	for _, f := range fields {
		if !slices.Contains(eventKeys, f.key) {
			d.unknown(f, eventKeys)
			good = false
			continue
		}
		by[f.key] = f
	}
	e := Event{Iter: 1, Packet: PacketData, Line: v.line, Col: v.col}
	// type and packet decide which other keys are allowed, so read them first.
	if f, has := by["type"]; has {
		t, ok := d.oneOf(f.v, eventTypes...)
		if t == "bit-error" {
			t = EventCorrupt
		}
		e.Type, good = t, good && ok
	} else {
		d.errv(v, "type is missing; expected one of %s", strings.Join(eventTypes, ", "))
		good = false
	}
	if f, has := by["packet"]; has {
		p, ok := d.oneOf(f.v, packetKinds...)
		e.Packet, good = p, good && ok
	}
	base, t := s.IndexBase, s.Traffic
	var qps []int
	if f, has := by["qpn"]; has {
		qps, ok = d.qpList(f.v, base, t.NumConnections)
		good = good && ok
	} else {
		d.errv(v, "qpn is missing; expected a connection number in %d..%d (index-base %d), a list, a range \"A-B\" or all", base, base+t.NumConnections-1, base)
		good = false
	}
	for _, key := range eventKeys {
		owner, specific := typeKeys[key]
		if f, has := by[key]; specific && has && e.Type != "" && e.Type != owner {
			d.errAt(f.kline, f.kcol, f.v.path, "only valid with type %s; this event has type %s", owner, e.Type)
			good = false
		}
	}
	seq := e.Packet == PacketData || e.Packet == PacketReadReq
	good = d.eventNth(v, by, base, seq, &e) && good
	if f, has := by["iter"]; has && seq {
		if str, isStr := f.v.n.(*ast.StringNode); isStr && strings.EqualFold(str.Value, "all") {
			e.Iter = 0 // every round: e.g. keep dropping a packet until the sender gives up
		} else {
			x, ok := d.intIn(f.v, 1, maxIter)
			e.Iter, good = x, good && ok
		}
	}
	if seq {
		good = d.eventPSN(v, by, s, &e) && good
	}
	good = d.eventAction(v, by, &e) && good
	if e.Packet == PacketReadReq && good {
		good = d.eventReadReq(by, t, qps, base)
	}
	if !good {
		return nil, false
	}
	out := make([]Event, len(qps))
	for i, q := range qps {
		out[i] = e
		out[i].QP = q
		if e.Msg != nil {
			m := *e.Msg
			out[i].Msg = &m
		}
	}
	return out, true
}

// eventNth reads nth for ack, nak and cnp events, and rejects what only sequenced (data, read-req) events take,
// or nth on them.
func (d *decoder) eventNth(v val, by map[string]field, base int, seq bool, e *Event) bool {
	good := true
	if !seq {
		for _, key := range []string{"psn", "iter", "msg", "every-msg", "every"} {
			if f, has := by[key]; has {
				d.errAt(f.kline, f.kcol, f.v.path, "not valid with packet %s; expected nth: the n-th %s packet of the connection", e.Packet, e.Packet)
				good = false
			}
		}
		if f, has := by["nth"]; has {
			if x, ok := intOf(f.v.n); ok && x >= int64(base) && x < int64(base+maxNth) {
				e.Nth = int(x)
			} else {
				d.errv(f.v, "%s is not a packet count; expected an integer in %d..%d (index-base %d)", show(f.v.n), base, base+maxNth-1, base)
				good = false
			}
		} else if e.Packet != "" {
			d.errv(v, "nth is missing; expected the n-th %s packet of the connection (index-base %d)", e.Packet, base)
			good = false
		}
	} else if f, has := by["nth"]; has {
		d.errAt(f.kline, f.kcol, f.v.path, "only valid with packet ack, nak or cnp; this event targets %s packets, expected psn", e.Packet)
		good = false
	}
	return good
}

// eventReadReq checks that a read-req event targets READ connections of a READ traffic.
func (d *decoder) eventReadReq(by map[string]field, t Traffic, qps []int, base int) bool {
	good := true
	if t.Verb != VerbRead && t.Verb != VerbSendRead {
		d.errAt(by["packet"].kline, by["packet"].kcol, by["packet"].v.path, "read-req needs rdma-verb read or send_read (it is %s); expected packet data, ack, nak or cnp", t.Verb)
		good = false
	}
	for _, q := range qps {
		if good && !t.IsReadQP(q-base) {
			d.errv(by["qpn"].v, "connection %d sends SENDs, not READs; expected a read connection %d..%d for packet read-req", q, base+t.NumSendQPs, base+t.NumConnections-1)
			good = false
		}
	}
	return good
}

// eventPSN reads psn, msg, every-msg and every for data and read-req events.
func (d *decoder) eventPSN(v val, by map[string]field, s *Scenario, e *Event) bool {
	base, t := s.IndexBase, s.Traffic
	good := true
	if f, has := by["msg"]; has {
		m, ok := d.indexIn(f.v, base, t.NumMsgsPerQP)
		if ok {
			e.Msg = &m
		}
		good = good && ok
	}
	if f, has := by["every-msg"]; has {
		b, ok := d.boolean(f.v)
		good = good && ok
		if b && e.Msg != nil {
			d.errAt(f.kline, f.kcol, f.v.path, "every-msg: true with msg %d; expected one of them", *e.Msg)
			good = false
		}
		e.EveryMsg = b
	} else if _, hasMsg := by["msg"]; !hasMsg && s.Format == FormatLumina && strings.HasPrefix(v.path, "traffic.data-pkt-events") {
		// The reference orchestrator copies each data-pkt-event to every message (psn += i * packets per
		// message): in its own configuration format, that is what an event means.
		e.EveryMsg = true
	}
	ppm := t.PacketsPerMessage()
	scope := t.PacketsPerConnection()
	if e.Msg != nil || e.EveryMsg {
		scope = ppm
	}
	f, has := by["psn"]
	if !has {
		d.errv(v, "psn is missing; expected a packet number in %d..%d (index-base %d) or all", base, base+scope-1, base)
		return false
	}
	if str, isStr := f.v.n.(*ast.StringNode); isStr && strings.EqualFold(str.Value, "all") {
		e.PSNAll = true
	} else if p, ok := d.indexIn(f.v, base, scope); ok {
		e.PSN = p
		if e.Packet == PacketReadReq && (p-base)%ppm != 0 {
			d.errv(f.v, "%d is not the first packet of a message; expected a READ request PSN %d, %d, ... (every %d packets)", p, base, base+ppm, ppm)
			good = false
		}
	} else {
		good = false
	}
	if g, has := by["every"]; has {
		switch {
		case e.PSNAll:
			d.errAt(g.kline, g.kcol, g.v.path, "every with psn: all; expected a numeric psn to start from")
			good = false
		default:
			x, ok := d.intIn(g.v, 1, int64(max(scope-1, 1)))
			if ok && e.Packet == PacketReadReq && x%ppm != 0 {
				d.errv(g.v, "%d is not a multiple of the %d packets per message; expected READ requests to be every k*%d packets", x, ppm, ppm)
				ok = false
			}
			e.Every, good = x, good && ok
		}
	}
	return good
}

// eventAction reads the keys specific to delay, reorder, duplicate and rewrite.
func (d *decoder) eventAction(v val, by map[string]field, e *Event) bool {
	need := func(key, what string) (field, bool) {
		f, has := by[key]
		if !has {
			d.errv(v, "%s is missing; expected %s for type %s", key, what, e.Type)
		}
		return f, has
	}
	switch e.Type {
	case EventDelay:
		if f, ok := need("delay-us", "the delay in microseconds (> 0)"); ok {
			x, ok := d.floatIn(f.v, 0, maxDelayUs)
			if ok && x == 0 {
				d.errv(f.v, "0 is no delay; expected a number of microseconds in (0, %g]", float64(maxDelayUs))
				return false
			}
			e.DelayUs = x
			return ok
		}
		return false
	case EventReorder:
		if f, ok := need("behind", "the number of later packets to let pass (1..1024)"); ok {
			x, ok := d.intIn(f.v, 1, maxBehind)
			e.Behind = x
			return ok
		}
		return false
	case EventDuplicate:
		e.Copies = 1
		if f, has := by["copies"]; has {
			x, ok := d.intIn(f.v, 1, maxCopies)
			e.Copies = x
			return ok
		}
	case EventRewrite:
		f, okF := need("field", "one of "+rewriteList)
		g, okV := need("value", "the new field value")
		if !okF || !okV {
			return false
		}
		name, ok := d.oneOf(f.v, "migreq", "dscp", "ecn", "se", "pad")
		if !ok {
			return false
		}
		x, ok := d.intIn(g.v, 0, int64(rewriteFields[name]))
		e.Field, e.Value = name, x
		return ok
	}
	return true
}

// qpList reads qpn: an integer, all, a range "A-B", or a list of integers and ranges.
func (d *decoder) qpList(v val, base, n int) ([]int, bool) {
	var out []int
	named := make([]bool, n) // which connections are already named, without a quadratic search
	good := true
	add := func(at val, q int64) {
		if q < int64(base) || q > int64(base+n-1) {
			d.errv(at, "%d is outside %d..%d (index-base %d)", q, base, base+n-1, base)
			good = false
			return
		}
		if named[q-int64(base)] {
			d.errv(at, "connection %d is named twice; expected each connection once", q)
			good = false
			return
		}
		named[q-int64(base)] = true
		out = append(out, int(q))
	}
	one := func(at val, allowAll bool) {
		if x, ok := intOf(at.n); ok {
			add(at, x)
			return
		}
		str, isStr := at.n.(*ast.StringNode)
		if !isStr {
			d.errv(at, "%s is not a connection; expected an integer in %d..%d (index-base %d), a range \"A-B\" or all", show(at.n), base, base+n-1, base)
			good = false
			return
		}
		text := strings.TrimSpace(str.Value)
		if allowAll && strings.EqualFold(text, "all") {
			for q := base; q < base+n; q++ {
				add(at, int64(q))
			}
			return
		}
		lo, hi, isRange := strings.Cut(text, "-")
		a, errA := strconv.ParseInt(strings.TrimSpace(lo), 10, 32)
		b, errB := strconv.ParseInt(strings.TrimSpace(hi), 10, 32)
		if !isRange {
			b, errB = a, errA
		}
		if errA != nil || errB != nil {
			d.errv(at, "%q is not a connection; expected an integer in %d..%d (index-base %d), a range \"A-B\" or all", str.Value, base, base+n-1, base)
			good = false
			return
		}
		if a > b {
			d.errv(at, "range %q is reversed; expected LOW-HIGH", str.Value)
			good = false
			return
		}
		for _, end := range []int64{a, b} {
			if end < int64(base) || end > int64(base+n-1) {
				d.errv(at, "%d is outside %d..%d (index-base %d)", end, base, base+n-1, base)
				good = false
				return
			}
		}
		for q := a; q <= b; q++ {
			add(at, q)
		}
	}
	if _, isSeq := v.n.(*ast.SequenceNode); isSeq {
		its, _ := d.items(v)
		if len(its) == 0 {
			d.errv(v, "the list is empty; expected at least one connection")
			return nil, false
		}
		for _, it := range its {
			one(it, false)
		}
	} else {
		one(v, true)
	}
	return out, good
}

// String is the event in the file's syntax on one line, for messages and logs.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{qpn: %d, ", e.QP)
	switch {
	case e.Packet != PacketData && e.Packet != PacketReadReq && e.Packet != "":
		fmt.Fprintf(&b, "nth: %d, ", e.Nth)
	case e.PSNAll:
		b.WriteString("psn: all, ")
	default:
		fmt.Fprintf(&b, "psn: %d, ", e.PSN)
	}
	if e.Iter == 0 {
		b.WriteString("iter: all")
	} else {
		fmt.Fprintf(&b, "iter: %d", e.Iter)
	}
	if e.Msg != nil {
		fmt.Fprintf(&b, ", msg: %d", *e.Msg)
	}
	if e.EveryMsg {
		b.WriteString(", every-msg: true")
	}
	if e.Every > 0 {
		fmt.Fprintf(&b, ", every: %d", e.Every)
	}
	fmt.Fprintf(&b, ", type: %s, packet: %s", e.Type, e.Packet)
	switch e.Type {
	case EventDelay:
		fmt.Fprintf(&b, ", delay-us: %s", strconv.FormatFloat(e.DelayUs, 'g', -1, 64))
	case EventReorder:
		fmt.Fprintf(&b, ", behind: %d", e.Behind)
	case EventDuplicate:
		fmt.Fprintf(&b, ", copies: %d", e.Copies)
	case EventRewrite:
		fmt.Fprintf(&b, ", field: %s, value: %d", e.Field, e.Value)
	}
	b.WriteString("}")
	return b.String()
}
