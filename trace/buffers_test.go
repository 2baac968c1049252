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
