package analyze

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// Analyze reads the trace once, in order, and runs every analyzer that applies. It holds per-connection state
// only (never the trace), and its running time is linear in the number of packets.
func Analyze(r trace.Reader, opts Options) (*Analysis, error) {
	return newAnalyzer(opts).run(r)
}

// Predecoded is implemented by a trace.Reader that has already decoded, as RoCE on UDP port 4791, the packet its
// Next returned last (summary.Source does, counting the capture while the analyzers read it): the analyzers
// then use that decoding instead of decoding the packet again. ok is false when the reader did not decode it;
// a decoded packet that is not RoCE has Version roce.NotRoCE.
type Predecoded interface {
	Decoded() (p *roce.Packet, ok bool)
}

// MirrorTagger is implemented by a trace.Reader that knows whether its captures are Lumina dumps by their first
// packets (summary.Source does: event-code TTLs and increasing mirror sequence numbers in the source MACs). When
// it says they are not, MetaAuto never selects MetaMirror: ordinary traffic sent with a TTL below 8 is not
// mirrored. A reader that does not know leaves the decision to the first RoCE packet's TTL.
type MirrorTagger interface {
	MirrorTagged() bool
}

func (a *analyzer) run(r trace.Reader) (*Analysis, error) {
	a.pre, _ = r.(Predecoded)
	if t, ok := r.(MirrorTagger); ok {
		a.untagged = !t.MirrorTagged()
	}
	for n := 0; ; n++ {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading packet %d: %w", n, err)
		}
		a.packet(p)
	}
	return a.finish(), nil
}

// AnalyzeFile opens a pcap or pcapng file and analyzes it.
func AnalyzeFile(path string, opts Options) (*Analysis, error) {
	f, err := trace.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	res, err := Analyze(f, opts)
	if err != nil {
		return nil, fmt.Errorf("analyzing %s: %w", path, err)
	}
	return res, nil
}

// OK reports whether every check and every counter comparison passed.
func (a *Analysis) OK() bool {
	for _, c := range a.Checks {
		if !c.OK {
			return false
		}
	}
	for _, c := range a.Counters {
		if !c.OK {
			return false
		}
	}
	return true
}

type dir uint8

const (
	dirReq  dir = iota // requester -> responder
	dirResp            // responder -> requester
)

// flowKey identifies the packets addressed to one QP: on RC a QP has exactly one peer, so the destination IP
// and QP name a direction of a connection.
type flowKey struct {
	ip netip.Addr
	qp uint32
}

// Host roles, indexes into analyzer.hosts.
const (
	roleRequester = 0
	roleResponder = 1
	roleUnknown   = -1
)

var roleNames = [2]string{"requester", "responder"}

// hostCounts is what the trace says each host's NIC did or received, for the counter check.
type hostCounts struct {
	cnpSent, cnpRecv, ceRecv, corruptRecv int64
}

type pktInfo struct {
	idx       int
	t         int64
	ev        roce.EventType
	delivered bool
	ce        bool
}

type analyzer struct {
	opts    Options
	res     Analysis
	pkt     roce.Packet
	cur     *roce.Packet // the packet being analyzed: pkt, or the reader's own decoding (Predecoded)
	pre     Predecoded
	meta    Metadata
	decided bool
	// untagged: the reader says the captures are not Lumina dumps (MirrorTagger).
	untagged bool
	conns    []*connState
	// Requests and responses to the same QP are told apart by opcode: on a QP pair that sends in both
	// directions, one destination QP receives both the peer's requests and the ACKs of its own.
	reqs     map[flowKey]*connState
	resps    map[flowKey]*connState
	unpaired pairing // learning mode: connections whose reverse direction is not known yet (pairing.go)
	skipped  map[flowKey]bool
	roles    map[netip.Addr]int
	hosts    [2]hostCounts
	retx     []lostRec
	cnp      cnpState
	maxViol  int
	lastIdx  int
	checks   []*Check
	// stopped is, per connection of opts.Traffic, whether it ended with an error (stoppedOnError; made on
	// first use, so that the lookup is not a scan of every connection's record for each connection).
	stopped map[int]bool
	// cnpDueLast is the configured limiter's state while replaying it over the triggers.
	cnpDueLast map[scopeKey]int64
	// discards is, per host role, how many packets the NIC's counters say it discarded after they passed the
	// switch: losses the trace cannot show, which explain NAKs and re-issues for packets it saw delivered.
	discards [2]int64
	// nicLosses counts the recoveries so explained.
	nicLosses int
	// slack and maxWin size the per-PSN windows (windowSlack, maxWindow; tests shrink them).
	slack, maxWin int64
	// clock unwraps the 48-bit mirror timestamps (MetaMirror), so that a wrap never makes a latency negative.
	clock trace.Unwrap48
	// cut counts, per destination flow, the RC packets whose extended transport headers the capture cut (a
	// snap length shorter than the headers): their connections cannot be judged, nor can the counters.
	cut      map[flowKey]int
	cutTotal int
	// cutUnknown counts the packets whose BTH the capture cut: they belong to no known connection.
	cutUnknown int
	// moved counts, per destination flow, the packets a delay, reorder or duplicate event delivered in
	// another order (or more often) than the switch saw them: the checkers read the switch's order, so these
	// connections, and the counters, cannot be judged.
	moved      map[flowKey]int
	movedTotal int
	// lookups caches what lookup found in reqs and resps (hashing a flowKey costs more than comparing it);
	// an entry holds while lookupGen, bumped at every change of the maps, is the one it was made with.
	lookups   [lookupCacheSize]lookupEntry
	lookupGen uint32
}

const lookupCacheSize = 64

type lookupEntry struct {
	k   flowKey
	cs  *connState
	gen uint32
	d   dir
}

// hostDiscards sums, per host, the changes of the counters whose name says "discard".
func hostDiscards(opts Options) [2]int64 {
	var d [2]int64
	for _, hc := range opts.Counters {
		role := -1
		for i, n := range roleNames {
			if hc.Host == n {
				role = i
			}
		}
		if role < 0 {
			continue
		}
		for name, f := range hc.Finish {
			if s, ok := hc.Start[name]; ok && f > s && strings.Contains(strings.ToLower(name), "discard") {
				d[role] += int64(f - s)
			}
		}
	}
	return d
}

// receiverDiscarded tells whether the data receiver of a connection discarded packets inside its NIC.
func (cs *connState) receiverDiscarded() bool {
	recv := roleResponder
	if cs.c.Verb == VerbRead {
		recv = roleRequester
	}
	return cs.a.discards[recv] > 0
}

func newAnalyzer(opts Options) *analyzer {
	a := &analyzer{opts: opts, reqs: make(map[flowKey]*connState),
		resps: make(map[flowKey]*connState), skipped: make(map[flowKey]bool),
		roles: make(map[netip.Addr]int), meta: opts.Metadata, maxViol: opts.MaxViolations,
		slack: windowSlack, maxWin: maxWindow, lookupGen: 1}
	if a.maxViol <= 0 {
		a.maxViol = 100
	}
	a.discards = hostDiscards(opts)
	a.decided = a.meta != MetaAuto
	a.cnp.init()
	for i, c := range opts.Conns {
		c.Index = i
		cs := newConnState(a, c, false)
		a.conns = append(a.conns, cs)
		a.reqs[flowKey{c.RespIP, c.RespQPN}] = cs
		a.resps[flowKey{c.ReqIP, c.ReqQPN}] = cs
		cs.respKnown = true
		a.roles[c.ReqIP] = roleRequester
		a.roles[c.RespIP] = roleResponder
	}
	return a
}

func (a *analyzer) role(ip netip.Addr) int {
	if r, ok := a.roles[ip]; ok {
		return r
	}
	return roleUnknown
}

// metadata returns the packet's event and time according to the metadata mode.
func (a *analyzer) metadata(p *trace.Packet) (roce.EventType, int64) {
	if !a.decided {
		a.decided = true
		switch {
		case trace.ParseComment(p.Comment).HasEvent:
			a.meta = MetaComment
		case a.cur.TTL < 8 && !a.untagged: // IPv4 TTL, IPv6 or GRH hop limit: the switch writes the event there (roce.DecodeMirror)
			a.meta = MetaMirror
		default:
			a.meta = MetaNone
		}
	}
	switch a.meta {
	case MetaMirror:
		if m, ok := roce.DecodeMirror(p.Data); ok {
			return m.Event, a.clock.Extend(m.TimestampNs)
		}
	case MetaComment:
		return commentEvent(p.Comment), p.Timestamp
	}
	return roce.EventNone, p.Timestamp
}

// commentEvent reads the event of a pcapng comment (trace.ParseComment: "event=NAME" or "event=N" among key=value
// words separated by spaces, commas, semicolons, tabs or newlines); none when it names no event.
func commentEvent(c string) roce.EventType {
	return trace.ParseComment(c).Event
}

func (a *analyzer) packet(tp *trace.Packet) {
	a.res.Packets++
	a.lastIdx = tp.Index
	if tp.LinkType != trace.LinkTypeEthernet {
		return
	}
	p, ok := (*roce.Packet)(nil), false
	decoded := false
	if a.pre != nil {
		p, decoded = a.pre.Decoded()
		ok = decoded && p.Version != roce.NotRoCE
	}
	if !decoded {
		p = &a.pkt
		ok = p.Decode(tp.Data, tp.OrigLen)
	}
	a.cur = p
	if ok && p.Reason == roce.ReasonShortBTH && len(tp.Data) >= p.BTHOffset+roce.BTHLen {
		// The BTH is there but not the extended headers that say what the packet is (RETH, AETH...): a
		// checker that skipped it would see a PSN gap or a missing ACK that never happened.
		if a.cut == nil {
			a.cut = map[flowKey]int{}
		}
		a.cut[flowKey{p.DstIP, p.BTH.DestQP}]++
		a.cutTotal++
	} else if ok && p.Reason == roce.ReasonShortBTH {
		// The BTH itself is cut: the packet's connection is unknown, so every connection may miss it.
		a.cutUnknown++
		a.cutTotal++
	}
	if !ok || p.Reason == roce.ReasonShortBTH {
		return
	}
	a.res.RoCEPackets++
	ev, t := a.metadata(tp)
	if ev == roce.EventDelay || ev == roce.EventReorder || ev == roce.EventDuplicate {
		if a.moved == nil {
			a.moved = map[flowKey]int{}
		}
		a.moved[flowKey{p.DstIP, p.BTH.DestQP}]++
		a.movedTotal++
	}
	pi := pktInfo{idx: tp.Index, t: t, ev: ev, delivered: ev != roce.EventDrop && ev != roce.EventCorrupt,
		ce: p.ECN() == 3 || ev == roce.EventECN}
	op := p.BTH.Opcode
	if rr := a.role(p.DstIP); rr != roleUnknown {
		if ev == roce.EventCorrupt {
			a.hosts[rr].corruptRecv++
		}
		if pi.delivered && pi.ce && op.CarriesPayload() {
			a.hosts[rr].ceRecv++
		}
	}
	if op == roce.CNP {
		a.onCNP(p, pi)
		return
	}
	if tr := op.Transport(); tr != roce.RC {
		a.skip(flowKey{p.DstIP, p.BTH.DestQP}, p, tr.String()+" transport: no reliable-connection retransmission to check")
		return
	}
	cs, d := a.lookup(p)
	if cs == nil {
		return
	}
	switch {
	case d == dirReq && op.IsReadRequest():
		cs.onReadRequest(p, pi)
		if !cs.respKnown {
			a.unpaired.track(cs)
		}
	case d == dirReq && (op.IsSend() || op.IsWrite()):
		cs.onData(p, pi)
		if !cs.respKnown {
			a.unpaired.track(cs)
		}
	case d == dirReq:
		cs.sawOther = true // atomics and other requests: recorded, not checked
	case op.IsReadResponse():
		cs.onReadResponse(p, pi)
	case op.IsAck() && p.Has(roce.ExtAETH):
		switch p.AETH.Type() {
		case roce.AckTypeACK:
			cs.onACK(p, pi)
		case roce.AckTypeNAK:
			if p.AETH.NAKCode() == roce.NAKPSNSequenceError {
				cs.onNAK(p, pi)
			}
		case roce.AckTypeRNRNAK:
			cs.onRNR(p, pi)
		}
	}
}

func flowName(p *roce.Packet) string {
	return fmt.Sprintf("%s > %s qp 0x%06x", p.SrcIP, p.DstIP, p.BTH.DestQP)
}

func (a *analyzer) skip(k flowKey, p *roce.Packet, reason string) {
	if a.skipped[k] {
		return
	}
	a.skipped[k] = true
	a.res.Skipped = append(a.res.Skipped, Skipped{Flow: flowName(p), Reason: reason})
}

// lookup finds the connection and direction of an RC packet; in learning mode it creates connections on their
// first request and pairs the reverse direction on its first response.
func (a *analyzer) lookup(p *roce.Packet) (*connState, dir) {
	k := flowKey{p.DstIP, p.BTH.DestQP}
	op := p.BTH.Opcode
	m, d := a.resps, dirResp
	if op.IsRequest() {
		m, d = a.reqs, dirReq
	}
	e := &a.lookups[(k.qp^uint32(d)<<7^uint32(k.ip.As16()[15])<<3)%lookupCacheSize]
	if e.gen == a.lookupGen && e.d == d && e.k == k {
		return e.cs, d
	}
	if cs, ok := m[k]; ok {
		*e = lookupEntry{k: k, d: d, cs: cs, gen: a.lookupGen}
		return cs, d
	}
	a.lookupGen++ // the maps change below: forget every cached lookup
	if a.opts.Conns != nil {
		m[k] = nil
		a.skip(k, p, "not a connection of the run")
		return nil, 0
	}
	if d == dirReq {
		verb := VerbWrite
		switch {
		case op.IsSend():
			verb = VerbSend
		case op.IsReadRequest():
			verb = VerbRead
		}
		c := Conn{Index: len(a.conns), Verb: verb, ReqIP: p.SrcIP, RespIP: p.DstIP, RespQPN: p.BTH.DestQP,
			ReqIPSN: p.BTH.PSN}
		cs := newConnState(a, c, true)
		a.conns = append(a.conns, cs)
		if a.unpaired.byPSN == nil {
			a.unpaired.init()
		}
		a.unpaired.add(cs)
		m[k] = cs
		return cs, dirReq
	}
	if cs := a.unpaired.match(p.DstIP, p.SrcIP, p.BTH.PSN); cs != nil {
		a.pair(cs, p.BTH.DestQP)
		return cs, dirResp
	}
	m[k] = nil
	a.skip(k, p, "responses whose requests are not in the capture")
	return nil, 0
}

// pair completes a learned connection with its requester QP.
func (a *analyzer) pair(cs *connState, qpn uint32) {
	cs.c.ReqQPN = qpn
	cs.respKnown = true
	a.unpaired.paired(cs)
	a.resps[flowKey{cs.c.ReqIP, qpn}] = cs
	a.lookupGen++
}

// onCNP attributes a CNP to the connection whose data sender it addresses.
func (a *analyzer) onCNP(p *roce.Packet, pi pktInfo) {
	k := flowKey{p.DstIP, p.BTH.DestQP}
	// A CNP goes to the data sender: a Write/Send requester, or a READ responder.
	cs := a.resps[k]
	if cs != nil && cs.c.Verb == VerbRead {
		cs = nil
	}
	if r := a.reqs[k]; cs == nil && r != nil && r.c.Verb == VerbRead {
		cs = r
	}
	if cs == nil && a.opts.Conns == nil && a.unpaired.byPSN != nil {
		// Learning mode, a CNP to a QP no response has named yet: a CNP carries no PSN, so it says nothing
		// about which connection the QP belongs to. It is attributed to the only unpaired SEND/WRITE
		// connection between its hosts, if there is one, without pairing it (the responses do that); with
		// several, pairing on the first CNP would tie QPs together at random and judge one connection's ACKs
		// against another's PSNs.
		cs = a.unpaired.cnpTarget(p.DstIP, p.SrcIP)
	}
	if r := a.role(p.SrcIP); r != roleUnknown {
		a.hosts[r].cnpSent++
	}
	if r := a.role(p.DstIP); r != roleUnknown && pi.delivered {
		a.hosts[r].cnpRecv++
	}
	a.cnp.onCNP(cs, pi)
}
