package inject

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/lumina-go/lumina/roce"
)

// DefaultTableCapacity is the event table size when Config.TableCapacity is 0: the reference P4 program's
// inject_event_table holds 8192 entries.
const DefaultTableCapacity = 8192

// maxDumpers bounds DumperWeights so that a typo cannot make per-dumper state huge.
const maxDumpers = 1024

// Config is everything the switch needs before traffic starts: the generators' runtime metadata (after the
// metadata barrier) and the scenario's resolved intents.
type Config struct {
	Conns         []ConnMeta
	Intents       []Intent
	TableCapacity int   // event table entries; 0 = DefaultTableCapacity
	DumperWeights []int // smooth weighted round robin over the dumpers; empty = one dumper
	// RewritePort, when not 0, is the UDP destination port of mirrored copies (the reference's
	// rewrite-udp-dst-port, 9741 in its example); the dumper undoes the rewrite (roce.UndoRSS).
	RewritePort uint16
	Seed        uint64 // seeds the RSS source-port randomization of mirrored copies, nothing else
	Ports       int    // host-facing ports: 0 or 2 (port 0 = requester side, 1 = responder side)
	// ClockStartNs is the switch clock at time 0: mirrored copies carry (ClockStartNs + now) mod 2^48 ns, so a
	// start near 2^48 makes the timestamps wrap during the run, as a real switch's do every 78 hours.
	ClockStartNs uint64
}

// Entry is one installed event-table entry, as the reference's switch_state_snapshot lists them.
//
// Data and read-req entries are keyed like the paper's table: source IP, destination IP, destination QPN, PSN
// and ITER. Ack, nak and cnp entries are keyed by connection and Nth; their addresses and QPN name the direction
// such packets travel (ACKs and NAKs: responder to requester; CNPs: data receiver to data sender).
type Entry struct {
	Kind   PacketKind `json:"kind"`
	Conn   int        `json:"conn"`
	SrcIP  netip.Addr `json:"src_ip"`
	DstIP  netip.Addr `json:"dst_ip"`
	DstQPN uint32     `json:"dst_qpn"`
	PSN    roce.PSN   `json:"psn"`  // data and read-req: the absolute 24-bit PSN
	Nth    int        `json:"nth"`  // ack, nak and cnp: 0-based index among that kind
	Iter   int        `json:"iter"` // 1-based round; 0 = any round
	// MsgIter: Iter counts rounds within the packet's message (Intent.MsgIter).
	MsgIter bool           `json:"msg_iter,omitempty"`
	Action  roce.EventType `json:"action"`
	Source  string         `json:"source"`
	Hits    uint64         `json:"hits"` // packets the entry matched so far
}

// entry is an installed action with its parameters resolved.
type entry struct {
	Entry
	delayNs int64
	behind  int
	copies  int
	field   rewriteField
	value   uint8
}

// key is the exact-match key. For data and read-req the connection index stands for (source IP, destination
// IP, destination QPN), which identify the connection one to one; seq is the PSN, or Nth for ack/nak/cnp.
type key struct {
	conn uint32
	seq  uint32
	iter uint32
	kind PacketKind
	rel  bool // iter counts rounds within the packet's message (Intent.MsgIter)
}

// connKey identifies a connection and direction from a packet's addresses and destination QPN.
type connKey struct {
	src, dst [16]byte
	qpn      uint32
}

// Directions of a connection's packets.
const (
	dirReqToResp = 0
	dirRespToReq = 1
)

type connRef struct {
	conn int
	dir  uint8
}

// connState is the per-connection state the data plane keeps.
type connState struct {
	read bool // READ connection: data packets are READ responses (responder to requester)
	// ITER of the data direction: last PSN seen and the round.
	dataLast roce.PSN
	dataIter int
	// ITER of READ requests (requester to responder).
	reqLast roce.PSN
	reqIter int
	nth     [3]uint32 // ACKs, NAKs and CNPs seen so far, indexed by kind-KindAck
	// msgStart[m] is the data round in which message m's first packet first arrived (0: not yet); kept only
	// for connections with message-relative intents.
	msgStart []int32
	ipsn     roce.PSN
	ppm      int
	cnpDir   uint8 // the direction CNPs of this connection travel (from the data receiver)
}

// New validates the metadata and intents and installs the event table. It is called after the metadata
// barrier and before any traffic, as the reference controller populates its tables before echoing the barrier.
func New(cfg Config) (*Switch, error) {
	ports := cfg.Ports
	if ports == 0 {
		ports = 2
	}
	if ports != 2 {
		return nil, fmt.Errorf("config has %d ports; expected 2 (the switch forwards between the requester's and the responder's port)", cfg.Ports)
	}
	capacity := cfg.TableCapacity
	if capacity == 0 {
		capacity = DefaultTableCapacity
	}
	if capacity < 0 {
		return nil, fmt.Errorf("event table capacity %d is negative; expected a number of entries, or 0 for %d", capacity, DefaultTableCapacity)
	}
	weights := cfg.DumperWeights
	if len(weights) == 0 {
		weights = []int{1}
	}
	if len(weights) > maxDumpers {
		return nil, fmt.Errorf("%d dumper weights given; expected at most %d dumpers", len(weights), maxDumpers)
	}
	for i, w := range weights {
		if w < 1 || w > 1<<20 {
			return nil, fmt.Errorf("dumper %d has weight %d; expected an integer in 1..%d", i, w, 1<<20)
		}
	}

	s := &Switch{
		conns:   make([]connState, len(cfg.Conns)),
		meta:    make([]ConnMeta, len(cfg.Conns)),
		connMap: make(map[connKey]connRef, 2*len(cfg.Conns)),
		rewrite: cfg.RewritePort,
		wrr:     NewWRR(weights),
		clock:   cfg.ClockStartNs,
	}
	s.rng = *rand.NewPCG(cfg.Seed, 0x6c756d696e61) // second word: "lumina", so seed 0 is still a usable stream
	s.c.init(ports, len(weights))

	if err := s.addConns(cfg.Conns); err != nil {
		return nil, err
	}
	if len(cfg.Intents) > capacity {
		return nil, fmt.Errorf("the scenario needs %d event table entries but the table holds %d; raise network.event-table-capacity to at least %d", len(cfg.Intents), capacity, len(cfg.Intents))
	}
	s.table = make(map[key]int32, len(cfg.Intents))
	s.entries = make([]entry, 0, len(cfg.Intents))
	for i := range cfg.Intents {
		if err := s.addIntent(i, &cfg.Intents[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Switch) addConns(conns []ConnMeta) error {
	seen := make([]bool, len(conns))
	for i := range conns {
		m := &conns[i]
		where := fmt.Sprintf("connection metadata #%d", i)
		if m.Index < 0 || m.Index >= len(conns) || seen[m.Index] {
			return fmt.Errorf("%s has index %d; expected a distinct index in 0..%d", where, m.Index, len(conns)-1)
		}
		seen[m.Index] = true
		read := false
		switch m.Verb {
		case "write", "send":
		case "read":
			read = true
		default:
			return fmt.Errorf("%s (connection %d) has verb %q; expected write, send or read", where, m.Index, m.Verb)
		}
		if !m.ReqIP.IsValid() || !m.RespIP.IsValid() || m.ReqIP.Is4() != m.RespIP.Is4() {
			return fmt.Errorf("%s (connection %d) has addresses %v and %v; expected two valid addresses of the same family", where, m.Index, m.ReqIP, m.RespIP)
		}
		if m.ReqQPN > roce.PSNMask || m.RespQPN > roce.PSNMask {
			return fmt.Errorf("%s (connection %d) has QPNs %#x and %#x; expected 24-bit QPNs", where, m.Index, m.ReqQPN, m.RespQPN)
		}
		if m.ReqIPSN > roce.PSNMask || m.RespIPSN > roce.PSNMask {
			return fmt.Errorf("%s (connection %d) has initial PSNs %d and %d; expected 24-bit PSNs", where, m.Index, m.ReqIPSN, m.RespIPSN)
		}
		if m.PacketsPerMsg < 0 || m.NumMsgs < 0 {
			return fmt.Errorf("%s (connection %d) has %d packets per message and %d messages; expected non-negative counts", where, m.Index, m.PacketsPerMsg, m.NumMsgs)
		}
		// Requests travel requester -> responder to the responder's QP, responses the other way.
		fwd := connKey{src: m.ReqIP.As16(), dst: m.RespIP.As16(), qpn: m.RespQPN}
		rev := connKey{src: m.RespIP.As16(), dst: m.ReqIP.As16(), qpn: m.ReqQPN}
		for _, k := range []connKey{fwd, rev} {
			if other, dup := s.connMap[k]; dup {
				return fmt.Errorf("%s (connection %d) shares addresses and QPN %#x with connection %d; expected every connection to be distinct", where, m.Index, k.qpn, other.conn)
			}
		}
		s.connMap[fwd] = connRef{conn: m.Index, dir: dirReqToResp}
		s.connMap[rev] = connRef{conn: m.Index, dir: dirRespToReq}
		s.meta[m.Index] = *m
		cs := &s.conns[m.Index]
		cs.read = read
		cs.dataLast, cs.dataIter = m.ReqIPSN.Add(-1), 1
		cs.reqLast, cs.reqIter = m.ReqIPSN.Add(-1), 1
		cs.cnpDir = dirRespToReq
		if read {
			cs.cnpDir = dirReqToResp
		}
	}
	return nil
}

// addIntent validates intent i and installs its entry.
func (s *Switch) addIntent(i int, in *Intent) error {
	src := in.Source
	if src == "" {
		src = fmt.Sprintf("intent #%d", i)
	}
	if in.Conn < 0 || in.Conn >= len(s.conns) {
		return fmt.Errorf("%s: connection %d does not exist; expected 0..%d (%d connections reported)", src, in.Conn, len(s.conns)-1, len(s.conns))
	}
	m := &s.meta[in.Conn]
	cs := &s.conns[in.Conn]
	if in.Iter < 0 || in.Iter > 1<<24 {
		return fmt.Errorf("%s: iter %d is out of range; expected 0 (any round) or a round in 1..%d", src, in.Iter, 1<<24)
	}
	e := entry{Entry: Entry{Kind: in.Kind, Conn: in.Conn, Iter: in.Iter, MsgIter: in.MsgIter && in.Iter > 0,
		Action: in.Action, Source: in.Source}}
	k := key{conn: uint32(in.Conn), iter: uint32(in.Iter), kind: in.Kind, rel: in.MsgIter && in.Iter > 0}
	if k.rel {
		if in.Kind != KindData || m.PacketsPerMsg <= 0 || m.NumMsgs <= 0 {
			return fmt.Errorf("%s: a message-relative iter needs a data intent on a connection with known packets per message and message count", src)
		}
		if cs.msgStart == nil {
			cs.msgStart = make([]int32, m.NumMsgs)
			cs.ipsn, cs.ppm = m.ReqIPSN, m.PacketsPerMsg
		}
	}
	switch in.Kind {
	case KindData, KindReadReq:
		if in.Kind == KindReadReq && !cs.read {
			return fmt.Errorf("%s: connection %d is a %s connection; expected a read connection for read-req events", src, in.Conn, m.Verb)
		}
		if in.PSN < 0 || in.PSN > roce.PSNMask {
			return fmt.Errorf("%s: psn offset %d is out of range; expected 0..%d", src, in.PSN, roce.PSNMask)
		}
		if n := m.PacketsPerMsg * m.NumMsgs; n > 0 && in.PSN >= n {
			return fmt.Errorf("%s: psn offset %d is beyond connection %d's %d data packets (%d messages of %d); expected 0..%d", src, in.PSN, in.Conn, n, m.NumMsgs, m.PacketsPerMsg, n-1)
		}
		// READ responses and READ requests both use the requester's PSN space.
		e.PSN = m.ReqIPSN.Add(in.PSN)
		if in.Kind == KindData && cs.read {
			e.SrcIP, e.DstIP, e.DstQPN = m.RespIP, m.ReqIP, m.ReqQPN
		} else {
			e.SrcIP, e.DstIP, e.DstQPN = m.ReqIP, m.RespIP, m.RespQPN
		}
		k.seq = uint32(e.PSN)
	case KindAck, KindNAK, KindCNP:
		if in.Nth < 0 || in.Nth > 1<<31-1 {
			return fmt.Errorf("%s: nth %d is out of range; expected a 0-based index in 0..%d", src, in.Nth, 1<<31-1)
		}
		e.Nth = in.Nth
		if in.Kind == KindCNP && cs.read {
			e.SrcIP, e.DstIP, e.DstQPN = m.ReqIP, m.RespIP, m.RespQPN
		} else {
			e.SrcIP, e.DstIP, e.DstQPN = m.RespIP, m.ReqIP, m.ReqQPN
		}
		k.seq = uint32(in.Nth)
	default:
		return fmt.Errorf("%s: packet kind %d is unknown; expected data, ack, nak, cnp or read-req", src, in.Kind)
	}
	switch in.Action {
	case roce.EventDrop, roce.EventECN, roce.EventCorrupt:
	case roce.EventDelay:
		if in.DelayNs <= 0 {
			return fmt.Errorf("%s: delay of %d ns; expected a positive duration", src, in.DelayNs)
		}
		e.delayNs = in.DelayNs
	case roce.EventReorder:
		if in.Behind < 1 || in.Behind > 1<<20 {
			return fmt.Errorf("%s: reorder behind %d packets; expected 1..%d", src, in.Behind, 1<<20)
		}
		e.behind = in.Behind
	case roce.EventDuplicate:
		if in.Copies < 1 || in.Copies > 64 {
			return fmt.Errorf("%s: duplicate with %d copies; expected 1..64 extra copies", src, in.Copies)
		}
		e.copies = in.Copies
	case roce.EventRewrite:
		f, ok := rewriteFields[in.Field]
		if !ok {
			return fmt.Errorf("%s: rewrite field %q is unknown; expected migreq, se, pad, dscp or ecn", src, in.Field)
		}
		if in.Value < 0 || in.Value > f.max {
			return fmt.Errorf("%s: rewrite %s value %d is out of range; expected 0..%d", src, in.Field, in.Value, f.max)
		}
		e.field, e.value = f.f, uint8(in.Value)
	default:
		return fmt.Errorf("%s: action %d is unknown; expected drop, ecn, corrupt, delay, reorder, duplicate or rewrite", src, in.Action)
	}
	if j, dup := s.table[k]; dup {
		other := s.entries[j].Source
		if other == "" {
			other = "another intent"
		}
		return fmt.Errorf("%s: targets the same packet as %s (connection %d, %s, %s, iter %d); expected one event per packet and round", src, other, in.Conn, in.Kind, e.target(), in.Iter)
	}
	s.table[k] = int32(len(s.entries))
	s.entries = append(s.entries, e)
	return nil
}

// target describes an entry's packet for messages.
func (e *entry) target() string {
	if e.Kind.sequenced() {
		return fmt.Sprintf("psn %d", e.PSN)
	}
	return fmt.Sprintf("nth %d", e.Nth)
}

// Entries lists the installed table in intent order, with each entry's hit count so far. Entries that never
// fired (Hits == 0) are intents the traffic never reached.
func (s *Switch) Entries() []Entry {
	out := make([]Entry, len(s.entries))
	for i := range s.entries {
		out[i] = s.entries[i].Entry
	}
	return out
}

// Hits returns how many packets each entry matched, aligned with Entries.
func (s *Switch) Hits() []uint64 {
	out := make([]uint64, len(s.entries))
	for i := range s.entries {
		out[i] = s.entries[i].Hits
	}
	return out
}

// Conns returns the installed connection metadata, indexed by connection (a data plane outside Go, such as
// the live switch's BPF program, initializes its per-connection registers from it).
func (s *Switch) Conns() []ConnMeta { return append([]ConnMeta(nil), s.meta...) }

// Dumpers returns what the switch was built with that a data plane outside Go needs besides the table and
// the connections: the dumper weights (normalized: at least one dumper) and the RSS rewrite port.
func (s *Switch) Dumpers() (weights []int, rewritePort uint16) {
	for _, w := range s.wrr.weight {
		weights = append(weights, int(w))
	}
	return weights, s.rewrite
}
