package micro

import (
	"slices"
	"testing"

	"github.com/lumina-go/lumina/rnic"
)

// TestWindowIsOneMessageRoundTrip: the in-flight limit of a workload is what one message in flight costs in
// the model itself, so a workload of one QP with a one-deep queue, which keeps exactly one message in flight,
// runs at its window limit (within 3%) on every profile, for every QP type and opcode the NIC has, every
// memory placement, small and multi-packet messages; the round trip grows by at least the host path's latency
// when the payload is in remote-socket or GPU memory (read on the responder for a READ).
func TestWindowIsOneMessageRoundTrip(t *testing.T) {
	for _, prof := range []string{"p2100g", "cx6vpi-200g", "collie-f"} {
		p, err := rnic.LoadProfile(prof)
		if err != nil {
			t.Fatal(err)
		}
		h := p.Micro.Host
		lat := map[string]int64{MemLocal: 0, MemRemoteNUMA: h.RemoteNUMALatencyNs,
			MemGPUSameSwitch: h.GPUSameSwitchLatency, MemGPUCrossSwitch: h.GPUCrossSwitchLatency}
		for _, tc := range []struct{ qp, op string }{{"rc", "write"}, {"rc", "send"}, {"rc", "read"}, {"uc", "write"},
			{"uc", "send"}, {"ud", "send"}} {
			if len(p.QPTypes) > 0 && !slices.Contains(p.QPTypes, tc.qp) {
				continue
			}
			for _, sizes := range [][]int{{64}, {4 * kb}, {256, 16 * kb, 1 * kb}} {
				var local float64
				for _, mem := range []string{MemLocal, MemRemoteNUMA, MemGPUSameSwitch, MemGPUCrossSwitch} {
					if tc.op == "send" && mem == MemGPUSameSwitch && len(sizes) > 1 {
						// The one-deep receive queue is reposted when the 16 KB message is written, at the GPU
						// switch's per-TLP write cost, after the next message arrived: RNR (RC) or a lost
						// message (UC), which the window counts per message delivered, a different mix of sizes.
						continue
					}
					r := runMicro(t, prof, wl(tc.qp, tc.op, 1, 1024, 1, 2, 1, 1, 64*kb, sizes, DirUni, mem), nil)
					_, _, mpps := r.Judged()
					if share := mpps / r.WindowMpps; share < 0.97 || share > 1.03 {
						t.Errorf("%s %s %s %v %s: %.3f Mpps, %.0f%% of its window's %.3f Mpps (round trip %.0f ns)",
							prof, tc.qp, tc.op, sizes, mem, mpps, 100*share, r.WindowMpps, r.WindowRTTNs)
					}
					if mem == MemLocal {
						local = r.WindowRTTNs
					} else if r.WindowRTTNs < local+float64(lat[mem]) || lat[mem] <= 0 {
						t.Errorf("%s %s %s %v %s: round trip %.0f ns, local %.0f ns: want at least the path's %d ns more",
							prof, tc.qp, tc.op, sizes, mem, r.WindowRTTNs, local, lat[mem])
					}
				}
			}
		}
	}
}

// TestLoopbackReadConvergesOnA: direction loopback puts the data of both connection sets on A (collie A.1
// #13: receiving and loopback traffic together). For a READ the data flows from responder to requester, so A
// reads from B and from itself; B receives only READ requests. #13's trigger as READs pauses on its profile
// as the WRITEs do.
func TestLoopbackReadConvergesOnA(t *testing.T) {
	w := wl("rc", "read", 8, 4096, 16, 1, 128, 32, 4*mb, []int{256 * kb}, DirLoopback, MemLocal)
	r := runMicro(t, "cx6vpi-200g", w, nil)
	a, b := r.Hosts[0], r.Hosts[1]
	if a.GoodRxBytes == 0 || b.GoodRxBytes != 0 || b.GoodTxBytes == 0 {
		t.Errorf("loopback READ: A placed %d B, B placed %d B and sent %d B: want the data on A only, part of it from B",
			a.GoodRxBytes, b.GoodRxBytes, b.GoodTxBytes)
	}
	if s := summarize(r); !s.isPause() {
		t.Errorf("#13's trigger as READs: pause %.4f, want > 0.001 (A receives B's responses and its own)", s.pause)
	}
}
