package micro

import (
	"testing"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
)

// trigger is one of Collie's concrete anomaly triggers (seeds/003 appendix A) and the symptom it must show.
type trigger struct {
	id      int
	profile string
	symptom string // pause | low
	w       scenario.Workload
	mod     func(*rnic.Profile) // a host setting that is part of the trigger
}

// noRelaxedOrdering is #9's host setting: the NIC not configured for PCIe relaxed ordering.
func noRelaxedOrdering(p *rnic.Profile) { p.Micro.PCIe.RelaxedOrdering = false }

func wl(qp, op string, qps, mtu, batch, sge, depth, mrs, mrSize int, sizes []int, dir, mem string) scenario.Workload {
	return scenario.Workload{QPType: qp, Opcode: op, NumQPs: qps, MTU: mtu, WQEBatch: batch, SGE: sge, WQDepth: depth,
		NumMRs: mrs, MRSize: mrSize, MsgSizes: sizes, Direction: dir, Memory: mem}
}

const (
	kb = 1 << 10
	mb = 1 << 20
)

// collieTriggers are appendix A's "simplified concrete trigger settings", one per anomaly.
var collieTriggers = []trigger{
	{1, "cx6vpi-200g", "pause", wl("ud", "send", 1, 2048, 64, 1, 256, 1, 64*kb, []int{2048}, DirUni, MemLocal), nil},
	{2, "cx6vpi-200g", "low", wl("ud", "send", 16, 1024, 4, 1, 1024, 1, 64*kb, []int{1024}, DirUni, MemLocal), nil},
	{3, "cx6vpi-200g", "pause", wl("rc", "read", 8, 1024, 1, 1, 128, 1, 4*mb, []int{4 * mb}, DirUni, MemLocal), nil},
	{4, "cx6vpi-200g", "pause", wl("rc", "read", 80, 4096, 128, 4, 128, 1, 64*kb, []int{128}, DirBi, MemLocal), nil},
	{5, "cx6vpi-200g", "pause", wl("rc", "send", 1, 1024, 64, 2, 1024, 1, 64*kb, []int{2048}, DirUni, MemLocal), nil},
	{6, "cx6vpi-200g", "low", wl("rc", "send", 32, 1024, 8, 2, 1024, 1, 64*kb, []int{1024}, DirUni, MemLocal), nil},
	{7, "cx6vpi-200g", "low", wl("rc", "write", 480, 1024, 1, 1, 16, 1, 64*kb, []int{512}, DirUni, MemLocal), nil},
	{8, "cx6vpi-200g", "low", wl("rc", "write", 24, 1024, 1, 1, 128, 1024, 64*kb, []int{512}, DirUni, MemLocal), nil},
	{9, "cx6vpi-200g", "pause", wl("rc", "write", 8, 4096, 8, 3, 128, 1, 4*mb, []int{128, 64 * kb, kb}, DirBi, MemLocal), noRelaxedOrdering},
	{10, "cx6vpi-200g", "pause", wl("rc", "write", 320, 1024, 64, 1, 128, 1, 64*kb, []int{64 * kb, 128, 128, 128}, DirBi, MemLocal), nil},
	{11, "cx6vpi-200g", "pause", wl("rc", "write", 1, 4096, 16, 1, 128, 32, 4*mb, []int{256 * kb}, DirBi, MemRemoteNUMA), nil},
	{12, "cx6vpi-200g", "pause", wl("rc", "write", 8, 4096, 8, 3, 128, 1, 4*mb, []int{128, 64 * kb, kb}, DirBi, MemGPUSameSwitch), nil},
	{13, "cx6vpi-200g", "pause", wl("rc", "write", 8, 4096, 16, 1, 128, 32, 4*mb, []int{256 * kb}, DirLoopback, MemLocal), nil},
	{14, "p2100g", "low", wl("rc", "write", 1024, 4096, 1, 4, 128, 81, 256*kb, []int{256 * kb}, DirBi, MemLocal), nil},
	{15, "p2100g", "pause", wl("ud", "send", 32, 2048, 1, 1, 64, 1, 4*kb, []int{256, kb, 64, kb}, DirUni, MemLocal), nil},
	{16, "p2100g", "pause", wl("rc", "read", 500, 1024, 8, 1, 128, 1, 256*kb, []int{64 * kb}, DirUni, MemLocal), nil},
	{17, "p2100g", "pause", wl("rc", "send", 80, 1024, 1, 1, 128, 1, mb, []int{kb}, DirUni, MemLocal), nil},
	{18, "p2100g", "pause", wl("rc", "write", 16, 1024, 16, 1, 64, 1, 12*kb, []int{64 * kb}, DirBi, MemLocal), nil},
}

func runMicro(t testing.TB, profile string, w scenario.Workload, mod func(*rnic.Profile)) *WorkloadResult {
	t.Helper()
	p, err := rnic.LoadProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		q := *p
		m := *p.Micro
		q.Micro = &m
		mod(&q)
		p = &q
	}
	r, err := RunWorkload(WorkloadConfig{Seed: 1, Profiles: [2]*rnic.Profile{p, p}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// summary is what the anomaly monitor looks at: the worst pause ratio of the two NICs and the busier
// direction's goodput against the limits.
type summary struct {
	pause, gbps, mpps, limG, limP float64
}

func summarize(r *WorkloadResult) summary {
	s := summary{limG: r.LimitGbps, limP: r.LimitMpps}
	for i := range r.Hosts {
		h := &r.Hosts[i]
		s.pause = max(s.pause, r.PauseRatio(i))
		s.gbps = max(s.gbps, r.Gbps(h.GoodTxBytes), r.Gbps(h.GoodRxBytes))
		s.mpps = max(s.mpps, r.Mpps(h.GoodTxPackets), r.Mpps(h.GoodRxPackets))
	}
	return s
}

func (s summary) isPause() bool { return s.pause > 0.001 }
func (s summary) isLow() bool {
	return !s.isPause() && s.gbps < 0.8*s.limG && s.mpps < 0.8*s.limP
}
