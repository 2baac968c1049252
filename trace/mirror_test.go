package trace

import (
	"encoding/binary"
	"io"
	"path/filepath"
	"testing"

	"github.com/lumina-go/lumina/roce"
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
		if cs := binary.BigEndian.Uint16(f[ip+10:]); cs != roce.IPv4Checksum(f[ip:ip+20]) {
			t.Errorf("vlan=%v: IPv4 checksum %04x, roce computes %04x", vlan, cs, roce.IPv4Checksum(f[ip:ip+20]))
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
	v6[14] = 0x65
	threeTags := append([]byte{}, frame(false, 0)[:12]...)
	threeTags = append(threeTags, 0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3)
	threeTags = append(threeTags, frame(false, 0)[12:]...)
	for name, f := range map[string][]byte{
		"empty": nil, "short": frame(false, 0)[:20], "arp": arp, "bad version": v6, "three vlan tags": threeTags,
	} {
		if m, ok := DecodeMirror(f); ok {
			t.Errorf("%s: decoded %+v", name, m)
		}
	}
}

// TestRSSRewriteICRC takes real RoCEv2 frames, applies the switch's metadata
// and RSS rewrites, and checks the ICRC: broken by the port rewrite (the ICRC
// covers UDP ports) and valid again after UndoRSS and with the metadata fields
// (TTL, MACs are outside the ICRC) still in place.
func TestRSSRewriteICRC(t *testing.T) {
	f, err := Open(filepath.Join(realCaptures, "oferby-proxy_roce.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rp roce.Packet
	checked := 0
	for i := 0; ; i++ {
		p, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !rp.Decode(p.Data, p.OrigLen) || rp.Version != roce.RoCEv2 || rp.CheckICRC() != roce.ICRCGood {
			continue
		}
		fr := append([]byte(nil), p.Data...)
		if err := EncodeMirror(fr, Mirror{Event: EventDrop, Seq: uint64(i + 1), TimestampNs: uint64(i) * 1000}); err != nil {
			t.Fatal(err)
		}
		if err := RewriteRSS(fr, 9741, uint16(i*7919)); err != nil {
			t.Fatal(err)
		}
		if rp.Decode(fr, len(fr)) {
			t.Fatalf("packet %d: still decodes as RoCE on port 4791 after the rewrite", i)
		}
		if !rp.DecodePort(fr, len(fr), 9741) || rp.CheckICRC() != roce.ICRCBad {
			t.Fatalf("packet %d: ICRC %v after the port rewrite, want bad", i, rp.CheckICRC())
		}
		if UndoRSS(fr, 9742) {
			t.Fatalf("packet %d: undo with the wrong port succeeded", i)
		}
		if !UndoRSS(fr, 9741) {
			t.Fatalf("packet %d: undo failed", i)
		}
		if !rp.Decode(fr, len(fr)) || rp.CheckICRC() != roce.ICRCGood {
			t.Fatalf("packet %d: ICRC %v after undo, want good", i, rp.CheckICRC())
		}
		m, ok := DecodeMirror(fr)
		if !ok || m.Seq != uint64(i+1) || m.Event != EventDrop || m.TimestampNs != uint64(i)*1000 {
			t.Fatalf("packet %d: metadata %+v after undo", i, m)
		}
		u := rp.L3Offset + rp.IPHdrLen
		if !equalExceptUDPChecksum(p.Data[u:], fr[u:]) || binary.BigEndian.Uint16(fr[u+6:]) != 0 {
			t.Fatalf("packet %d: UDP and beyond differ from the original", i)
		}
		checked++
	}
	if checked != 105 { // PROVENANCE.md: 105 RoCEv2 frames, ICRC good on all
		t.Errorf("checked %d RoCEv2 frames, want 105", checked)
	}
}

func equalExceptUDPChecksum(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if i != 6 && i != 7 && a[i] != b[i] {
			return false
		}
	}
	return true
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
