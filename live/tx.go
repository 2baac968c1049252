package live

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TxStats count what a transmit socket sent and lost.
type TxStats struct {
	Frames uint64 `json:"frames"`
	Bytes  uint64 `json:"bytes"`
	Errors uint64 `json:"errors"` // frames the kernel refused (ENOBUFS, EMSGSIZE, ...)
}

// Tx is a transmit-only AF_PACKET socket bound to one interface. Frames are copied into a batch and sent with
// one sendmmsg(2) per batch: the copy is cheap next to a system call per frame, and it frees the caller's
// buffers (ring slots, the injector's Verdict) at once.
type Tx struct {
	fd    int
	name  string
	arena []byte
	lens  []int
	iov   []unix.Iovec
	hdrs  []unix.Mmsghdr
	stats TxStats
	// lastErr is the last send error, kept for the status report.
	lastErr error
}

// DefaultTxBatch is how many frames a Tx batches before it sends.
const DefaultTxBatch = 64

const maxFrame = 9216 // the largest frame a batch slot holds (jumbo MTU)

// OpenTx opens a transmit socket on ifname in the calling thread's network namespace. The socket's protocol is
// 0, so it receives nothing; PACKET_QDISC_BYPASS hands frames straight to the driver as a switch would.
func OpenTx(ifname string, batch int) (*Tx, error) {
	if batch <= 0 {
		batch = DefaultTxBatch
	}
	idx, err := ifIndex(ifname)
	if err != nil {
		return nil, fmt.Errorf("opening transmit socket: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening transmit socket on %s: %w (needs root or CAP_NET_RAW)", ifname, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: idx}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening transmit socket on %s: bind: %w", ifname, err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	t := &Tx{fd: fd, name: ifname, arena: make([]byte, 0, batch*2048), lens: make([]int, 0, batch),
		iov: make([]unix.Iovec, batch), hdrs: make([]unix.Mmsghdr, batch)}
	return t, nil
}

// Send queues a copy of frame; the batch goes out when full or at Flush.
func (t *Tx) Send(frame []byte) {
	if len(frame) > maxFrame {
		t.stats.Errors++
		t.lastErr = fmt.Errorf("frame of %d bytes exceeds %d", len(frame), maxFrame)
		return
	}
	if len(t.lens) == cap(t.lens) || len(t.arena)+len(frame) > cap(t.arena) {
		t.Flush()
	}
	t.arena = append(t.arena, frame...)
	t.lens = append(t.lens, len(frame))
}

// Pending is the number of frames waiting in the batch.
func (t *Tx) Pending() int { return len(t.lens) }

// Flush sends the batch.
func (t *Tx) Flush() {
	n := len(t.lens)
	if n == 0 {
		return
	}
	off := 0
	for i, l := range t.lens {
		t.iov[i].Base = &t.arena[off]
		t.iov[i].SetLen(l)
		t.hdrs[i] = unix.Mmsghdr{}
		t.hdrs[i].Hdr.Iov = &t.iov[i]
		t.hdrs[i].Hdr.SetIovlen(1)
		off += l
	}
	done := 0
	for done < n {
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(t.fd), uintptr(unsafe.Pointer(&t.hdrs[done])), uintptr(n-done), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			// The frame at the head of what is left failed; count it and go on with the rest.
			t.stats.Errors++
			t.lastErr = fmt.Errorf("sendmmsg on %s: %w", t.name, errno)
			done++
			continue
		}
		for i := done; i < done+int(r); i++ {
			t.stats.Bytes += uint64(t.lens[i])
		}
		t.stats.Frames += uint64(r)
		done += int(r)
	}
	t.arena = t.arena[:0]
	t.lens = t.lens[:0]
}

// Stats returns the counts so far.
func (t *Tx) Stats() TxStats { return t.stats }

// Close flushes and closes the socket.
func (t *Tx) Close() error {
	if t.fd < 0 {
		return nil
	}
	t.Flush()
	err := unix.Close(t.fd)
	t.fd = -1
	return err
}
