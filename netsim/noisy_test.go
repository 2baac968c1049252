package netsim

import (
	"testing"

	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
)

// noisyRun is seed 000 §6.2.2: cx4lx, 36 READ connections, ten 20 KB messages each, the 5th data packet (READ
// response) of the first i connections dropped once. It returns the innocent connections' mean MCT and the
// requester's rx_discards_phy.
func noisyRun(t *testing.T, i int) (innocentMean float64, discards uint64, res *lab.Result) {
	cfg := baseConfig(t, "cx4lx", "cx4lx")
	cfg.Traffic.Verb = "read"
	cfg.Traffic.NumConns = 36
	cfg.Traffic.MsgsPerConn = 10
	cfg.Traffic.MsgSize = 20 * 1024
	cfg.RunLimitNs = 60e9
	var rules []*rule
	for k := 0; k < i; k++ {
		rules = append(rules, &rule{conn: k, psnOff: 4, action: tDrop, times: 1})
	}
	cfg.NewSwitch = newTestSwitch(rules...)
	res, err := Run(cfg)
	if err != nil {
		t.Fatalf("i=%d: %v", i, err)
	}
	var sum float64
	n := 0
	for k := i; k < 36; k++ {
		pc := res.PerConn[k]
		if pc.Status != rnic.ConnOK {
			t.Fatalf("i=%d: innocent connection %d status %s", i, k, pc.Status)
		}
		for _, m := range pc.MCTNs {
			sum += float64(m)
			n++
		}
	}
	d, _ := counter(res.Counters.Requester.Finish, "rx_discards_phy")
	d0, _ := counter(res.Counters.Requester.Start, "rx_discards_phy")
	return sum / float64(n), d - d0, res
}

// TestNoisyNeighborCX4 checks seed 000 §6.2.2 / Fig. 11: i=8: innocent MCT ~160 us and no discards; i=12 and
// 16: the shared READ-gap slow path overflows, the receive pipeline stalls and discards arriving packets
// (rx_discards_phy +107 at i=12) and the innocent connections slow down. The published ~430 ms innocent mean is
// not reproduced: the paper attributes it to discarded tail packets hitting timeouts, but the simulated
// connections run in lockstep, so the one ~25 us stall that gives ~107 discards hits the middle of every
// innocent message, never its tail; those losses are recovered through the same slow path (~0.4 ms mean).
func TestNoisyNeighborCX4(t *testing.T) {
	means := map[int]float64{}
	for _, i := range []int{0, 8, 12, 16} {
		mean, disc, res := noisyRun(t, i)
		means[i] = mean
		t.Logf("i=%2d: innocent mean MCT %.1f us, rx_discards_phy %d, end %.3f s, events %d", i, mean/1e3, disc, float64(res.EndNs)/1e9, res.Events)
		switch i {
		case 0, 8:
			if mean < 120e3 || mean > 200e3 || disc != 0 {
				t.Errorf("i=%d: innocent mean MCT %.1f us, %d discards: want ~160 us and none", i, mean/1e3, disc)
			}
		default:
			if disc < 60 || disc > 200 {
				t.Errorf("i=%d: rx_discards_phy %d: want ~107", i, disc)
			}
			if mean < 2*means[0] {
				t.Errorf("i=%d: innocent mean MCT %.1f us: want well above the undisturbed %.1f us", i, mean/1e3, means[0]/1e3)
			}
		}
	}
}
