package netsim

import (
	"testing"

	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
)

// etsRun is seed 000 §6.2.1: two QPs; QP0's every 50th packet ECN-marked so that DCQCN slows it; with twoTCs
// the QPs sit in two ETS classes of equal weight, else in one class. It returns both QPs' goodput.
func etsRun(t *testing.T, card string, twoTCs, ecn bool) (g0, g1 float64) {
	cfg := baseConfig(t, card, card)
	cfg.Traffic.NumConns = 2
	cfg.Traffic.MsgsPerConn = 8
	cfg.Traffic.MsgSize = 1 << 20
	cfg.Traffic.TxDepth = 4
	cfg.Traffic.DSCPList = []int{10, 20}
	cfg.Requester.DCQCNRPEnable = true
	cfg.Responder.DCQCNNPEnable = true
	if twoTCs {
		cfg.Requester.ETS = lab.ETSConfig{DSCPToTC: map[int]int{10: 0, 20: 1},
			Classes: []lab.TrafficClass{{TC: 0, Weight: 50}, {TC: 1, Weight: 50}}}
	} else {
		cfg.Requester.ETS = lab.ETSConfig{DSCPToTC: map[int]int{10: 0, 20: 0},
			Classes: []lab.TrafficClass{{TC: 0, Weight: 50}, {TC: 1, Weight: 50}}}
	}
	if ecn {
		cfg.NewSwitch = newTestSwitch(&rule{conn: 0, every: 50, action: tECN})
	}
	res, _ := run(t, cfg)
	for k, pc := range res.PerConn {
		if pc.Status != rnic.ConnOK {
			t.Fatalf("connection %d: status %s", k, pc.Status)
		}
	}
	// QP1's goodput while QP0 is still sending: both start at 0; QP1 finishes first.
	return res.PerConn[0].GoodputGbps, res.PerConn[1].GoodputGbps
}

// TestETSWorkConserving: QP1 stays near its 50% guarantee on cx6dx (non-work-conserving ETS) although QP0
// leaves bandwidth unused; on cx5, and with both QPs in one class on cx6dx, QP1 takes the spare bandwidth.
func TestETSWorkConserving(t *testing.T) {
	cases := []struct {
		card         string
		twoTCs, ecn  bool
		q1Min, q1Max float64
		q0Max        float64
	}{
		{"cx6dx", true, false, 42, 50, 50}, // (1) vanilla: both ~50%
		{"cx6dx", true, true, 42, 52, 40},  // (2) the bug: QP1 stays at its guarantee
		{"cx5", true, true, 60, 100, 40},
		{"cx6dx", false, true, 60, 100, 40}, // (3) one queue: QP1 takes the spare
	}
	for _, tc := range cases {
		g0, g1 := etsRun(t, tc.card, tc.twoTCs, tc.ecn)
		t.Logf("%s two classes=%v ecn=%v: QP0 %.1f Gb/s, QP1 %.1f Gb/s", tc.card, tc.twoTCs, tc.ecn, g0, g1)
		if g0 > tc.q0Max {
			t.Errorf("%s: QP0 %.1f Gb/s: want DCQCN to hold it below %.0f", tc.card, g0, tc.q0Max)
		}
		if g1 < tc.q1Min || g1 > tc.q1Max {
			t.Errorf("%s two classes=%v: QP1 %.1f Gb/s: want %.0f..%.0f", tc.card, tc.twoTCs, g1, tc.q1Min, tc.q1Max)
		}
	}
}
