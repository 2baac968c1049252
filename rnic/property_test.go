package rnic

import (
	"math/rand/v2"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// For any pattern of drops on a lossy pipe (both directions), every message completes or fails with retry
// exceeded (and then everything after it is flushed), the run ends (no deadlock, no livelock), and no request
// PSN is sent twice within one recovery epoch.
func TestPropertyLossyPipe(t *testing.T) {
	profiles := []string{"ideal", "cx5", "e810", "irn"}
	for seed := uint64(1); seed <= 60; seed++ {
		prof := profiles[seed%uint64(len(profiles))]
		rng := rand.New(rand.NewPCG(seed, 99))
		lossPct := []int{0, 2, 10, 30}[rng.IntN(4)]
		h := newPair(t, mustProfile(t, prof), seed, func(i int, c *QPConfig) {
			c.Timeout = 8 // ~1 ms minimum: keeps virtual time short
			c.RetryCnt = uint8(rng.IntN(8))
		})
		h.qp[1].PostRecv(1000)
		nmsg := 1 + rng.IntN(6)
		for m := 0; m < nmsg; m++ {
			v := []Verb{VerbSend, VerbSendImm, VerbWrite, VerbWriteImm, VerbRead}[rng.IntN(5)]
			h.post(0, WorkRequest{ID: uint64(m), Verb: v, Length: rng.IntN(12 * 1024)})
		}
		h.drop = func(from int, p *Pkt) bool { return rng.IntN(100) < lossPct }
		if !h.run(1e12) {
			t.Fatalf("seed %d (%s, loss %d%%): livelock", seed, prof, lossPct)
		}
		c := h.comps[0]
		if len(c) != nmsg {
			t.Fatalf("seed %d (%s, loss %d%%): %d completions for %d messages (deadlock): %+v", seed, prof, lossPct, len(c), nmsg, c)
		}
		failed := false
		for i, cp := range c {
			if cp.WRID != uint64(i) {
				t.Fatalf("seed %d: completion %d is WR %d: completions must be in order", seed, i, cp.WRID)
			}
			switch {
			case failed && cp.Status != StatusFlushErr:
				t.Fatalf("seed %d: WR %d after a failure has status %d, want flush", seed, i, cp.Status)
			case !failed && cp.Status == StatusRetryExc:
				failed = true
			case !failed && cp.Status != StatusSuccess:
				t.Fatalf("seed %d: WR %d status %d", seed, i, cp.Status)
			}
		}
		if failed != (h.qp[0].State() == QPStateError) {
			t.Fatalf("seed %d: failure %v but state %v", seed, failed, h.qp[0].State())
		}
		if lossPct == 0 && (failed || h.qp[0].Stats().TxRetransmits != 0) {
			t.Fatalf("seed %d: lossless run failed or retransmitted", seed)
		}
		h.checkNoSpuriousResend(0)
	}
}

// Timeouts of the non-adaptive (default) mode, seed 001 §6.3 Fig. 12(b): timeout=14, retry_cnt=7, 10 KB WRITE
// messages whose last packet is dropped: first timeout 0.2-0.4 s, later ones ~0.537 s, exactly 7 retries.
func TestNonAdaptiveTimeoutsMatchLumina(t *testing.T) {
	for _, prof := range []string{"cx4lx", "cx5", "cx6dx", "e810"} {
		for seed := uint64(1); seed <= 3; seed++ {
			h := newPair(t, mustProfile(t, prof), seed, nil)
			h.serial(tenKB(5)...)
			// Message 0..3: the tail is dropped 7 times, then delivered. Message 4: dropped until the QP fails.
			drops := map[roce.PSN]int{}
			first := h.qp[0].cfg.SendPSN
			h.drop = func(from int, p *Pkt) bool {
				if from != 0 {
					return false
				}
				rel := p.PSN.Diff(first)
				if rel%10 != 9 {
					return false
				}
				drops[p.PSN]++
				return rel/10 == 4 || drops[p.PSN] <= 7
			}
			h.run(1e12)
			for m := 0; m < 5; m++ {
				tail := first.Add(10*m + 9)
				ts := h.sends(0, tail)
				wantSends := 8 // original + 7 retries
				if len(ts) != wantSends {
					t.Fatalf("%s seed %d msg %d: tail sent %d times, want %d", prof, seed, m, len(ts), wantSends)
				}
				for k := 1; k < len(ts); k++ {
					gap := float64(ts[k]-ts[k-1]) / 1e9
					if k == 1 && (gap < 0.2 || gap > 0.4) {
						t.Errorf("%s seed %d msg %d: first timeout %.4f s, want 0.2-0.4 s", prof, seed, m, gap)
					}
					if k > 1 && (gap < 0.535 || gap > 0.539) {
						t.Errorf("%s seed %d msg %d: timeout %d = %.4f s, want ~0.537 s", prof, seed, m, k, gap)
					}
				}
			}
			c := h.comps[0]
			if len(c) != 5 || c[3].Status != StatusSuccess || c[4].Status != StatusRetryExc {
				t.Fatalf("%s: completions %+v, want 4 successes then RETRY_EXC_ERR", prof, c)
			}
			if v := h.ctr[0].Value(CtrLocalAckTimeoutErr); prof != "e810" && v != 5*7 {
				t.Errorf("%s: local_ack_timeout_err = %d, want 35", prof, v)
			}
		}
	}
}

// Adaptive retransmission, seed 000/001 §6.3: the timeouts of the first message and the jump of the first
// timeout of the 2nd (~0.267 s) and later (~0.671 s) messages.
func TestAdaptiveTimeoutsMatchLumina(t *testing.T) {
	h := newPair(t, mustProfile(t, "cx6dx"), 5, func(i int, c *QPConfig) { c.AdaptiveRetrans = true })
	h.serial(tenKB(5)...)
	first := h.qp[0].cfg.SendPSN
	drops := map[roce.PSN]int{}
	h.drop = func(from int, p *Pkt) bool {
		if from != 0 || p.PSN.Diff(first)%10 != 9 {
			return false
		}
		drops[p.PSN]++
		return drops[p.PSN] <= 7
	}
	h.run(1e12)
	want1 := []float64{0.0056, 0.0041, 0.0084, 0.0167, 0.0251, 0.0671, 0.1342}
	for m := 0; m < 5; m++ {
		ts := h.sends(0, first.Add(10*m+9))
		if len(ts) != 8 {
			t.Fatalf("msg %d: tail sent %d times, want 8", m, len(ts))
		}
		for k := 1; k < len(ts); k++ {
			gap := float64(ts[k]-ts[k-1]) / 1e9
			var want float64
			switch {
			case m == 0:
				want = want1[k-1]
			case k == 1 && m == 1:
				want = 0.267
			case k == 1:
				want = 0.671
			default:
				want = 0.671
			}
			if gap < want-0.0002 || gap > want+0.0002 {
				t.Errorf("msg %d timeout %d = %.4f s, want %.4f s", m, k, gap, want)
			}
		}
	}
	if v := h.ctr[0].Value(CtrAdpRetrans); v != 35 {
		t.Errorf("roce_adp_retrans = %d, want 35", v)
	}
}

// Seed 001 Table 2: maximum retries per message with retry_cnt = 7 (earlier messages each needed timeouts).
func TestMaxRetriesTable(t *testing.T) {
	for _, tc := range []struct {
		prof     string
		adaptive bool
		want     []int
	}{
		{"cx4lx", true, []int{13, 8, 7, 7, 7}},
		{"cx5", true, []int{13, 8, 8, 8, 8}},
		{"cx6dx", true, []int{13, 8, 8, 8, 8}},
		{"cx5", false, []int{7, 7, 7, 7, 7}},
		{"e810", false, []int{7, 7, 7, 7, 7}},
	} {
		for target := 0; target < 5; target++ {
			h := newPair(t, mustProfile(t, tc.prof), 11, func(i int, c *QPConfig) { c.AdaptiveRetrans = tc.adaptive })
			h.serial(tenKB(target + 1)...)
			first := h.qp[0].cfg.SendPSN
			drops := map[roce.PSN]int{}
			h.drop = func(from int, p *Pkt) bool {
				rel := p.PSN.Diff(first)
				if from != 0 || rel%10 != 9 {
					return false
				}
				drops[p.PSN]++
				return rel/10 == target || drops[p.PSN] <= 2
			}
			h.run(1e13)
			got := len(h.sends(0, first.Add(10*target+9))) - 1
			if got != tc.want[target] {
				t.Errorf("%s adaptive=%v msg %d: %d retries, want %d", tc.prof, tc.adaptive, target+1, got, tc.want[target])
			}
			if c := h.comps[0]; len(c) != target+1 || c[target].Status != StatusRetryExc {
				t.Errorf("%s msg %d: completions %+v", tc.prof, target+1, c)
			}
		}
	}
}

// tenKB returns n 10 KB WRITE work requests (Lumina §6.3's timeout experiment).
func tenKB(n int) []WorkRequest {
	wrs := make([]WorkRequest, n)
	for i := range wrs {
		wrs[i] = WorkRequest{ID: uint64(i), Verb: VerbWrite, Length: 10 * 1024}
	}
	return wrs
}
