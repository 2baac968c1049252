package micro

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/lumina-go/lumina/internal/des"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
)

// The micro-architecture model runs in picoseconds: at 200 Gb/s a byte takes 40 ps, and nanosecond rounding
// per frame would bias the rates by a few percent.
const psPerNs = 1000

// DefaultPropagationNs and DefaultSwitchLatencyNs are the paper's testbed, as in netsim (a netsim test holds
// the two packages' values equal).
const (
	DefaultPropagationNs   = 100
	DefaultSwitchLatencyNs = 300
)

// evKind is the type of a scheduled event (des.Event.Kind).
type evKind = uint8

// Event kinds of the workload model (its own queue; the values only need to differ among themselves).
const (
	mevWQEFetched   evKind = iota + 1 // a doorbell's WQEs arrived on the NIC (obj host, arg conn, aux count)
	mevUnitDone                       // a transmit unit finished a job (obj host, arg job)
	mevDMADone                        // a job's payload is on the NIC
	mevWireDone                       // a NIC finished serializing a frame (obj host, arg packet)
	mevSwArrive                       // a frame reached the switch (obj egress port = destination host)
	mevSwTxDone                       // the switch finished serializing a frame toward host obj
	mevHostArrive                     // a frame reached host obj's RX buffer
	mevRxDone                         // the packet processor finished packet arg on host obj
	mevRxFree                         // packet arg's payload left the RX buffer by DMA (host obj)
	mevCtrlReady                      // an ACK or READ request is ready for the wire
	mevSwPause                        // the switch egress toward host obj pauses (aux 1) or resumes (aux 0)
	mevHostPause                      // host obj's transmitter is paused (aux 1) or resumed (aux 0) by the switch
	mevRxWQEFetched                   // receive WQEs of conn arg arrived on host obj (aux count)
	mevNAK                            // conn arg's sender (host obj) goes back to message aux
	mevLoopDone                       // a loopback frame crossed the NIC's internal switch
	mevWindowStart
	mevWindowEnd
	mevLookedUp // a job's lookups, run beside its unit, are back (obj host, arg job)
)

// Packet kinds.
const (
	mpData     uint8 = iota // WRITE/SEND data
	mpReadReq               // READ request
	mpReadResp              // READ response data
	mpAck                   // RC acknowledgement
)

// Frame sizes: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4, plus preamble and inter-frame gap.
const (
	mHdrBytes  = 62 + 20
	mRETHBytes = 16
	mDETHBytes = 8
	mAETHBytes = 4
	mMaxRdAtom = 16 // READs in flight per QP (Collie's engine: max_qp_rd_atom 16)
)

type mpkt struct {
	conn    int32
	msg     int32
	idx     int32
	npk     int32
	payload int32
	wire    int32
	kind    uint8
	epoch   uint16
	src     int8
	dst     int8
}

func (p *mpkt) first() bool { return p.idx == 0 }
func (p *mpkt) last() bool  { return p.idx == p.npk-1 }

// mjob is one WQE a transmit unit works on.
type mjob struct {
	conn  int32
	msg   int32
	epoch uint16
	resp  bool // a READ response (on the responder) rather than a requester WQE
	// lookedUp is when the job's context and translations are on the NIC, its payload read's earliest start
	// (after the unit let it go: tx.lookup-wait).
	lookedUp int64
	// refetch is the payload the job reads again because its staging was evicted (tx.staging-bytes), counted
	// when the message is packetized: a long message's reads are issued long before its packets leave, so
	// counted at issue a short window of long messages missed the refetches of the packets it sent.
	refetch int32
}

// mconn is one connection: its requester (which posts the WQEs) and responder.
type mconn struct {
	req, resp int8
	// Requester side.
	outstanding int   // posted WQEs not yet completed
	posted      int   // posted WQEs the NIC has not read yet
	fetching    bool  // a WQE read is in flight
	ready       int   // WQEs on the NIC waiting for a transmit unit
	nextMsg     int32 // next message a unit processes
	acked       int32 // messages completed (RC: acknowledged)
	readsOut    int   // READ requests in flight
	epoch       uint16
	inRR        [2]bool
	// Responder side of READ: messages whose responses wait for a unit.
	respQ des.Ring[int32]
	// Receiver of data (SEND/WRITE: responder; READ: requester).
	rxMinEpoch uint16 // go-back-N: frames of older attempts from message dropMsg on are discarded
	dropMsg    int32
	// Receive queue (SEND): WQEs posted and not consumed, cached on the NIC, being fetched.
	rqAvail, rqCached, rqFetching int
	rqAhead                       int // the QP's read-ahead grown by rx.prefetch-grow (0: prefetchSize)
	rqConsumed                    int // consumed since the last repost
	lastUse                       int64
	rxQueued                      int             // frames of the connection in the RX queue
	parked                        des.Ring[int32] // packets waiting for a receive WQE
	parkedMsgs                    int             // of them, first frames of messages (each needs a WQE)
	// Packet staging (tx.staging-bytes): the connection holds staging while it has data to send.
	txDone  int32 // messages of the current attempt whose last frame left the requester
	respOut int   // READ requests whose last response frame has not left the responder
	staged  bool
	// ctxHeld: the connection's next WQEs whose context and translations the unit that took the first WQE
	// of their doorbell already loaded (tx.burst-wqes).
	ctxHeld int
}

// mhost is one NIC with its host.
type mhost struct {
	id int
	m  *rnic.MicroArch
	st MicroStats
	// Transmit.
	lookupWait bool // the workload's WQEs hold their unit through their lookups (tx.lookup-wait)
	dbFree     int64
	freeUnits  int
	dmaPending int             // jobs whose payload read is in flight
	dmaBytes   int             // their payload bytes, which the transmit buffer holds room for
	rr         des.Ring[int32] // connections with transmit work
	burstConn  int32           // the connection the scheduler serves back to back (tx.rc-doorbell-burst)
	burstLeft  int             // and how many more of its WQEs
	txQ        des.Ring[int32] // packets waiting for the wire
	ctrlQ      des.Ring[int32]
	loopQ      des.Ring[int32]
	txQBytes   int
	// reqQ: READ requests waiting for the wire, taken in turn with txQ's frames (reqTurn: the next pick
	// between the two is a request). They are not in txQBytes: a request carries no payload, and a QP has at
	// most mMaxRdAtom of them outstanding.
	reqQ     des.Ring[int32]
	reqTurn  bool
	wireBusy bool
	paused   bool // by the switch
	pausedAt int64
	loopBusy bool
	ppFree   int64 // the shared packet processor
	nextTxAt int64 // earliest start of the next frame (packet-rate limit)
	pktGapPs int64
	// PCIe.
	rdFree, wrFree, pathFree int64
	lastReadDone             int64
	lastReadIssue            int64 // when the latest payload read booked leaves the NIC (after its tag wait)
	tags                     heap64
	// Caches.
	qpc, mtt setAssoc
	qps      int // QPs on this NIC (each connection's requester and responder are one QP each)
	// Receive.
	wqeResident  bool  // receive WQEs never miss (rx.wqe-resident, or rx.short-queues-resident, wqe-cache-qp-types, rc-wqe-cache-max-mtu for this workload)
	wqeCacheSize int   // receive WQEs the wqe-cache holds for this workload (rx.wqe-cache, rx.rc-wqe-cache-bytes)
	rxGapPs      int64 // the receive packet rate's spacing (rx.max-mpps; 0: none)
	nextRxAt     int64 // the next received frame starts on the processor no earlier
	rxBuf        int
	rxQ          des.Ring[int32]
	rxBusy       bool
	xoff         bool
	xoffAt       int64
	parkedMsgs   int
	rqs          int     // receive queues on this host (a connection's responder side)
	cacheUsed    int     // receive WQEs cached (all QPs)
	holders      []int32 // connections with cached receive WQEs
	// Receive-WQE fetches in flight and waiting (connection, count).
	fetchActive int
	// When each of the receive-WQE fetcher's parse engines (rx.fetch-engines, at least one) is free.
	fetchEngs      []int64
	evictFree      int64 // the receive-WQE cache's eviction port is busy until then (rx.evict-wqe-ns)
	fetchQ, fetchN des.Ring[int32]
	// Demand fetches in flight and waiting when they have slots of their own (rx.demand-fetch-slots).
	demandActive     int
	demandQ, demandN des.Ring[int32]
	// Occupancy integral for the average.
	occArea int64
	occAt   int64
	// Topology of the payload memory.
	pathLatPs  int64
	pathPsPerB int64 // 0: local memory, no extra path
	// Writes on a path budget of their own (host.duplex-path: at the path's rate; host.gpu-*-switch-write-gbps:
	// at that rate; 0: they share pathFree with the reads).
	pathWrPsPerB, pathWrFree int64
	// pathTLPBytes: each TLP's overhead on the path (host.path-tlp-bytes); pathWrTLPPs: the forwarding time of
	// each write TLP (host.gpu-same-switch-write-tlp-ns).
	pathTLPBytes int
	pathWrTLPPs  int64
	// rdPsB, wrPsB: the PCIe link's picoseconds per byte of reads and of writes (with pcie.write-tlp-bytes, per
	// byte of payload and TLP header).
	rdPsB, wrPsB int64
	// Packet staging the connections with data in flight need on this NIC (sending and receiving).
	stageDemand int64
	// readers: connections with READs in flight from this NIC (their responses arrive interleaved).
	readers int
	// burstBytes: the payload bytes of the doorbell whose context was loaded last (tx.burst-wqes).
	burstBytes int
	// txRCData: this NIC transmits RC data frames (WRITE/SEND data, READ responses) of some connection.
	txRCData bool
}

// msim is one workload run.
type msim struct {
	w       *scenario.Workload
	q       des.Queue
	now     int64
	events  uint64
	pkts    []mpkt
	free    []int32
	jobs    []mjob
	freeJob []int32
	conns   []mconn
	hosts   [2]*mhost
	linkPsB int64 // ps per byte on the cables
	propPs  int64
	swLatPs int64
	sw      [2]swPort
	swXoff  int
	winFrom int64
	winTo   int64
	// measurePs is the window's length; warmCapPs > 0 lets the warm-up run on, up to that time, while some
	// connection has not completed a message yet and more did in the last step (started counts those that
	// did, lastStarted at the previous step).
	measurePs, warmCapPs int64
	started, lastStarted int
	inWin                bool
	// delivered counts the messages whose last frame reached the receiver's memory.
	delivered int32
	// Staging one connection needs on its data's sender (per SGE stream one packet) and on its receiver.
	stageTx, stageRx int64
	maxMsgBytes      int // the largest message (maxMsg; 0 until asked)
}

// swPort is the switch's egress toward one host, with the PFC state of the ingress feeding it.
type swPort struct {
	q        des.Ring[int32]
	bytes    int
	busy     bool
	paused   bool
	pausedUp bool // the switch paused the sender feeding this port
}

// RunWorkload simulates a workload on two hosts and returns the counters measured in the window.
func RunWorkload(cfg WorkloadConfig) (*WorkloadResult, error) {
	if err := validateWorkload(&cfg.Workload); err != nil {
		return nil, err
	}
	for i, p := range cfg.Profiles {
		if p == nil {
			return nil, fmt.Errorf("host %c: no NIC profile", 'A'+i)
		}
		if p.Micro == nil {
			return nil, fmt.Errorf("host %c: profile %s has no micro section: the workload model needs the NIC's micro-architecture", 'A'+i, p.Name)
		}
		if err := p.CheckQPType(cfg.Workload.QPType); err != nil {
			return nil, fmt.Errorf("host %c: %w", 'A'+i, err)
		}
	}
	adaptive := cfg.WarmupNs <= 0
	if adaptive {
		cfg.WarmupNs = defaultWarmupNs(&cfg)
	}
	if cfg.MeasureNs <= 0 {
		cfg.MeasureNs = 500_000
	}
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = 50_000_000
	}
	if cfg.PropagationNs <= 0 {
		cfg.PropagationNs = DefaultPropagationNs
	}
	if cfg.SwitchLatencyNs <= 0 {
		cfg.SwitchLatencyNs = DefaultSwitchLatencyNs
	}
	if cfg.SwitchXoffBytes <= 0 {
		cfg.SwitchXoffBytes = 256 << 10
	}
	gbps := cfg.LinkGbps
	if gbps <= 0 {
		gbps = min(cfg.Profiles[0].LinkGbps, cfg.Profiles[1].LinkGbps)
	}
	s := newMSim(&cfg, gbps)
	defer s.releasePkts()
	s.winFrom = cfg.WarmupNs * psPerNs
	s.winTo = s.winFrom + cfg.MeasureNs*psPerNs
	s.measurePs = cfg.MeasureNs * psPerNs
	if adaptive {
		s.warmCapPs = maxWarmupNs * psPerNs
		for _, h := range s.hosts {
			// The applications' initial fill of their queues is start-up, however long its doorbells take
			// (Collie samples a second of steady traffic): the warm-up runs on at least until it is through.
			s.warmCapPs = max(s.warmCapPs, h.dbFree+warmupStepNs*psPerNs)
		}
	}
	s.q.Push(des.Event{At: s.winFrom, Kind: mevWindowStart})
	for s.q.Len() > 0 {
		e := s.q.Pop()
		s.now = e.At
		s.events++
		if s.events > cfg.MaxEvents {
			return nil, fmt.Errorf("%w: event limit %d at simulated time %d ns", des.ErrRunLimit, cfg.MaxEvents, s.now/psPerNs)
		}
		if e.Kind == mevWindowEnd {
			break
		}
		s.dispatch(&e)
	}
	r := s.result(gbps, unloadedRTTNs(&cfg, gbps))
	if _, g, m := r.Judged(); g < inFlightCheck*min(r.LimitGbps, r.WindowGbps) && m < inFlightCheck*min(r.LimitMpps, r.WindowMpps) {
		s.oneQPWindow(&cfg, gbps, r)
	}
	return r, nil
}

// inFlightCheck: a workload carrying less than this share of both its limits has its in-flight limit checked
// against one of its QPs alone (oneQPWindow). One at or near its limits cannot be judged low whatever that
// check finds, so the second run is spared; and QPs that alone come within this share of the line limits are
// bound by the line, not by their pipeline (a link-bound run measures the line rate only to within its
// bursts).
const inFlightCheck = 0.95

// oneQPWindow lowers the in-flight limit to what one of the workload's QPs alone carries at its queue depth
// and batch, times the QPs, where that is less. The unloaded round trip has one message in flight; a QP
// whose queue holds several overlaps their round trips only as far as its own pipeline lets it (its send WQEs
// read one read at a time, its ACKs coalesced), and that is the workload's doing, not the NIC's under load.
// Contention between QPs (caches, shared engines and paths) stays out of it: the QP runs alone, one way,
// with its translations, context and receive WQEs resident.
func (s *msim) oneQPWindow(cfg *WorkloadConfig, gbps float64, r *WorkloadResult) {
	t := oneQPMessageNs(cfg, gbps)
	if t <= 0 {
		return
	}
	per := float64(s.w.WQDepth)
	if s.w.Opcode == "read" {
		per = float64(min(s.w.WQDepth, mMaxRdAtom))
	}
	rtt := t * per
	if rtt <= r.WindowRTTNs {
		return
	}
	k := r.WindowRTTNs / rtt
	if r.WindowGbps*k >= inFlightCheck*r.LimitGbps || r.WindowMpps*k >= inFlightCheck*r.LimitMpps {
		return // the QPs alone fill the link: what bounds them is the line, not their pipeline
	}
	r.WindowRTTNs, r.WindowGbps, r.WindowMpps = rtt, r.WindowGbps*k, r.WindowMpps*k
}

// pktBufs keeps the frame tables of finished runs for the next: a workload of tens of thousands of QPs holds
// hundreds of thousands of frames at once, and growing the table from empty on every run of a search copied
// it over and over (a tenth of such runs' time). newPkt writes every slot it hands out, so a reused table
// changes nothing.
var pktBufs sync.Pool

// maxPooledPkts bounds the tables kept (32 MB of frames).
const maxPooledPkts = 1 << 20

// newMSim builds the two hosts and the workload's connections, every queue posted full.
func newMSim(cfg *WorkloadConfig, gbps float64) *msim {
	s := &msim{w: &cfg.Workload, lastStarted: -1, linkPsB: psPerByte(gbps), propPs: cfg.PropagationNs * psPerNs,
		swLatPs: cfg.SwitchLatencyNs * psPerNs, swXoff: cfg.SwitchXoffBytes}
	if b, ok := pktBufs.Get().(*[]mpkt); ok {
		s.pkts = (*b)[:0]
	}
	for i := range s.hosts {
		s.hosts[i] = newMHost(i, cfg.Profiles[i], &cfg.Workload)
	}
	s.stageTx, s.stageRx = s.stagingEntries()
	s.q.Lanes(laneCount)
	s.setupConns()
	return s
}

// Event lanes (des.Queue.PushLane): one per source of events that come in time order, or mostly do (an event
// pushed before its lane's last goes to the heap instead). Frames cross the links and the switch after a fixed
// delay; a host's wire, the switch's egress ports and a host's packet processor each finish one frame at a time;
// a host's receive DMA writes, payload reads, transmit units, lookups and WQE reads finish mostly in order.
const (
	laneProp   = iota           // now + the propagation delay
	laneWire                    // + host: a NIC finished serializing a frame
	laneSwTx   = laneWire + 2   // + port: the switch finished serializing a frame
	laneRxDone = laneSwTx + 2   // + host: the packet processor finished a frame or built an ACK or READ request
	laneRxFree = laneRxDone + 2 // + host: a received frame's payload left the RX buffer
	laneDMA    = laneRxFree + 2 // + host: a job's payload is on the NIC
	laneUnit   = laneDMA + 2    // + host: a transmit unit finished a job
	laneLookup = laneUnit + 2   // + host: a job's lookups are back
	laneWQE    = laneLookup + 2 // + host: a doorbell's WQEs arrived
	laneCount  = laneWQE + 2
)

// defaultWarmupNs is 200 us, longer when many QPs must each get a turn before the caches hold their steady
// state: the initial WQE reads must clear PCIe, and every connection should have sent its largest and an average
// message at line rate (cold misses of connections not yet seen would otherwise count in the window). At most
// 2 ms by this estimate.
//
// The warm-up then runs on, in steps of warmupStepNs and up to maxWarmupNs, while some connection has not
// completed a message and others still complete their first: with thousands of QPs every QP's first WQE reads
// land on the PCIe read channel at once, and the window would otherwise measure that backlog rather than the
// steady state (Collie measures a workload once its traffic is stable). A connection the steady state starves
// (no new first completion in a step) does not hold the window back. The cap is later where the applications'
// initial fill of their queues takes longer to ring through the doorbell handling (RunWorkload).
func defaultWarmupNs(cfg *WorkloadConfig) int64 {
	w := &cfg.Workload
	conns := w.NumQPs
	if w.Direction != DirUni {
		conns *= 2
	}
	m := cfg.Profiles[0].Micro
	bytes := float64(conns*min(w.WQDepth, 2*wqeFetchMax)) * float64(m.Tx.WQEBaseBytes+w.SGE*m.Tx.WQESGEBytes)
	var mean, largest float64
	for _, sz := range w.MsgSizes {
		mean += float64(sz)
		largest = max(largest, float64(sz))
	}
	mean /= float64(len(w.MsgSizes))
	gbps := cfg.LinkGbps
	if gbps <= 0 {
		gbps = min(cfg.Profiles[0].LinkGbps, cfg.Profiles[1].LinkGbps)
	}
	turns := float64(conns) * (mean + largest) * 8 / gbps
	return min(200_000+int64(max(2*bytes*8/m.PCIe.ReadGbps, turns)), 2_000_000)
}

// warmupStepNs and maxWarmupNs pace and bound the warm-up's wait for every connection's first completion.
const (
	warmupStepNs = 100_000
	maxWarmupNs  = 4_000_000
)

func psPerByte(gbps float64) int64 { return max(int64(8000/gbps+0.5), 1) }

func newMHost(id int, p *rnic.Profile, w *scenario.Workload) *mhost {
	m := p.Micro
	h := &mhost{id: id, m: m, freeUnits: m.Tx.Units, pktGapPs: int64(1e6 / m.MaxMpps)}
	kind := w.QPType + "-" + w.Opcode
	h.lookupWait = len(m.Tx.LookupWait) == 0 || slices.Contains(m.Tx.LookupWait, kind)
	h.wqeResident = rxWQEsResident(&m.Rx, w)
	h.wqeCacheSize = m.Rx.WQECacheSize
	if w.QPType == "rc" && m.Rx.RCWQECacheBytes > 0 {
		h.wqeCacheSize = max(m.Rx.RCWQECacheBytes/(max(w.SGE, 1)*m.Rx.WQEBytes), 1)
	}
	if r := m.Rx.MaxMpps; r > 0 {
		h.rxGapPs = int64(1e6 / r)
	}
	h.st.PausePrio = m.Rx.PausePrio
	h.qpc = newSetAssoc(m.Cache.QPCEntries)
	h.mtt = newSetAssoc(m.Cache.MTTEntries)
	switch w.Memory {
	case MemRemoteNUMA:
		h.pathLatPs, h.pathPsPerB = m.Host.RemoteNUMALatencyNs*psPerNs, psPerByte(m.Host.RemoteNUMAGbps)
	case MemGPUSameSwitch:
		h.pathLatPs, h.pathPsPerB = m.Host.GPUSameSwitchLatency*psPerNs, psPerByte(m.Host.GPUSameSwitchGbps)
		if g := m.Host.GPUSameSwitchWriteGbps; g > 0 {
			h.pathWrPsPerB = psPerByte(g)
			h.pathWrTLPPs = m.Host.GPUSameSwitchWriteTLPNs * psPerNs
		}
	case MemGPUCrossSwitch:
		h.pathLatPs, h.pathPsPerB = m.Host.GPUCrossSwitchLatency*psPerNs, psPerByte(m.Host.GPUCrossSwitchGbps)
		if g := m.Host.GPUCrossSwitchWriteGbps; g > 0 {
			h.pathWrPsPerB = psPerByte(g)
		}
	}
	if h.pathPsPerB > 0 {
		h.pathTLPBytes = m.Host.PathTLPBytes
	}
	if m.Host.DuplexPath && h.pathWrPsPerB == 0 {
		h.pathWrPsPerB = h.pathPsPerB // writes flow the other way: they do not wait behind the reads booked
	}
	h.rdPsB, h.wrPsB = psPerByte(m.PCIe.ReadGbps), psPerByte(m.PCIe.WriteGbps)
	if hb := m.PCIe.WriteTLPBytes; hb > 0 {
		// Each TLP's header at the raw rate, which carries full TLPs' payload at write-gbps.
		h.wrPsB = psPerByte(m.PCIe.WriteGbps * float64(pathTLPPayload+hb) / pathTLPPayload)
	}
	return h
}

// setupConns creates the connections of the workload and posts every queue full.
func (s *msim) setupConns() {
	w := s.w
	type pair struct{ req, resp int8 }
	var ps []pair
	add := func(req, resp int8) {
		for i := 0; i < w.NumQPs; i++ {
			ps = append(ps, pair{req, resp})
		}
	}
	switch w.Direction {
	case DirUni:
		add(0, 1)
	case DirBi:
		add(0, 1)
		add(1, 0)
	case DirLoopback:
		// The data converges on A (collie A.1 #13, receiving and loopback traffic together): B sends to A and A
		// to itself. A READ's data flows from responder to requester, so A's requester reads from B and from
		// itself; a WRITE/SEND's from requester to responder, so B's requester writes to A.
		if w.Opcode == "read" {
			add(0, 1)
		} else {
			add(1, 0)
		}
		add(0, 0)
	}
	s.conns = make([]mconn, len(ps))
	for _, p := range ps {
		s.hosts[p.resp].rqs++
	}
	for i, p := range ps {
		c := &s.conns[i]
		c.req, c.resp = p.req, p.resp
		s.hosts[c.req].qps++
		s.hosts[c.resp].qps++
		if w.QPType == "rc" {
			// The data's sender: the responder of a READ, the requester of a WRITE or SEND.
			tx := c.req
			if w.Opcode == "read" {
				tx = c.resp
			}
			s.hosts[tx].txRCData = true
		}
		if w.Opcode == "send" {
			c.rqAvail = w.WQDepth
			s.rqPrefetch(s.hosts[c.resp], int32(i))
		}
	}
	for i := range s.conns {
		s.post(int32(i))
	}
}

func (s *msim) dispatch(e *des.Event) {
	h := s.hosts[e.Obj&1]
	switch e.Kind {
	case mevWQEFetched:
		c := &s.conns[e.Arg]
		c.ready += int(e.Aux)
		c.fetching = false
		if c.ready < wqeLowWater {
			s.fetchWQEs(h, e.Arg, h.dbFree)
		}
		s.wake(h, e.Arg)
	case mevUnitDone:
		s.unitDone(h, e.Arg)
	case mevLookedUp:
		s.issuePayload(h, e.Arg)
		s.startUnits(h)
	case mevDMADone:
		s.dmaDone(h, e.Arg)
	case mevWireDone:
		h.wireBusy = false
		p := &s.pkts[e.Arg]
		s.count(&h.st.TxBytes, &h.st.TxPackets, p.wire)
		s.q.PushLane(laneProp, des.Event{At: s.now + s.propPs, Kind: mevSwArrive, Obj: int32(p.dst), Arg: e.Arg})
		s.sent(p)
		if p.kind == mpData && s.w.QPType != "rc" && p.last() {
			s.complete(e.Arg)
		}
		s.trySend(h)
	case mevSwArrive:
		s.swArrive(int(e.Obj), e.Arg)
	case mevSwTxDone:
		s.swTxDone(int(e.Obj), e.Arg)
	case mevHostArrive:
		s.arrive(h, e.Arg)
	case mevRxDone:
		h.rxBusy = false
		s.rxDone(h, e.Arg)
		s.startRx(h)
	case mevRxFree:
		s.rxFree(h, e.Arg)
	case mevCtrlReady:
		h.ctrlQ.Push(e.Arg)
		s.trySend(h)
	case mevSwPause:
		sp := &s.sw[e.Obj]
		sp.paused = e.Aux == 1
		if !sp.paused {
			s.swStart(int(e.Obj))
		}
	case mevHostPause:
		s.hostPause(h, e.Aux == 1)
	case mevRxWQEFetched:
		if e.Aux < 0 { // a demand fetch on slots of its own
			s.rqFetched(h, e.Arg, int(-e.Aux), true)
		} else {
			s.rqFetched(h, e.Arg, int(e.Aux), false)
		}
	case mevNAK:
		s.goBack(h, e.Arg, e.Aux)
	case mevLoopDone:
		h.loopBusy = false
		p := &s.pkts[e.Arg]
		s.sent(p)
		if p.kind == mpData && s.w.QPType != "rc" && p.last() {
			s.complete(e.Arg)
		}
		s.arrive(h, e.Arg)
		s.tryLoop(h)
	case mevWindowStart:
		if s.started < len(s.conns) && s.started > s.lastStarted && s.now < s.warmCapPs {
			// Start-up is not over: some connection has not completed its first message yet (its first WQE
			// read or payload still waits behind those of thousands of others), and connections still start.
			s.lastStarted = s.started
			s.q.Push(des.Event{At: min(s.now+warmupStepNs*psPerNs, s.warmCapPs), Kind: mevWindowStart})
			return
		}
		s.winFrom, s.winTo = s.now, s.now+s.measurePs
		s.q.Push(des.Event{At: s.winTo, Kind: mevWindowEnd})
		s.inWin = true
		for _, h := range s.hosts {
			h.occAt = s.now
			if h.xoff {
				h.xoffAt = s.now
			}
			if h.paused {
				h.pausedAt = s.now
			}
		}
	}
}

// count adds a frame to a byte and packet counter when the window is open.
func (s *msim) count(b, n *uint64, wire int32) {
	if s.inWin {
		*b += uint64(wire)
		*n++
	}
}

func (s *msim) newPkt(p mpkt) int32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		s.pkts[i] = p
		return i
	}
	s.pkts = append(s.pkts, p)
	return int32(len(s.pkts) - 1)
}

func (s *msim) freePkt(i int32) { s.free = append(s.free, i) }

// releasePkts hands the frame table to the next run.
func (s *msim) releasePkts() {
	if c := cap(s.pkts); c > 0 && c <= maxPooledPkts {
		b := s.pkts[:0]
		pktBufs.Put(&b)
	}
	s.pkts = nil
}

// msgSize is the size of message m (msg_sizes used in turn; UD messages are capped at the MTU).
func (s *msim) msgSize(m int32) int {
	sz := s.w.MsgSizes[int(m)%len(s.w.MsgSizes)]
	if s.w.QPType == "ud" {
		sz = min(sz, s.w.MTU)
	}
	return sz
}

// maxMsg is the workload's largest message (UD: at most the MTU), the size of every receive buffer posted.
func (s *msim) maxMsg() int {
	if s.maxMsgBytes == 0 {
		s.maxMsgBytes = 1
		for i := range s.w.MsgSizes {
			s.maxMsgBytes = max(s.maxMsgBytes, s.msgSize(int32(i)))
		}
	}
	return s.maxMsgBytes
}

// --- application ---

// post lets the requester's application post work requests in batches while its send queue has room, one
// doorbell per batch. The NIC reads the posted WQEs of a QP over PCIe, one read in flight per QP, each read
// taking what the doorbells announced so far (up to wqeFetchMax): small batches cost more reads. A doorbell
// starts a read only while fewer than wqeLowWater read WQEs wait on the NIC; otherwise the scheduler reads on
// when they run low, so a deep queue is read just ahead of its units rather than whole.
func (s *msim) post(ci int32) {
	c := &s.conns[ci]
	h := s.hosts[c.req]
	b := s.w.WQEBatch
	rang := false
	coalesce := h.m.Tx.DoorbellCoalesce
	for s.w.WQDepth-c.outstanding >= b {
		c.outstanding += b
		c.posted += b
		if !coalesce || !rang {
			h.dbFree = max(s.now, h.dbFree) + h.m.Tx.DoorbellNs*psPerNs
		}
		rang = true
		if !c.fetching {
			break // the NIC reads what this doorbell announced; later batches wait for the next read
		}
	}
	if rang && !c.fetching && c.ready < wqeLowWater {
		s.fetchWQEs(h, ci, h.dbFree)
	}
	for s.w.WQDepth-c.outstanding >= b {
		c.outstanding += b
		c.posted += b
		if !coalesce {
			// With tx.doorbell-coalesce, the doorbells the application rings back to back for one QP only move
			// the producer index of the one the engine already holds.
			h.dbFree = max(s.now, h.dbFree) + h.m.Tx.DoorbellNs*psPerNs
		}
	}
	s.stageUpdate(ci)
}

// wqeFetchMax bounds one WQE read (a few cache lines of a send queue); the NIC reads again when fewer than
// wqeLowWater read WQEs are left, so it reads just ahead of its units rather than whole queues.
const (
	wqeFetchMax = 16
	wqeLowWater = 4
)

func (s *msim) fetchWQEs(h *mhost, ci int32, t int64) {
	c := &s.conns[ci]
	n := min(c.posted, wqeFetchMax)
	if n <= 0 {
		return
	}
	c.posted -= n
	c.fetching = true
	bytes := n * (h.m.Tx.WQEBaseBytes + s.w.SGE*h.m.Tx.WQESGEBytes)
	done := s.pcieRead(h, max(t, s.now), bytes, ctxRead)
	s.q.PushLane(laneWQE+h.id, des.Event{At: done, Kind: mevWQEFetched, Obj: int32(h.id), Arg: ci, Aux: int32(n)})
}

// complete retires the message of packet pi at its requester and lets the application post again.
func (s *msim) complete(pi int32) {
	s.retire(&s.conns[s.pkts[pi].conn])
	s.post(s.pkts[pi].conn)
}

// retire counts one more message of the connection completed (and the connection started, for the warm-up,
// at its first).
func (s *msim) retire(c *mconn) {
	if c.acked == 0 {
		s.started++
	}
	c.acked++
	c.outstanding--
}

// --- transmit path ---

func (s *msim) hasWork(c *mconn, h *mhost) bool {
	if int(c.req) == h.id && c.ready > 0 && (s.w.Opcode != "read" || c.readsOut < mMaxRdAtom) {
		return true
	}
	return int(c.resp) == h.id && c.respQ.Len() > 0
}

// wake puts a connection with transmit work in the host's round robin and starts idle units.
func (s *msim) wake(h *mhost, ci int32) {
	c := &s.conns[ci]
	if !c.inRR[h.id] && s.hasWork(c, h) {
		c.inRR[h.id] = true
		h.rr.Push(ci)
	}
	s.startUnits(h)
}

// startUnits gives WQEs to free processing units, one per connection in turn, while the transmit buffer has
// room: units bound the requests in flight, the buffer bounds what waits for the wire and what is being read
// for it (two payload reads may always be in flight, so a message larger than the buffer streams while the
// next one is read).
func (s *msim) startUnits(h *mhost) {
	for h.freeUnits > 0 && (h.dmaPending < 2 || h.txQBytes+h.dmaBytes < h.m.Tx.BufferBytes) &&
		h.dmaPending < h.m.PCIe.MaxOutstandingReads && (h.rr.Len() > 0 || h.burstLeft > 0) {
		var ci int32
		burst := h.burstLeft > 0
		if burst {
			ci = h.burstConn
			h.burstLeft--
		} else {
			ci = h.rr.Pop()
			s.conns[ci].inRR[h.id] = false
		}
		c := &s.conns[ci]
		if burst && (int(c.req) != h.id || c.ready == 0 || (s.w.Opcode == "read" && c.readsOut >= mMaxRdAtom)) {
			h.burstLeft = 0 // the doorbell's WQEs are not all here yet: the QP waits for its next turn
			if !c.inRR[h.id] && s.hasWork(c, h) {
				c.inRR[h.id] = true
				h.rr.Push(ci)
			}
			continue
		}
		if !s.hasWork(c, h) {
			continue
		}
		j := mjob{conn: ci, epoch: c.epoch}
		if !burst && int(c.resp) == h.id && c.respQ.Len() > 0 {
			j.resp = true
			j.msg = c.respQ.Pop()
		} else {
			j.msg = c.nextMsg
			c.nextMsg++
			c.ready--
			if c.ready < wqeLowWater && !c.fetching {
				s.fetchWQEs(h, ci, h.dbFree)
			}
			if s.w.Opcode == "read" {
				if c.readsOut == 0 {
					h.readers++
				}
				c.readsOut++
			}
		}
		h.freeUnits--
		s.startJob(h, j)
		if n := s.doorbellBurst(h); !burst && !j.resp && n > 1 {
			h.burstConn, h.burstLeft = ci, n-1
		}
		if h.burstLeft > 0 {
			continue // the QP keeps the scheduler for the rest of its doorbell's WQEs
		}
		if s.hasWork(c, h) {
			c.inRR[h.id] = true
			h.rr.Push(ci)
		}
	}
}

// doorbellBurst is how many WQEs of one QP the scheduler takes back to back (tx.rc-doorbell-burst: those one
// doorbell announced, up to one WQE read; otherwise 1, one WQE per connection in turn).
func (s *msim) doorbellBurst(h *mhost) int {
	if !h.m.Tx.RCDoorbellBurst || s.w.QPType != "rc" {
		return 1
	}
	return min(s.w.WQEBatch, wqeFetchMax)
}

// startJob runs one WQE through the unit: WQE parsing, QP-context lookup, a translation per SGE, then the
// payload DMA read; each cache miss is a PCIe read the unit waits for.
func (s *msim) startJob(h *mhost, j mjob) {
	m := h.m
	sge := s.w.SGE
	if j.resp {
		sge = 1 // the responder reads one remote range
	}
	parsed := s.now + (m.Tx.WQENs+int64(sge)*m.Tx.SGENs)*psPerNs
	t := parsed
	if m.Tx.BurstWQEs > 0 && !j.resp {
		t = s.lookupBurst(h, t, j)
	} else {
		t = s.lookupQPC(h, t, j.conn)
		size := s.msgSize(j.msg)
		t = s.lookupMTT(h, t, j.conn, j.msg, size, sge)
	}
	j.lookedUp = t
	if !h.lookupWait {
		t = parsed // the lookups run on beside the unit
	}
	ji := s.newJob(j)
	s.q.PushLane(laneUnit+h.id, des.Event{At: t, Kind: mevUnitDone, Obj: int32(h.id), Arg: ji})
}

// unitDone frees the unit and issues the payload DMA read: each SGE's bytes in read requests, bounded by the
// read tags; the packets exist once the data is on the NIC. A job whose lookups run on beside the unit
// (tx.lookup-wait) holds its room in the transmit buffer from now and hands its reads to the DMA engine when
// they are back.
func (s *msim) unitDone(h *mhost, ji int32) {
	j := &s.jobs[ji]
	h.freeUnits++
	if s.hasPayload(j) {
		h.dmaBytes += s.msgSize(j.msg)
	}
	h.dmaPending++
	if j.lookedUp > s.now {
		s.q.PushLane(laneLookup+h.id, des.Event{At: j.lookedUp, Kind: mevLookedUp, Obj: int32(h.id), Arg: ji})
	} else {
		s.issuePayload(h, ji)
	}
	s.startUnits(h)
}

// hasPayload reports whether job j reads a payload: every job but a READ request.
func (s *msim) hasPayload(j *mjob) bool { return j.resp || s.w.Opcode != "read" }

// issuePayload issues job ji's payload reads (none for a READ request) and schedules its packetizing.
func (s *msim) issuePayload(h *mhost, ji int32) {
	j := &s.jobs[ji]
	done := s.now
	if s.hasPayload(j) {
		sge := s.w.SGE
		if j.resp {
			sge = 1
		}
		size := s.msgSize(j.msg)
		kind := payloadRead
		if size >= h.m.PCIe.LongReadBytes() {
			kind = longPayloadRead // pcie.ordered-long-reads
		}
		piece := (size + sge - 1) / sge
		for left := size; left > 0; {
			n := min(piece, left)
			left -= n
			done = max(done, s.readPayload(h, n, kind))
		}
		j.refetch = int32(s.stagingRefetch(h, size))
		done = max(done, s.readPayload(h, int(j.refetch), kind))
	}
	s.q.PushLane(laneDMA+h.id, des.Event{At: done, Kind: mevDMADone, Obj: int32(h.id), Arg: ji})
}

// readPayload issues n payload bytes as read requests of at most read-request-bytes from now and returns when
// the last of them is on the NIC (now for n = 0).
func (s *msim) readPayload(h *mhost, n int, kind dmaRead) int64 {
	done := s.now
	for n > 0 {
		r := min(n, h.m.PCIe.ReadRequestBytes)
		n -= r
		done = max(done, s.pcieRead(h, s.now, r, kind))
	}
	return done
}

func (s *msim) newJob(j mjob) int32 {
	if n := len(s.freeJob); n > 0 {
		i := s.freeJob[n-1]
		s.freeJob = s.freeJob[:n-1]
		s.jobs[i] = j
		return i
	}
	s.jobs = append(s.jobs, j)
	return int32(len(s.jobs) - 1)
}

// dmaDone packetizes the job's message at the MTU into the transmit queue (or the loopback queue).
func (s *msim) dmaDone(h *mhost, ji int32) {
	j := s.jobs[ji]
	s.freeJob = append(s.freeJob, ji)
	h.dmaPending--
	c := &s.conns[j.conn]
	if s.hasPayload(&j) {
		h.dmaBytes -= s.msgSize(j.msg)
	}
	if s.inWin {
		h.st.StagingRefetchBytes += uint64(j.refetch)
	}
	if j.epoch != c.epoch && !j.resp {
		s.startUnits(h) // went back meanwhile: this message will be sent again
		return
	}
	w := s.w
	size := s.msgSize(j.msg)
	src, dst := c.req, c.resp
	kind := mpData
	switch {
	case j.resp:
		src, dst, kind = c.resp, c.req, mpReadResp
	case w.Opcode == "read":
		kind = mpReadReq
	}
	npk := 1
	if kind != mpReadReq {
		npk = roce.PacketsPerMessage(size, w.MTU)
	}
	for i := 0; i < npk; i++ {
		p := mpkt{conn: j.conn, msg: j.msg, idx: int32(i), npk: int32(npk), kind: kind, epoch: j.epoch,
			src: src, dst: dst}
		wire := mHdrBytes
		switch kind {
		case mpReadReq:
			wire += mRETHBytes
		case mpReadResp:
			if i == 0 || i == npk-1 {
				wire += mAETHBytes
			}
		default:
			if w.QPType == "ud" {
				wire += mDETHBytes
			} else if i == 0 && w.Opcode == "write" {
				wire += mRETHBytes
			}
		}
		if kind != mpReadReq {
			p.payload = int32(min(w.MTU, size-i*w.MTU))
		}
		p.wire = int32(wire) + p.payload
		pi := s.newPkt(p)
		switch {
		case src == dst:
			h.txQBytes += int(p.wire)
			h.loopQ.Push(pi)
		case kind == mpReadReq:
			h.reqQ.Push(pi)
		default:
			h.txQBytes += int(p.wire)
			h.txQ.Push(pi)
		}
	}
	s.trySend(h)
	s.tryLoop(h)
	s.startUnits(h)
}

// trySend starts the next frame on an idle, unpaused wire: ACKs and READ requests first, then data. With a
// shared packet processor a transmitted frame first takes its turn on it.
func (s *msim) trySend(h *mhost) {
	for !h.wireBusy && !h.paused {
		var pi int32
		switch {
		case h.ctrlQ.Len() > 0:
			pi = h.ctrlQ.Pop()
		case h.reqQ.Len() > 0 && (h.reqTurn || h.txQ.Len() == 0):
			// READ requests and the other frames take turns: the egress arbitrates frame by frame between
			// the requester's QPs and the data queued for the wire, so neither waits behind all of the other
			// (the first requests of thousands of QPs, 16 each, queued megabytes ahead of every response).
			pi = h.reqQ.Pop()
			h.reqTurn = false
		case h.txQ.Len() > 0:
			h.reqTurn = true
			pi = h.txQ.Pop()
			p := &s.pkts[pi]
			h.txQBytes -= int(p.wire)
			if p.kind == mpData && p.epoch != s.conns[p.conn].epoch {
				s.freePkt(pi) // went back: the NIC drops what it had queued of the old attempt
				continue
			}
		default:
			s.startUnits(h)
			return
		}
		p := &s.pkts[pi]
		if t := h.m.Tx.PktNs; t > 0 && p.kind != mpAck {
			// Transmit goes first on the shared unit: the frame leaves on time and the receive side waits.
			if s.w.QPType == "rc" {
				t += s.rcStateNs(h, p)
			}
			h.ppFree = max(s.now, h.ppFree) + t*psPerNs
		}
		// The NIC's packet rate (max-mpps) spaces frame starts; the wire spaces their ends.
		start := max(s.now, h.nextTxAt)
		h.nextTxAt = start + h.pktGapPs
		h.wireBusy = true
		s.q.PushLane(laneWire+h.id, des.Event{At: start + int64(p.wire)*s.linkPsB, Kind: mevWireDone, Obj: int32(h.id), Arg: pi})
	}
	if !h.paused {
		s.startUnits(h)
	}
}

// tryLoop moves loopback frames through the NIC's internal switch into its own RX buffer; the internal path
// has no PFC, only back-pressure from the receive buffer: past XOFF, or earlier (loopback-xoff-bytes) on a NIC
// that keeps its receive path for the wire.
func (s *msim) tryLoop(h *mhost) {
	limit := h.m.Rx.XoffBytes
	if x := h.m.Tx.LoopbackXoffBytes; x > 0 {
		limit = min(limit, x)
	}
	if h.loopBusy || h.loopQ.Len() == 0 || h.xoff || h.rxBuf >= limit {
		return
	}
	pi := h.loopQ.Pop()
	p := &s.pkts[pi]
	h.txQBytes -= int(p.wire)
	if p.kind == mpData && p.epoch != s.conns[p.conn].epoch {
		s.freePkt(pi)
		s.tryLoop(h)
		return
	}
	s.count(&h.st.TxBytes, &h.st.TxPackets, p.wire)
	var d int64
	if g := h.m.Tx.LoopbackGbps; g > 0 {
		d = int64(p.wire) * psPerByte(g)
	} else {
		d = int64(p.wire) // no limit: one ps per byte (8 Tb/s)
	}
	h.loopBusy = true
	s.q.Push(des.Event{At: s.now + d, Kind: mevLoopDone, Obj: int32(h.id), Arg: pi})
	s.startUnits(h)
}

// --- PCIe ---

// dmaRead is what a DMA read fetches: a context, translation or WQE, or a message's payload (a long message's,
// more than pcie.ordered-short-bytes, is the one short writes wait behind with pcie.ordered-long-reads).
type dmaRead uint8

const (
	ctxRead dmaRead = iota
	payloadRead
	longPayloadRead
)

// pcieRead issues one DMA read of n bytes at time t and returns when its data is on the NIC. Payload reads
// hold a tag from issue to completion (max-outstanding-reads), share the read bandwidth and cross the host
// path to remote-socket or GPU memory; context, translation and WQE reads go ahead of them.
func (s *msim) pcieRead(h *mhost, t int64, n int, kind dmaRead) int64 {
	m := &h.m.PCIe
	if kind == ctxRead {
		// Context, translation and WQE reads are arbitrated ahead of payload reads: they take the link's
		// bandwidth from the payload queue rather than waiting behind the payload bytes already queued.
		xfer := int64(n) * h.rdPsB
		h.rdFree = max(s.now, h.rdFree) + xfer
		return max(t, s.now) + xfer + m.ReadLatencyNs*psPerNs
	}
	if h.tags.Len() >= m.MaxOutstandingReads {
		if e := h.tags.Pop(); e > t {
			if s.inWin {
				h.st.PCIeBackPressureNs += (e - t) / psPerNs
			}
			t = e
		}
	}
	// The channel's bandwidth is booked from now, so a read issued for later (after a tag frees) leaves no idle
	// gap that reads issued meanwhile could not use; the read still ends no earlier than its issue time allows.
	xfer := int64(n) * h.rdPsB
	h.rdFree = max(s.now, h.rdFree) + xfer
	end := max(h.rdFree, t+xfer)
	lat := m.ReadLatencyNs * psPerNs
	if h.pathPsPerB > 0 {
		px := int64(n+tlps(n)*h.pathTLPBytes) * h.pathPsPerB
		h.pathFree = max(s.now, h.pathFree) + px
		end = max(end, h.pathFree, t+px)
		lat += h.pathLatPs
	}
	done := end + lat
	h.tags.Push(done)
	// Assumption: only payload reads hold writes back; context and WQE reads are single short TLPs.
	h.lastReadDone = max(h.lastReadDone, done)
	if kind == longPayloadRead || !h.m.PCIe.OrderedLongReads {
		h.lastReadIssue = max(h.lastReadIssue, t)
	}
	return done
}

// pcieWrite writes packet p's n received bytes to memory from time t and returns when the data has left the
// NIC. Writes leave in order (wrFree). With relaxed ordering off the write may not pass read completions
// issued before it; with pcie.ordered-short-requests, only a message received whole in one packet (with
// pcie.ordered-short-bytes, a message of at most that size) waits, and only for the payload reads queued before
// it that still wait for a read tag (the writes after it wait in turn).
func (s *msim) pcieWrite(h *mhost, t int64, n int, p *mpkt) int64 {
	m := &h.m.PCIe
	switch {
	case m.RelaxedOrdering:
	case m.OrderedShortRequests:
		short := p.npk == 1
		if m.OrderedShortBytes > 0 {
			short = s.msgSize(p.msg) <= m.OrderedShortBytes
		}
		if short && s.w.SGE >= m.OrderedMinSGE {
			t = max(t, h.lastReadIssue)
		}
	default:
		t = max(t, h.lastReadDone)
	}
	start := max(t, h.wrFree)
	h.wrFree = start + int64(n+m.WriteTLPBytes*tlps(n))*h.wrPsB // wrPsB counts the TLP headers at the raw rate
	end := h.wrFree
	if h.pathWrPsPerB > 0 {
		ps := max(start, h.pathWrFree)
		h.pathWrFree = ps + int64(n+tlps(n)*h.pathTLPBytes)*h.pathWrPsPerB + int64(tlps(n))*h.pathWrTLPPs
		end = max(end, h.pathWrFree)
	} else if h.pathPsPerB > 0 {
		ps := max(start, h.pathFree)
		h.pathFree = ps + int64(n+tlps(n)*h.pathTLPBytes)*h.pathPsPerB
		end = max(end, h.pathFree)
	}
	return end
}

// pathTLPPayload is the most payload one TLP carries, on the NIC's link and on the host path (assumption: a
// 256 B max payload size, the common setting, for writes and read completions alike).
const pathTLPPayload = 256

// tlps is how many TLPs carry n payload bytes.
func tlps(n int) int { return (n + pathTLPPayload - 1) / pathTLPPayload }

func (s *msim) lookupQPC(h *mhost, t int64, ci int32) int64 {
	if h.qpc.lookup(uint64(ci)) {
		return t
	}
	if s.inWin {
		h.st.QPCCacheMiss++
	}
	return s.pcieRead(h, t, h.m.Cache.QPCBytes, ctxRead)
}

// lookupBurst is the requester's lookups with tx.burst-wqes: the first WQE of a doorbell (the application's
// post list of wqe_batch WQEs, up to burst-wqes of those the NIC has read) loads the QP's context once for
// all of them and looks their translations up together, the misses read in parallel; the doorbell's later
// WQEs find both loaded. With a batch of 1 every WQE pays its own lookups.
func (s *msim) lookupBurst(h *mhost, t int64, j mjob) int64 {
	c := &s.conns[j.conn]
	if c.ctxHeld > 0 {
		c.ctxHeld--
		return t
	}
	n := int32(min(c.ready+1, s.w.WQEBatch, h.m.Tx.BurstWQEs))
	c.ctxHeld = int(n - 1)
	t = s.lookupQPC(h, t, j.conn)
	done := t
	h.burstBytes = 0
	for k := int32(0); k < n; k++ {
		size := s.msgSize(j.msg + k)
		h.burstBytes += size
		done = max(done, s.lookupMTT(h, t, j.conn, j.msg+k, size, s.w.SGE))
	}
	return done
}

// lookupMTT translates every page each SGE touches: message i uses MR i mod num_mrs at the next offset in it,
// so many or large MRs touch more translation entries than the cache holds (none miss with cache.mtt-resident).
func (s *msim) lookupMTT(h *mhost, t int64, ci, msg int32, size, sge int) int64 {
	w := s.w
	mc := &h.m.Cache
	if mc.MTTResident {
		return t
	}
	mrSize := max(w.MRSize, 1)
	mr := int(msg) % w.NumMRs
	off := (int(msg) / w.NumMRs) * size % mrSize
	pages := (mrSize + mc.MTTPageBytes - 1) / mc.MTTPageBytes
	piece := max(size/sge, 1)
	prev := -1
	for i := 0; i < sge; i++ {
		a := (off + i*piece) % mrSize
		for page := a / mc.MTTPageBytes; page <= min(a+piece-1, mrSize-1)/mc.MTTPageBytes; page++ {
			if page == prev {
				continue
			}
			prev = page
			key := (uint64(ci)*uint64(w.NumMRs)+uint64(mr))*uint64(pages) + uint64(page)
			if h.mtt.lookup(key) {
				continue
			}
			if s.inWin {
				h.st.MTTCacheMiss++
			}
			t = s.pcieRead(h, t, mc.MTTBytes, ctxRead)
		}
	}
	return t
}

// --- packet staging ---

// stagingEntries is the staging one connection holds while it has data in flight, on the NIC that sends the
// data (one packet per SGE stream, a packet being the MTU or the SGE's share of a smaller message) and on the
// NIC that receives it (one packet), for the pattern's mean message size.
func (s *msim) stagingEntries() (tx, rx int64) {
	w := s.w
	mean := 0
	for i := range w.MsgSizes {
		mean += s.msgSize(int32(i))
	}
	mean = max((mean+len(w.MsgSizes)/2)/len(w.MsgSizes), 1)
	sge := w.SGE
	if w.Opcode == "read" {
		sge = 1 // the responder reads one remote range
	}
	piece := (mean + sge - 1) / sge
	if n := s.hosts[0].m.Tx.StagingMinSGE; n > 0 && sge < n {
		// Gathered on the fly: the packets stream from their reads and are never evicted and read again.
		return 0, int64(min(w.MTU, mean))
	}
	if n := s.hosts[0].m.Tx.StagingMinMTU; n > 0 && w.MTU < n {
		return 0, int64(min(w.MTU, mean)) // small packets are assembled on the fly too
	}
	return int64(sge * min(w.MTU, piece)), int64(min(w.MTU, mean))
}

// stageUpdate books or releases connection ci's staging on the sender and the receiver of its data: a
// WRITE/SEND connection holds it from the post of a message until that message's last frame left, a READ
// connection from the arrival of a request until its last response frame left.
func (s *msim) stageUpdate(ci int32) {
	c := &s.conns[ci]
	snd, rcv := c.req, c.resp
	var active bool
	if s.w.Opcode == "read" {
		snd, rcv = c.resp, c.req
		active = c.respOut > 0
	} else {
		active = int(c.acked)+c.outstanding > int(c.txDone)
	}
	if active == c.staged {
		return
	}
	c.staged = active
	d := int64(1)
	if !active {
		d = -1
	}
	s.hosts[snd].stageDemand += d * s.stageTx
	s.hosts[rcv].stageDemand += d * s.stageRx
}

// sent notes that a frame left the NIC (on the wire or through the internal switch).
func (s *msim) sent(p *mpkt) {
	if !p.last() {
		return
	}
	c := &s.conns[p.conn]
	switch {
	case p.kind == mpData && p.epoch == c.epoch:
		c.txDone = max(c.txDone, p.msg+1)
	case p.kind == mpReadResp:
		c.respOut--
	default:
		return
	}
	s.stageUpdate(p.conn)
}

// stagingRefetch is how many bytes a message of size bytes reads again because its staging was evicted: with
// the connections in flight needing more staging than the NIC has, a share 1 - staging/demand of the packets
// find the staged packets of their connection gone (the engine interleaves connections packet by packet, so
// every staged packet waits a whole round) and read them again, every SGE stream's.
func (s *msim) stagingRefetch(h *mhost, size int) int {
	sb := int64(h.m.Tx.StagingBytes)
	if sb == 0 || h.stageDemand <= sb {
		return 0
	}
	miss := 1 - float64(sb)/float64(h.stageDemand)
	npk := roce.PacketsPerMessage(size, s.w.MTU)
	return int(miss*float64(npk)*float64(s.stageTx) + 0.5)
}

// --- switch ---

func (s *msim) swArrive(port int, pi int32) {
	sp := &s.sw[port]
	p := &s.pkts[pi]
	sp.q.Push(pi)
	sp.bytes += int(p.wire)
	if !sp.pausedUp && sp.bytes > s.swXoff {
		sp.pausedUp = true
		s.q.PushLane(laneProp, des.Event{At: s.now + s.propPs, Kind: mevHostPause, Obj: int32(1 - port), Aux: 1})
	}
	if !sp.busy {
		// The switch pipeline latency is folded into the first frame's departure.
		s.swStartAt(port, s.now+s.swLatPs)
	}
}

func (s *msim) swStart(port int) { s.swStartAt(port, s.now) }

func (s *msim) swStartAt(port int, at int64) {
	sp := &s.sw[port]
	if sp.busy || sp.paused || sp.q.Len() == 0 {
		return
	}
	pi := sp.q.Pop()
	sp.busy = true
	s.q.PushLane(laneSwTx+port, des.Event{At: at + int64(s.pkts[pi].wire)*s.linkPsB, Kind: mevSwTxDone, Obj: int32(port), Arg: pi})
}

func (s *msim) swTxDone(port int, pi int32) {
	sp := &s.sw[port]
	sp.busy = false
	sp.bytes -= int(s.pkts[pi].wire)
	if sp.pausedUp && sp.bytes < s.swXoff/2 {
		sp.pausedUp = false
		s.q.PushLane(laneProp, des.Event{At: s.now + s.propPs, Kind: mevHostPause, Obj: int32(1 - port), Aux: 0})
	}
	s.q.PushLane(laneProp, des.Event{At: s.now + s.propPs, Kind: mevHostArrive, Obj: int32(port), Arg: pi})
	s.swStart(port)
}

func (s *msim) hostPause(h *mhost, on bool) {
	if on == h.paused {
		return
	}
	h.paused = on
	if on {
		h.pausedAt = s.now
		return
	}
	if s.inWin {
		h.st.RxPauseNs += (s.now - max(h.pausedAt, s.winFrom)) / psPerNs
	}
	s.trySend(h)
}

// --- receive path ---

// occupancy integrates the RX buffer for its average and tracks its maximum.
func (s *msim) occupancy(h *mhost, delta int) {
	if s.inWin {
		h.occArea += int64(h.rxBuf) * (s.now - h.occAt) / psPerNs
		h.occAt = s.now
	}
	h.rxBuf += delta
	if s.inWin && h.rxBuf > h.st.RxBufferMaxBytes {
		h.st.RxBufferMaxBytes = h.rxBuf
	}
}

// arrive puts a frame in the RX buffer (or drops it when the buffer is full) and asserts PFC past XOFF.
func (s *msim) arrive(h *mhost, pi int32) {
	p := &s.pkts[pi]
	s.count(&h.st.RxBytes, &h.st.RxPackets, p.wire)
	if p.kind == mpData && h.rxBuf+h.cellBytes(p.wire) > h.m.Rx.BufferBytes {
		// Only WRITE/SEND data is dropped; the model does not retransmit READs or control frames, which the
		// PFC headroom protects.
		if s.inWin {
			h.st.RxDiscards++
		}
		s.dropData(h, pi, false)
		return
	}
	s.occupancy(h, h.cellBytes(p.wire))
	if !h.xoff && h.rxBuf >= h.m.Rx.XoffBytes {
		h.xoff = true
		h.xoffAt = s.now
		s.q.PushLane(laneProp, des.Event{At: s.now + s.propPs, Kind: mevSwPause, Obj: int32(h.id), Aux: 1})
	}
	h.rxQ.Push(pi)
	s.conns[p.conn].rxQueued++
	s.startRx(h)
}

// startRx gives the head of the RX queue to the packet processor, whose time it shares with ACK generation
// and, on some NICs, with transmitted frames.
func (s *msim) startRx(h *mhost) {
	if h.rxBusy || h.rxQ.Len() == 0 {
		return
	}
	pi := h.rxQ.Pop()
	p := &s.pkts[pi]
	s.conns[p.conn].rxQueued--
	r := &h.m.Rx
	var cost int64
	switch p.kind {
	case mpAck:
		cost = r.AckNs
	case mpReadReq:
		cost = r.ReadReqNs
	case mpReadResp:
		cost = r.ReadRespNs
		if r.ReadRespFirstNs > 0 && (p.first() || int(p.idx)*s.w.MTU < r.ReadRespSpanBytes) {
			cost = r.ReadRespFirstNs
		}
	default:
		switch {
		case s.w.QPType == "ud":
			cost = r.UDNs
		case s.w.Opcode == "send":
			cost = r.SendNs
		default:
			cost = r.WriteNs
		}
		if s.w.QPType == "rc" {
			cost += r.RCDataNs + s.rcStateNs(h, p)
		}
	}
	start := max(s.now, h.ppFree)
	if h.rxGapPs > 0 && p.kind != mpAck {
		start = max(start, h.nextRxAt)
		h.nextRxAt = start + h.rxGapPs
	}
	perPacketQPC := r.ReadRespPerPacketQPC && p.kind == mpReadResp && h.readers > h.m.Cache.QPCEntries &&
		min(s.w.WQEBatch, wqeFetchMax) >= r.ReadRespQPCBatch && (r.ReadRespQPCMaxMTU == 0 || s.w.MTU <= r.ReadRespQPCMaxMTU)
	if perPacketQPC && !p.first() {
		// Every response packet needs its QP's read state; with the responses of more QPs than the context cache
		// holds arriving interleaved packet by packet, each one misses.
		if s.inWin {
			h.st.QPCCacheMiss++
		}
		done := s.pcieRead(h, start, h.m.Cache.QPCBytes, ctxRead)
		start += (done - start) / int64(r.QPCMissSlots)
	}
	if p.first() && (p.kind == mpData || p.kind == mpReadResp) {
		cost += int64(s.w.SGE) * r.SGENs
		if p.kind == mpReadResp {
			cost += int64(s.w.SGE) * r.ReadRespSGENs
		}
		// The receive side needs the QP's context too; its misses are handled qpc-miss-slots at a time, so
		// the processor loses a slot's share of each miss's PCIe read. With rx-read-queue-bytes the read
		// first waits in the DMA read queue behind the transmit path's payload reads, in its slot, and takes a
		// qpc-miss-slot even when the packet is data.
		if !h.qpc.lookup(uint64(p.conn)) {
			if s.inWin {
				h.st.QPCCacheMiss++
			}
			issue := start
			if pc := &h.m.PCIe; pc.RxReadQueueBytes > 0 && s.rxReadQueued(h, p) {
				// Behind the payload reads already queued, up to what the read queue holds; with doorbell
				// bursts, behind the payload of the doorbell being read at most.
				q := pc.RxReadQueueBytes
				if h.m.Tx.BurstWQEs > 0 {
					q = min(q, h.burstBytes)
				}
				issue = max(start, min(h.rdFree, start+int64(q)*h.rdPsB))
			}
			done := s.pcieRead(h, issue, h.m.Cache.QPCBytes, ctxRead)
			slots := r.QPCMissSlots
			// A read queued behind payload reads holds one of the qpc-miss-slots; the others of received
			// data go on the context fetcher's own slots (data-qpc-miss-slots).
			// With rx.read-resp-context-data-slots a READ response's does too, unless its QP's read state is
			// looked up packet by packet (then the first packet's miss is that lookup's too).
			if (p.kind == mpData || p.kind == mpReadResp && r.ReadRespContextDataSlots && !perPacketQPC) &&
				r.DataQPCMissSlots > 0 && issue == start {
				slots = r.DataQPCMissSlots
			}
			if p.kind == mpData && r.DataQPCMissSlots > 0 && issue > start && h.m.PCIe.RxReadQueueRelease {
				// The queued read holds its qpc-miss-slot while it waits (pcie.rx-read-queue-release); issued,
				// it is in flight on the fetcher's own slots like the others of received data.
				start += (issue-start)/int64(slots) + (done-issue)/int64(r.DataQPCMissSlots)
			} else {
				start += (done - start) / int64(slots)
			}
		}
	}
	h.ppFree = start + cost*psPerNs
	h.rxBusy = true
	s.q.PushLane(laneRxDone+h.id, des.Event{At: h.ppFree, Kind: mevRxDone, Obj: int32(h.id), Arg: pi})
}

// rxReadQueued reports whether a received packet's context read waits in the DMA read queue
// (pcie.rx-read-queue-bytes): every one without tx.burst-wqes; with it, only RC WRITE data's (collie A.1 #10:
// bidirectional RC WRITE, reliable traffic "requires packet-level ACK"; assumption: a WRITE's context read
// also brings its RETH's memory-key context, a read the DMA engine queues with the payload reads, while a
// SEND's receive WQE comes through the receive-WQE path).
func (s *msim) rxReadQueued(h *mhost, p *mpkt) bool {
	if b := h.m.PCIe.RxReadQueueBatch; b > 0 && s.w.WQEBatch < b {
		return false
	}
	return h.m.Tx.BurstWQEs <= 0 || (p.kind == mpData && s.w.QPType == "rc" && s.w.Opcode == "write")
}

// rcStateNs is the shared processor's extra time for an RC data frame, sent or received, on a NIC with more
// QPs than it keeps RC transport state for (rx.rc-state-entries): their frames interleave (transmit, receive
// and acknowledgements of different QPs), so each one swaps its QP's state in; with rx.rc-state-batch, only when
// the QP's doorbells announce a full WQE read-ahead, which then moves with its state. With rx.rc-state-read-resp
// a transmitted READ response frame swaps too (startRx does not call this for received responses).
func (s *msim) rcStateNs(h *mhost, p *mpkt) int64 {
	if n := h.m.Rx.RCStateEntries; n <= 0 || h.qps <= n {
		return 0
	}
	if p.kind != mpData && (p.kind != mpReadResp || !h.m.Rx.RCStateReadResp) {
		return 0
	}
	if b := h.m.Rx.RCStateBatch; b > 0 && min(s.w.WQEBatch, wqeFetchMax) < b {
		return 0 // no read-ahead rides with the state: only the PSN line moves, hidden behind the frame
	}
	if h.m.Rx.RCStateSenderOnly && !h.txRCData {
		return 0 // only receive state in the slots: no read-ahead to move
	}
	return h.m.Rx.RCStateMissNs
}

// cellBytes is the RX buffer a frame of wire bytes takes: whole cells of rx.buffer-cell-bytes (0: its bytes).
func (h *mhost) cellBytes(wire int32) int {
	if c := h.m.Rx.BufferCellBytes; c > 0 {
		return (int(wire) + c - 1) / c * c
	}
	return int(wire)
}

// release frees a frame's RX buffer space and drops PFC below XON.
func (s *msim) release(h *mhost, pi int32) {
	s.occupancy(h, -h.cellBytes(s.pkts[pi].wire))
	if h.xoff && h.rxBuf <= h.m.Rx.XonBytes {
		h.xoff = false
		if s.inWin {
			h.st.TxPauseNs += (s.now - max(h.xoffAt, s.winFrom)) / psPerNs
		}
		s.q.PushLane(laneProp, des.Event{At: s.now + s.propPs, Kind: mevSwPause, Obj: int32(h.id), Aux: 0})
	}
	s.freePkt(pi)
	s.tryLoop(h)
}

// rxDone acts on a processed frame.
func (s *msim) rxDone(h *mhost, pi int32) {
	p := &s.pkts[pi]
	c := &s.conns[p.conn]
	switch p.kind {
	case mpAck:
		// ACKs are cumulative and only ever cover delivered messages, whatever the attempt.
		for c.acked <= p.msg {
			s.retire(c)
		}
		s.post(p.conn)
		s.release(h, pi)
		return
	case mpReadReq:
		c.respQ.Push(p.msg)
		c.respOut++
		s.stageUpdate(p.conn)
		s.release(h, pi)
		s.wake(h, p.conn)
		return
	}
	if s.stale(c, p) {
		s.release(h, pi) // go-back-N: a frame of an abandoned attempt
		return
	}
	needWQE := p.first() && p.kind == mpData && s.w.Opcode == "send"
	if c.parked.Len() > 0 {
		// Behind a frame waiting for its receive WQE: wait too, to keep the QP's order.
		if needWQE && h.parkedMsgs >= h.m.Rx.MissSlots {
			s.dropData(h, pi, true)
			return
		}
		if needWQE {
			h.parkedMsgs++
			c.parkedMsgs++
		}
		c.parked.Push(pi)
		return
	}
	if needWQE && h.m.Rx.DropBeforeFetch && !h.wqeResident && c.rqCached == 0 && c.rqAvail > 0 && h.parkedMsgs >= h.m.Rx.MissSlots {
		// A miss with every miss-slot taken: the message is dropped before a WQE read starts for it.
		if s.inWin {
			h.st.RxWQECacheMiss++
		}
		s.dropData(h, pi, true)
		return
	}
	if needWQE && !s.takeRecvWQE(h, p.conn) {
		if c.rqAvail == 0 {
			s.dropDataAfter(h, pi, true, minRNRTimerNs) // receiver not ready
			return
		}
		if h.parkedMsgs >= h.m.Rx.MissSlots {
			s.dropData(h, pi, true)
			return
		}
		h.parkedMsgs++
		c.parkedMsgs++
		c.parked.Push(pi)
		return
	}
	s.place(h, pi)
}

// place writes a frame's payload to memory; the buffer frees when the data left the NIC.
func (s *msim) place(h *mhost, pi int32) {
	p := &s.pkts[pi]
	end := s.pcieWrite(h, s.now, int(p.payload), p)
	if n := h.m.Rx.CQEBytes; n > 0 && p.kind == mpData && p.last() && s.w.Opcode == "send" {
		s.pcieWrite(h, end, n, p) // the receive completion, after the message's data (the frame's buffer is free)
	}
	if s.w.QPType == "rc" && p.kind == mpData {
		// One ACK every N packets, and at a message's end unless more of the QP's frames are queued (the
		// next ACK covers it: ACKs are cumulative).
		c := &s.conns[p.conn]
		if (p.last() && c.rxQueued == 0) || (p.idx+1)%int32(h.m.Tx.AckEveryPackets) == 0 {
			s.sendAck(h, p)
		}
	}
	s.q.PushLane(laneRxFree+h.id, des.Event{At: end, Kind: mevRxFree, Obj: int32(h.id), Arg: pi})
}

// sendAck generates an acknowledgement on the packet processor; the requester completes the message when
// an ACK for its last packet arrives.
func (s *msim) sendAck(h *mhost, p *mpkt) {
	start := max(s.now, h.ppFree)
	h.ppFree = start + h.m.Rx.AckGenNs*psPerNs
	msg := p.msg
	if !p.last() {
		msg--
	}
	a := mpkt{conn: p.conn, msg: msg, kind: mpAck, epoch: p.epoch, src: p.dst, dst: p.src, npk: 1,
		wire: mHdrBytes + mAETHBytes}
	ai := s.newPkt(a)
	if a.src == a.dst {
		h.txQBytes += int(a.wire)
		h.loopQ.Push(ai)
		s.tryLoop(h)
		return
	}
	s.q.PushLane(laneRxDone+h.id, des.Event{At: h.ppFree, Kind: mevCtrlReady, Obj: int32(h.id), Arg: ai})
}

// rxFree: the payload is in memory.
func (s *msim) rxFree(h *mhost, pi int32) {
	p := &s.pkts[pi]
	c := &s.conns[p.conn]
	sender := s.hosts[p.src]
	s.count(&h.st.GoodRxBytes, &h.st.GoodRxPackets, p.wire)
	s.count(&sender.st.GoodTxBytes, &sender.st.GoodTxPackets, p.wire)
	if p.last() {
		s.delivered++
		if s.w.Opcode == "send" {
			s.recvConsumed(h, p.conn)
		}
		if p.kind == mpReadResp {
			c.readsOut--
			if c.readsOut == 0 {
				h.readers--
			}
			s.complete(pi)
			s.wake(h, p.conn)
		}
	}
	s.release(h, pi)
}

// dropData loses a WRITE/SEND frame: UD and UC lose the message; RC discards the rest of the attempt and the
// requester goes back to the frame's message after the NAK delay (generation, wire and reaction).
func (s *msim) dropData(h *mhost, pi int32, admitted bool) {
	s.dropDataAfter(h, pi, admitted, h.m.Rx.NAKDelayNs)
}

// minRNRTimerNs is the RNR NAK delay Collie's traffic engine configures (--min_rnr_timer 14 = 1.28 ms): an RC
// SEND that finds the receive queue empty makes its sender wait that long.
const minRNRTimerNs = 1_280_000

func (s *msim) dropDataAfter(h *mhost, pi int32, admitted bool, delayNs int64) {
	p := &s.pkts[pi]
	c := &s.conns[p.conn]
	if p.first() && s.w.Opcode == "send" && admitted && s.inWin {
		h.st.RxOutOfBuffer++
	}
	if s.w.QPType == "rc" && !s.stale(c, p) {
		c.rxMinEpoch = p.epoch + 1
		c.dropMsg = p.msg
		if s.inWin {
			h.st.NAKs++
		}
		s.q.Push(des.Event{At: s.now + delayNs*psPerNs, Kind: mevNAK, Obj: int32(p.src), Arg: p.conn, Aux: p.msg})
	}
	if admitted {
		s.release(h, pi)
		return
	}
	s.freePkt(pi)
}

// stale reports whether a frame belongs to an attempt the receiver abandoned (go-back-N).
func (s *msim) stale(c *mconn, p *mpkt) bool { return p.epoch < c.rxMinEpoch && p.msg >= c.dropMsg }

// goBack restarts a connection at message msg: queued frames of the old attempt are dropped, the messages
// are processed again.
func (s *msim) goBack(h *mhost, ci, msg int32) {
	c := &s.conns[ci]
	if msg < c.acked {
		msg = c.acked
	}
	c.epoch++
	if msg < c.nextMsg {
		c.ready += int(c.nextMsg - msg)
		c.nextMsg = msg
	}
	c.txDone = min(c.txDone, msg)
	s.stageUpdate(ci)
	s.wake(h, ci)
}

// --- receive WQEs ---

// rxWQEsResident says whether the workload's receive WQEs are on the NIC whenever a message needs one, so that
// they never take the wqe-cache and its prefetch and miss paths.
func rxWQEsResident(r *rnic.MicroRx, w *scenario.Workload) bool {
	switch {
	case r.WQEResident:
		return true
	case r.ShortQueuesResident && (prefetchSize(r, w) < r.PrefetchMax || w.WQDepth < r.LargeBatchDepth):
		return true // a short queue, or a large batch on a queue under large-batch-depth
	case len(r.WQECacheQPTypes) > 0 && !slices.Contains(r.WQECacheQPTypes, w.QPType):
		return true // a QP type that does not take the cache
	}
	return w.QPType == "rc" && r.RCWQECacheMaxMTU > 0 && w.MTU > r.RCWQECacheMaxMTU
}

// prefetchSize is how many receive WQEs the NIC reads ahead per receive doorbell: the batch just posted, or
// more for a long queue (depth / prefetch-div, from rx.prefetch-long-depth on), within [prefetch-min, prefetch-max].
func prefetchSize(r *rnic.MicroRx, w *scenario.Workload) int {
	long := w.WQDepth / r.PrefetchDiv
	if w.WQDepth < r.PrefetchLongDepth {
		long = 0 // a short queue: its doorbell's batch, at least prefetch-min
	}
	n := min(max(w.WQEBatch, long, r.PrefetchMin), r.PrefetchMax)
	if d := r.PrefetchDepthDiv; d > 0 {
		n = min(n, max(w.WQDepth/d, w.WQEBatch, 1)) // a short queue: its doorbell's batch, or a share of its depth
	}
	return n
}

// readAhead is the connection's read-ahead: prefetchSize, or more once rx.prefetch-grow lengthened it.
func (s *msim) readAhead(h *mhost, c *mconn) int {
	return max(prefetchSize(&h.m.Rx, s.w), c.rqAhead)
}

// growReadAhead: a QP whose messages wait behind a receive-WQE miss ran dry under load; rx.prefetch-grow
// multiplies its read-ahead (up to prefetch-max) while the half of it that every receive queue of the host
// keeps on the NIC (a refill is due at half) would fit the cache for all of them.
func (s *msim) growReadAhead(h *mhost, c *mconn) {
	g := h.m.Rx.PrefetchGrow
	if g <= 1 {
		return
	}
	if n := min(s.readAhead(h, c)*g, h.m.Rx.PrefetchMax); h.rqs*(n/2) <= h.wqeCacheSize {
		c.rqAhead = max(c.rqAhead, n)
	}
}

// rqPrefetch runs on a receive doorbell: it reads ahead the next uncached receive WQEs of the connection when
// what it has on the NIC (cached or being fetched) is down to half a prefetch. A QP whose messages wait for a
// receive WQE (they parked when its posted ones ran out) needs the read: it is a demand fetch, not a hint the
// busy prefetcher may drop, since nothing else would read WQEs for the waiting messages.
func (s *msim) rqPrefetch(h *mhost, ci int32) {
	c := &s.conns[ci]
	if h.wqeResident {
		return
	}
	if h.m.Rx.WholeQPCache && c.rqCached+c.rqFetching == 0 && c.parked.Len() == 0 {
		return // not in the cache and nothing waiting: its WQEs are read when its next message needs one
	}
	if n := s.readAhead(h, c); c.rqCached+c.rqFetching <= n/2 {
		s.rqFetch(h, ci, n, c.parked.Len() > 0)
	}
}

// rqFetch reads up to want receive WQEs of the connection; demand (a message waits for one) uses the
// rx.demand-fetch-slots when the profile gives demand fetches slots of their own.
func (s *msim) rqFetch(h *mhost, ci int32, want int, demand bool) {
	c := &s.conns[ci]
	// A QP never holds more than prefetch-max WQEs on the NIC.
	n := min(want, c.rqAvail-c.rqCached-c.rqFetching, h.m.Rx.PrefetchMax-c.rqCached-c.rqFetching)
	if n <= 0 {
		return
	}
	if !demand && h.m.Rx.PrefetchDropBusy && h.fetchActive >= h.m.Rx.FetchSlots {
		return // the prefetcher is busy: the hint is dropped, the QP's next message reads its WQEs on demand
	}
	c.rqFetching += n
	if demand && h.m.Rx.DemandFetchSlots > 0 {
		if h.demandActive >= h.m.Rx.DemandFetchSlots {
			h.demandQ.Push(ci)
			h.demandN.Push(int32(n))
			return
		}
		s.issueRQFetch(h, ci, n, true)
		return
	}
	if h.fetchActive >= h.m.Rx.FetchSlots {
		h.fetchQ.Push(ci) // the receive-WQE fetcher is busy: wait in line
		h.fetchN.Push(int32(n))
		return
	}
	s.issueRQFetch(h, ci, n, false)
}

func (s *msim) issueRQFetch(h *mhost, ci int32, n int, demand bool) {
	aux := int32(n)
	if demand {
		h.demandActive++
		aux = -aux
	} else {
		h.fetchActive++
	}
	done := s.pcieRead(h, s.now, n*s.w.SGE*h.m.Rx.WQEBytes, ctxRead)
	if c := h.m.Rx.FetchWQENs; c > 0 {
		if h.fetchEngs == nil {
			h.fetchEngs = make([]int64, max(h.m.Rx.FetchEngines, 1))
		}
		k := 0
		for i, f := range h.fetchEngs {
			if f < h.fetchEngs[k] {
				k = i
			}
		}
		h.fetchEngs[k] = max(s.now, h.fetchEngs[k]) + int64(n)*c*psPerNs
		done = max(done, h.fetchEngs[k])
	}
	if h.m.Rx.EvictWQENs > 0 {
		done = max(done, h.evictFree)
	}
	s.q.Push(des.Event{At: done, Kind: mevRxWQEFetched, Obj: int32(h.id), Arg: ci, Aux: aux})
}

// rqFetched caches fetched WQEs, evicting the least recently used QPs' entries past the cache size, and
// resumes the frames that waited for them.
func (s *msim) rqFetched(h *mhost, ci int32, n int, demand bool) {
	c := &s.conns[ci]
	if demand {
		h.demandActive--
		if h.demandQ.Len() > 0 {
			s.issueRQFetch(h, h.demandQ.Pop(), int(h.demandN.Pop()), true)
		}
	} else {
		h.fetchActive--
		if h.fetchQ.Len() > 0 {
			s.issueRQFetch(h, h.fetchQ.Pop(), int(h.fetchN.Pop()), false)
		}
	}
	c.rqFetching -= n
	s.setCached(h, ci, c.rqCached+n)
	c.lastUse = s.now
	for h.cacheUsed > h.wqeCacheSize {
		v := s.lruVictim(h, ci)
		if v < 0 {
			break
		}
		vc := &s.conns[v]
		k := min(vc.rqCached, h.cacheUsed-h.wqeCacheSize)
		if h.m.Rx.WholeQPCache {
			k = vc.rqCached
		}
		if e := h.m.Rx.EvictWQENs; e > 0 {
			h.evictFree = max(s.now, h.evictFree) + int64(k)*e*psPerNs
		}
		s.setCached(h, v, vc.rqCached-k)
	}
	s.unpark(h, ci)
}

// lruVictim is the connection on host h with cached WQEs used longest ago (ci itself only as a last resort).
// Only the few connections holding cache entries are scanned.
func (s *msim) lruVictim(h *mhost, ci int32) int32 {
	best := int32(-1)
	for _, i := range h.holders {
		c := &s.conns[i]
		if c.rqCached == 0 || i == ci {
			continue
		}
		if best < 0 || c.lastUse < s.conns[best].lastUse {
			best = i
		}
	}
	if best < 0 && s.conns[ci].rqCached > 0 {
		best = ci
	}
	return best
}

// setCached changes a connection's cached WQE count and keeps the host's list of holders.
func (s *msim) setCached(h *mhost, ci int32, n int) {
	c := &s.conns[ci]
	if c.rqCached == 0 && n > 0 {
		h.holders = append(h.holders, ci)
	} else if c.rqCached > 0 && n == 0 {
		for k, v := range h.holders {
			if v == ci {
				h.holders[k] = h.holders[len(h.holders)-1]
				h.holders = h.holders[:len(h.holders)-1]
				break
			}
		}
	}
	h.cacheUsed += n - c.rqCached
	c.rqCached = n
}

// takeRecvWQE consumes the connection's next receive WQE from the cache; a miss starts a demand fetch.
func (s *msim) takeRecvWQE(h *mhost, ci int32) bool {
	c := &s.conns[ci]
	c.lastUse = s.now
	if h.wqeResident {
		if c.rqAvail == 0 {
			return false // nothing posted: receiver not ready
		}
		c.rqAvail--
		return true
	}
	if c.rqCached > 0 {
		s.setCached(h, ci, c.rqCached-1)
		c.rqAvail--
		return true
	}
	if s.inWin {
		h.st.RxWQECacheMiss++
	}
	if c.parked.Len() > 0 {
		s.growReadAhead(h, c)
	}
	if c.rqFetching == 0 {
		n := h.m.Rx.MissFetch
		if k := h.m.Rx.ColdMissFetch; k > 0 && c.parked.Len() == 0 {
			n = k // nothing of the QP waits behind this miss: read what this message needs
		}
		if d := h.m.Rx.MissFetchDiv; d > 0 {
			n = min(max(s.w.WQDepth/d, n), h.m.Rx.PrefetchMax)
		}
		if b := h.m.Rx.MissFetchBytes; b > 0 {
			n = min(n, max(b/s.maxMsg(), 1)) // the WQEs whose buffers fill the bytes read ahead
		}
		if h.m.Rx.MissFetchParked {
			n = min(max(n, c.parkedMsgs), h.m.Rx.PrefetchMax)
		}
		s.rqFetch(h, ci, n, true)
	}
	return false
}

// unpark places the frames of a connection that waited for receive WQEs, in order, until one misses again.
func (s *msim) unpark(h *mhost, ci int32) {
	c := &s.conns[ci]
	for c.parked.Len() > 0 {
		pi := c.parked.Front()
		p := &s.pkts[pi]
		first := p.first() && p.kind == mpData
		if s.stale(c, p) {
			c.parked.Pop()
			if first {
				h.parkedMsgs--
				c.parkedMsgs--
			}
			s.release(h, pi)
			continue
		}
		if first {
			if !s.takeRecvWQE(h, ci) {
				return
			}
			h.parkedMsgs--
			c.parkedMsgs--
		}
		c.parked.Pop()
		s.place(h, pi)
	}
}

// recvConsumed is the receiving application: it reposts receive WQEs in batches, and each repost doorbell
// makes the NIC prefetch.
func (s *msim) recvConsumed(h *mhost, ci int32) {
	c := &s.conns[ci]
	c.rqConsumed++
	if c.rqConsumed >= s.w.WQEBatch {
		c.rqConsumed -= s.w.WQEBatch
		c.rqAvail += s.w.WQEBatch
		s.rqPrefetch(h, ci)
	}
}

// result closes the window's integrals and derives the limits, the window's from the unloaded round trip rttNs.
func (s *msim) result(gbps, rttNs float64) *WorkloadResult {
	r := &WorkloadResult{WindowNs: (s.winTo - s.winFrom) / psPerNs, LimitGbps: gbps, Events: s.events}
	for i, h := range s.hosts {
		if h.xoff {
			h.st.TxPauseNs += (s.now - max(h.xoffAt, s.winFrom)) / psPerNs
		}
		if h.paused {
			h.st.RxPauseNs += (s.now - max(h.pausedAt, s.winFrom)) / psPerNs
		}
		h.occArea += int64(h.rxBuf) * (s.now - h.occAt) / psPerNs
		if r.WindowNs > 0 {
			h.st.RxBufferAvgBytes = float64(h.occArea) / float64(r.WindowNs)
		}
		r.Hosts[i] = h.st
	}
	// The workload's data frames, one pass over its message sizes: their wire bytes, and the time a NIC at its
	// limits needs for them, each frame taking its wire time or the packet-rate gap, whichever is longer. A mix
	// of small frames (held to the packet rate) and large ones (held to the wire) reaches neither the line rate
	// nor the packet rate, so both limits are what the mix can reach: a limit no NIC could reach would make
	// every such workload look slow.
	maxMpps := min(s.hosts[0].m.MaxMpps, s.hosts[1].m.MaxMpps)
	gapNs := 1e3 / maxMpps
	var bytes, pkts, extraNs, ctrlNs float64
	wireBound := false
	for _, sz := range s.w.MsgSizes {
		if s.w.QPType == "ud" {
			sz = min(sz, s.w.MTU)
		}
		n := roce.PacketsPerMessage(sz, s.w.MTU)
		bytes += float64(sz + n*mHdrBytes)
		pkts += float64(n)
		for i := 0; i < n; i++ {
			wireNs := float64(min(s.w.MTU, sz-i*s.w.MTU)+mHdrBytes) * 8 / gbps
			extraNs += max(0, gapNs-wireNs)
			wireBound = wireBound || wireNs > gapNs
		}
		if k, wire := s.reverseCtrl(n); k > 0 {
			ctrlNs += float64(k) * max(float64(wire)*8/gbps, gapNs)
		}
	}
	lineMpps := gbps * 1e3 / 8 / (bytes / pkts)
	r.LimitMpps = min(lineMpps, maxMpps)
	if wireNs := bytes * 8 / gbps; ctrlNs > 0 || (extraNs > 0 && wireBound) {
		// Some frames are held to the packet rate and some to the wire, or the wire also carries the other
		// direction's ACKs or READ requests (a uniform size one way is one or the other, and keeps the limits
		// above exactly).
		t := wireNs + extraNs + ctrlNs
		r.LimitGbps = bytes * 8 / t
		r.LimitMpps = pkts * 1e3 / t
	}
	for _, h := range s.hosts {
		if q := h.m.MaxMppsPerQP; q > 0 {
			r.LimitMpps = min(r.LimitMpps, q*float64(s.w.NumQPs))
		}
	}
	// What the workload's own outstanding work carries: its messages in flight (QPs x queue depth, READs capped
	// at the QP's read limit), each the pattern's mean wire bytes and packets, once per unloaded round trip.
	r.WindowRTTNs = rttNs
	inflight := float64(s.w.NumQPs * s.w.WQDepth)
	if s.w.Opcode == "read" {
		inflight = float64(s.w.NumQPs * min(s.w.WQDepth, mMaxRdAtom))
	}
	r.WindowGbps = inflight * bytes / float64(len(s.w.MsgSizes)) * 8 / r.WindowRTTNs
	r.WindowMpps = inflight * pkts / float64(len(s.w.MsgSizes)) * 1e3 / r.WindowRTTNs
	return r
}

// oneQPMessageNs is the time per message of one connection of the workload alone, one way, at the
// workload's queue depth and batch, with every cache the NIC shares between QPs holding what it needs
// (translations resident, its context cached, receive WQEs always on the NIC: their misses are the load of
// many QPs or MRs, the anomalies a search looks for). After 16 messages (whole passes over the pattern) it
// times four queues' worth (at least 32 messages, at most 256). 0 when the run does not get there.
func oneQPMessageNs(cfg *WorkloadConfig, gbps float64) float64 {
	c := oneQP(cfg, nil, func(m *rnic.MicroArch) { m.Rx.WQEResident = true })
	w := c.Workload
	s := newMSim(&c, gbps)
	defer s.releasePkts()
	n := int32(len(w.MsgSizes))
	warm := (16 + n - 1) / n * n
	// A UC/UD SEND lost for want of a receive WQE carries nothing: those count per message delivered.
	return s.nsPerMessage(warm, warm+(max(4*min(int32(w.WQDepth), 64), 32)+n-1)/n*n, w.QPType != "rc")
}

// nsPerMessage runs a one-connection simulation until its connection has completed end messages and returns
// the time per message from the warm-th completion on: per message completed, or per message delivered
// (byDelivered). 0 when the run ends or reaches unloadedMaxEvents first, or nothing was delivered.
func (s *msim) nsPerMessage(warm, end int32, byDelivered bool) float64 {
	s.winFrom, s.winTo = math.MaxInt64, math.MaxInt64
	conn := &s.conns[0]
	var from int64
	var delivered int32
	for s.q.Len() > 0 && s.events < unloadedMaxEvents {
		e := s.q.Pop()
		s.now = e.At
		s.events++
		s.dispatch(&e)
		if from == 0 && conn.acked >= warm {
			from, delivered = s.now, s.delivered
		}
		if conn.acked >= end {
			d := end - warm
			if byDelivered {
				d = s.delivered - delivered
			}
			if d > 0 {
				return float64(s.now-from) / float64(d) / psPerNs
			}
			break
		}
	}
	return 0
}

// reverseCtrl is what a message of n data frames puts on the wire that carries the data of the other
// direction, when both directions carry data (bidirectional RC): its ACKs (one every ack-every-packets frames
// and one at the message's end, as place sends them when nothing of the QP is queued behind) or its READ
// request. Goodput counts data frames only, so a bidirectional workload's limits leave the wire time of these.
func (s *msim) reverseCtrl(n int) (frames, wire int) {
	if s.w.Direction != DirBi || s.w.QPType != "rc" {
		return 0, 0
	}
	if s.w.Opcode == "read" {
		return 1, mHdrBytes + mRETHBytes
	}
	every := min(s.hosts[0].m.Tx.AckEveryPackets, s.hosts[1].m.Tx.AckEveryPackets)
	if every < 1 {
		return 1, mHdrBytes + mAETHBytes
	}
	return (n + every - 1) / every, mHdrBytes + mAETHBytes
}

// unloadedRTTNs is the time from posting a message to its completion with nothing else in the NIC, which
// the model itself measures: one connection of the workload (its QP type, opcode, MTU, SGEs, message sizes
// and memory placement) with one message in flight, from one host to the other, every message of the pattern
// in turn. Each cycle pays every fixed cost the model imposes on a message: the doorbell, the WQE read, the
// unit's work, the payload read over PCIe and the host path (at their latency and rate), the packet rate and
// the wire, the switch, the receive processing (and a receive WQE read where the NIC cannot have read it
// ahead), the payload write before a READ completes, and for RC the ACK's way back. Translations are taken as
// resident and one QP's context stays cached: misses of many MRs or QPs are the NIC's load, not the
// workload's window. The first pass over the pattern warms the caches; the mean of the next two is the round
// trip.
func unloadedRTTNs(cfg *WorkloadConfig, gbps float64) float64 {
	c := oneQP(cfg, func(w *scenario.Workload) { w.WQDepth, w.WQEBatch = 1, 1 }, nil)
	w := c.Workload
	s := newMSim(&c, gbps)
	if w.Opcode == "send" {
		// The receive queue is the workload's: one message in flight never finds it empty.
		s.conns[0].rqAvail = cfg.Workload.WQDepth
	}
	// Per message delivered: a message lost on the way (a UC/UD SEND that found no receive WQE) is not
	// carried.
	n := int32(len(w.MsgSizes))
	if t := s.nsPerMessage(n, 3*n, true); t > 0 {
		return t
	}
	// Not reached (a message lost for good): the analytic sum of the fixed latencies.
	return s.fixedRTTNs(gbps)
}

// oneQP is cfg reduced to one connection of its workload, one way, with one MR whose translations stay
// resident, then changed by wl and by arch on each host's copy of its micro-architecture (either may be nil).
func oneQP(cfg *WorkloadConfig, wl func(*scenario.Workload), arch func(*rnic.MicroArch)) WorkloadConfig {
	c := *cfg
	w := c.Workload
	w.NumQPs, w.NumMRs, w.Direction = 1, 1, DirUni
	w.MsgSizes = append([]int(nil), w.MsgSizes...)
	if wl != nil {
		wl(&w)
	}
	c.Workload = w
	for i, p := range cfg.Profiles {
		q, m := *p, *p.Micro
		m.Cache.MTTResident = true
		if arch != nil {
			arch(&m)
		}
		q.Micro = &m
		c.Profiles[i] = &q
	}
	return c
}

// unloadedMaxEvents bounds each one-connection run: the unloaded round trip's (3 passes over at most 64
// messages) and the one-QP reference's (at most 16 + 256 messages and a pass). A run of huge messages that
// reaches it falls back to fixedRTTNs (the round trip) or leaves the in-flight limit as it was (the
// reference).
const unloadedMaxEvents = 2_000_000

// fixedRTTNs is the sum of the main fixed latencies of one message (doorbell, WQE read, unit, payload read and
// host path, serialization of the mean message, switch and cables, receive and for RC the ACK's way back): the
// fallback when the one-connection run does not complete.
func (s *msim) fixedRTTNs(gbps float64) float64 {
	m := s.hosts[0].m
	var msgWire float64
	for _, sz := range s.w.MsgSizes {
		msgWire += float64(sz + roce.PacketsPerMessage(sz, s.w.MTU)*mHdrBytes)
	}
	msgWire /= float64(len(s.w.MsgSizes))
	wire := float64(2*s.propPs+s.swLatPs) / psPerNs
	reader := s.hosts[0]
	if s.w.Opcode == "read" {
		reader = s.hosts[1]
	}
	t := float64(m.Tx.DoorbellNs+m.PCIe.ReadLatencyNs+m.Tx.WQENs+int64(s.w.SGE)*m.Tx.SGENs+m.PCIe.ReadLatencyNs) +
		float64(reader.pathLatPs)/psPerNs + msgWire*8/gbps
	if s.w.QPType != "rc" {
		return t
	}
	return t + 2*wire + float64(m.Rx.WriteNs+m.Rx.AckGenNs+m.Rx.AckNs)
}
