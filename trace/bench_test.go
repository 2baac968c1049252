package trace

import (
	"bytes"
	"io"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// benchPcap is a 100k-packet in-memory pcap of 128-byte records.
func benchPcap(b *testing.B) []byte {
	var buf bytes.Buffer
	w, _ := NewPcapWriter(&buf, PcapWriterOptions{Nanosecond: true})
	data := frame(false, 128-46)[:112]
	for i := 0; i < 100_000; i++ {
		if err := w.WritePacket(int64(i)*100, data, 0); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	return buf.Bytes()
}

// BenchmarkReadPcap measures one op = one packet read, so allocs/op is the
// per-packet allocation count (the reader setup is amortised over 100k).
func BenchmarkReadPcap(b *testing.B) {
	data := benchPcap(b)
	br := bytes.NewReader(data)
	f, err := NewReader(br, "bench.pcap")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(128)
	b.ReportAllocs()
	b.ResetTimer()
	var sum int
	for i := 0; i < b.N; i++ {
		p, err := f.Next()
		if err == io.EOF {
			br.Reset(data)
			f, _ = NewReader(br, "bench.pcap")
			p, err = f.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
		sum += p.CapLen
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
	if sum == 0 {
		b.Fatal("no data read")
	}
}

// BenchmarkWritePcapng measures writing one annotated packet per op.
func BenchmarkWritePcapng(b *testing.B) {
	w, _ := NewPcapngWriter(io.Discard, PcapngWriterOptions{Interfaces: []InterfaceSpec{{}}})
	data := frame(false, 60)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := w.WritePacket(0, int64(i), data, 0, "event=none iter=1 seq=123456"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMergeIntegrity merges two dumps by mirror seq and checks integrity.
func BenchmarkMergeIntegrity(b *testing.B) {
	var bufs [2]bytes.Buffer
	for i := range bufs {
		w, _ := NewPcapWriter(&bufs[i], PcapWriterOptions{Nanosecond: true, SnapLen: 128})
		for s := uint64(i + 1); s <= 20_000; s += 2 {
			f := frame(false, 60)
			roce.EncodeMirror(f, roce.Mirror{Seq: s, TimestampNs: s * 50})
			w.WritePacket(int64(s*50), f, 0)
		}
		w.Close()
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		r0, _ := NewReader(bytes.NewReader(bufs[0].Bytes()), "d0")
		r1, _ := NewReader(bytes.NewReader(bufs[1].Bytes()), "d1")
		m := MergeByMirrorSeq(r0, r1)
		c := NewIntegrityChecker(IntegrityOptions{})
		for {
			p, err := m.Next()
			if err != nil {
				break
			}
			mi, _ := m.Mirror()
			c.Add(p.Index, mi)
			n++
		}
		if !c.Finish(20_000, 20_000).OK {
			b.Fatal("integrity failed")
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "packets/s")
}
