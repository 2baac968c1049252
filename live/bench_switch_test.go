package live

import (
	"testing"
	"time"

	"github.com/lumina-go/lumina/roce"
)

// BenchmarkSwitchForwardMirror measures the real-time switch on veth pairs: bursts of RoCE WRITE frames
// (1024-byte payload, the default MTU) from the requester's namespace through the switch, which forwards each
// to the responder and mirrors a copy to a running dumper; each burst is received in full at the responder
// before the next is sent (closed loop, so that the rate is the switch's, not the loss of an overrun ring).
// It reports frames per second forwarded (each also mirrored and captured). Root only.
//
//	go test -run '^$' -bench SwitchForwardMirror -benchtime 400x ./live
func BenchmarkSwitchForwardMirror(b *testing.B) {
	r := newRig(b, nil)
	const burst = 128
	frames := make([][]byte, burst)
	for i := range frames {
		frames[i] = rocev2(b, 0x11, roce.PSN(i), 1024)
	}
	got := 0
	count := func(f []byte, _ int64, _ int) { got++ }
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for _, f := range frames {
			r.tx.Send(f)
		}
		r.tx.Flush()
		want := (i + 1) * burst
		deadline := time.Now().Add(2 * time.Second)
		for got < want {
			if r.rx.Poll(0, count) == 0 {
				if time.Now().After(deadline) {
					b.Fatalf("burst %d: %d of %d frames arrived", i, got-i*burst, burst)
				}
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(got)/el.Seconds(), "frames/s")
	b.ReportMetric(float64(el.Nanoseconds())/float64(got), "ns/frame")
}
