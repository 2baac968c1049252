package netsim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/internal/des"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// connState is one connection as the traffic generator tracks it.
type connState struct {
	verb      string
	req, resp *qpState
	postNs    []int64
	posted    int
	completed int
	bytes     int64
	status    string
	finished  bool
	mcts      []int64
	firstPost int64
	lastComp  int64
}

// trafficGen is Lumina's traffic generator: it posts messages per connection (tx-depth outstanding, or in
// barrier rounds), records message completion times and decides when the run is over.
type trafficGen struct {
	cfg      *lab.TrafficConfig
	conns    []connState
	round    int // barrier: messages every connection has been asked to post so far
	finished int
}

// post posts message number c.posted of connection i.
func (g *trafficGen) post(s *sim, i int) {
	c := &g.conns[i]
	if c.finished || c.posted >= g.cfg.MsgsPerConn {
		return
	}
	m := c.posted
	c.posted++
	c.postNs[m] = s.now
	if m == 0 {
		c.firstPost = s.now
	}
	h := s.hosts[0]
	wr := rnic.WorkRequest{ID: uint64(m), Verb: rnic.VerbOf(c.verb), Length: g.cfg.MsgSize,
		RemoteAddr: 0x10000000 + uint64(m)*uint64(g.cfg.MsgSize), RKey: 0x1234}
	h.out.Reset()
	if err := c.req.qp.PostSend(s.now, wr, &h.out); err != nil {
		if s.err == nil {
			s.err = fmt.Errorf("connection %d: posting message %d: %w", i, m, err)
		}
		return
	}
	h.handleOut(s, c.req)
}

// postRound posts the initial window (or, with barrier, the next round) on every connection.
func (g *trafficGen) postRound(s *sim) {
	if g.cfg.Barrier {
		g.round++
		for i := range g.conns {
			g.post(s, i)
		}
		return
	}
	for k := 0; k < max(g.cfg.TxDepth, 1); k++ {
		for i := range g.conns {
			g.post(s, i)
		}
	}
}

// complete records a work completion of a requester QP.
func (g *trafficGen) complete(s *sim, conn int, cpl *rnic.Completion) {
	c := &g.conns[conn]
	if c.finished {
		return
	}
	m := int(cpl.WRID)
	if cpl.Status != rnic.StatusSuccess {
		c.status = cpl.Status.ConnStatus()
		g.finish(s, c)
		return
	}
	c.completed++
	c.bytes += int64(g.cfg.MsgSize)
	if m >= 0 && m < len(c.postNs) {
		c.mcts = append(c.mcts, s.now-c.postNs[m])
	}
	c.lastComp = s.now
	if c.completed == g.cfg.MsgsPerConn {
		c.status = rnic.ConnOK
		g.finish(s, c)
		return
	}
	if !g.cfg.Barrier {
		g.post(s, conn)
		return
	}
	g.maybeNextRound(s)
}

func (g *trafficGen) finish(s *sim, c *connState) {
	c.finished = true
	g.finished++
	if g.finished == len(g.conns) {
		s.done = true
		return
	}
	if g.cfg.Barrier {
		g.maybeNextRound(s)
	}
}

// maybeNextRound starts the next barrier round once every live connection completed the current one.
func (g *trafficGen) maybeNextRound(s *sim) {
	for i := range g.conns {
		c := &g.conns[i]
		if !c.finished && c.completed < g.round {
			return
		}
	}
	g.postRound(s)
}

// pending describes the unfinished traffic for limit and stall errors.
func (g *trafficGen) pending() string {
	done, total := 0, 0
	open := 0
	for i := range g.conns {
		done += g.conns[i].completed
		total += g.cfg.MsgsPerConn
		if !g.conns[i].finished {
			open++
		}
	}
	return fmt.Sprintf("%d of %d messages completed, %d of %d connections unfinished", done, total, open, len(g.conns))
}

// ValidateConfig checks the configuration as Run does before anything is built, so that a caller can reject a
// bad one before it creates anything.
func ValidateConfig(cfg *lab.Config) error { return validateConfig(cfg) }

// validate checks the configuration before anything is built.
func validateConfig(cfg *lab.Config) error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	for _, hc := range []struct {
		name string
		h    *lab.HostConfig
	}{{"requester", &cfg.Requester}, {"responder", &cfg.Responder}} {
		if hc.h.Profile == nil {
			bad("%s: no NIC profile", hc.name)
		}
		if len(hc.h.IPs) == 0 {
			bad("%s: no IP address", hc.name)
		}
		for i, ip := range hc.h.IPs {
			if !ip.Is4() {
				bad("%s: IPs[%d] = %v: want an IPv4 address", hc.name, i, ip)
			}
		}
		for _, c := range hc.h.ETS.Classes {
			if c.Weight < 0 {
				bad("%s: ets class %d: weight %d: want >= 0", hc.name, c.TC, c.Weight)
			}
		}
	}
	t := &cfg.Traffic
	switch t.Verb {
	case "write", "send", "read":
		if t.NumConns < 1 {
			bad("traffic: num-conns %d: want >= 1", t.NumConns)
		}
	case "send_read":
		if t.NumSendConns < 0 || t.NumReadConns < 0 || t.NumSendConns+t.NumReadConns < 1 {
			bad("traffic: send_read with %d send and %d read connections: want >= 0 each and >= 1 in total",
				t.NumSendConns, t.NumReadConns)
		}
	default:
		bad("traffic: verb %q: want write, send, read or send_read", t.Verb)
	}
	if t.MsgsPerConn < 1 || t.MsgsPerConn > 1<<26 {
		bad("traffic: messages per connection %d: want 1..2^26", t.MsgsPerConn)
	}
	n := t.NumConns
	if t.Verb == "send_read" {
		n = t.NumSendConns + t.NumReadConns
	}
	if n > 1<<16 {
		bad("traffic: %d connections: want at most 65536", n)
	}
	for i, d := range t.DSCPList {
		if d < 0 || d > 63 {
			bad("traffic: dscp-list[%d] = %d: want 0..63", i, d)
		}
	}
	if t.MsgSize < 1 || t.MsgSize > 1<<31-1 {
		bad("traffic: message size %d: want 1..2^31-1 bytes", t.MsgSize)
	}
	switch t.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		bad("traffic: mtu %d: want 256, 512, 1024, 2048 or 4096", t.MTU)
	}
	if t.TxDepth < 0 {
		bad("traffic: tx-depth %d: want >= 1", t.TxDepth)
	}
	if t.Barrier && t.TxDepth > 1 {
		bad("traffic: barrier needs tx-depth 1, got %d", t.TxDepth)
	}
	if t.RetryCnt > 7 || t.RNRRetry > 7 || t.Timeout > 31 {
		bad("traffic: timeout %d, retry-cnt %d, rnr-retry %d: want 0..31, 0..7, 0..7", t.Timeout, t.RetryCnt, t.RNRRetry)
	}
	if !(cfg.Link.LossProb >= 0 && cfg.Link.LossProb < 1) {
		bad("link: loss probability %v: want 0 <= p < 1", cfg.Link.LossProb)
	}
	if cfg.Link.Gbps < 0 || math.IsNaN(cfg.Link.Gbps) || cfg.Link.PropagationNs < 0 || cfg.SwitchLatencyNs < 0 {
		bad("link: %v Gb/s, propagation %d ns, switch latency %d ns: want non-negative values",
			cfg.Link.Gbps, cfg.Link.PropagationNs, cfg.SwitchLatencyNs)
	}
	if len(errs) > 0 {
		return errors.New("invalid simulation config: " + strings.Join(errs, "; "))
	}
	return nil
}

// DefaultPropagationNs and DefaultSwitchLatencyNs describe the paper's testbed (direct cables to one Tofino
// switch): latencies measured at the simulated switch then land in the published ranges.
const (
	DefaultPropagationNs   = 100
	DefaultSwitchLatencyNs = 300
)

// Run simulates one scenario and returns its results. Bad configuration and run limits are errors; a run that
// stops at a limit returns no result.
func Run(cfg lab.Config) (*lab.Result, error) {
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	return s.run()
}

// newSim builds a run's simulation: links, hosts, every connection's QPs (idle) and the switch logic.
func newSim(cfg lab.Config) (*sim, error) {
	if err := validateConfig(&cfg); err != nil {
		return nil, err
	}
	s := &sim{cfg: &cfg}
	gbps := cfg.Link.Gbps
	if gbps == 0 {
		gbps = min(cfg.Requester.Profile.LinkGbps, cfg.Responder.Profile.LinkGbps)
	}
	psPerB := int64(math.Round(8000 / gbps))
	for i := range s.links {
		l := &s.links[i]
		l.id, l.psPerB, l.propNs, l.srcHost = int32(i), max(psPerB, 1), cfg.Link.PropagationNs, -1
		l.lossProb, l.rng = cfg.Link.LossProb, newRand(cfg.Seed, fmt.Sprintf("link/%d", i))
	}
	// 0 requester->switch port 0, 1 switch port 1->responder, 2 responder->switch port 1, 3 switch port 0->requester.
	s.links[0].dstKind, s.links[0].dstPort, s.links[0].srcHost = nodeSwitch, 0, 0
	s.links[1].dstKind, s.links[1].dstID = nodeHost, 1
	s.links[2].dstKind, s.links[2].dstPort, s.links[2].srcHost = nodeSwitch, 1, 1
	s.links[3].dstKind, s.links[3].dstID = nodeHost, 0
	s.sw.out = [2]*link{&s.links[3], &s.links[1]}
	s.links[3].extraNs = cfg.Requester.Profile.Timing.RxProcessingNs
	s.links[1].extraNs = cfg.Responder.Profile.Timing.RxProcessingNs
	s.sw.latencyNs = cfg.SwitchLatencyNs

	names := [2]string{"requester", "responder"}
	hcs := [2]*lab.HostConfig{&cfg.Requester, &cfg.Responder}
	for i := range s.hosts {
		hc := hcs[i]
		interval := hc.Profile.CNP.IntervalNs
		if hc.MinTimeBetweenCNPsNs != nil && hc.Profile.CNP.IntervalConfigurable {
			interval = *hc.MinTimeBetweenCNPsNs
		}
		h := &host{id: int32(i), name: names[i], prof: hc.Profile, cfg: hc, ctr: rnic.NewCounters(hc.Profile),
			np: rnic.NewNP(hc.Profile, interval, hc.DCQCNNPEnable), rng: newRand(cfg.Seed, "nic/"+names[i]),
			peerMAC: hcs[1-i].MAC, lineBps: gbps * 1e9, byQPN: make(map[uint32]int32), zops: newZeroOps()}
		h.link = &s.links[[2]int{0, 2}[i]]
		h.pipeCap = max(hc.Profile.Timing.TxPipelinePackets, 1)
		h.pipeCapB = hc.Profile.Timing.TxPipelineBytes
		h.setupClasses()
		s.hosts[i] = h
	}
	if err := s.setupConns(); err != nil {
		return nil, err
	}
	for _, h := range s.hosts {
		h.capClasses()
	}
	logic := inject.Logic(nil)
	if cfg.NewSwitch != nil {
		l, err := cfg.NewSwitch(s.connMeta())
		if err != nil {
			return nil, fmt.Errorf("building the switch logic: %w", err)
		}
		logic = l
	}
	if logic == nil {
		logic = NewDefaultSwitch(cfg.Dumpers)
	}
	s.sw.logic = logic
	s.sw.def, _ = logic.(*DefaultSwitch)
	return s, nil
}

// run runs the traffic to its end and collects the result.
func (s *sim) run() (*lab.Result, error) {
	logic := s.sw.logic
	res := &lab.Result{Conns: s.connMeta()}
	res.Counters.Requester.Start = s.hosts[0].ctr.Snapshot()
	res.Counters.Responder.Start = s.hosts[1].ctr.Snapshot()
	s.q.Push(des.Event{At: 0, Kind: evPost})
	if err := s.loop(); err != nil {
		return nil, err
	}
	held := logic.Flush(s.now)
	res.FlushedFrames = len(held)
	res.Counters.Requester.Finish = s.hosts[0].ctr.Snapshot()
	res.Counters.Responder.Finish = s.hosts[1].ctr.Snapshot()
	res.SwitchPorts = s.sw.ports
	if c, ok := logic.(interface{ Counters() inject.Counters }); ok {
		res.Switch = c.Counters()
	}
	res.EndNs, res.Events = s.now, s.events
	for i := range s.links {
		res.LinkLosses += s.links[i].lost
	}
	for i := range s.gen.conns {
		c := &s.gen.conns[i]
		cr := lab.ConnResult{Verb: c.verb, MCTNs: c.mcts, Status: c.status, Completed: c.completed, Posted: c.posted,
			FirstPostNs: c.firstPost, LastCompletionNs: c.lastComp}
		if cr.Status == "" {
			cr.Status = rnic.ConnIncomplete
		}
		if d := c.lastComp - c.firstPost; c.completed > 0 && d > 0 {
			cr.GoodputGbps = float64(c.bytes) * 8 / float64(d)
		}
		sender := c.req
		if c.verb == "read" {
			sender = c.resp
		}
		cr.DataPackets, cr.Retransmissions = sender.dataPkts, sender.retrans
		res.PerConn = append(res.PerConn, cr)
	}
	return res, nil
}

// connMeta is the metadata exchange of the paper: what the traffic generator tells the switch controller.
func (s *sim) connMeta() []inject.ConnMeta {
	out := make([]inject.ConnMeta, len(s.gen.conns))
	t := &s.cfg.Traffic
	for i := range s.gen.conns {
		c := &s.gen.conns[i]
		out[i] = inject.ConnMeta{Index: i, Verb: c.verb, ReqIP: c.req.localIP, RespIP: c.resp.localIP,
			ReqQPN: c.req.qpn, RespQPN: c.resp.qpn, ReqIPSN: c.resp.rxIPSN, RespIPSN: c.req.rxIPSN,
			PacketsPerMsg: roce.PacketsPerMessage(t.MsgSize, t.MTU), NumMsgs: t.MsgsPerConn}
	}
	return out
}

// setupProgressEvery is how many connections lab.Config.SetupProgress hears about at a time.
const setupProgressEvery = 1024

// setupConns creates every connection's pair of QPs with seeded QPNs and initial PSNs.
func (s *sim) setupConns() error {
	cfg := s.cfg
	t := &cfg.Traffic
	s.gen.cfg = t
	n := t.NumConns
	if t.Verb == "send_read" {
		n = t.NumSendConns + t.NumReadConns
	}
	qpnRng := [2]*rand.Rand{newRand(cfg.Seed, "qpn/requester"), newRand(cfg.Seed, "qpn/responder")}
	psnRng := newRand(cfg.Seed, "psn")
	used := map[uint32]bool{}
	newQPN := func(side int) uint32 {
		for {
			q := qpnRng[side].Uint32() & 0xffffff
			if q > 1 && !used[q] {
				used[q] = true
				return q
			}
		}
	}
	ppm := roce.PacketsPerMessage(t.MsgSize, t.MTU)
	s.gen.conns = make([]connState, n)
	for i := 0; i < n; i++ {
		verb := t.Verb
		if verb == "send_read" {
			verb = "send"
			if i >= t.NumSendConns {
				verb = "read"
			}
		}
		reqQPN, respQPN := newQPN(0), newQPN(1)
		reqIPSN := roce.PSN(psnRng.Uint32() & roce.PSNMask)
		respIPSN := roce.PSN(psnRng.Uint32() & roce.PSNMask)
		if cfg.ForceIPSN != nil {
			if p, ok := cfg.ForceIPSN(i); ok {
				reqIPSN = p & roce.PSNMask
			}
		}
		dscp := 0
		if len(t.DSCPList) > 0 {
			dscp = t.DSCPList[i%len(t.DSCPList)]
		}
		pick := func(ips []netip.Addr) netip.Addr {
			if t.MultiGID {
				return ips[i%len(ips)]
			}
			return ips[0]
		}
		reqIP, respIP := pick(cfg.Requester.IPs), pick(cfg.Responder.IPs)
		rq, err := s.newQP(0, i, verb, reqQPN, respQPN, reqIPSN, respIPSN, reqIP, respIP, dscp)
		if err != nil {
			return fmt.Errorf("connection %d: requester QP: %w", i, err)
		}
		sq, err := s.newQP(1, i, verb, respQPN, reqQPN, respIPSN, reqIPSN, respIP, reqIP, dscp)
		if err != nil {
			return fmt.Errorf("connection %d: responder QP: %w", i, err)
		}
		rq.ppm, sq.ppm = ppm, ppm
		rq.readSink = verb == "read"
		sq.dataSink = verb != "read"
		c := &s.gen.conns[i]
		*c = connState{verb: verb, req: rq, resp: sq, postNs: make([]int64, t.MsgsPerConn)}
		if cfg.SetupProgress != nil && ((i+1)%setupProgressEvery == 0 || i+1 == n) {
			cfg.SetupProgress(i+1, n)
		}
		if verb == "send" {
			wqes := t.RecvWQEs
			if wqes <= 0 {
				wqes = t.MsgsPerConn
			}
			sq.qp.PostRecv(wqes)
		}
	}
	return nil
}

// newQP creates one QP on host side (0 requester, 1 responder) and registers it with the NIC model.
func (s *sim) newQP(side, conn int, verb string, qpn, peer uint32, sendIPSN, rxIPSN roce.PSN,
	local, remote netip.Addr, dscp int) (*qpState, error) {
	h := s.hosts[side]
	hc := h.cfg
	t := &s.cfg.Traffic
	qp, err := rnic.NewQP(rnic.QPConfig{
		Profile: hc.Profile, Counters: h.ctr, LocalQPN: qpn, RemoteQPN: peer, SendPSN: sendIPSN, RecvPSN: rxIPSN,
		MTU: t.MTU, Timeout: t.Timeout, RetryCnt: t.RetryCnt, RNRRetry: t.RNRRetry, MaxRdAtomic: 1,
		AdaptiveRetrans: hc.AdaptiveRetrans, SlowRestart: hc.SlowRestart, DCQCNRP: hc.DCQCNRPEnable,
		MigReq: hc.Profile.MigReq, RNG: newRand(s.cfg.Seed, fmt.Sprintf("qp/%s/%d", h.name, conn)),
	})
	if err != nil {
		return nil, err
	}
	qs := &qpState{qp: qp, idx: int32(len(h.qps)), conn: conn, qpn: qpn, peerQPN: peer, localIP: local,
		peerIP: remote, tos: uint8(dscp)<<2 | 2, rxIPSN: rxIPSN}
	// NICs derive the UDP source port from the QP number so that ECMP spreads QPs (RoCEv2 annex A17.5.2.1).
	qs.udpSport = uint16(0xc000 | (qpn^qpn>>14)&0x3fff)
	for k := range qs.timerAt {
		qs.timerAt[k], qs.timerEv[k] = -1, -1
	}
	qs.tc = h.classOf(dscp)
	qs.posInClass = len(h.classes[qs.tc].qps)
	h.classes[qs.tc].qps = append(h.classes[qs.tc].qps, qs.idx)
	h.classes[qs.tc].active.grow(len(h.classes[qs.tc].qps))
	h.qps = append(h.qps, qs)
	h.byQPN[qpn] = qs.idx
	return qs, nil
}
