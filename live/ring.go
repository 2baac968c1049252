package live

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RingVersion selects the AF_PACKET receive ring layout.
type RingVersion int

// Ring layouts. V2 hands each frame to user space as soon as it lands in its slot, so it adds no latency: the
// switch uses it. V3 packs variable-size frames into blocks that reach user space only when full or retired by
// a timeout: fewer wake-ups and no wasted slot space, so the dumper uses it.
const (
	RingV2 RingVersion = 2
	RingV3 RingVersion = 3
)

// RingConfig sizes a receive ring and chooses its socket options.
type RingConfig struct {
	Version   RingVersion // 0 = RingV2
	BlockSize int         // bytes per block, a multiple of the page size (0: 1 MiB for V3, 64 KiB for V2)
	NumBlocks int         // blocks in the ring (0: 64)
	FrameSize int         // V2 slot size (0: 2048); must divide BlockSize
	RetireMs  int         // V3: a partly filled block is handed over after this many ms (0: 1)
	// FanoutGroup, when not 0, joins the socket to a PACKET_FANOUT group (16-bit id) with FanoutMode
	// (unix.PACKET_FANOUT_HASH, _CPU, _LB); the kernel then spreads the interface's frames over the group.
	FanoutGroup uint16
	FanoutMode  int
	// IgnoreOutgoing keeps frames this host transmits on the interface (the switch's own output) out of the ring.
	IgnoreOutgoing bool
}

func (c *RingConfig) normalize() error {
	if c.Version == 0 {
		c.Version = RingV2
	}
	if c.Version != RingV2 && c.Version != RingV3 {
		return fmt.Errorf("ring version %d; expected 2 or 3", c.Version)
	}
	if c.BlockSize == 0 {
		c.BlockSize = 1 << 16
		if c.Version == RingV3 {
			c.BlockSize = 1 << 20
		}
	}
	if c.NumBlocks == 0 {
		c.NumBlocks = 64
	}
	if c.FrameSize == 0 {
		c.FrameSize = 2048
	}
	if c.RetireMs == 0 {
		c.RetireMs = 1
	}
	page := unix.Getpagesize()
	switch {
	case c.BlockSize < page || c.BlockSize%page != 0:
		return fmt.Errorf("ring block size %d; expected a multiple of the page size %d", c.BlockSize, page)
	case c.NumBlocks < 1 || c.NumBlocks > 1<<16:
		return fmt.Errorf("ring of %d blocks; expected 1..65536", c.NumBlocks)
	case c.FrameSize < 128 || c.FrameSize%16 != 0 || c.BlockSize%c.FrameSize != 0:
		return fmt.Errorf("ring frame size %d; expected a multiple of 16, at least 128, dividing the block size %d", c.FrameSize, c.BlockSize)
	case int64(c.BlockSize)*int64(c.NumBlocks) > 1<<31:
		return fmt.Errorf("ring of %d blocks of %d bytes exceeds 2 GiB", c.NumBlocks, c.BlockSize)
	}
	return nil
}

// RingStats are a receive socket's losses: the kernel's tpacket statistics (accumulated over reads, which
// reset them) and what the ring walker found.
type RingStats struct {
	Packets uint64 `json:"packets"`  // frames the kernel handled for this socket (tp_packets)
	Drops   uint64 `json:"drops"`    // frames the kernel dropped because the ring was full (tp_drops)
	FreezeQ uint64 `json:"freeze_q"` // V3: times the ring froze because no block was free (tp_freeze_q_cnt)
	// Truncated counts frames longer than the slot (V2) that the ring cut; Malformed ring entries skipped.
	Truncated uint64 `json:"truncated"`
	Malformed uint64 `json:"malformed"`
}

// Ring is an AF_PACKET socket bound to one interface with a memory-mapped receive ring. Frames handed to the
// callback of Poll point into the ring and are valid only during the call.
type Ring struct {
	fd      int
	ifindex int
	name    string
	cfg     RingConfig
	mem     []byte
	cur     int // next block (V3) or slot (V2)
	slots   int
	stats   RingStats
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ifIndex looks an interface up in the calling thread's network namespace.
func ifIndex(name string) (int, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, fmt.Errorf("interface %q: %w", name, err)
	}
	return ifc.Index, nil
}

// OpenRing opens a receive ring on interface ifname (in the calling thread's network namespace).
func OpenRing(ifname string, cfg RingConfig) (*Ring, error) {
	if err := cfg.normalize(); err != nil {
		return nil, fmt.Errorf("opening ring on %s: %w", ifname, err)
	}
	idx, err := ifIndex(ifname)
	if err != nil {
		return nil, fmt.Errorf("opening ring: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("opening ring on %s: AF_PACKET socket: %w (needs root or CAP_NET_RAW)", ifname, err)
	}
	r := &Ring{fd: fd, ifindex: idx, name: ifname, cfg: cfg}
	if err := r.setup(); err != nil {
		r.Close()
		return nil, fmt.Errorf("opening ring on %s: %w", ifname, err)
	}
	return r, nil
}

func (r *Ring) setup() error {
	c := &r.cfg
	ver := unix.TPACKET_V2
	if c.Version == RingV3 {
		ver = unix.TPACKET_V3
	}
	if err := unix.SetsockoptInt(r.fd, unix.SOL_PACKET, unix.PACKET_VERSION, ver); err != nil {
		return fmt.Errorf("PACKET_VERSION %d: %w", c.Version, err)
	}
	if c.IgnoreOutgoing {
		if err := unix.SetsockoptInt(r.fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
		}
	}
	frames := c.BlockSize / c.FrameSize * c.NumBlocks
	var err error
	if c.Version == RingV3 {
		req := unix.TpacketReq3{Block_size: uint32(c.BlockSize), Block_nr: uint32(c.NumBlocks),
			Frame_size: uint32(c.FrameSize), Frame_nr: uint32(frames), Retire_blk_tov: uint32(c.RetireMs)}
		err = unix.SetsockoptTpacketReq3(r.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req)
		r.slots = c.NumBlocks
	} else {
		req := unix.TpacketReq{Block_size: uint32(c.BlockSize), Block_nr: uint32(c.NumBlocks),
			Frame_size: uint32(c.FrameSize), Frame_nr: uint32(frames)}
		err = unix.SetsockoptTpacketReq(r.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req)
		r.slots = frames
	}
	if err != nil {
		return fmt.Errorf("PACKET_RX_RING (%d blocks of %d bytes): %w", c.NumBlocks, c.BlockSize, err)
	}
	r.mem, err = unix.Mmap(r.fd, 0, c.BlockSize*c.NumBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap of the ring: %w", err)
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: r.ifindex}
	if err := unix.Bind(r.fd, sa); err != nil {
		return fmt.Errorf("bind to ifindex %d: %w", r.ifindex, err)
	}
	if c.FanoutGroup != 0 {
		v := int(c.FanoutGroup) | c.FanoutMode<<16
		if err := unix.SetsockoptInt(r.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, v); err != nil {
			return fmt.Errorf("PACKET_FANOUT group %d mode %d: %w", c.FanoutGroup, c.FanoutMode, err)
		}
	}
	return nil
}

// Fd is the socket, for poll(2).
func (r *Ring) Fd() int { return r.fd }

// Name is the interface the ring is bound to.
func (r *Ring) Name() string { return r.name }

// Close unmaps the ring and closes the socket.
func (r *Ring) Close() error {
	var err error
	if r.mem != nil {
		err = unix.Munmap(r.mem)
		r.mem = nil
	}
	if r.fd >= 0 {
		if e := unix.Close(r.fd); err == nil {
			err = e
		}
		r.fd = -1
	}
	return err
}

// Stats reads the kernel's counters (which reading resets) into the running totals and returns the totals.
func (r *Ring) Stats() (RingStats, error) {
	st, err := unix.GetsockoptTpacketStatsV3(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return r.stats, fmt.Errorf("reading PACKET_STATISTICS of %s: %w", r.name, err)
	}
	r.stats.Packets += uint64(st.Packets)
	r.stats.Drops += uint64(st.Drops)
	r.stats.FreezeQ += uint64(st.Freeze_q_cnt)
	return r.stats, nil
}

// FrameFunc receives one frame: its captured bytes, the kernel's receive time (CLOCK_REALTIME ns) and the
// frame's length on the wire.
type FrameFunc func(frame []byte, tsNs int64, wireLen int)

// Poll hands every frame already in the ring to fn, without blocking, and returns how many it handed over.
// It stops after max frames (V2) or max blocks (V3) when max > 0.
func (r *Ring) Poll(max int, fn FrameFunc) int {
	if r.cfg.Version == RingV3 {
		return r.pollV3(max, fn)
	}
	return r.pollV2(max, fn)
}

// status returns the status word at the start of a slot or block header. The kernel writes it last (with a
// barrier), so an atomic load orders our reads of the rest after it.
func status(b []byte) *uint32 { return (*uint32)(unsafe.Pointer(&b[0])) }

func (r *Ring) pollV2(max int, fn FrameFunc) int {
	fs := r.cfg.FrameSize
	n := 0
	for max <= 0 || n < max {
		slot := r.mem[r.cur*fs : (r.cur+1)*fs]
		st := status(slot)
		s := atomic.LoadUint32(st)
		if s&unix.TP_STATUS_USER == 0 {
			break
		}
		frame, ts, wire, err := parseV2(slot)
		if err != nil {
			r.stats.Malformed++
		} else {
			if len(frame) < wire {
				r.stats.Truncated++
			}
			fn(frame, ts, wire)
		}
		atomic.StoreUint32(st, unix.TP_STATUS_KERNEL)
		r.cur++
		if r.cur == r.slots {
			r.cur = 0
		}
		n++
	}
	return n
}

// tpacket2_hdr and tpacket3_hdr field offsets (linux/if_packet.h), native byte order.
const (
	v2Len, v2Snap, v2Mac, v2Sec, v2Nsec = 4, 8, 12, 16, 20
	v3Next, v3Sec, v3Nsec, v3Snap       = 0, 4, 8, 12
	v3Len, v3Mac, v3HdrLen              = 16, 24, 48
	// tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1.
	bdStatus, bdNumPkts, bdFirst = 8, 12, 16
	bdHdrLen                     = 48
)

var ne = binary.NativeEndian

var errRing = errors.New("malformed ring entry")

// parseV2 validates one V2 slot and returns its frame.
func parseV2(slot []byte) (frame []byte, tsNs int64, wireLen int, err error) {
	if len(slot) < 32 {
		return nil, 0, 0, fmt.Errorf("slot of %d bytes is shorter than its 32-byte header: %w", len(slot), errRing)
	}
	wire := int(ne.Uint32(slot[v2Len:]))
	snap := int(ne.Uint32(slot[v2Snap:]))
	mac := int(ne.Uint16(slot[v2Mac:]))
	if mac < 32 || mac+snap > len(slot) {
		return nil, 0, 0, fmt.Errorf("slot frame at offset %d with %d bytes overruns the %d-byte slot: %w", mac, snap, len(slot), errRing)
	}
	ts := int64(ne.Uint32(slot[v2Sec:]))*1e9 + int64(ne.Uint32(slot[v2Nsec:]))
	return slot[mac : mac+snap], ts, wire, nil
}

func (r *Ring) pollV3(max int, fn FrameFunc) int {
	bs := r.cfg.BlockSize
	n := 0
	for blocks := 0; max <= 0 || blocks < max; blocks++ {
		block := r.mem[r.cur*bs : (r.cur+1)*bs]
		st := (*uint32)(unsafe.Pointer(&block[bdStatus]))
		if atomic.LoadUint32(st)&unix.TP_STATUS_USER == 0 {
			break
		}
		k, err := walkBlockV3(block, fn)
		n += k
		if err != nil {
			r.stats.Malformed++
		}
		atomic.StoreUint32(st, unix.TP_STATUS_KERNEL)
		r.cur++
		if r.cur == r.slots {
			r.cur = 0
		}
	}
	return n
}

// walkBlockV3 hands every frame of a retired V3 block to fn. It trusts nothing in the block: an offset or
// length that points outside it ends the walk with an error naming the frame and byte offset.
func walkBlockV3(block []byte, fn FrameFunc) (int, error) {
	if len(block) < bdHdrLen {
		return 0, fmt.Errorf("block of %d bytes is shorter than its %d-byte descriptor: %w", len(block), bdHdrLen, errRing)
	}
	num := int(ne.Uint32(block[bdNumPkts:]))
	off := int(ne.Uint32(block[bdFirst:]))
	for i := 0; i < num; i++ {
		if off < bdHdrLen || off > len(block)-v3HdrLen {
			return i, fmt.Errorf("frame %d of %d: header at byte %d lies outside the %d-byte block: %w", i, num, off, len(block), errRing)
		}
		h := block[off:]
		snap := int(ne.Uint32(h[v3Snap:]))
		mac := int(ne.Uint16(h[v3Mac:]))
		if mac < v3HdrLen || off+mac+snap > len(block) {
			return i, fmt.Errorf("frame %d of %d at byte %d: %d bytes at offset %d overrun the %d-byte block: %w", i, num, off, snap, mac, len(block), errRing)
		}
		ts := int64(ne.Uint32(h[v3Sec:]))*1e9 + int64(ne.Uint32(h[v3Nsec:]))
		fn(h[mac:mac+snap], ts, int(ne.Uint32(h[v3Len:])))
		next := int(ne.Uint32(h[v3Next:]))
		if next == 0 {
			if i != num-1 {
				return i + 1, fmt.Errorf("frame %d of %d at byte %d has no next frame: %w", i, num, off, errRing)
			}
			break
		}
		off += next
	}
	return num, nil
}
