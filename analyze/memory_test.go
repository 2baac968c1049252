package analyze

import (
	"runtime"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// memConns is a trace of n connections of one 1 KB WRITE and its ACK each (what bench/gencap -conns writes).
func memConns(t *testing.T, n int) []frame {
	b := &builder{t: t}
	for i := 0; i < n; i++ {
		c := mkConn("10.0.0.2", "10.0.0.3", uint32(0x10000+i), uint32(0x20000+i), roce.PSN(i*7))
		b.data(c, 0, roce.RCWriteOnly, 0, float64(i))
		b.ack(c, 0, float64(i)+0.5)
	}
	return b.frames
}

// What the analysis of many connections keeps per connection once Analyze returns is its result only: the
// analyzer's per-connection state is garbage (the caller holds the result while it writes the report, and
// the state is most of the memory of a trace of 65,536 connections). Before, the result pointed into the
// analyzer and kept ~1,770 bytes per connection alive; the result itself is ~270. What Analyze allocates per
// connection (its state, indexes and result: the peak of a large trace's analysis) is bounded too.
func TestAnalysisKeepsOnlyItsResultPerConnection(t *testing.T) {
	const n = 8192
	frames := memConns(t, n)
	before := heapAfterGC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	res, err := Analyze(&sliceReader{frames: frames}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms1)
	allocated := float64(ms1.TotalAlloc-ms0.TotalAlloc) / n
	kept := float64(heapAfterGC()-before) / n
	if len(res.Checks) != n || len(res.Connections) != n || !res.OK() {
		t.Fatalf("%d checks, %d connections, ok=%v: want %d passing connections", len(res.Checks), len(res.Connections), res.OK(), n)
	}
	t.Logf("%.0f bytes per connection allocated by Analyze, %.0f kept after it returned", allocated, kept)
	if allocated > 2150 {
		t.Errorf("the analysis allocates %.0f bytes per connection, want <= 2,150 (2,044 measured; 2,276 while "+
			"every connection carried a READ state and finish formatted a name for each)", allocated)
	}
	if kept > 600 {
		t.Errorf("the analysis keeps %.0f bytes per connection after it returned, want <= 600 (its result)", kept)
	}
	runtime.KeepAlive(res)
	runtime.KeepAlive(frames)
}
