package analyze

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// benchTrace builds ~200k packets on 8 connections: 10-packet WRITE messages, one drop per message recovered
// by NAK and go-back-N, and an ACK per message.
func benchTrace(tb testing.TB) []frame {
	b := &builder{t: tb}
	conns := make([]tconn, 8)
	for i := range conns {
		conns[i] = mkConn("10.0.0.2", "10.0.0.3", uint32(0x100+i), uint32(0x200+i), roce.PSN(1<<24-5000+i*100))
	}
	tm := 0.0
	for m := 0; len(b.frames) < 200000; m++ {
		for _, c := range conns {
			base := m * 10
			for i := 0; i < 10; i++ {
				ev := roce.EventNone
				if i == 4 {
					ev = roce.EventDrop
				}
				b.data(c, base+i, writeOp(i, 10), ev, tm)
				tm += 0.1
			}
			b.nak(c, base+4, tm)
			for i := 4; i < 10; i++ {
				tm += 0.1
				b.data(c, base+i, writeOp(i, 10), 0, tm)
			}
			b.ack(c, base+9, tm+0.5)
			tm++
		}
	}
	return b.frames
}

// The analysis of a 200k-packet trace (one loss per 18-packet message) passes every check; the benchmark shows it is linear.
func TestBenchTraceIsClean(t *testing.T) {
	frames := benchTrace(t)
	res, err := Analyze(&sliceReader{frames: frames}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Checks) != 8 || !res.OK() || len(res.Retransmissions) != len(frames)/18 {
		t.Fatalf("%d checks ok=%v, %d retransmissions", len(res.Checks), res.OK(), len(res.Retransmissions))
	}
}

func BenchmarkAnalyze(b *testing.B) {
	frames := benchTrace(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := Analyze(&sliceReader{frames: frames}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(frames)), "packets/op")
}
