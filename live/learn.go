package live

import (
	"fmt"
	"maps"
	"math/rand/v2"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/roce"
)

// LearnConfig configures learning mode: events for traffic from generators that report no metadata.
type LearnConfig struct {
	// Intents target learned connections: Conn is the order in which connections are learned (0 = the first
	// connection seen), PSN the offset from the PSN of its first data packet. Only data intents are allowed.
	Intents       []inject.Intent
	DumperWeights []int  // as inject.Config
	RewritePort   uint16 // as inject.Config
	Seed          uint64 // as inject.Config
	TableCapacity int    // per connection, as inject.Config
	MaxConns      int    // connections learned at most (0: 4096); later ones are forwarded and mirrored only
}

// Learner is an inject-compatible switch logic that learns connections from traffic: a connection (source IP,
// destination IP, destination QP) is learned at its first SEND or WRITE packet, whose PSN becomes the initial
// PSN, so the scenario's relative PSNs apply without the generator's metadata.
//
// inject.Switch fixes its connections at New, so the Learner runs one inject.Switch per learned connection
// (built at the first packet, with the intents of that connection) plus one with no connection for everything
// else, and rewrites the mirror metadata itself so that sequence numbers and the dumper choice stay global.
// The requester's own QPN never appears in its requests, so ACKs, NAKs and CNPs of a learned connection are
// not classified: learning mode supports data events only (New rejects the others).
type Learner struct {
	cfg     LearnConfig
	base    *inject.Switch
	subs    []*inject.Switch
	metas   []inject.ConnMeta
	byKey   map[learnKey]int
	intents map[int][]inject.Intent
	wrr     inject.WRR
	seq     uint64
	rng     rand.PCG
	pkt     roce.Packet
	perDump []uint64
	// Errors: connections whose switch could not be built (their traffic is forwarded and mirrored only).
	failed []error
}

type learnKey struct {
	src, dst [16]byte
	qpn      uint32
}

// NewLearner validates the intents; connections are created as traffic arrives.
func NewLearner(cfg LearnConfig) (*Learner, error) {
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 4096
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("learning mode: max connections %d; expected a positive number", cfg.MaxConns)
	}
	weights := cfg.DumperWeights
	if len(weights) == 0 {
		weights = []int{1}
	}
	base, err := inject.New(inject.Config{DumperWeights: []int{1}})
	if err != nil {
		return nil, fmt.Errorf("learning mode: %w", err)
	}
	l := &Learner{cfg: cfg, base: base, byKey: map[learnKey]int{}, intents: map[int][]inject.Intent{},
		wrr: inject.NewWRR(weights), perDump: make([]uint64, len(weights))}
	for i, w := range weights {
		if w < 1 {
			return nil, fmt.Errorf("learning mode: dumper %d has weight %d; expected a positive integer", i, w)
		}
	}
	l.rng = *rand.NewPCG(cfg.Seed, 0x6c6561726e) // "learn"
	for i, in := range cfg.Intents {
		src := in.Source
		if src == "" {
			src = fmt.Sprintf("intent #%d", i)
		}
		if in.Kind != inject.KindData {
			return nil, fmt.Errorf("%s: learning mode cannot target %s packets: the requester's QPN never appears in its requests, so only data events apply to learned connections", src, in.Kind)
		}
		if in.Conn < 0 || in.Conn >= cfg.MaxConns {
			return nil, fmt.Errorf("%s: connection %d; expected 0..%d (the order in which connections are learned)", src, in.Conn, cfg.MaxConns-1)
		}
		local := in
		local.Conn = 0
		l.intents[in.Conn] = append(l.intents[in.Conn], local)
	}
	return l, nil
}

// Process implements Logic.
func (l *Learner) Process(now int64, inPort int, frame []byte, v *inject.Verdict) {
	p := &l.pkt
	sw, conn := l.base, -1
	if p.Decode(frame, len(frame)) && len(p.Data()) >= p.BTHOffset+roce.BTHLen {
		k := learnKey{src: p.SrcIP.As16(), dst: p.DstIP.As16(), qpn: p.BTH.DestQP}
		i, ok := l.byKey[k]
		if !ok {
			i, ok = l.learn(k, p)
		}
		if ok && l.subs[i] != nil {
			sw, conn = l.subs[i], i
		}
	}
	sw.Process(now, inPort, frame, v)
	if v.Conn >= 0 {
		v.Conn = conn
	}
	if len(v.Mirror) == 0 {
		return
	}
	// Global metadata: one sequence space and one dumper choice over all the per-connection switches.
	l.seq = l.seq%(1<<48-1) + 1
	v.Seq = l.seq
	v.Dumper = l.wrr.Next()
	l.perDump[v.Dumper]++
	m := roce.Mirror{Event: roce.EventType(v.Event), Seq: l.seq, TimestampNs: uint64(now) & (1<<48 - 1)}
	if err := roce.EncodeMirror(v.Mirror, m); err != nil {
		// Not IPv4: the metadata lives in the MACs only (inject wrote the event into the hop limit).
		put48(v.Mirror[0:], m.TimestampNs)
		put48(v.Mirror[6:], m.Seq)
		return
	}
	if l.cfg.RewritePort != 0 {
		_ = roce.RewriteRSS(v.Mirror, l.cfg.RewritePort, uint16(l.rng.Uint64()))
	}
}

// learn creates the connection of a first SEND or WRITE packet.
func (l *Learner) learn(k learnKey, p *roce.Packet) (int, bool) {
	op := p.BTH.Opcode
	if !(op.IsSend() || op.IsWrite()) || len(l.metas) >= l.cfg.MaxConns || p.Version != roce.RoCEv2 {
		return 0, false
	}
	i := len(l.metas)
	verb := "write"
	if op.IsSend() {
		verb = "send"
	}
	meta := inject.ConnMeta{Index: 0, Verb: verb, ReqIP: p.SrcIP, RespIP: p.DstIP, RespQPN: p.BTH.DestQP,
		ReqQPN: p.BTH.DestQP ^ 1, ReqIPSN: p.BTH.PSN} // ReqQPN is unknown: a placeholder distinct from RespQPN
	sw, err := inject.New(inject.Config{Conns: []inject.ConnMeta{meta}, Intents: l.intents[i],
		TableCapacity: l.cfg.TableCapacity, DumperWeights: []int{1}, Seed: l.cfg.Seed})
	if err != nil {
		l.failed = append(l.failed, fmt.Errorf("learned connection %d (%v -> %v qpn %#x): %w", i, p.SrcIP, p.DstIP, p.BTH.DestQP, err))
		sw = nil
	}
	meta.Index, meta.ReqQPN = i, 0
	l.metas = append(l.metas, meta)
	l.subs = append(l.subs, sw)
	l.byKey[k] = i
	return i, true
}

// Flush implements Logic.
func (l *Learner) Flush(now int64) []inject.Held {
	out := l.base.Flush(now)
	for _, s := range l.subs {
		if s != nil {
			out = append(out, s.Flush(now)...)
		}
	}
	return out
}

// Learned lists the learned connections in learning order (ReqQPN is 0: unknown).
func (l *Learner) Learned() []inject.ConnMeta { return append([]inject.ConnMeta(nil), l.metas...) }

// Errors lists the connections whose events could not be installed.
func (l *Learner) Errors() []error { return append([]error(nil), l.failed...) }

// Counters sums the per-connection switches' counters; mirroring counts are the Learner's own.
func (l *Learner) Counters() inject.Counters {
	c := l.base.Counters()
	c.Events = maps.Clone(c.Events)
	for _, s := range l.subs {
		if s == nil {
			continue
		}
		sc := s.Counters()
		for p := range c.RxRoCE {
			c.RxRoCE[p] += sc.RxRoCE[p]
			c.TxRoCE[p] += sc.TxRoCE[p]
			c.RxNonRoCE[p] += sc.RxNonRoCE[p]
		}
		c.Dropped += sc.Dropped
		c.Held += sc.Held
		c.BadPort += sc.BadPort
		c.MirrorErrors += sc.MirrorErrors
		for k, v := range sc.Events {
			c.Events[k] += v
		}
	}
	c.MirroredPerDumper = append([]uint64(nil), l.perDump...)
	c.Mirrored = 0
	for _, n := range l.perDump {
		c.Mirrored += n
	}
	return c
}

// Entries lists every learned connection's installed entries, with Conn as the learning order.
func (l *Learner) Entries() []inject.Entry {
	var out []inject.Entry
	for i, s := range l.subs {
		if s == nil {
			continue
		}
		for _, e := range s.Entries() {
			e.Conn = i
			out = append(out, e)
		}
	}
	return out
}

func put48(b []byte, v uint64) {
	_ = b[5]
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}
