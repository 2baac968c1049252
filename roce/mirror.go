package roce

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// EventType is the event the switch applied to a packet, carried in the IPv4
// TTL of its mirrored copy. The injector's intents name their action with the
// same type, so what an intent does and what the trace says happened are one
// number.
type EventType uint8

// Event types. 0-3 are the Lumina reference's (1 drop, 2 ecn, 3 corrupt);
// 4-7 are this project's.
const (
	EventNone      EventType = 0
	EventDrop      EventType = 1
	EventECN       EventType = 2
	EventCorrupt   EventType = 3
	EventDelay     EventType = 4
	EventReorder   EventType = 5
	EventDuplicate EventType = 6
	EventRewrite   EventType = 7

	// NumEvents bounds per-event counters: every event type is below it.
	NumEvents = int(EventRewrite) + 1
)

var eventNames = [...]string{"none", "drop", "ecn", "corrupt", "delay", "reorder", "duplicate", "rewrite"}

func (e EventType) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return "event-" + strconv.Itoa(int(e))
}

// MarshalText makes the event appear by name in JSON results.
func (e EventType) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads an event by name (intents travel as JSON to the remote testbed's switch agent).
func (e *EventType) UnmarshalText(b []byte) error {
	if v, ok := ParseEventType(string(b)); ok {
		*e = v
		return nil
	}
	return fmt.Errorf("action %q; expected one of %v", b, eventNames)
}

// ParseEventType is the inverse of EventType.String for the named events.
func ParseEventType(s string) (EventType, bool) {
	for i, n := range eventNames {
		if n == s {
			return EventType(i), true
		}
	}
	return 0, false
}

// Mirror is the metadata Lumina's switch writes into a mirrored copy.
type Mirror struct {
	Event       EventType // IPv4 TTL; IPv6 or GRH hop limit
	Seq         uint64    // mirror sequence number: Ethernet source MAC, 48-bit big-endian
	TimestampNs uint64    // switch ingress time in ns: Ethernet destination MAC, 48-bit big-endian
}

// MirrorMax is the largest mirror sequence number and timestamp: both travel in a 48-bit MAC address.
const MirrorMax = 1<<48 - 1

const ipProtoUDP = 17

// ipv4Offset returns the offset of the IPv4 header in an Ethernet frame,
// skipping up to two VLAN tags, and whether at least minLen bytes of a
// version-4 header are present.
func ipv4Offset(frame []byte, minLen int) (int, bool) {
	off := 12
	for tags := 0; ; tags++ {
		if len(frame) < off+2 {
			return 0, false
		}
		et := binary.BigEndian.Uint16(frame[off:])
		if et == EtherTypeIPv4 {
			off += 2
			break
		}
		if tags == 2 || (et != EtherTypeVLAN && et != EtherTypeQinQ && et != EtherTypeQinQ2) {
			return 0, false
		}
		off += 4
	}
	if len(frame) < off+minLen || frame[off]>>4 != 4 {
		return 0, false
	}
	return off, true
}

// DecodeMirror reads Lumina's metadata from a mirrored Ethernet frame (optionally VLAN-tagged) carrying IPv4
// (the event in the TTL, EncodeMirror), or IPv6 or RoCEv1 (the event in the IPv6 or GRH hop limit,
// EncodeMirrorNoChecksum). It returns false for anything else.
func DecodeMirror(frame []byte) (Mirror, bool) {
	hop := -1
	if ip, ok := ipv4Offset(frame, 9); ok {
		hop = ip + 8
	} else if l3, ok := ipv6Offset(frame); ok {
		hop = l3 + 7
	}
	if hop < 0 {
		return Mirror{}, false
	}
	return Mirror{
		Event:       EventType(frame[hop]),
		Seq:         get48(frame[6:]),
		TimestampNs: get48(frame[0:]),
	}, true
}

// ipv6Offset returns the offset of the IPv6 header or RoCEv1 GRH (both version 6, the hop limit at byte 7) in
// an Ethernet frame, skipping up to two VLAN tags, and whether its first 8 bytes are present.
func ipv6Offset(frame []byte) (int, bool) {
	off := 12
	for tags := 0; ; tags++ {
		if len(frame) < off+2 {
			return 0, false
		}
		et := binary.BigEndian.Uint16(frame[off:])
		if et == EtherTypeIPv6 || et == EtherTypeRoCEv1 {
			off += 2
			break
		}
		if tags == 2 || (et != EtherTypeVLAN && et != EtherTypeQinQ && et != EtherTypeQinQ2) {
			return 0, false
		}
		off += 4
	}
	if len(frame) < off+8 || frame[off]>>4 != 6 {
		return 0, false
	}
	return off, true
}

// EncodeMirror writes m into frame in place, as the switch does on a mirrored
// copy: TTL = event (with the IPv4 header checksum fixed), source MAC =
// sequence number, destination MAC = timestamp. Seq and TimestampNs must fit
// 48 bits.
func EncodeMirror(frame []byte, m Mirror) error {
	if m.Seq > MirrorMax || m.TimestampNs > MirrorMax {
		return fmt.Errorf("encoding mirror metadata: seq %d or timestamp %d does not fit 48 bits", m.Seq, m.TimestampNs)
	}
	ip, ihl, err := ipv4Header(frame)
	if err != nil {
		return fmt.Errorf("encoding mirror metadata: %w", err)
	}
	put48(frame[0:], m.TimestampNs)
	put48(frame[6:], m.Seq)
	frame[ip+8] = byte(m.Event)
	binary.BigEndian.PutUint16(frame[ip+10:], IPv4Checksum(frame[ip:ip+ihl]))
	return nil
}

// EncodeMirrorNoChecksum writes m into an IPv6 or RoCEv1 frame whose L3 header (IPv6 or GRH) starts at byte
// l3: the event goes into the hop limit (byte 7 of both headers, which have no checksum to fix), the sequence
// number and timestamp into the MACs as for IPv4. These frames are not RSS-rewritten: UndoRSS handles IPv4 only.
func EncodeMirrorNoChecksum(frame []byte, l3 int, m Mirror) error {
	if m.Seq > MirrorMax || m.TimestampNs > MirrorMax {
		return fmt.Errorf("encoding mirror metadata: seq %d or timestamp %d does not fit 48 bits", m.Seq, m.TimestampNs)
	}
	if l3 < EthernetLen-2 || len(frame) < l3+8 {
		return fmt.Errorf("encoding mirror metadata: hop limit at byte %d is outside the %d-byte frame", l3+7, len(frame))
	}
	put48(frame[0:], m.TimestampNs)
	put48(frame[6:], m.Seq)
	frame[l3+7] = byte(m.Event)
	return nil
}

// ipv4Header locates a complete IPv4 header and returns its offset and length.
func ipv4Header(frame []byte) (off, ihl int, err error) {
	off, ok := ipv4Offset(frame, 20)
	if !ok {
		return 0, 0, fmt.Errorf("frame of %d bytes is not Ethernet (optionally VLAN-tagged) with a complete IPv4 header", len(frame))
	}
	ihl = int(frame[off]&0x0f) * 4
	if ihl < 20 || len(frame) < off+ihl {
		return 0, 0, fmt.Errorf("IPv4 header length %d at byte %d is invalid or cut (frame has %d bytes)", ihl, off, len(frame))
	}
	return off, ihl, nil
}

// udpHeader locates the UDP header of an IPv4 frame.
func udpHeader(frame []byte) (int, error) {
	ip, ihl, err := ipv4Header(frame)
	if err != nil {
		return 0, err
	}
	if frame[ip+9] != ipProtoUDP {
		return 0, fmt.Errorf("IPv4 protocol is %d, not UDP (17)", frame[ip+9])
	}
	u := ip + ihl
	if len(frame) < u+8 {
		return 0, fmt.Errorf("UDP header at byte %d is cut (frame has %d bytes)", u, len(frame))
	}
	return u, nil
}

// RewriteRSS does the switch's rewrite that spreads mirrored copies over a
// dumper's receive queues: the UDP destination port becomes port, the UDP
// checksum field keeps the original source port, and the source port becomes
// rnd (the caller's pseudo-random value).
func RewriteRSS(frame []byte, port, rnd uint16) error {
	u, err := udpHeader(frame)
	if err != nil {
		return fmt.Errorf("rewriting UDP ports: %w", err)
	}
	copy(frame[u+6:u+8], frame[u:u+2]) // checksum field <- original sport
	binary.BigEndian.PutUint16(frame[u:], rnd)
	binary.BigEndian.PutUint16(frame[u+2:], port)
	return nil
}

// UndoRSS is the dumper's undo of RewriteRSS: if the UDP destination port is
// rewritePort, the source port is restored from the checksum field, the
// destination port set back to 4791 and the checksum to 0. It reports whether
// the frame was rewritten (and is now restored).
func UndoRSS(frame []byte, rewritePort uint16) bool {
	u, err := udpHeader(frame)
	if err != nil || binary.BigEndian.Uint16(frame[u+2:]) != rewritePort {
		return false
	}
	copy(frame[u:u+2], frame[u+6:u+8])
	binary.BigEndian.PutUint16(frame[u+2:], UDPPort)
	frame[u+6], frame[u+7] = 0, 0
	return true
}

func get48(b []byte) uint64 {
	_ = b[5]
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}

func put48(b []byte, v uint64) {
	_ = b[5]
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}
