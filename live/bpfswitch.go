package live

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/roce"
)

// Limits of the BPF data plane (bpf/switch.c); the control plane refuses what exceeds them.
const (
	BPFMaxDumpers = 16
	BPFMaxConns   = 4096
	BPFMaxMsgs    = 65536 // messages over all connections with message-relative events
)

// opcode classes of bpf/switch.c
const (
	clsOther = iota
	clsSendWrite
	clsReadReq
	clsReadResp
	clsAck
	clsCNP
)

// BPFSupports reports whether the BPF data plane implements an action.
func BPFSupports(a roce.EventType) bool {
	return a == roce.EventDrop || a == roce.EventECN || a == roce.EventCorrupt
}

// CheckBPFIntents refuses intents the BPF data plane does not implement, naming the first such event.
func CheckBPFIntents(intents []inject.Intent) error {
	for i, in := range intents {
		if !BPFSupports(in.Action) {
			src := in.Source
			if src == "" {
				src = fmt.Sprintf("intent #%d", i)
			}
			return fmt.Errorf("%s: the BPF data planes (tc, xdp) implement drop, ecn and corrupt, not %s; run it with --dataplane ring", src, in.Action)
		}
	}
	return nil
}

// BPFSwitchConfig describes the BPF data plane: the ports, the dumpers and their weights, the RSS rewrite port
// and the event table capacity are fixed at load time; connections and events come with Install.
type BPFSwitchConfig struct {
	Ports         [2]string
	Dumpers       []string
	DumperWeights []int  // empty: equal weights
	RewritePort   uint16 // UDP destination port of mirrored copies (0: no rewrite)
	TableCapacity int    // event table entries (0: inject.DefaultTableCapacity)
	// Hook is where the program runs: HookTC (TC ingress, mirrors with bpf_clone_redirect; the default) or
	// HookXDP (the driver's XDP hook, mirrors through a broadcast devmap; targets must take XDP frames).
	Hook string
	// detached loads the program and fills its maps but attaches it nowhere (benchmarks run it with
	// BPF_PROG_TEST_RUN).
	detached    bool
	StatusFile  string
	StatusEvery time.Duration
}

// Hooks of the BPF data plane.
const (
	HookTC  = "tc"
	HookXDP = "xdp"
)

// BPFSwitch runs the switch in the kernel: a program on the two ports (bpf/switch.c; at TC ingress or at the
// XDP hook) forwards, applies the installed events and mirrors every RoCE frame to the dumpers (TC with
// bpf_clone_redirect, XDP through a broadcast devmap). Go keeps the control plane: it fills the program's
// maps from an inject.Switch and reads the counters back.
type BPFSwitch struct {
	cfg      BPFSwitchConfig
	weights  []int
	objs     bpfObjects
	links    []link.Link
	capacity int
	start    time.Time

	mu        sync.Mutex
	sw        *inject.Switch // the installed table (nil: none, everything forwarded and mirrored)
	base      bpfSwitchCounters
	installed int
}

// NewBPFSwitch loads the hook's programs and attaches them to the two ports (in the calling thread's network
// namespace, see InNetns). It needs root; TC needs TCX links (Linux 6.6 or later), XDP native XDP on the
// ports and XDP transmit on the ports and the dumpers.
func NewBPFSwitch(cfg BPFSwitchConfig) (*BPFSwitch, error) {
	if cfg.Ports[0] == "" || cfg.Ports[1] == "" {
		return nil, fmt.Errorf("switch needs two ports; got %q and %q", cfg.Ports[0], cfg.Ports[1])
	}
	if len(cfg.Dumpers) > BPFMaxDumpers {
		return nil, fmt.Errorf("%d dumpers; the bpf data plane handles at most %d", len(cfg.Dumpers), BPFMaxDumpers)
	}
	weights := cfg.DumperWeights
	if len(weights) == 0 {
		weights = equalWeights(len(cfg.Dumpers))
	}
	if len(cfg.Dumpers) > 0 && len(weights) != len(cfg.Dumpers) {
		return nil, fmt.Errorf("%d dumper weights for %d dumpers; expected one weight per dumper", len(weights), len(cfg.Dumpers))
	}
	capacity := cfg.TableCapacity
	if capacity == 0 {
		capacity = inject.DefaultTableCapacity
	}
	if capacity < 1 || capacity > 1<<20 {
		return nil, fmt.Errorf("event table capacity %d; the bpf data plane takes 1..%d entries", capacity, 1<<20)
	}
	if cfg.StatusEvery == 0 {
		cfg.StatusEvery = time.Second
	}
	if cfg.Hook == "" {
		cfg.Hook = HookTC
	}
	if cfg.Hook != HookTC && cfg.Hook != HookXDP {
		return nil, fmt.Errorf("bpf data plane hook %q; expected %s or %s", cfg.Hook, HookTC, HookXDP)
	}
	var ifs [2]int
	for p := range 2 {
		i, err := ifIndex(cfg.Ports[p])
		if err != nil {
			return nil, fmt.Errorf("switch port %d: %w", p, err)
		}
		ifs[p] = i
	}
	var dumps []int
	for i, d := range cfg.Dumpers {
		idx, err := ifIndex(d)
		if err != nil {
			return nil, fmt.Errorf("switch dumper port %d: %w", i, err)
		}
		dumps = append(dumps, idx)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("bpf data plane: %w", err)
	}
	spec, err := loadBpfSwitch()
	if err != nil {
		return nil, fmt.Errorf("bpf data plane: reading the embedded program: %w", err)
	}
	spec.Maps[bpfSwitchMapTable].MaxEntries = uint32(capacity)
	spec.Maps[bpfSwitchMapHits].MaxEntries = uint32(capacity)
	s := &BPFSwitch{cfg: cfg, weights: weights, capacity: capacity, start: time.Now()}
	// Only the hook's programs are loaded, so that a kernel that cannot verify one hook's program can run
	// the other.
	if cfg.Hook == HookXDP {
		var o struct {
			bpfSwitchMaps
			xdpPrograms
		}
		err = spec.LoadAndAssign(&o, nil)
		s.objs.bpfSwitchMaps, s.objs.xdp = o.bpfSwitchMaps, o.xdpPrograms
	} else {
		var o struct {
			bpfSwitchMaps
			tcPrograms
		}
		err = spec.LoadAndAssign(&o, nil)
		s.objs.bpfSwitchMaps, s.objs.tc = o.bpfSwitchMaps, o.tcPrograms
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("bpf data plane: the kernel's verifier refused the program: %+v", ve)
		}
		return nil, fmt.Errorf("bpf data plane: loading the program: %w", err)
	}
	if err := s.fillOpcodes(); err != nil {
		s.Close()
		return nil, err
	}
	var c bpfSwitchConfig
	c.Ifindex = [2]uint32{uint32(ifs[0]), uint32(ifs[1])}
	for i, idx := range dumps {
		c.DumperIfindex[i] = uint32(idx)
		c.Weight[i] = int64(weights[i])
		c.TotalWeight += int64(weights[i])
	}
	c.Ndumpers = uint32(len(dumps))
	c.RewritePort = uint32(cfg.RewritePort)
	c.StartNs = monoNow()
	if err := s.objs.Config.Put(uint32(0), &c); err != nil {
		s.Close()
		return nil, fmt.Errorf("bpf data plane: writing the configuration: %w", err)
	}
	if cfg.Hook == HookXDP {
		if err := s.fillDevmaps(ifs, dumps); err != nil {
			s.Close()
			return nil, err
		}
	}
	for p := range 2 {
		if cfg.detached {
			break
		}
		var l link.Link
		var err error
		if cfg.Hook == HookXDP {
			// Native mode only: generic (skb) XDP does not carry the metadata area to the devmap program.
			l, err = link.AttachXDP(link.XDPOptions{Interface: ifs[p], Program: s.objs.xdp.LuminaXdp, Flags: link.XDPDriverMode})
			if err != nil {
				err = fmt.Errorf("bpf data plane: attaching XDP in native mode to %s (its driver needs native XDP; --dataplane tc works on any): %w", cfg.Ports[p], err)
			}
		} else {
			l, err = link.AttachTCX(link.TCXOptions{Interface: ifs[p], Program: s.objs.tc.LuminaSwitch, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				err = fmt.Errorf("bpf data plane: attaching to %s ingress (TCX needs Linux 6.6 or later): %w", cfg.Ports[p], err)
			}
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		s.links = append(s.links, l)
	}
	return s, nil
}

// bpfObjects are the maps and the hook's programs.
type bpfObjects struct {
	bpfSwitchMaps
	tc  tcPrograms
	xdp xdpPrograms
}

type tcPrograms struct {
	LuminaSwitch *ebpf.Program `ebpf:"lumina_switch"`
}

type xdpPrograms struct {
	LuminaXdp       *ebpf.Program `ebpf:"lumina_xdp"`
	LuminaXdpMirror *ebpf.Program `ebpf:"lumina_xdp_mirror"`
}

// Close closes the programs and the maps.
func (o *bpfObjects) Close() error {
	var errs []error
	for _, p := range []*ebpf.Program{o.tc.LuminaSwitch, o.xdp.LuminaXdp, o.xdp.LuminaXdpMirror} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(append(errs, o.bpfSwitchMaps.Close())...)
}

// fillDevmaps writes dumper d's broadcast devmap: the two ports (keys 0, 1) and the dumper (key 2) with the
// program that turns its copy into the mirror copy.
func (s *BPFSwitch) fillDevmaps(ifs [2]int, dumps []int) error {
	m := &s.objs.bpfSwitchMaps
	maps := []*ebpf.Map{m.Bcast0, m.Bcast1, m.Bcast2, m.Bcast3, m.Bcast4, m.Bcast5, m.Bcast6, m.Bcast7, m.Bcast8,
		m.Bcast9, m.Bcast10, m.Bcast11, m.Bcast12, m.Bcast13, m.Bcast14, m.Bcast15}
	type devmapVal struct{ Ifindex, ProgFd uint32 }
	for d, idx := range dumps {
		for k, v := range []devmapVal{{uint32(ifs[0]), 0}, {uint32(ifs[1]), 0}, {uint32(idx), uint32(s.objs.xdp.LuminaXdpMirror.FD())}} {
			if err := maps[d].Put(uint32(k), &v); err != nil {
				return fmt.Errorf("bpf data plane: devmap of dumper %d, entry %d: %w", d, k, err)
			}
		}
	}
	return nil
}

func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// fillOpcodes writes the opcode classes the program dispatches on, from package roce's own rules, and for
// acknowledges the offset of the AETH behind the BTH as roce's decoder finds it.
func (s *BPFSwitch) fillOpcodes() error {
	for i := range 256 {
		op := roce.Opcode(i)
		var oi bpfSwitchOpinfo
		switch {
		case op == roce.CNP:
			oi.Cls = clsCNP
		case op.IsAck():
			oi.Cls = clsAck
			oi.AethOff = uint8(aethOffset(op))
		case op.IsReadRequest():
			oi.Cls = clsReadReq
		case op.IsReadResponse():
			oi.Cls = clsReadResp
		case op.IsSend() || op.IsWrite():
			oi.Cls = clsSendWrite
		}
		if err := s.objs.Opcodes.Put(uint32(i), &oi); err != nil {
			return fmt.Errorf("bpf data plane: writing opcode %#x: %w", i, err)
		}
	}
	return nil
}

// aethOffset sums the extended headers roce's decoder reads between the BTH and the AETH, in its order.
func aethOffset(op roce.Opcode) int {
	n := 0
	for _, h := range []struct {
		has bool
		len int
	}{{op.HasRDETH(), roce.RDETHLen}, {op.HasDETH(), roce.DETHLen}, {op.HasXRCETH(), roce.XRCETHLen},
		{op.HasRETH(), roce.RETHLen}, {op.HasAtomicETH(), roce.AtomicETHLen}, {op.HasImm(), roce.ImmLen},
		{op.HasIETH(), roce.IETHLen}} {
		if h.has {
			n += h.len
		}
	}
	return n
}

// Close detaches the program and frees its maps.
func (s *BPFSwitch) Close() error {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	s.links = nil
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// CheckBPF refuses an injector the BPF data plane cannot run: events other than drop, ecn and corrupt,
// IPv6 connections, and more connections or messages than its maps hold.
func CheckBPF(sw *inject.Switch) error {
	for _, e := range sw.Entries() {
		if !BPFSupports(e.Action) {
			src := e.Source
			if src == "" {
				src = "an event"
			}
			return fmt.Errorf("%s: the BPF data planes (tc, xdp) implement drop, ecn and corrupt, not %s; run it with --dataplane ring", src, e.Action)
		}
	}
	conns := sw.Conns()
	if len(conns) > BPFMaxConns {
		return fmt.Errorf("%d connections; the bpf data plane holds at most %d", len(conns), BPFMaxConns)
	}
	msgs := 0
	rel := relConns(sw)
	for _, m := range conns {
		if !m.ReqIP.Is4() {
			return fmt.Errorf("connection %d has IPv6 addresses %v and %v; the bpf data plane handles IPv4 RoCEv2 only", m.Index, m.ReqIP, m.RespIP)
		}
		if rel[m.Index] {
			msgs += m.NumMsgs
		}
	}
	if msgs > BPFMaxMsgs {
		return fmt.Errorf("message-relative events over %d messages; the bpf data plane tracks at most %d", msgs, BPFMaxMsgs)
	}
	return nil
}

func relConns(sw *inject.Switch) map[int]bool {
	rel := map[int]bool{}
	for _, e := range sw.Entries() {
		if e.MsgIter {
			rel[e.Conn] = true
		}
	}
	return rel
}

// Install replaces the connections and the event table with those of l, which must be an *inject.Switch
// (the same table the ring path would run), and restarts the injector's counters, sequence numbers and
// round robin as installing a new logic does on the ring path. Unlike the ring path, the maps are rewritten
// while frames flow: install before traffic starts (the control plane's barrier guarantees it).
func (s *BPFSwitch) Install(_ context.Context, l inject.Logic) error {
	sw, ok := l.(*inject.Switch)
	if !ok {
		return fmt.Errorf("the bpf data plane runs an event injector, not %T", l)
	}
	if err := CheckBPF(sw); err != nil {
		return err
	}
	// Weights and the rewrite port are loaded with the program; the injector must have been built with them.
	w, rewrite := sw.Dumpers()
	if len(s.cfg.Dumpers) > 0 && fmt.Sprint(w) != fmt.Sprint(s.weights) {
		return fmt.Errorf("the injector has dumper weights %v but the bpf data plane was loaded with %v", w, s.weights)
	}
	if rewrite != s.cfg.RewritePort {
		return fmt.Errorf("the injector rewrites mirrored copies to UDP port %d but the bpf data plane was loaded with %d", rewrite, s.cfg.RewritePort)
	}
	if n := len(sw.Entries()); n > s.capacity {
		return fmt.Errorf("%d events exceed the loaded event table capacity %d", n, s.capacity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.clear(); err != nil {
		return err
	}
	entries := sw.Entries()
	rel := relConns(sw)
	conns := sw.Conns()
	for _, m := range conns {
		cs := bpfSwitchConnState{DataLast: uint32(m.ReqIPSN.Add(-1)), DataIter: 1, ReqLast: uint32(m.ReqIPSN.Add(-1)), ReqIter: 1,
			CnpDir: 1, Ipsn: uint32(m.ReqIPSN), Ppm: uint32(max(m.PacketsPerMsg, 0)), Nmsgs: uint32(max(m.NumMsgs, 0))}
		if m.Verb == "read" {
			cs.Read, cs.CnpDir = 1, 0
		}
		if rel[m.Index] {
			cs.HasMsg = 1
			for i := range m.NumMsgs {
				if err := s.objs.MsgStart.Put(bpfSwitchMsgKey{Conn: uint32(m.Index), Msg: uint32(i)}, int32(0)); err != nil {
					return fmt.Errorf("bpf data plane: message start of connection %d message %d: %w", m.Index, i, err)
				}
			}
		}
		if err := s.objs.Conns.Put(uint32(m.Index), &cs); err != nil {
			return fmt.Errorf("bpf data plane: connection %d state: %w", m.Index, err)
		}
	}
	for i, e := range entries {
		k := bpfSwitchTableKey{Conn: uint32(e.Conn), Iter: uint32(e.Iter), Kind: uint8(e.Kind)}
		if e.Kind == inject.KindData || e.Kind == inject.KindReadReq {
			k.Seq = uint32(e.PSN)
		} else {
			k.Seq = uint32(e.Nth)
		}
		if e.MsgIter {
			k.Rel = 1
		}
		if err := s.objs.Table.Put(&k, &bpfSwitchTableVal{Idx: uint32(i), Action: uint32(e.Action)}); err != nil {
			return fmt.Errorf("bpf data plane: event table entry %d (%s): %w", i, e.Source, err)
		}
	}
	// The connection map goes last: a packet matches nothing until its connection's state and events are in.
	for _, m := range conns {
		fwd := bpfSwitchConnKey{Src: ip4(m.ReqIP.As4()), Dst: ip4(m.RespIP.As4()), Qpn: m.RespQPN}
		rev := bpfSwitchConnKey{Src: ip4(m.RespIP.As4()), Dst: ip4(m.ReqIP.As4()), Qpn: m.ReqQPN}
		if err := s.objs.ConnMap.Put(&fwd, &bpfSwitchConnRef{Conn: uint32(m.Index), Dir: 0}); err != nil {
			return fmt.Errorf("bpf data plane: connection %d: %w", m.Index, err)
		}
		if err := s.objs.ConnMap.Put(&rev, &bpfSwitchConnRef{Conn: uint32(m.Index), Dir: 1}); err != nil {
			return fmt.Errorf("bpf data plane: connection %d: %w", m.Index, err)
		}
	}
	s.sw = sw
	s.installed++
	return nil
}

// ip4 is an IPv4 address as the program reads it from the packet: the four bytes in memory order.
func ip4(a [4]byte) uint32 { return binary.NativeEndian.Uint32(a[:]) }

// clear empties the connection map, the table, the message starts and the hits, resets the sequence number
// and the round robin, and takes the current counters as the injector's new zero.
func (s *BPFSwitch) clear() error {
	var errs []error
	errs = append(errs, deleteAll[bpfSwitchConnKey](s.objs.ConnMap), deleteAll[bpfSwitchTableKey](s.objs.Table),
		deleteAll[bpfSwitchMsgKey](s.objs.MsgStart))
	if s.sw != nil {
		for i := range s.sw.Entries() {
			errs = append(errs, s.objs.Hits.Put(uint32(i), uint64(0)))
		}
	}
	errs = append(errs, s.objs.Gstate.Put(uint32(0), &bpfSwitchGstate{}))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bpf data plane: clearing the tables: %w", err)
	}
	c, err := s.counters()
	if err != nil {
		return err
	}
	s.base = c
	return nil
}

func deleteAll[K any](m *ebpf.Map) error {
	var keys []K
	var k K
	it := m.Iterate()
	var v []byte
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return err
	}
	for i := range keys {
		if err := m.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// counters sums the per-CPU counters.
func (s *BPFSwitch) counters() (bpfSwitchCounters, error) {
	var per []bpfSwitchCounters
	if err := s.objs.Counters.Lookup(uint32(0), &per); err != nil {
		return bpfSwitchCounters{}, fmt.Errorf("bpf data plane: reading counters: %w", err)
	}
	var t bpfSwitchCounters
	for i := range per {
		addCounters(&t, &per[i], 1)
	}
	return t, nil
}

// addCounters adds sign*b to a, field by field.
func addCounters(a, b *bpfSwitchCounters, sign uint64) {
	add := func(x []uint64, y []uint64) {
		for i := range x {
			x[i] += sign * y[i]
		}
	}
	add(a.RxFrames[:], b.RxFrames[:])
	add(a.RxBytes[:], b.RxBytes[:])
	add(a.RxRoce[:], b.RxRoce[:])
	add(a.TxRoce[:], b.TxRoce[:])
	add(a.RxOther[:], b.RxOther[:])
	add(a.TxFrames[:], b.TxFrames[:])
	add(a.TxBytes[:], b.TxBytes[:])
	add(a.MirroredFrom[:], b.MirroredFrom[:])
	add(a.PerDumper[:], b.PerDumper[:])
	add(a.DumperSent[:], b.DumperSent[:])
	add(a.DumperBytes[:], b.DumperBytes[:])
	add(a.DumperErr[:], b.DumperErr[:])
	add(a.Events[:], b.Events[:])
	a.Mirrored += sign * b.Mirrored
	a.Dropped += sign * b.Dropped
	a.BadDumper += sign * b.BadDumper
	a.MirrorErr += sign * b.MirrorErr
}

// Status reads the counters; it has the ring path's shape so that status files and results read the same.
func (s *BPFSwitch) Status(context.Context) (SwitchStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot()
}

func (s *BPFSwitch) snapshot() (SwitchStatus, error) {
	t, err := s.counters()
	if err != nil {
		return SwitchStatus{}, err
	}
	st := SwitchStatus{UptimeNs: int64(time.Since(s.start)), Dataplane: s.cfg.Hook, Installed: s.installed}
	for p := range 2 {
		st.Ports[p] = PortStatus{Name: s.cfg.Ports[p], RxFrames: t.RxFrames[p], RxBytes: t.RxBytes[p], RxRoCE: t.RxRoce[p],
			TxRoCE: t.TxRoce[p], Mirrored: t.MirroredFrom[p], Tx: TxStats{Frames: t.TxFrames[p], Bytes: t.TxBytes[p]}}
	}
	for i, d := range s.cfg.Dumpers {
		st.Dumpers = append(st.Dumpers, DumperStatus{Name: d, Tx: TxStats{Frames: t.DumperSent[i], Bytes: t.DumperBytes[i], Errors: t.DumperErr[i]}})
		st.Mirrored += t.DumperSent[i]
	}
	st.BadDumper = t.BadDumper
	// The injector's counters start at the last install, as a newly installed logic's do on the ring path.
	inj := t
	addCounters(&inj, &s.base, ^uint64(0))
	st.NotForwarded = inj.Dropped
	nd := max(len(s.cfg.Dumpers), 1)
	ic := inject.Counters{RxRoCE: inj.RxRoce[:], TxRoCE: inj.TxRoce[:], RxNonRoCE: inj.RxOther[:], Mirrored: inj.Mirrored,
		MirroredPerDumper: inj.PerDumper[:nd], Dropped: inj.Dropped, Events: map[string]uint64{}, MirrorErrors: inj.MirrorErr}
	for a := roce.EventDrop; a <= roce.EventRewrite; a++ {
		ic.Events[a.String()] = inj.Events[a]
	}
	st.Injector = &ic
	if s.sw != nil {
		st.Entries = s.sw.Entries()
		for i := range st.Entries {
			var h uint64
			if err := s.objs.Hits.Lookup(uint32(i), &h); err != nil {
				return st, fmt.Errorf("bpf data plane: reading hits of entry %d: %w", i, err)
			}
			st.Entries[i].Hits = h
		}
	}
	return st, nil
}

// Run keeps the program attached until ctx is done, writing the status file every StatusEvery, and returns
// the final status. The kernel forwards; this goroutine only reads counters.
func (s *BPFSwitch) Run(ctx context.Context) (SwitchStatus, error) {
	tick := time.NewTicker(s.cfg.StatusEvery)
	defer tick.Stop()
	var runErr error
	for {
		select {
		case <-ctx.Done():
			st, err := s.Status(context.Background())
			if err == nil && s.cfg.StatusFile != "" {
				err = writeJSONFile(s.cfg.StatusFile, st)
			}
			return st, errors.Join(runErr, err)
		case <-tick.C:
			if s.cfg.StatusFile == "" {
				continue
			}
			st, err := s.Status(ctx)
			if err == nil {
				err = writeJSONFile(s.cfg.StatusFile, st)
			}
			if err != nil && runErr == nil {
				runErr = err
			}
		}
	}
}
