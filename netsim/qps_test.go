package netsim

import (
	"runtime"
	"slices"
	"testing"
)

// idleQPBytes builds a simulation of n one-message WRITE connections, every QP created and idle (nothing
// posted yet), and returns the heap it holds per QP (two QPs per connection).
func idleQPBytes(tb testing.TB, n int) float64 {
	tb.Helper()
	cfg := baseConfig(tb, "cx5", "cx5")
	cfg.Traffic.NumConns, cfg.Traffic.MsgSize = n, 1024
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := newSim(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	if len(s.hosts[0].qps) != n || len(s.hosts[1].qps) != n {
		tb.Fatalf("%d and %d QPs set up, want %d each", len(s.hosts[0].qps), len(s.hosts[1].qps), n)
	}
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(2*n)
}

// Issue 17: at most 8 KB of memory per idle QP, whatever the number of QPs.
func TestIdleQPMemory(t *testing.T) {
	for _, n := range []int{1024, 16384} {
		if b := idleQPBytes(t, n); b > 8192 || b <= 0 {
			t.Errorf("%d connections: %.0f bytes of heap per idle QP; want at most 8192", n, b)
		}
	}
}

// BenchmarkIdleQPs reports the heap per idle QP and the set-up time per connection at 65,536 connections (the
// limit).
func BenchmarkIdleQPs(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(idleQPBytes(b, 65536), "B/idle-QP")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/65536, "ns/conn-setup")
}

// SetupProgress hears every 1,024 connections and the last, in order, before any traffic.
func TestSetupProgress(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.Traffic.NumConns, cfg.Traffic.MsgSize = 2500, 1024
	var got []int
	events := uint64(0)
	cfg.ProgressEvery = 1
	cfg.Progress = func(_ int64, ev uint64) {
		if events == 0 && !slices.Equal(got, []int{1024, 2048, 2500}) {
			t.Errorf("traffic started after set-up progress %v", got)
		}
		events = ev
	}
	cfg.SetupProgress = func(conns, total int) {
		if total != 2500 {
			t.Errorf("total %d, want 2500", total)
		}
		got = append(got, conns)
	}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{1024, 2048, 2500}) || events == 0 {
		t.Errorf("set-up progress %v, events %d; want [1024 2048 2500] then the traffic's", got, events)
	}
}
