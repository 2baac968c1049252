package trace

import (
	"encoding/binary"
	"io"
	"path/filepath"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

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
		if err := roce.EncodeMirror(fr, roce.Mirror{Event: roce.EventDrop, Seq: uint64(i + 1), TimestampNs: uint64(i) * 1000}); err != nil {
			t.Fatal(err)
		}
		if err := roce.RewriteRSS(fr, 9741, uint16(i*7919)); err != nil {
			t.Fatal(err)
		}
		if rp.Decode(fr, len(fr)) {
			t.Fatalf("packet %d: still decodes as RoCE on port 4791 after the rewrite", i)
		}
		if !rp.DecodePort(fr, len(fr), 9741) || rp.CheckICRC() != roce.ICRCBad {
			t.Fatalf("packet %d: ICRC %v after the port rewrite, want bad", i, rp.CheckICRC())
		}
		if roce.UndoRSS(fr, 9742) {
			t.Fatalf("packet %d: undo with the wrong port succeeded", i)
		}
		if !roce.UndoRSS(fr, 9741) {
			t.Fatalf("packet %d: undo failed", i)
		}
		if !rp.Decode(fr, len(fr)) || rp.CheckICRC() != roce.ICRCGood {
			t.Fatalf("packet %d: ICRC %v after undo, want good", i, rp.CheckICRC())
		}
		m, ok := roce.DecodeMirror(fr)
		if !ok || m.Seq != uint64(i+1) || m.Event != roce.EventDrop || m.TimestampNs != uint64(i)*1000 {
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
