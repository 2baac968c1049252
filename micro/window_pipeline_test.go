package micro

import "testing"

// TestWindowIsOneQPAlone: a QP whose queue holds several messages overlaps their round trips only as far as
// its own pipeline lets it (p2100g reads a QP's send WQEs one read at a time), so a workload of a few QPs with
// short queues carries what one of its QPs alone carries, times the QPs. That is its in-flight limit, and the
// workload is not low against it. Contention between QPs stays the NIC's: #7's trigger (480 QPs, 16 deep,
// context misses) keeps a limit far above what it carries, and stays low.
func TestWindowIsOneQPAlone(t *testing.T) {
	for _, prof := range []string{"p2100g", "cx6vpi-200g"} {
		for _, tc := range []struct {
			qp, op string
			qps    int
			mem    string
		}{
			{"ud", "send", 1, MemGPUSameSwitch},
			{"rc", "write", 2, MemLocal},
			{"rc", "send", 3, MemRemoteNUMA},
		} {
			for _, depth := range []int{3, 6, 12} {
				w := wl(tc.qp, tc.op, tc.qps, 256, 1, 4, depth, 1, 320*kb, []int{160, 128, 32}, DirUni, tc.mem)
				r := runMicro(t, prof, w, nil)
				_, _, mpps := r.Judged()
				_, ml := r.Limits()
				if s := verdict(r); s != "" || mpps > 1.15*ml {
					t.Errorf("%s %s %s %d QPs %s depth %d: %.2f Mpps against a limit of %.2f (in flight %.2f, round trip %.0f ns): %q, want normal at its limit",
						prof, tc.qp, tc.op, tc.qps, tc.mem, depth, mpps, ml, r.WindowMpps, r.WindowRTTNs, s)
				}
			}
		}
	}
	w := wl("rc", "write", 480, 1024, 1, 1, 16, 1, 64*kb, []int{512}, DirUni, MemLocal)
	r := runMicro(t, "cx6vpi-200g", w, nil)
	_, _, mpps := r.Judged()
	if s := verdict(r); s != "low-throughput" || r.WindowMpps < mpps/(1-AnomalyLowFraction) {
		t.Errorf("#7's trigger: %.2f Mpps, in flight %.2f Mpps: %q, want low-throughput with the in-flight limit above it", mpps, r.WindowMpps, s)
	}
}
