package trace

import (
	"bytes"
	"io"
	"testing"
)

// TestSetBuffersKeepsPackets: with SetBuffers, every packet a File returned keeps its bytes to the end (the
// File never writes into a buffer it handed bytes out of), the packets are those NewReader gives, buffers are
// retired as the File moves on, and records larger than a buffer (up to the maximum) still read whole.
func TestSetBuffersKeepsPackets(t *testing.T) {
	b := newPcapBuilder(false, true, 0, 1)
	var sizes []int
	for i := 0; i < 3000; i++ {
		n := 60 + (i*37)%1400
		switch i {
		case 1000:
			n = MaxCapLen
		case 2000:
			n = 150_000
		}
		sizes = append(sizes, n)
		d := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, n/2+1)[:n]
		b.record(uint32(i), uint32(i), d, uint32(n))
	}
	for _, chunked := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(b.buf.Bytes())
		if chunked {
			r = iotestOneByte{r}
		}
		f, err := NewReader(r, "keep.pcap")
		if err != nil {
			t.Fatal(err)
		}
		gets, retired := 0, 0
		f.SetBuffers(func(min int) []byte { gets++; return make([]byte, max(min, 32<<10)) },
			func([]byte) { retired++ })
		var kept []*Packet
		for {
			p, err := f.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			q := *p
			kept = append(kept, &q) // Data not copied: it must stay valid
		}
		ref, err := NewReader(bytes.NewReader(b.buf.Bytes()), "ref.pcap")
		if err != nil {
			t.Fatal(err)
		}
		want, err := readAll(t, ref)
		if err != nil || len(want) != len(sizes) || len(kept) != len(want) {
			t.Fatalf("chunked %v: %d packets kept, %d read by NewReader (%v), want %d", chunked, len(kept), len(want), err, len(sizes))
		}
		for i, p := range kept {
			w := want[i]
			if !bytes.Equal(p.Data, w.Data) || p.CapLen != sizes[i] || p.Offset != w.Offset || p.Timestamp != w.Timestamp || p.Index != w.Index {
				t.Fatalf("chunked %v: packet %d (caplen %d) changed after it was returned", chunked, i, p.CapLen)
			}
		}
		if gets < 10 || retired != gets {
			t.Errorf("chunked %v: %d buffers taken, %d retired: want many, each retired when the next is taken", chunked, gets, retired)
		}
	}
}

// TestSetBuffersSkipsInPlace: under SetBuffers, skipping unknown pcapng blocks much larger than the buffer
// reuses the room after the last packet instead of taking a new buffer per buffer's length (each taken buffer
// stays held by whoever holds the packets before it), and the packets, offsets and errors are NewReader's.
func TestSetBuffersSkipsInPlace(t *testing.T) {
	b := &ngBuilder{}
	b.shb(false).idb(1, 65535)
	const packets, unknown = 200, 1 << 20
	for i := 0; i < packets; i++ {
		b.epb(0, uint64(i), bytes.Repeat([]byte{byte(i)}, 60+i%7), 60+uint32(i%7))
		b.block(0xBAD, make([]byte, unknown+4*(i%3)))
	}
	whole := b.buf.Bytes()
	for _, chunked := range []bool{false, true} {
		for _, cut := range []int{0, 5000} { // a capture cut inside its last unknown block
			data := whole[:len(whole)-cut]
			var r io.Reader = bytes.NewReader(data)
			if chunked {
				r = iotestOneByte{r}
			}
			f, err := NewReader(r, "skip.pcapng")
			if err != nil {
				t.Fatal(err)
			}
			gets, taken := 0, 0
			f.SetBuffers(func(min int) []byte { gets++; taken += max(min, 32<<10); return make([]byte, max(min, 32<<10)) },
				func([]byte) {})
			var kept []Packet
			var got error
			for {
				p, err := f.Next()
				if err != nil {
					got = err
					break
				}
				kept = append(kept, *p)
			}
			ref, err := NewReader(bytes.NewReader(data), "skip.pcapng")
			if err != nil {
				t.Fatal(err)
			}
			want, werr := readAll(t, ref)
			if got == io.EOF {
				got = nil
			}
			if len(kept) != packets || len(want) != packets || errText(got) != errText(werr) ||
				(cut > 0) != (f.Truncated() != nil) || (cut > 0 && *f.Truncated() != *ref.Truncated()) {
				t.Fatalf("chunked %v, cut %d: %d packets then %v (cut %+v); NewReader: %d then %v (cut %+v); want %d", chunked, cut, len(kept), got, f.Truncated(), len(want), werr, ref.Truncated(), packets)
			}
			for i, p := range kept {
				if !bytes.Equal(p.Data, want[i].Data) || p.Offset != want[i].Offset || p.Index != i {
					t.Fatalf("chunked %v, cut %d: packet %d differs from NewReader's", chunked, cut, i)
				}
			}
			// At most one new buffer per skipped block (when the room after a packet is short), never one per
			// 32 KiB of it: 200 MiB skipped would take 6400.
			if gets > packets {
				t.Errorf("chunked %v, cut %d: %d buffers (%d bytes) taken to skip %d blocks of 1 MiB; want at most one per block", chunked, cut, gets, taken, packets)
			}
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestPacketCommentsJoined: a packet's opt_comment values are joined by "\n", an empty one before any text
// left out (as Packet.Comment always said), whether the packet has one comment or several.
func TestPacketCommentsJoined(t *testing.T) {
	c := func(s string) opt { return opt{code: 1, val: []byte(s)} }
	cases := []struct {
		opts []opt
		want string
	}{
		{nil, ""},
		{[]opt{c("one")}, "one"},
		{[]opt{c("")}, ""},
		{[]opt{c("a"), c("b"), c("c")}, "a\nb\nc"},
		{[]opt{c(""), c("a"), c(""), c("b")}, "a\n\nb"},
		{[]opt{c("a"), {code: 2, val: []byte("x")}, c("")}, "a\n"},
	}
	b := &ngBuilder{}
	b.shb(false).idb(1, 65535)
	for i, k := range cases {
		b.epb(0, uint64(i), frame(false, 20), 0, k.opts...)
	}
	f, err := NewReader(bytes.NewReader(b.buf.Bytes()), "comments.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range cases {
		p, err := f.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p.Comment != k.want {
			t.Errorf("packet %d: comment %q; want %q", i, p.Comment, k.want)
		}
	}
}
