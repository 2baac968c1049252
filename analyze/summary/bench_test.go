package summary

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// benchFrames is a mix like a datacenter RDMA trace: WRITE Middle 1024 B, WRITE First, ACKs, CNPs, CE marks,
// over several QPs.
func benchFrames(b *testing.B) [][]byte {
	var fs [][]byte
	for i := 0; i < 100; i++ {
		qp := uint32(0x100 + i%8)
		switch {
		case i%10 == 9:
			fs = append(fs, frame(b, frameSpec{op: roce.RCAcknowledge, psn: uint32(i), qp: qp + 0x100, from: hostB, to: hostA, syndrome: 0x1f}))
		case i == 50:
			fs = append(fs, frame(b, frameSpec{op: roce.CNP, qp: qp + 0x100, from: hostB, to: hostA, tos: 0xc2}))
		case i%25 == 0:
			fs = append(fs, frame(b, frameSpec{op: roce.RCWriteFirst, psn: uint32(i), qp: qp, tos: 2, payload: 1024}))
		default:
			tos := uint8(2)
			if i%50 == 7 {
				tos = 3
			}
			fs = append(fs, frame(b, frameSpec{op: roce.RCWriteMiddle, psn: uint32(i), qp: qp, tos: tos, payload: 1024}))
		}
	}
	return fs
}

// BenchmarkStatsAdd is the full per-packet work of `lumina analyze`: decode, ICRC, counters, flow state.
func BenchmarkStatsAdd(b *testing.B) {
	benchAdd(b, Options{})
}

// BenchmarkStatsAddNoICRC is the same without the ICRC check.
func BenchmarkStatsAddNoICRC(b *testing.B) {
	benchAdd(b, Options{SkipICRC: true})
}

func benchAdd(b *testing.B, opts Options) {
	fs := benchFrames(b)
	s := NewStats(opts)
	pk := trace.Packet{LinkType: trace.LinkTypeEthernet}
	var n int64
	for _, f := range fs {
		n += int64(len(f))
	}
	b.SetBytes(n / int64(len(fs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := fs[i%len(fs)]
		pk.Data, pk.OrigLen = f, len(f)
		s.Add(&pk)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpkt/s")
}

// BenchmarkDecode is decode-only: the roce codec on the same mix.
func BenchmarkDecode(b *testing.B) {
	fs := benchFrames(b)
	var p roce.Packet
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := fs[i%len(fs)]
		if !p.Decode(f, len(f)) {
			b.Fatal("not RoCE")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpkt/s")
}
