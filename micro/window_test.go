package micro

import (
	"testing"

	"github.com/lumina-go/lumina/rnic"
)

// TestWindowIncludesHostPath: the in-flight limit of a workload counts the host-path latency its profile models
// for the payload's memory (remote socket, GPU behind the same or another PCIe switch): the unloaded round trip
// grows by exactly that latency, read on the host whose memory the payload comes from (the responder for a
// READ), so a workload limited by its own window is judged against what that window can carry.
func TestWindowIncludesHostPath(t *testing.T) {
	for _, prof := range []string{"p2100g", "cx6vpi-200g", "collie-f"} {
		p, err := rnic.LoadProfile(prof)
		if err != nil {
			t.Fatal(err)
		}
		h := p.Micro.Host
		for _, op := range []string{"write", "read"} {
			base := runMicro(t, prof, wl("rc", op, 1, 4096, 1, 1, 4, 1, 64*kb, []int{4 * kb}, DirUni, MemLocal), nil)
			for mem, lat := range map[string]int64{MemRemoteNUMA: h.RemoteNUMALatencyNs,
				MemGPUSameSwitch: h.GPUSameSwitchLatency, MemGPUCrossSwitch: h.GPUCrossSwitchLatency} {
				r := runMicro(t, prof, wl("rc", op, 1, 4096, 1, 1, 4, 1, 64*kb, []int{4 * kb}, DirUni, mem), nil)
				if got := r.WindowRTTNs - base.WindowRTTNs; got != float64(lat) || lat <= 0 {
					t.Errorf("%s %s %s: window round trip %.0f ns, local %.0f ns: +%.0f, want the path's %d ns",
						prof, op, mem, r.WindowRTTNs, base.WindowRTTNs, got, lat)
				}
				if r.WindowGbps >= base.WindowGbps {
					t.Errorf("%s %s %s: window %.1f Gb/s, not below local memory's %.1f", prof, op, mem, r.WindowGbps, base.WindowGbps)
				}
			}
		}
	}
}
