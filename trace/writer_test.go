package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestPcapWriterRoundTrip(t *testing.T) {
	for _, nano := range []bool{false, true} {
		var buf bytes.Buffer
		w, err := NewPcapWriter(&buf, PcapWriterOptions{Nanosecond: nano, SnapLen: 128})
		if err != nil {
			t.Fatal(err)
		}
		in := []struct {
			ts   int64
			data []byte
			orig int
		}{
			{1_700_000_000_123_456_789, frame(false, 10), 0},
			{1_700_000_000_123_457_000, frame(true, 300), 0}, // truncated to 128
			{5, []byte{1}, 60},
		}
		for _, p := range in {
			if err := w.WritePacket(p.ts, p.data, p.orig); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(0, nil, 0); !errors.Is(err, errClosed) {
			t.Errorf("write after close: %v", err)
		}
		f, err := NewReader(&buf, "rt.pcap")
		if err != nil {
			t.Fatal(err)
		}
		if lt, _ := f.LinkType(0); lt != LinkTypeEthernet || f.Nanosecond() != nano || f.Interfaces()[0].SnapLen != 128 {
			t.Errorf("header: linktype %d nano %v snap %d", lt, f.Nanosecond(), f.Interfaces()[0].SnapLen)
		}
		out, err := readAll(t, f)
		if err != nil || len(out) != len(in) {
			t.Fatalf("nano=%v: %d packets, %v", nano, len(out), err)
		}
		for i, p := range in {
			wantTs, wantData, wantOrig := p.ts, p.data, p.orig
			if !nano {
				wantTs -= wantTs % 1000
			}
			if len(wantData) > 128 {
				wantData = wantData[:128]
			}
			if wantOrig == 0 {
				wantOrig = len(p.data)
			}
			if out[i].Timestamp != wantTs || !bytes.Equal(out[i].Data, wantData) || out[i].OrigLen != wantOrig {
				t.Errorf("nano=%v packet %d: ts %d len %d orig %d; want %d %d %d", nano, i,
					out[i].Timestamp, out[i].CapLen, out[i].OrigLen, wantTs, len(wantData), wantOrig)
			}
		}
	}
}

func TestPcapWriterRejects(t *testing.T) {
	w, _ := NewPcapWriter(&bytes.Buffer{}, PcapWriterOptions{})
	if err := w.WritePacket(-1, nil, 0); err == nil || !strings.Contains(err.Error(), "outside the pcap range") {
		t.Errorf("negative timestamp: %v", err)
	}
	if err := w.WritePacket(1<<62, nil, 0); err == nil {
		t.Error("timestamp beyond 2^32 s accepted")
	}
}

func TestPcapngWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewPcapngWriter(&buf, PcapngWriterOptions{
		Comment:    "lumina run seed 7",
		Interfaces: []InterfaceSpec{{Name: "switch-mirror"}, {LinkType: LinkTypeRaw, SnapLen: 16}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.AddInterface(InterfaceSpec{LinkType: LinkTypeERF})
	if err != nil || id != 2 {
		t.Fatalf("AddInterface = %d, %v", id, err)
	}
	type pk struct {
		iface   int
		ts      int64
		data    []byte
		orig    int
		comment string
	}
	in := []pk{
		{0, 1_700_000_000_123_456_789, frame(false, 3), 0, "event=drop iter=1 seq=42"},
		{1, 7, frame(false, 40), 0, ""},
		{2, 1 << 40, []byte{1, 2, 3}, 9, "x"},
		{0, 8, []byte{}, 0, strings.Repeat("long comment ", 50)},
	}
	for _, p := range in {
		if err := w.WritePacket(p.iface, p.ts, p.data, p.orig, p.comment); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WritePacket(3, 0, nil, 0, ""); err == nil || !strings.Contains(err.Error(), "interface 3 not declared (have 3)") {
		t.Errorf("undeclared interface: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw := append([]byte(nil), buf.Bytes()...)
	f, err := NewReader(&buf, "rt.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	out, err := readAll(t, f)
	if err != nil || len(out) != len(in) {
		t.Fatalf("%d packets, %v", len(out), err)
	}
	for i, p := range in {
		data := p.data
		if p.iface == 1 {
			data = data[:16]
		}
		orig := p.orig
		if orig == 0 {
			orig = len(p.data) // the wire length, even where the snaplen cut the data
		}
		o := out[i]
		if o.Interface != p.iface || o.Timestamp != p.ts || !bytes.Equal(o.Data, data) || o.OrigLen != orig || o.Comment != p.comment {
			t.Errorf("packet %d: %+v, want %+v", i, o, p)
		}
	}
	ifs := f.Interfaces()
	if len(ifs) != 3 || ifs[0].Name != "switch-mirror" || ifs[0].LinkType != 1 || ifs[1].LinkType != LinkTypeRaw ||
		ifs[1].SnapLen != 16 || ifs[2].LinkType != LinkTypeERF || ifs[0].TsResolution != "1e-9" {
		t.Errorf("interfaces %+v", ifs)
	}
	// Structure: SHB carries shb_userappl "lumina"; every block length is a multiple of 4
	// and matches its trailer (checked by the reader above); the SHB is little-endian.
	if binary.LittleEndian.Uint32(raw[8:]) != 0x1a2b3c4d || !bytes.Contains(raw[:binary.LittleEndian.Uint32(raw[4:])], []byte("\x04\x00\x06\x00lumina\x00\x00")) {
		t.Errorf("section header lacks shb_userappl \"lumina\": % x", raw[:64])
	}
}

// WritePacketBytes writes what WritePacket writes: comments of every length modulo 4, and none.
func TestWritePacketBytesEqualsWritePacket(t *testing.T) {
	var a, b bytes.Buffer
	opts := PcapngWriterOptions{Interfaces: []InterfaceSpec{{LinkType: LinkTypeEthernet, SnapLen: 65535}}}
	wa, err := NewPcapngWriter(&a, opts)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := NewPcapngWriter(&b, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"", "e", "ev", "eve", "even", "event=drop seq=12 qp=3"} {
		data := bytes.Repeat([]byte{byte(i)}, 60+i)
		if err := wa.WritePacket(0, int64(i)*1000, data, 0, c); err != nil {
			t.Fatal(err)
		}
		if err := wb.WritePacketBytes(0, int64(i)*1000, data, 0, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wa.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if a.Len() < 400 || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("WritePacketBytes wrote %d bytes, WritePacket %d; equal %v", b.Len(), a.Len(), bytes.Equal(a.Bytes(), b.Bytes()))
	}
}
