package live

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// EndpointQP is one QP of a software RNIC.
type EndpointQP struct {
	Conn    int
	QP      rnic.QPConfig // Profile and Counters are filled in by the endpoint
	LocalIP netip.Addr
	PeerIP  netip.Addr
	TOS     uint8 // DSCP<<2 | ECN of the packets it sends (2 = ECT(0))
	// Requester QPs post the traffic; Verb is write, send or read.
	Requester bool
	Verb      string
	RecvWQEs  int // receive WQEs posted at start (the responder of a send connection)
}

// TrafficSpec is what a requester endpoint posts on each of its requester QPs.
type TrafficSpec struct {
	MsgsPerConn int
	MsgSize     int
	TxDepth     int // outstanding messages per QP (0: 1)
}

// EndpointConfig describes a software RNIC on one interface.
type EndpointConfig struct {
	Iface   string
	MAC     [6]byte
	PeerMAC [6]byte
	Profile *rnic.Profile
	QPs     []EndpointQP
	Traffic TrafficSpec
	Ring    RingConfig
}

// epQP is the endpoint's state of one QP.
type epQP struct {
	EndpointQP
	qp       *rnic.QP
	sport    uint16
	active   bool
	timerGen [8]uint64
	// Requester traffic.
	posted, completed int
	postNs            []int64
	res               lab.ConnResult
	done              bool
}

type epTimer struct {
	at   int64
	qp   int
	kind rnic.TimerKind
	gen  uint64
}

type timerHeap []epTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(epTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Endpoint is a software RNIC: the pure rnic QPs driven in real time over a raw socket. It runs the same
// transport code as the simulator; what it does not model is the NIC's timing (processing delays, pacing,
// DCQCN notification point): packets go out as fast as the QPs release them.
type Endpoint struct {
	cfg      EndpointConfig
	ring     *Ring
	tx       *Tx
	ctr      *rnic.Counters
	qps      []*epQP
	byQPN    map[uint32]int
	timers   timerHeap
	start    time.Time
	out      rnic.Output
	pkt      rnic.Pkt
	dec      roce.Packet
	enc      roce.Packet
	buf      []byte
	ipID     uint16
	finished int
	reqs     int
	startCtr []rnic.Counter
	err      error
	// Unknown counts received RoCE frames for no QP of this endpoint; NotRoCE other frames.
	Unknown, NotRoCE uint64
}

// NewEndpoint creates the QPs and opens the sockets in the calling thread's namespace.
func NewEndpoint(cfg EndpointConfig) (*Endpoint, error) {
	if cfg.Profile == nil {
		return nil, errors.New("endpoint needs a NIC profile")
	}
	e := &Endpoint{cfg: cfg, ctr: rnic.NewCounters(cfg.Profile), byQPN: map[uint32]int{}}
	for i, q := range cfg.QPs {
		c := q.QP
		c.Profile, c.Counters = cfg.Profile, e.ctr
		qp, err := rnic.NewQP(c)
		if err != nil {
			return nil, fmt.Errorf("endpoint on %s, QP %d (connection %d): %w", cfg.Iface, i, q.Conn, err)
		}
		if _, dup := e.byQPN[c.LocalQPN]; dup {
			return nil, fmt.Errorf("endpoint on %s, QP %d: QPN %#x is used twice", cfg.Iface, i, c.LocalQPN)
		}
		if q.RecvWQEs > 0 {
			qp.PostRecv(q.RecvWQEs)
		}
		ep := &epQP{EndpointQP: q, qp: qp, sport: uint16(0xc000 | (c.LocalQPN^c.LocalQPN>>14)&0x3fff)}
		if q.Requester {
			e.reqs++
			ep.postNs = make([]int64, cfg.Traffic.MsgsPerConn)
			ep.res = lab.ConnResult{Verb: q.Verb, Status: rnic.ConnIncomplete}
		}
		e.byQPN[c.LocalQPN] = i
		e.qps = append(e.qps, ep)
	}
	rc := cfg.Ring
	rc.IgnoreOutgoing = true
	var err error
	if e.ring, err = OpenRing(cfg.Iface, rc); err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	if e.tx, err = OpenTx(cfg.Iface, 0); err != nil {
		e.ring.Close()
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	return e, nil
}

// Close closes the sockets.
func (e *Endpoint) Close() error { return errors.Join(e.ring.Close(), e.tx.Close()) }

func (e *Endpoint) now() int64 { return int64(time.Since(e.start)) }

// Run drives the QPs until ctx is done or, for an endpoint with requester QPs, until every connection has
// finished. Requester QPs start posting when start is closed (the control plane's barrier).
func (e *Endpoint) Run(ctx context.Context, start <-chan struct{}) error {
	e.start = time.Now()
	started := false
	onFrame := func(f []byte, ts int64, wire int) { e.receive(f) }
	fds := []unix.PollFd{{Fd: int32(e.ring.Fd()), Events: unix.POLLIN}}
	for ctx.Err() == nil && e.err == nil {
		if !started && e.reqs > 0 {
			select {
			case <-start:
				started = true
				e.startCtr = e.ctr.Snapshot()
				e.postWindow()
			default:
			}
		}
		n := e.ring.Poll(64, onFrame)
		e.fireTimers()
		sent := e.transmit(64)
		e.tx.Flush()
		if e.reqs > 0 && e.finished == e.reqs {
			return nil
		}
		if n > 0 || sent > 0 {
			continue
		}
		wait := int64(5e6)
		if !started && e.reqs > 0 {
			wait = 1e6
		}
		if len(e.timers) > 0 {
			wait = min(wait, max(e.timers[0].at-e.now(), 0))
		}
		if wait == 0 {
			continue
		}
		ts := unix.NsecToTimespec(wait)
		if _, err := unix.Ppoll(fds, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("endpoint on %s: ppoll: %w", e.cfg.Iface, err)
		}
	}
	return e.err
}

// postWindow posts the first TxDepth messages of every requester QP.
func (e *Endpoint) postWindow() {
	for range max(e.cfg.Traffic.TxDepth, 1) {
		for i, q := range e.qps {
			if q.Requester {
				e.post(i)
			}
		}
	}
}

func (e *Endpoint) post(i int) {
	q := e.qps[i]
	t := &e.cfg.Traffic
	if q.done || q.posted >= t.MsgsPerConn {
		return
	}
	m := q.posted
	q.posted++
	now := e.now()
	q.postNs[m] = now
	if m == 0 {
		q.res.FirstPostNs = now
	}
	q.res.Posted = q.posted
	wr := rnic.WorkRequest{ID: uint64(m), Verb: rnic.VerbOf(q.Verb), Length: t.MsgSize,
		RemoteAddr: 0x10000000 + uint64(m)*uint64(t.MsgSize), RKey: 0x1234}
	e.out.Reset()
	if err := q.qp.PostSend(now, wr, &e.out); err != nil {
		e.err = fmt.Errorf("connection %d: posting message %d: %w", q.Conn, m, err)
		return
	}
	e.handleOut(i)
}

// receive hands one frame to its QP, as the NIC's receive pipeline would: ICRC check, ECN, QP lookup.
func (e *Endpoint) receive(f []byte) {
	p := &e.dec
	if !p.Decode(f, len(f)) || p.Truncated {
		e.NotRoCE++
		return
	}
	e.ctr.Inc(rnic.CtrRxPacketsPhy, 1)
	e.ctr.Inc(rnic.CtrRxBytesPhy, uint64(len(f)))
	if p.CheckICRC() != roce.ICRCGood {
		e.ctr.Inc(rnic.CtrRxICRCEncapsulated, 1)
		return
	}
	i, ok := e.byQPN[p.BTH.DestQP]
	if !ok {
		e.Unknown++
		return
	}
	q := e.qps[i]
	e.pkt = rnic.Pkt{Opcode: p.BTH.Opcode, DestQP: p.BTH.DestQP, PSN: p.BTH.PSN, AckReq: p.BTH.AckReq,
		SE: p.BTH.SE, MigReq: p.BTH.MigReq, BECN: p.BTH.BECN, AETH: p.AETH, RETH: p.RETH, Imm: p.Imm,
		PayloadLen: p.PayloadLen, CE: p.ECN() == 3, Msg: -1}
	if p.BTH.Opcode.CarriesPayload() && e.pkt.CE {
		e.ctr.Inc(rnic.CtrNPECNMarked, 1)
	}
	now := e.now()
	e.out.Reset()
	if p.BTH.Opcode == roce.CNP {
		q.qp.OnCNP(now, &e.out)
	} else {
		q.qp.Receive(now, &e.pkt, &e.out)
	}
	e.handleOut(i)
}

// handleOut applies a QP step's output: timers, completions, wake-ups.
func (e *Endpoint) handleOut(i int) {
	q := e.qps[i]
	o := &e.out
	for _, t := range o.Timers {
		k := int(t.Kind) & 7
		q.timerGen[k]++
		if !t.Cancel {
			heap.Push(&e.timers, epTimer{at: t.At, qp: i, kind: t.Kind, gen: q.timerGen[k]})
		}
	}
	if o.Wake {
		q.active = true
	}
	// Completions may post more work (which resets e.out), so they are copied first.
	if len(o.Completions) == 0 {
		return
	}
	cpls := append([]rnic.Completion(nil), o.Completions...)
	for k := range cpls {
		e.complete(i, &cpls[k])
	}
}

func (e *Endpoint) complete(i int, c *rnic.Completion) {
	q := e.qps[i]
	if !q.Requester || q.done || c.Recv {
		return
	}
	now := e.now()
	if c.Status != rnic.StatusSuccess {
		q.res.Status = c.Status.ConnStatus()
		e.finish(q)
		return
	}
	q.completed++
	q.res.Completed = q.completed
	if m := int(c.WRID); m >= 0 && m < len(q.postNs) {
		q.res.MCTNs = append(q.res.MCTNs, now-q.postNs[m])
	}
	q.res.LastCompletionNs = now
	if q.completed == e.cfg.Traffic.MsgsPerConn {
		q.res.Status = rnic.ConnOK
		e.finish(q)
		return
	}
	e.post(i)
}

func (e *Endpoint) finish(q *epQP) {
	q.done = true
	e.finished++
	if d := q.res.LastCompletionNs - q.res.FirstPostNs; d > 0 {
		q.res.GoodputGbps = float64(int64(q.completed)*int64(e.cfg.Traffic.MsgSize)*8) / float64(d)
	}
}

func (e *Endpoint) fireTimers() {
	now := e.now()
	for len(e.timers) > 0 && e.timers[0].at <= now {
		t := heap.Pop(&e.timers).(epTimer)
		q := e.qps[t.qp]
		if q.timerGen[int(t.kind)&7] != t.gen {
			continue // replaced or cancelled since
		}
		e.out.Reset()
		q.qp.OnTimer(now, t.kind, &e.out)
		e.handleOut(t.qp)
	}
}

// transmit sends up to budget packets per active QP.
func (e *Endpoint) transmit(budget int) int {
	sent := 0
	for _, q := range e.qps {
		if !q.active {
			continue
		}
		for k := 0; k < budget; k++ {
			now := e.now()
			if !q.qp.NextPacket(now, &e.pkt) {
				q.active = false
				break
			}
			if e.pkt.Opcode.CarriesPayload() && (q.Requester != (q.Verb == "read")) {
				q.res.DataPackets++
				if e.pkt.Retransmission {
					q.res.Retransmissions++
				}
			}
			e.send(q, &e.pkt)
			sent++
		}
	}
	return sent
}

// send encodes a transport packet as a RoCEv2 frame, as the NIC's transmit path would.
func (e *Endpoint) send(q *epQP, p *rnic.Pkt) {
	x := &e.enc
	x.Payload = nil
	x.NumVLANs = 0
	x.EthDst, x.EthSrc = e.cfg.PeerMAC, e.cfg.MAC
	x.Version = roce.RoCEv2
	x.IPv6 = !q.LocalIP.Is4()
	x.TOS = q.TOS
	x.TTL = 64
	e.ipID++
	x.IPID = e.ipID
	x.IPFlags = 2
	x.SrcIP, x.DstIP = q.LocalIP, q.PeerIP
	x.UDPSrc, x.UDPDst = q.sport, roce.UDPPort
	x.BTH = roce.BTH{Opcode: p.Opcode, SE: p.SE, MigReq: p.MigReq, PKey: 0xffff, DestQP: p.DestQP,
		AckReq: p.AckReq, PSN: p.PSN & roce.PSNMask, BECN: p.BECN}
	x.RETH, x.AETH, x.Imm = p.RETH, p.AETH, p.Imm
	x.PayloadLen = p.PayloadLen
	buf, err := x.AppendTo(e.buf[:0])
	if err != nil {
		e.err = fmt.Errorf("endpoint on %s: encoding %v PSN %d: %w", e.cfg.Iface, p.Opcode, p.PSN, err)
		return
	}
	e.buf = buf
	e.ctr.Inc(rnic.CtrTxPacketsPhy, 1)
	e.ctr.Inc(rnic.CtrTxBytesPhy, uint64(len(buf)))
	e.tx.Send(buf)
}

// Results returns the requester QPs' outcomes in QP order (responder QPs are skipped).
func (e *Endpoint) Results() map[int]lab.ConnResult {
	out := map[int]lab.ConnResult{}
	for _, q := range e.qps {
		if q.Requester {
			out[q.Conn] = q.res
		}
	}
	return out
}

// DataStats returns, per connection, the data packets and retransmissions this endpoint sent as data sender.
func (e *Endpoint) DataStats() map[int][2]uint64 {
	out := map[int][2]uint64{}
	for _, q := range e.qps {
		if q.res.DataPackets > 0 {
			out[q.Conn] = [2]uint64{q.res.DataPackets, q.res.Retransmissions}
		}
	}
	return out
}

// Counters returns the NIC counters at the start of traffic and now, with the vendor's names.
func (e *Endpoint) Counters() lab.CounterSnapshot {
	start := e.startCtr
	if start == nil {
		start = rnic.NewCounters(e.cfg.Profile).Snapshot()
	}
	return lab.CounterSnapshot{Start: start, Finish: e.ctr.Snapshot()}
}
