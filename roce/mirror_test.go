package roce

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

func TestEventTypeString(t *testing.T) {
	want := []string{"none", "drop", "ecn", "corrupt", "delay", "reorder", "duplicate", "rewrite"}
	for i, w := range want {
		if got := EventType(i).String(); got != w {
			t.Errorf("EventType(%d) = %q, want %q", i, got, w)
		}
		if e, ok := ParseEventType(w); !ok || e != EventType(i) {
			t.Errorf("ParseEventType(%q) = %d %v", w, e, ok)
		}
	}
	if got := EventType(200).String(); got != "event-200" {
		t.Errorf("EventType(200) = %q", got)
	}
	if _, ok := ParseEventType("bit-error"); ok {
		t.Error("ParseEventType accepted an unknown name")
	}
}

func TestMirrorRoundTrip(t *testing.T) {
	for _, vlan := range []bool{false, true} {
		f := frame(vlan, 20)
		m := Mirror{Event: EventECN, Seq: 0xfedcba987654, TimestampNs: 0x123456789abc}
		if err := EncodeMirror(f, m); err != nil {
			t.Fatal(err)
		}
		got, ok := DecodeMirror(f)
		if !ok || got != m {
			t.Errorf("vlan=%v: decoded %+v %v, want %+v", vlan, got, ok, m)
		}
		ip := 14
		if vlan {
			ip = 18
		}
		// Layout from the reference: TTL byte, MACs big-endian.
		if f[ip+8] != 2 || f[6] != 0xfe || f[11] != 0x54 || f[0] != 0x12 || f[5] != 0xbc {
			t.Errorf("vlan=%v: wrong layout % x", vlan, f[:ip+12])
		}
		if cs := binary.BigEndian.Uint16(f[ip+10:]); cs != IPv4Checksum(f[ip:ip+20]) {
			t.Errorf("vlan=%v: IPv4 checksum %04x, roce computes %04x", vlan, cs, IPv4Checksum(f[ip:ip+20]))
		}
	}
	if err := EncodeMirror(frame(false, 0), Mirror{Seq: 1 << 48}); err == nil {
		t.Error("49-bit sequence number accepted")
	}
	if err := EncodeMirror(frame(false, 0)[:30], Mirror{}); err == nil {
		t.Error("cut IPv4 header accepted")
	}
}

func TestDecodeMirrorRejects(t *testing.T) {
	arp := frame(false, 0)
	arp[12], arp[13] = 0x08, 0x06
	v6 := frame(false, 0)
	v6[14] = 0x65 // version 6 in an IPv4 ethertype
	v4in6 := frame(false, 0)
	v4in6[12], v4in6[13] = 0x86, 0xdd // version 4 in an IPv6 ethertype
	threeTags := append([]byte{}, frame(false, 0)[:12]...)
	threeTags = append(threeTags, 0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3)
	threeTags = append(threeTags, frame(false, 0)[12:]...)
	for name, f := range map[string][]byte{
		"empty": nil, "short": frame(false, 0)[:20], "arp": arp, "bad version": v6, "v4 in v6": v4in6, "three vlan tags": threeTags,
	} {
		if m, ok := DecodeMirror(f); ok {
			t.Errorf("%s: decoded %+v", name, m)
		}
	}
}

func TestRewriteRSSRejects(t *testing.T) {
	tcp := frame(false, 8)
	tcp[14+9] = 6
	if err := RewriteRSS(tcp, 9741, 1); err == nil {
		t.Error("TCP frame accepted")
	}
	if err := RewriteRSS(frame(false, 0)[:40], 9741, 1); err == nil {
		t.Error("cut UDP header accepted")
	}
	if UndoRSS(frame(false, 0)[:20], 9741) {
		t.Error("undo on a short frame succeeded")
	}
}

// frame builds an Ethernet/IPv4/UDP RoCEv2 frame (a SEND carrying payload bytes, optionally VLAN-tagged) with
// the package's own encoder.
func frame(vlan bool, payload int) []byte {
	p := Packet{Version: RoCEv2, SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"),
		TTL: 64, TOS: 2, UDPSrc: 0xc000, BTH: BTH{Opcode: RCSendOnly, DestQP: 0x12, PKey: 0xffff}, PayloadLen: payload}
	if vlan {
		p.NumVLANs, p.VLANs[0] = 1, VLAN{TPID: EtherTypeVLAN, TCI: 0x2005}
	}
	b, err := p.AppendTo(nil)
	if err != nil {
		panic(err) // a fixed, valid packet: a failure is a bug of the encoder, which the other tests report
	}
	return b
}

func TestEncodeMirrorNoChecksum(t *testing.T) {
	// An IPv6 frame: the event goes into the hop limit (byte 7 of the IPv6 header), nothing else of L3 changes.
	f := make([]byte, EthernetLen+IPv6Len+UDPLen)
	binary.BigEndian.PutUint16(f[12:], EtherTypeIPv6)
	f[EthernetLen] = 0x60
	f[EthernetLen+7] = 64
	m := Mirror{Event: EventReorder, Seq: 0x0102030405, TimestampNs: MirrorMax}
	if err := EncodeMirrorNoChecksum(f, EthernetLen, m); err != nil {
		t.Fatal(err)
	}
	if f[EthernetLen+7] != byte(EventReorder) || get48(f[6:]) != m.Seq || get48(f[0:]) != m.TimestampNs {
		t.Errorf("wrong layout % x", f[:EthernetLen+8])
	}
	if got, ok := DecodeMirror(f); !ok || got != m {
		t.Errorf("IPv6: decoded %+v %v; want %+v", got, ok, m)
	}
	// RoCEv1 (GRH, hop limit at byte 7), VLAN-tagged IPv6, both built by the package's encoder.
	for name, p := range map[string]Packet{
		"rocev1":    {Version: RoCEv1, SrcIP: netip.MustParseAddr("fe80::1"), DstIP: netip.MustParseAddr("fe80::2"), TTL: 64},
		"vlan ipv6": {Version: RoCEv2, IPv6: true, SrcIP: netip.MustParseAddr("fd00::1"), DstIP: netip.MustParseAddr("fd00::2"), TTL: 64, NumVLANs: 1, VLANs: [2]VLAN{{TPID: EtherTypeVLAN, TCI: 5}}},
	} {
		p.BTH = BTH{Opcode: RCSendOnly, DestQP: 0x12}
		b, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		var d Packet
		d.Decode(b, len(b))
		if err := EncodeMirrorNoChecksum(b, d.L3Offset, m); err != nil {
			t.Fatal(err)
		}
		if got, ok := DecodeMirror(b); !ok || got != m {
			t.Errorf("%s: decoded %+v %v; want %+v", name, got, ok, m)
		}
	}
	if _, ok := DecodeMirror(f[:EthernetLen+7]); ok {
		t.Error("IPv6 frame cut before the hop limit decoded")
	}
	if err := EncodeMirrorNoChecksum(f, EthernetLen, Mirror{Seq: MirrorMax + 1}); err == nil {
		t.Error("49-bit sequence number accepted")
	}
	if err := EncodeMirrorNoChecksum(f[:EthernetLen+7], EthernetLen, Mirror{}); err == nil {
		t.Error("frame cut before the hop limit accepted")
	}
}

func TestEventTypeMarshalText(t *testing.T) {
	b, err := EventDuplicate.MarshalText()
	if err != nil || string(b) != "duplicate" {
		t.Errorf("MarshalText = %q, %v; want duplicate", b, err)
	}
}
