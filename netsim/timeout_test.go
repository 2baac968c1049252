package netsim

import (
	"math"
	"testing"

	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
)

// lastPacketRules drops the last (10th) packet of each of msgs 10 KB messages drops[i] times (-1: always).
func lastPacketRules(drops []int) []*rule {
	var rs []*rule
	for m, d := range drops {
		if d == 0 {
			continue
		}
		rs = append(rs, &rule{conn: 0, psnOff: m*10 + 9, action: tDrop, times: max(d, 0)})
	}
	return rs
}

// transmissions returns, per message, the switch timestamps of every transmission of its last packet.
func transmissions(t *testing.T, res *lab.Result, c *capture, msgs int) [][]int64 {
	out := make([][]int64, msgs)
	m := res.Conns[0]
	for i := range c.frames {
		p := c.decode(t, i)
		if !p.BTH.Opcode.IsRequest() || !p.BTH.Opcode.CarriesPayload() {
			continue
		}
		off := p.BTH.PSN.Diff(m.ReqIPSN)
		if off%10 == 9 && off/10 < msgs {
			out[off/10] = append(out[off/10], c.ts[i])
		}
	}
	return out
}

func gaps(ts []int64) []float64 {
	var g []float64
	for i := 1; i < len(ts); i++ {
		g = append(g, float64(ts[i]-ts[i-1])/1e9)
	}
	return g
}

func timeoutConfig(t *testing.T, card string, adaptive bool, drops []int) lab.Config {
	cfg := baseConfig(t, card, card)
	cfg.Traffic.MsgsPerConn = len(drops)
	cfg.Traffic.MsgSize = 10 * 1024
	cfg.Requester.AdaptiveRetrans = adaptive
	cfg.RunLimitNs = 60e9
	cfg.NewSwitch = newTestSwitch(lastPacketRules(drops)...)
	return cfg
}

// TestTimeoutNonAdaptive is seed 001 §6.3 Fig. 12(b): timeout 14 (minimum 0.0671 s), the last packet of each
// of 5 10 KB WRITEs dropped 7 times: the first timeout of a message is 0.2-0.4 s, later ones ~0.537 s.
func TestTimeoutNonAdaptive(t *testing.T) {
	for _, card := range []string{"cx4lx", "cx5", "cx6dx", "e810"} {
		t.Run(card, func(t *testing.T) {
			res, c := run(t, timeoutConfig(t, card, false, []int{7, 7, 7, 7, 7}))
			if st := res.PerConn[0].Status; st != rnic.ConnOK {
				t.Fatalf("status %s: want ok (7 drops are within retry_cnt 7)", st)
			}
			for m, ts := range transmissions(t, res, c, 5) {
				g := gaps(ts)
				t.Logf("message %d timeouts (s): %.4f", m+1, g)
				if len(g) != 7 {
					t.Fatalf("message %d: %d timeouts: want 7", m+1, len(g))
				}
				if g[0] < 0.2 || g[0] > 0.41 {
					t.Errorf("message %d: first timeout %.4f s: want 0.2-0.4 s", m+1, g[0])
				}
				for k, v := range g[1:] {
					if math.Abs(v-0.537) > 0.01 {
						t.Errorf("message %d: timeout %d = %.4f s: want ~0.537 s", m+1, k+2, v)
					}
				}
			}
		})
	}
}

// TestTimeoutAdaptiveCX6 is seed 000 §6.3 / seed 001 §6.3 Fig. 12(a): with adaptive retransmission, the first
// message's timeouts are 0.0056, 0.0041, 0.0084, 0.0167, 0.0251, 0.0671, 0.1342 s; the first timeout of the 2nd
// message is ~0.267 s and of later messages ~0.671 s.
func TestTimeoutAdaptiveCX6(t *testing.T) {
	res, c := run(t, timeoutConfig(t, "cx6dx", true, []int{7, 7, 7, 7, 7}))
	if st := res.PerConn[0].Status; st != rnic.ConnOK {
		t.Fatalf("status %s: want ok", st)
	}
	tr := transmissions(t, res, c, 5)
	want := []float64{0.0056, 0.0041, 0.0084, 0.0167, 0.0251, 0.0671, 0.1342}
	g := gaps(tr[0])
	t.Logf("message 1 timeouts (s): %.4f; message 2: %.4f", g, gaps(tr[1]))
	if len(g) != len(want) {
		t.Fatalf("message 1: timeouts %v: want %d", g, len(want))
	}
	for i := range want {
		if math.Abs(g[i]-want[i]) > 0.05*want[i]+0.0002 {
			t.Errorf("message 1: timeout %d = %.4f s: want %.4f s", i+1, g[i], want[i])
		}
	}
	firsts := []float64{0.267, 0.671, 0.671, 0.671}
	for m := 1; m < 5; m++ {
		g := gaps(tr[m])
		if len(g) == 0 || math.Abs(g[0]-firsts[m-1]) > 0.05*firsts[m-1] {
			t.Errorf("message %d: timeouts %v: want the first ~%.3f s", m+1, g, firsts[m-1])
		}
	}
}

// TestMaxRetries is seed 001 Table 2 (retry_cnt 7): non-adaptive retries exactly 7 times before
// IBV_WC_RETRY_EXC_ERR; adaptive retries 13 times on the first message that times out, and on the 5th
// message 7 (cx4lx) or 8 (cx5, cx6dx).
func TestMaxRetries(t *testing.T) {
	cases := []struct {
		card     string
		adaptive bool
		drops    []int
		want     int
	}{
		{"cx6dx", false, []int{-1}, 7},
		{"e810", false, []int{-1}, 7},
		{"cx4lx", true, []int{-1}, 13},
		{"cx5", true, []int{-1}, 13},
		{"cx6dx", true, []int{-1}, 13},
		{"cx4lx", true, []int{1, 1, 1, 1, -1}, 7},
		{"cx5", true, []int{1, 1, 1, 1, -1}, 8},
		{"cx6dx", true, []int{1, 1, 1, 1, -1}, 8},
	}
	for _, tc := range cases {
		name := tc.card
		if tc.adaptive {
			name += "/adaptive"
		}
		t.Run(name+"/msg"+string(rune('0'+len(tc.drops))), func(t *testing.T) {
			res, c := run(t, timeoutConfig(t, tc.card, tc.adaptive, tc.drops))
			if st := res.PerConn[0].Status; st != rnic.ConnRetryExceeded {
				t.Fatalf("status %s: want %s", st, rnic.ConnRetryExceeded)
			}
			tr := transmissions(t, res, c, len(tc.drops))
			last := tr[len(tc.drops)-1]
			if got := len(last) - 1; got != tc.want {
				t.Errorf("message %d: %d retries: want %d", len(tc.drops), got, tc.want)
			}
		})
	}
}
