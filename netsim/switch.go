package netsim

import (
	"encoding/binary"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/internal/des"
	"github.com/lumina-go/lumina/roce"
)

// DefaultSwitch forwards every frame unchanged and mirrors every RoCE frame with Lumina's metadata (event 0,
// sequence number in the source MAC, ingress timestamp in the destination MAC) to dumpers in round robin.
type DefaultSwitch struct {
	Dumpers int
	seq     uint64
	next    int
	mirror  []byte
	fwd     [1][]byte
}

// NewDefaultSwitch returns a DefaultSwitch mirroring to n dumpers (at least one).
func NewDefaultSwitch(n int) *DefaultSwitch {
	if n < 1 {
		n = 1
	}
	return &DefaultSwitch{Dumpers: n}
}

// Process implements inject.Logic.
func (d *DefaultSwitch) Process(now int64, inPort int, frame []byte, v *inject.Verdict) {
	d.fwd[0] = frame
	*v = inject.Verdict{Forward: d.fwd[:], OutPort: 1 - inPort, Dumper: -1, Conn: -1}
	if !isRoCEv2(frame) {
		return
	}
	v.RoCE = true
	d.seq++
	d.mirror = append(d.mirror[:0], frame...)
	writeMirrorMeta(d.mirror, d.seq, uint64(now), 0)
	v.Mirror = d.mirror
	v.Seq = d.seq
	v.Dumper = d.next
	d.next = (d.next + 1) % max(d.Dumpers, 1)
}

// Flush implements inject.Logic; the default switch holds nothing.
func (d *DefaultSwitch) Flush(int64) []inject.Held { return nil }

// isRoCEv2 reports whether an untagged IPv4 frame is UDP to 4791 (all frames netsim builds are untagged IPv4).
func isRoCEv2(f []byte) bool {
	return len(f) >= roce.EthernetLen+roce.IPv4Len+roce.UDPLen &&
		binary.BigEndian.Uint16(f[12:]) == roce.EtherTypeIPv4 && f[23] == 17 &&
		binary.BigEndian.Uint16(f[14+int(f[14]&0xf)*4+2:]) == roce.UDPPort
}

// writeMirrorMeta writes Lumina's mirror metadata into an untagged IPv4 frame: TTL = event (header checksum
// fixed), source MAC = 48-bit sequence number, destination MAC = 48-bit timestamp.
func writeMirrorMeta(f []byte, seq, ts uint64, ev uint8) {
	for i := 0; i < 6; i++ {
		f[i] = byte(ts >> (40 - 8*i))
		f[6+i] = byte(seq >> (40 - 8*i))
	}
	ih := f[14 : 14+int(f[14]&0xf)*4]
	old := binary.BigEndian.Uint16(ih[8:])
	ih[8] = ev
	binary.BigEndian.PutUint16(ih[10:], csumUpdate(binary.BigEndian.Uint16(ih[10:]), old, binary.BigEndian.Uint16(ih[8:])))
}

// switchNode is the simulated switch: ingress counters, the logic, mirroring at ingress (before any drop), and
// a fixed pipeline latency before the egress link.
type switchNode struct {
	logic     inject.Logic
	def       *DefaultSwitch // logic, when it is the default: mirrored in place, without a copy
	v         inject.Verdict
	latencyNs int64
	ports     [2]inject.PortCounters
	out       [2]*link
}

func (sw *switchNode) arrive(s *sim, port int, f int32) {
	frame := s.frames.bufs[f]
	roceFrame := isRoCEv2(frame)
	if roceFrame {
		sw.ports[port].RxRoCE++
	}
	if sw.def != nil {
		sw.arriveDefault(s, port, f, roceFrame)
		return
	}
	v := &sw.v
	sw.logic.Process(s.now, port, frame, v)
	if len(v.Mirror) > 0 {
		sw.ports[port].Mirrored++
		if s.cfg.Dump != nil {
			s.cfg.Dump(v.Dumper, s.now, v.Mirror)
		}
	}
	pristine := s.frames.pristine[f] && v.Event == roce.EventNone
	reused := false
	outPort := v.OutPort
	if outPort != 0 && outPort != 1 {
		v.Forward = v.Forward[:0]
	}
	for i, out := range v.Forward {
		slot, isRoCE := int32(-1), roceFrame
		if !reused && len(out) == len(frame) && len(out) > 0 && &out[0] == &frame[0] {
			slot, reused = f, true
			s.frames.pristine[slot] = pristine
		} else {
			// Another frame (a duplicate or a released reordered one): the receiver decodes it afresh.
			slot = s.frames.get()
			s.frames.tmpl[slot] = nil
			s.frames.bufs[slot] = append(s.frames.bufs[slot][:0], out...)
			isRoCE = isRoCEv2(out)
		}
		at := s.now + sw.latencyNs
		if i == 0 && v.DelayNs > 0 {
			// A delayed frame takes its place in the egress FIFO when it is released.
			s.q.Push(des.Event{At: at + v.DelayNs, Kind: evSwitchFwd, Obj: int32(outPort), Arg: slot})
			continue
		}
		sw.forward(s, outPort, slot, at, isRoCE)
	}
	if !reused {
		s.frames.put(f)
	}
}

// arriveDefault is DefaultSwitch's behavior without its copy: the metadata is written into the frame for the
// dump and the original bytes restored before it is forwarded. Same output as DefaultSwitch.Process.
func (sw *switchNode) arriveDefault(s *sim, port int, f int32, roceFrame bool) {
	frame := s.frames.bufs[f]
	if d := sw.def; roceFrame {
		d.seq++
		sw.ports[port].Mirrored++
		if s.cfg.Dump != nil {
			var save [12]byte
			copy(save[:], frame[:12])
			ih := frame[14 : 14+int(frame[14]&0xf)*4]
			ttl, ck := ih[8], [2]byte{ih[10], ih[11]}
			writeMirrorMeta(frame, d.seq, uint64(s.now), 0)
			s.cfg.Dump(d.next, s.now, frame)
			copy(frame[:12], save[:])
			ih[8], ih[10], ih[11] = ttl, ck[0], ck[1]
		}
		d.next = (d.next + 1) % max(d.Dumpers, 1)
	}
	sw.forward(s, 1-port, f, s.now+sw.latencyNs, roceFrame)
}

// forward puts a frame, ready to leave at time ready, on the egress link of port.
func (sw *switchNode) forward(s *sim, port int, f int32, ready int64, isRoCE bool) {
	if isRoCE {
		sw.ports[port].TxRoCE++
	}
	s.reserve(sw.out[port], f, ready)
}
