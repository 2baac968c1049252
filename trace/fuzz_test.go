package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// maxBuffer is the most a reader may ever hold: one maximal pcapng block.
const maxBuffer = MaxBlockLen

// fuzzRead reads data as a capture and checks the invariants that must hold
// for any input: no panic, errors are typed with an in-range offset, packets
// are self-consistent, and the buffer never exceeds the cap.
func fuzzRead(t *testing.T, data []byte) {
	sameFromBytes(t, data)
	f, err := NewReader(bytes.NewReader(data), "fuzz")
	if err != nil {
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(data)) {
			t.Fatalf("open: %v", err)
		}
		return
	}
	prev := int64(-1)
	for i := 0; ; i++ {
		p, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("packet %d: %v", i, err)
			}
			break
		}
		if p.Index != i || len(p.Data) != p.CapLen || p.CapLen > MaxCapLen || p.Offset <= prev ||
			p.Offset+int64(p.CapLen) > int64(len(data)) {
			t.Fatalf("packet %d inconsistent: index %d len %d caplen %d offset %d (prev %d)",
				i, p.Index, len(p.Data), p.CapLen, p.Offset, prev)
		}
		if _, ok := f.LinkType(p.Interface); !ok {
			t.Fatalf("packet %d: interface %d has no link type", i, p.Interface)
		}
		prev = p.Offset
	}
	if c := cap(f.src.buf); c > maxBuffer {
		t.Fatalf("buffer grew to %d bytes", c)
	}
	// Allocation follows the data: a reader never holds more than twice
	// the input (plus its initial buffer).
	if c := cap(f.src.buf); c > initialBuffer && c > 2*len(data) {
		t.Fatalf("buffer of %d bytes for %d bytes of input", c, len(data))
	}
}

func addSeeds(f *testing.F, pcapng bool) {
	entries, _ := os.ReadDir(realCaptures)
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".pcap" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(realCaptures, e.Name()))
		if err == nil && !pcapng {
			f.Add(b[:min(len(b), 600)])
		}
	}
	if pcapng {
		if b, err := os.ReadFile("testdata/wireshark_merged.pcapng"); err == nil {
			f.Add(b[:min(len(b), 1200)])
		}
		b := &ngBuilder{}
		b.shb(false).idb(1, 0, opt{9, []byte{0x80 | 20}}, opt{14, u64le(5)}).epb(0, 1<<40, []byte("data"), 4, opt{1, []byte("c")}).spb(4, []byte("abcd"))
		b.shb(true).idb(1, 3).opb(0, 9, []byte("xy"), 2).block(0x99, []byte{1, 2, 3})
		f.Add(b.buf.Bytes())
		f.Add([]byte{0x0a, 0x0d, 0x0d, 0x0a, 0xff, 0xff, 0xff, 0x7f, 0x4d, 0x3c, 0x2b, 0x1a})
	} else {
		b := newPcapBuilder(true, true, 64, 1).record(1, 2, []byte("hello"), 5).record(3, 4, nil, 0)
		f.Add(b.buf.Bytes())
		f.Add(append(newPcapBuilder(false, false, 0, 1).buf.Bytes(), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 3, 0, 0, 0, 0, 0))
	}
}

func FuzzPcapReader(f *testing.F) {
	addSeeds(f, false)
	f.Fuzz(fuzzRead)
}

func FuzzPcapngReader(f *testing.F) {
	addSeeds(f, true)
	f.Fuzz(fuzzRead)
}

// newBytesReader reads a capture held in memory without copying it, the oracle of sameFromBytes: nothing to
// refill, so none of the buffer handling of a stream.
func newBytesReader(b []byte, name string) (*File, error) {
	return newFile(&source{buf: b, wpos: len(b), eof: true}, name)
}

// sameFromBytes: newBytesReader over data gives what NewReader over the same bytes gives, packet by packet,
// error by error, truncation included; and its packets point into data.
func sameFromBytes(t *testing.T, data []byte) {
	t.Helper()
	a, errA := NewReader(bytes.NewReader(data), "fuzz")
	b, errB := newBytesReader(data, "fuzz")
	if fmt.Sprint(errA) != fmt.Sprint(errB) {
		t.Fatalf("open: stream %v, bytes %v", errA, errB)
	}
	if errA != nil {
		return
	}
	for i := 0; ; i++ {
		pa, errA := a.Next()
		pb, errB := b.Next()
		if fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Fatalf("packet %d: stream %v, bytes %v", i, errA, errB)
		}
		if errA != nil {
			break
		}
		if !bytes.Equal(pa.Data, pb.Data) || pa.CapLen != pb.CapLen || pa.OrigLen != pb.OrigLen || pa.Timestamp != pb.Timestamp ||
			pa.LinkType != pb.LinkType || pa.Interface != pb.Interface || pa.Comment != pb.Comment || pa.Index != pb.Index ||
			pa.Offset != pb.Offset {
			t.Fatalf("packet %d: stream %+v, bytes %+v", i, *pa, *pb)
		}
		if len(pb.Data) > 0 {
			if d := uintptr(unsafe.Pointer(&pb.Data[0])) - uintptr(unsafe.Pointer(&data[0])); d >= uintptr(len(data)) {
				t.Fatalf("packet %d: data copied out of the input", i)
			}
		}
	}
	if fmt.Sprint(a.Truncated()) != fmt.Sprint(b.Truncated()) {
		t.Fatalf("truncation: stream %v, bytes %v", a.Truncated(), b.Truncated())
	}
}
