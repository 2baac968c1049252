package netsim

import (
	"testing"
	"time"

	"github.com/lumina-go/lumina/lab"
)

// lineRateConfig is two cx6dx hosts at 100 Gb/s, one connection streaming 1 MB WRITEs with 4 outstanding,
// enough messages for simNs of simulated time.
func lineRateConfig(b testing.TB, simNs int64) lab.Config {
	cfg := baseConfig(b, "cx6dx", "cx6dx")
	cfg.Traffic.MsgSize = 1 << 20
	cfg.Traffic.TxDepth = 4
	cfg.Traffic.MsgsPerConn = int(simNs / 90000) // ~11.1 GB/s of goodput: ~90 us per 1 MB message
	cfg.Dump = func(int, int64, []byte) {}
	return cfg
}

// BenchmarkEvents reports simulated events per second of wall time on one core.
func BenchmarkEvents(b *testing.B) {
	cfg := lineRateConfig(b, 50e6) // 50 ms of simulated time per iteration
	b.ReportAllocs()
	var events, frames uint64
	start := time.Now()
	for b.Loop() {
		res, err := Run(cfg)
		if err != nil {
			b.Fatal(err)
		}
		events += res.Events
		frames += res.SwitchPorts[0].RxRoCE + res.SwitchPorts[1].RxRoCE
	}
	wall := time.Since(start).Seconds()
	b.ReportMetric(float64(events)/wall, "events/s")
	// Every frame is two link hops (host -> switch -> host); events merge several hops, see link.go.
	b.ReportMetric(float64(frames)/wall, "frames/s")
}

// BenchmarkLineRate100G is the target: two hosts at 100 Gb/s for 1 s of simulated time (~12 M data
// packets), mirrored frames discarded. Reports wall seconds per simulated second and data packets.
func BenchmarkLineRate100G(b *testing.B) {
	cfg := lineRateConfig(b, 1e9)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		res, err := Run(cfg)
		if err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start).Seconds()
		b.ReportMetric(wall/(float64(res.EndNs)/1e9), "wall-s/sim-s")
		b.ReportMetric(float64(res.PerConn[0].DataPackets), "data-pkts")
		b.ReportMetric(float64(res.Events)/wall, "events/s")
		b.ReportMetric(float64(res.SwitchPorts[0].RxRoCE+res.SwitchPorts[1].RxRoCE)/wall, "frames/s")
	}
}
