package live

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/version"
)

// SwitchConfig describes a real-time switch.
type SwitchConfig struct {
	Ports   [2]string // port 0 faces the requester, port 1 the responder
	Dumpers []string  // mirror ports, indexed as Verdict.Dumper
	// Logic runs until the control plane installs another; nil means an injector with no connections, which
	// forwards everything and mirrors every RoCE frame over the dumpers in round robin.
	Logic       inject.Logic
	Ring        RingConfig // receive rings of the two ports (default: V2, low latency)
	TxBatch     int        // frames per sendmmsg (0: DefaultTxBatch)
	FlushIdleNs int64      // frames held by reorder events are released after this much silence (0: 100 ms)
	// StatusFile, if set, receives the status as JSON every StatusEvery (0: 1 s) and at exit.
	StatusFile  string
	StatusEvery time.Duration
	// SpinNs keeps polling the rings without sleeping for this long after the last frame (0: sleep at once).
	// Waking a thread blocked in ppoll costs tens to hundreds of microseconds on a busy machine; spinning
	// trades a CPU for that latency while traffic flows.
	SpinNs int64
}

// PortStatus are one host-facing port's counters.
type PortStatus struct {
	Name     string    `json:"name"`
	RxFrames uint64    `json:"rx_frames"`
	RxBytes  uint64    `json:"rx_bytes"`
	RxRoCE   uint64    `json:"rx_roce"`
	TxRoCE   uint64    `json:"tx_roce"`  // RoCE frames sent out of this port
	Mirrored uint64    `json:"mirrored"` // mirrored copies of frames that entered here
	Tx       TxStats   `json:"tx"`
	Ring     RingStats `json:"ring"`
}

// DumperStatus are one mirror port's counters.
type DumperStatus struct {
	Name string  `json:"name"`
	Tx   TxStats `json:"tx"`
}

// SwitchStatus is the switch's state for status files and results.
type SwitchStatus struct {
	UptimeNs int64 `json:"uptime_ns"`
	// Dataplane is the BPF data plane's hook, "tc" or "xdp"; empty for the ring path.
	Dataplane string         `json:"dataplane,omitempty"`
	Ports     [2]PortStatus  `json:"ports"`
	Dumpers   []DumperStatus `json:"dumpers"`
	Mirrored  uint64         `json:"mirrored"`
	// NotForwarded counts frames the logic kept back (drop events, frames held for reordering).
	NotForwarded uint64            `json:"not_forwarded"`
	Delayed      uint64            `json:"delayed"`    // frames sent late by delay events
	Flushed      uint64            `json:"flushed"`    // held frames released by the idle timeout or at exit
	BadDumper    uint64            `json:"bad_dumper"` // mirrored copies for a dumper index with no port
	Installed    int               `json:"installed"`  // logics installed by the control plane
	Injector     *inject.Counters  `json:"injector,omitempty"`
	Entries      []inject.Entry    `json:"entries,omitempty"`
	Learned      []inject.ConnMeta `json:"learned,omitempty"`
}

// delayed is a frame waiting for its delay event to expire.
type delayed struct {
	due  int64
	seq  uint64 // FIFO among equal due times
	port int
	buf  []byte
}

type delayQueue []delayed

func (q delayQueue) Len() int { return len(q) }
func (q delayQueue) Less(i, j int) bool {
	return q[i].due < q[j].due || q[i].due == q[j].due && q[i].seq < q[j].seq
}
func (q delayQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *delayQueue) Push(x any)   { *q = append(*q, x.(delayed)) }
func (q *delayQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

type installReq struct {
	logic inject.Logic
	done  chan struct{}
}

// Switch forwards frames between two interfaces through the logic, mirrors to dumper interfaces and keeps
// counters. Its sockets are opened by NewSwitch in the calling thread's namespace (see InNetns).
type Switch struct {
	cfg     SwitchConfig
	rx      [2]*Ring
	tx      [2]*Tx
	dump    []*Tx
	logic   inject.Logic
	v       inject.Verdict
	st      SwitchStatus
	start   time.Time
	startRT int64
	lastNow int64
	lastRx  int64
	dq      delayQueue
	dqSeq   uint64
	free    [][]byte
	install chan installReq
	status  chan chan SwitchStatus
	onFrame [2]FrameFunc
}

// NewSwitch opens the switch's rings and sockets.
func NewSwitch(cfg SwitchConfig) (*Switch, error) {
	if cfg.Ports[0] == "" || cfg.Ports[1] == "" {
		return nil, fmt.Errorf("switch needs two ports; got %q and %q", cfg.Ports[0], cfg.Ports[1])
	}
	if cfg.FlushIdleNs == 0 {
		cfg.FlushIdleNs = 100e6
	}
	if cfg.StatusEvery == 0 {
		cfg.StatusEvery = time.Second
	}
	s := &Switch{cfg: cfg, install: make(chan installReq), status: make(chan chan SwitchStatus)}
	ringCfg := cfg.Ring
	ringCfg.IgnoreOutgoing = true
	ringCfg.FanoutGroup = 0
	var err error
	for p := range 2 {
		if s.rx[p], err = OpenRing(cfg.Ports[p], ringCfg); err != nil {
			s.Close()
			return nil, fmt.Errorf("switch port %d: %w", p, err)
		}
		if s.tx[p], err = OpenTx(cfg.Ports[p], cfg.TxBatch); err != nil {
			s.Close()
			return nil, fmt.Errorf("switch port %d: %w", p, err)
		}
		s.st.Ports[p].Name = cfg.Ports[p]
	}
	for i, d := range cfg.Dumpers {
		t, err := OpenTx(d, cfg.TxBatch)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("switch dumper port %d: %w", i, err)
		}
		s.dump = append(s.dump, t)
		s.st.Dumpers = append(s.st.Dumpers, DumperStatus{Name: d})
	}
	s.logic = cfg.Logic
	if s.logic == nil {
		sw, err := inject.New(inject.Config{DumperWeights: equalWeights(len(cfg.Dumpers))})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("default switch logic: %w", err)
		}
		s.logic = sw
	}
	s.onFrame[0] = func(f []byte, ts int64, wire int) { s.frame(0, f, ts) }
	s.onFrame[1] = func(f []byte, ts int64, wire int) { s.frame(1, f, ts) }
	return s, nil
}

func equalWeights(n int) []int {
	w := make([]int, max(n, 1))
	for i := range w {
		w[i] = 1
	}
	return w
}

// Close closes every socket.
func (s *Switch) Close() error {
	var errs []error
	for p := range 2 {
		if s.rx[p] != nil {
			errs = append(errs, s.rx[p].Close())
		}
		if s.tx[p] != nil {
			errs = append(errs, s.tx[p].Close())
		}
	}
	for _, d := range s.dump {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// Install replaces the logic between two frames and returns once the data plane runs it, so that no frame
// after the return sees the old logic (the control plane's barrier). It fails if Run is not running.
func (s *Switch) Install(ctx context.Context, l inject.Logic) error {
	req := installReq{logic: l, done: make(chan struct{})}
	select {
	case s.install <- req:
	case <-ctx.Done():
		return fmt.Errorf("installing switch logic: %w", ctx.Err())
	}
	select {
	case <-req.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("installing switch logic: %w", ctx.Err())
	}
}

// Status asks the running data plane for a snapshot; it fails if Run is not running.
func (s *Switch) Status(ctx context.Context) (SwitchStatus, error) {
	ch := make(chan SwitchStatus, 1)
	select {
	case s.status <- ch:
	case <-ctx.Done():
		return SwitchStatus{}, fmt.Errorf("switch status: %w", ctx.Err())
	}
	select {
	case st := <-ch:
		return st, nil
	case <-ctx.Done():
		return SwitchStatus{}, fmt.Errorf("switch status: %w", ctx.Err())
	}
}

// now is the switch clock: ns since the switch started, from the kernel's receive time when there is one.
func (s *Switch) clock() int64 { return int64(time.Since(s.start)) }

// Run forwards until ctx is done, then releases held and delayed frames, and returns the final status.
func (s *Switch) Run(ctx context.Context) (SwitchStatus, error) {
	s.start = time.Now()
	s.startRT = s.start.UnixNano()
	fds := []unix.PollFd{{Fd: int32(s.rx[0].Fd()), Events: unix.POLLIN}, {Fd: int32(s.rx[1].Fd()), Events: unix.POLLIN}}
	nextStatus := s.cfg.StatusEvery
	var runErr error
	for ctx.Err() == nil {
		select {
		case req := <-s.install:
			s.releaseHeld(s.logic.Flush(s.clock()))
			s.logic = req.logic
			s.st.Installed++
			close(req.done)
		case ch := <-s.status:
			ch <- s.snapshot()
		default:
		}
		n := s.rx[0].Poll(256, s.onFrame[0])
		n += s.rx[1].Poll(256, s.onFrame[1])
		now := s.clock()
		s.releaseDue(now)
		if n > 0 {
			s.lastRx = now
		} else if s.lastRx > 0 && now-s.lastRx > s.cfg.FlushIdleNs {
			s.releaseHeld(s.logic.Flush(now))
			s.lastRx = 0
		}
		s.flushTx()
		if s.cfg.StatusFile != "" && time.Duration(now) >= nextStatus {
			nextStatus = time.Duration(now) + s.cfg.StatusEvery
			if err := s.writeStatus(); err != nil && runErr == nil {
				runErr = err
			}
		}
		if n > 0 || (s.cfg.SpinNs > 0 && s.lastRx > 0 && now-s.lastRx < s.cfg.SpinNs) {
			continue
		}
		wait := int64(20e6)
		if len(s.dq) > 0 {
			wait = min(wait, max(s.dq[0].due-now, 0))
		}
		if wait == 0 {
			continue
		}
		ts := unix.NsecToTimespec(wait)
		if _, err := unix.Ppoll(fds, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return s.snapshot(), fmt.Errorf("switch: ppoll: %w", err)
		}
	}
	now := s.clock()
	s.releaseHeld(s.logic.Flush(now))
	for len(s.dq) > 0 {
		d := heap.Pop(&s.dq).(delayed)
		s.send(d.port, d.buf, true)
		s.st.Delayed++
	}
	s.flushTx()
	if s.cfg.StatusFile != "" {
		if err := s.writeStatus(); err != nil && runErr == nil {
			runErr = err
		}
	}
	return s.snapshot(), runErr
}

// frame handles one received frame. It runs once per packet: no allocation except delayed-frame buffers,
// which are recycled.
func (s *Switch) frame(port int, f []byte, tsRT int64) {
	now := tsRT - s.startRT
	if now < s.lastNow {
		now = s.lastNow // two rings and a coarse kernel clock can disagree by a little; keep time monotonic
	}
	s.lastNow = now
	ps := &s.st.Ports[port]
	ps.RxFrames++
	ps.RxBytes += uint64(len(f))
	v := &s.v
	s.logic.Process(now, port, f, v)
	if v.RoCE {
		ps.RxRoCE++
	}
	if len(v.Mirror) > 0 && v.Dumper >= 0 {
		if v.Dumper < len(s.dump) {
			s.dump[v.Dumper].Send(v.Mirror)
			s.st.Mirrored++
			ps.Mirrored++
		} else {
			s.st.BadDumper++
		}
	}
	if v.OutPort < 0 || v.OutPort > 1 {
		return
	}
	if len(v.Forward) == 0 {
		s.st.NotForwarded++
		return
	}
	for i, out := range v.Forward {
		if i == 0 && v.DelayNs > 0 {
			s.delay(now+v.DelayNs, v.OutPort, out)
			continue
		}
		s.send(v.OutPort, out, v.RoCE)
	}
}

// send queues a frame on a port; roce says whether it counts as RoCE (events only ever hold or delay RoCE
// frames, so released frames always do).
func (s *Switch) send(port int, f []byte, roce bool) {
	if roce {
		s.st.Ports[port].TxRoCE++
	}
	s.tx[port].Send(f)
}

func (s *Switch) delay(due int64, port int, f []byte) {
	var buf []byte
	if n := len(s.free); n > 0 {
		buf, s.free = s.free[n-1][:0], s.free[:n-1]
	}
	s.dqSeq++
	heap.Push(&s.dq, delayed{due: due, seq: s.dqSeq, port: port, buf: append(buf, f...)})
}

func (s *Switch) releaseDue(now int64) {
	for len(s.dq) > 0 && s.dq[0].due <= now {
		d := heap.Pop(&s.dq).(delayed)
		s.send(d.port, d.buf, true)
		s.st.Delayed++
		s.free = append(s.free, d.buf)
	}
}

func (s *Switch) releaseHeld(hs []inject.Held) {
	for _, h := range hs {
		if h.OutPort == 0 || h.OutPort == 1 {
			s.send(h.OutPort, h.Frame, true)
			s.st.Flushed++
		}
	}
}

func (s *Switch) flushTx() {
	s.tx[0].Flush()
	s.tx[1].Flush()
	for _, d := range s.dump {
		d.Flush()
	}
}

// Counted is implemented by logics that expose the injector's counters and table (inject.Switch, Learner).
type Counted interface {
	Counters() inject.Counters
	Entries() []inject.Entry
}

func (s *Switch) snapshot() SwitchStatus {
	st := s.st
	st.UptimeNs = s.clock()
	for p := range 2 {
		st.Ports[p].Tx = s.tx[p].Stats()
		if rs, err := s.rx[p].Stats(); err == nil {
			st.Ports[p].Ring = rs
		}
	}
	st.Dumpers = append([]DumperStatus(nil), s.st.Dumpers...)
	for i, d := range s.dump {
		st.Dumpers[i].Tx = d.Stats()
	}
	if c, ok := s.logic.(Counted); ok {
		cs := c.Counters()
		st.Injector = &cs
		st.Entries = c.Entries()
	}
	if l, ok := s.logic.(*Learner); ok {
		st.Learned = l.Learned()
	}
	s.st.Ports[0].Ring, s.st.Ports[1].Ring = st.Ports[0].Ring, st.Ports[1].Ring
	return st
}

// writeStatus replaces the status file atomically (write, then rename).
func (s *Switch) writeStatus() error {
	return writeJSONFile(s.cfg.StatusFile, s.snapshot())
}

func writeJSONFile(path string, v any) error {
	b, err := version.MarshalDocument(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
