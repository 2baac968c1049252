package live

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// DumpConfig configures a dumper.
type DumpConfig struct {
	Iface string
	// Workers is the number of fan-out sockets, each read by its own goroutine (0: the number of CPUs).
	Workers int
	// FanoutMode is the kernel's spreading (unix.PACKET_FANOUT_HASH, the default, spreads on the flow hash,
	// which the switch's RSS rewrite randomizes; unix.PACKET_FANOUT_CPU follows the receiving CPU).
	FanoutMode  int
	FanoutGroup uint16 // 0: derived from the process id
	SnapLen     int    // bytes kept per packet (0: 128)
	MaxPackets  int    // packets kept in memory at most, over all workers (0: 1 M); the excess is counted
	RewritePort uint16 // the switch's RSS rewrite port to undo (0: none)
	Ring        RingConfig
}

// DumpStats is the dumper's account of what it captured and lost, written beside the pcap.
type DumpStats struct {
	Interface string `json:"interface"`
	Workers   int    `json:"workers"`
	SnapLen   int    `json:"snaplen"`
	Captured  uint64 `json:"captured"` // mirrored packets written to the pcap
	Ignored   uint64 `json:"ignored"`  // frames that were not mirrored RoCE copies (ARP, IPv6 ND, ...)
	// Losses: any of these above 0 makes the dump incomplete.
	KernelDrops uint64 `json:"kernel_drops"`     // tp_drops: ring full
	FreezeQ     uint64 `json:"kernel_freeze_q"`  // tp_freeze_q_cnt: ring frozen for lack of a free block
	Malformed   uint64 `json:"ring_malformed"`   // ring entries the walker rejected
	BufferFull  uint64 `json:"buffer_full_drop"` // packets dropped because MaxPackets was reached
	Complete    bool   `json:"complete"`
	FirstSeq    uint64 `json:"first_seq"`
	LastSeq     uint64 `json:"last_seq"`
	// PerWorker are each fan-out socket's packets and drops (the kernel's view).
	PerWorker []RingStats `json:"per_worker"`
}

// record is one captured packet in a worker's buffer.
type record struct {
	seq     uint64
	ts      int64
	off     int
	n       int
	origLen int
}

type dumpWorker struct {
	ring  *Ring
	arena []byte
	recs  []record
	limit int
	full  uint64
	other uint64
}

// Dumper captures mirrored frames from one interface with kernel fan-out over several sockets.
type Dumper struct {
	cfg     DumpConfig
	workers []*dumpWorker
}

// NewDumper opens the fan-out sockets on cfg.Iface in the calling thread's namespace.
func NewDumper(cfg DumpConfig) (*Dumper, error) {
	if cfg.Iface == "" {
		return nil, errors.New("dumper needs an interface")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.NumCPU()
	}
	if cfg.Workers > 64 {
		return nil, fmt.Errorf("dumper with %d workers; expected 1..64", cfg.Workers)
	}
	if cfg.SnapLen == 0 {
		cfg.SnapLen = 128
	}
	if cfg.SnapLen < 64 || cfg.SnapLen > 65535 {
		return nil, fmt.Errorf("dumper snap length %d; expected 64..65535 bytes (the headers up to the BTH need 58)", cfg.SnapLen)
	}
	if cfg.MaxPackets == 0 {
		cfg.MaxPackets = 1 << 20
	}
	if cfg.MaxPackets < 0 {
		return nil, fmt.Errorf("dumper max packets %d; expected a positive number", cfg.MaxPackets)
	}
	if cfg.FanoutGroup == 0 {
		cfg.FanoutGroup = uint16(os.Getpid()) | 1
	}
	if cfg.Ring.Version == 0 {
		cfg.Ring.Version = RingV3
	}
	if cfg.Ring.Version == RingV3 && cfg.Ring.BlockSize == 0 {
		cfg.Ring.BlockSize, cfg.Ring.NumBlocks = 1<<18, 32
	}
	cfg.Ring.FanoutGroup, cfg.Ring.FanoutMode = cfg.FanoutGroup, cfg.FanoutMode
	d := &Dumper{cfg: cfg}
	per := (cfg.MaxPackets + cfg.Workers - 1) / cfg.Workers
	for i := 0; i < cfg.Workers; i++ {
		r, err := OpenRing(cfg.Iface, cfg.Ring)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("dumper worker %d: %w", i, err)
		}
		d.workers = append(d.workers, &dumpWorker{ring: r, limit: per})
	}
	return d, nil
}

// Close closes the sockets (the captured packets stay in memory).
func (d *Dumper) Close() error {
	var errs []error
	for _, w := range d.workers {
		errs = append(errs, w.ring.Close())
	}
	return errors.Join(errs...)
}

// Run captures until ctx is done, one goroutine per fan-out socket, then drains what the rings still hold.
func (d *Dumper) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(d.workers))
	for i, w := range d.workers {
		wg.Go(func() { errs[i] = d.work(ctx, w) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (d *Dumper) work(ctx context.Context, w *dumpWorker) error {
	fn := func(f []byte, ts int64, wire int) { d.keep(w, f, wire) }
	fds := []unix.PollFd{{Fd: int32(w.ring.Fd()), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		if w.ring.Poll(0, fn) > 0 {
			continue
		}
		ts := unix.NsecToTimespec(20e6)
		if _, err := unix.Ppoll(fds, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("dumper on %s: ppoll: %w", d.cfg.Iface, err)
		}
	}
	// A V3 block is handed over when full or retired: wait one retire period so the last frames are in.
	ts := unix.NsecToTimespec(int64(d.cfg.Ring.RetireMs+2) * 1e6)
	_, _ = unix.Ppoll(fds, &ts, nil)
	w.ring.Poll(0, fn)
	return nil
}

// keep stores the first SnapLen bytes of a mirrored frame, undoing the RSS rewrite. Storage grows in the
// worker's arena up to its share of MaxPackets; nothing is allocated per packet once the arena has grown.
func (d *Dumper) keep(w *dumpWorker, f []byte, wire int) {
	n := min(len(f), d.cfg.SnapLen)
	if len(w.recs) >= w.limit {
		w.full++
		return
	}
	off := len(w.arena)
	w.arena = append(w.arena, f[:n]...)
	b := w.arena[off : off+n]
	if d.cfg.RewritePort != 0 {
		if !roce.UndoRSS(b, d.cfg.RewritePort) {
			w.arena = w.arena[:off]
			w.other++
			return
		}
	} else if !isRoCEv2(b) {
		w.arena = w.arena[:off]
		w.other++
		return
	}
	m, ok := roce.DecodeMirror(b)
	if !ok {
		w.arena = w.arena[:off]
		w.other++
		return
	}
	w.recs = append(w.recs, record{seq: m.Seq, ts: int64(m.TimestampNs), off: off, n: n, origLen: wire})
}

// isRoCEv2 reports an untagged IPv4 UDP frame to port 4791 (the mirrored copies when no rewrite port is set).
func isRoCEv2(b []byte) bool {
	if len(b) < 34 || b[12] != 0x08 || b[13] != 0x00 || b[14]>>4 != 4 || b[23] != 17 {
		return false
	}
	u := 14 + int(b[14]&0x0f)*4
	return len(b) >= u+4 && int(b[u+2])<<8|int(b[u+3]) == roce.UDPPort
}

// StatsPath is where the stats of the dump at pcapPath go: beside it, .pcap replaced by .stats.json.
func StatsPath(pcapPath string) string {
	return strings.TrimSuffix(pcapPath, ".pcap") + ".stats.json"
}

// Write writes the captured packets, sorted by mirror sequence number, as a nanosecond pcap (timestamps from
// the mirror metadata), and the stats beside it (StatsPath). Call it after Run has returned.
func (d *Dumper) Write(pcapPath string) (DumpStats, error) {
	st := DumpStats{Interface: d.cfg.Iface, Workers: len(d.workers), SnapLen: d.cfg.SnapLen}
	type ref struct {
		w *dumpWorker
		r record
	}
	var all []ref
	for _, w := range d.workers {
		rs, err := w.ring.Stats()
		if err != nil {
			return st, fmt.Errorf("dumper: %w", err)
		}
		st.PerWorker = append(st.PerWorker, rs)
		st.KernelDrops += rs.Drops
		st.FreezeQ += rs.FreezeQ
		st.Malformed += rs.Malformed
		st.BufferFull += w.full
		st.Ignored += w.other
		for _, r := range w.recs {
			all = append(all, ref{w, r})
		}
	}
	slices.SortStableFunc(all, func(a, b ref) int {
		switch {
		case a.r.seq < b.r.seq:
			return -1
		case a.r.seq > b.r.seq:
			return 1
		}
		return 0
	})
	f, err := os.Create(pcapPath)
	if err != nil {
		return st, fmt.Errorf("dumper: %w", err)
	}
	pw, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true, SnapLen: uint32(d.cfg.SnapLen)})
	if err != nil {
		f.Close()
		return st, fmt.Errorf("dumper: %w", err)
	}
	for _, x := range all {
		if err := pw.WritePacket(x.r.ts, x.w.arena[x.r.off:x.r.off+x.r.n], x.r.origLen); err != nil {
			f.Close()
			return st, fmt.Errorf("dumper: writing %s: %w", pcapPath, err)
		}
	}
	if err := pw.Close(); err != nil {
		f.Close()
		return st, fmt.Errorf("dumper: writing %s: %w", pcapPath, err)
	}
	if err := f.Close(); err != nil {
		return st, fmt.Errorf("dumper: writing %s: %w", pcapPath, err)
	}
	st.Captured = uint64(len(all))
	if len(all) > 0 {
		st.FirstSeq, st.LastSeq = all[0].r.seq, all[len(all)-1].r.seq
	}
	st.Complete = st.KernelDrops == 0 && st.FreezeQ == 0 && st.Malformed == 0 && st.BufferFull == 0
	return st, writeJSONFile(StatsPath(pcapPath), st)
}
