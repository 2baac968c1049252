package netsim

import (
	"net/netip"
	"testing"

	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
)

// cnpsPerConn counts the CNPs seen at the switch per connection (by destination QP) and checks their format
// (nic-behaviors.md §1).
func cnpsPerConn(t *testing.T, res *lab.Result, c *capture) ([]int, []int64) {
	t.Helper()
	n := make([]int, len(res.Conns))
	var ts []int64
	for i := range c.frames {
		p := c.decode(t, i)
		if !p.IsCNP() {
			continue
		}
		if p.DSCP() != 48 || p.ECN() != 2 || p.BTH.PSN != 0 || !p.BTH.BECN || p.PayloadLen != 16 || p.CheckICRC() != 1 ||
			p.UDPSrc != 0 || p.UDPDst != 4791 {
			t.Fatalf("CNP %d: dscp %d ecn %d psn %d becn %v payload %d icrc %v udp %d->%d: want 48, 2, 0, true, 16, good, 0->4791",
				i, p.DSCP(), p.ECN(), p.BTH.PSN, p.BTH.BECN, p.PayloadLen, p.CheckICRC(), p.UDPSrc, p.UDPDst)
		}
		found := false
		for k, m := range res.Conns {
			if p.BTH.DestQP == m.ReqQPN && p.DstIP == m.ReqIP {
				n[k]++
				found = true
			}
		}
		if !found {
			t.Fatalf("CNP %d to QP %#x at %v: want a data sender's QP", i, p.BTH.DestQP, p.DstIP)
		}
		ts = append(ts, c.ts[i])
	}
	return n, ts
}

func counter(snap []rnic.Counter, name string) (uint64, bool) {
	for _, c := range snap {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

// TestCNPLimiterScope is seed 001 §6.4 (Tables 3-4) with seed 000 §6.3's scopes: three connections from three
// source IPs to one responder, 1 MB WRITEs, min_time_between_cnps 50 us, ECN on the 50th and 950th packet of
// each, DCQCN RP disabled. Per-port limiters (cx5, cx6dx) answer only the first mark of each round; per
// destination IP (cx4lx) and per QP (e810, hidden ~50 us) answer each.
func TestCNPLimiterScope(t *testing.T) {
	cases := []struct {
		card string
		want []int
	}{
		{"cx6dx", []int{2, 0, 0}},
		{"cx5", []int{2, 0, 0}},
		{"cx4lx", []int{2, 2, 2}},
		{"e810", []int{2, 2, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.card, func(t *testing.T) {
			cfg := baseConfig(t, tc.card, tc.card)
			cfg.Requester.IPs = []netip.Addr{netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.12"),
				netip.MustParseAddr("10.0.0.13")}
			cfg.Traffic.MultiGID = true
			cfg.Traffic.NumConns = 3
			cfg.Traffic.MsgSize = 1 << 20
			cfg.Requester.DCQCNRPEnable = false
			cfg.Responder.DCQCNNPEnable = true
			iv := int64(50000)
			cfg.Responder.MinTimeBetweenCNPsNs = &iv
			var rules []*rule
			for k := 0; k < 3; k++ {
				rules = append(rules, &rule{conn: k, psnOff: 49, action: tECN}, &rule{conn: k, psnOff: 949, action: tECN})
			}
			cfg.NewSwitch = newTestSwitch(rules...)
			res, c := run(t, cfg)
			got, _ := cnpsPerConn(t, res, c)
			// The limiter answers whichever connection's mark arrives first; compare the sorted counts.
			if !sameMultiset(got, tc.want) {
				t.Errorf("CNPs per connection %v: want %v (in some order)", got, tc.want)
			}
			fin := res.Counters.Responder.Finish
			total := uint64(got[0] + got[1] + got[2])
			switch tc.card {
			case "e810":
				if v, _ := counter(fin, "cnpSent"); v != 0 {
					t.Errorf("e810 cnpSent = %d: want 0 (counter bug, seed 000 §6.2.4) although %d CNPs were sent", v, total)
				}
				if v, _ := counter(fin, "RxECNMrkd"); v != 6 {
					t.Errorf("RxECNMrkd = %d: want 6", v)
				}
			default:
				if v, _ := counter(fin, "np_cnp_sent"); v != total {
					t.Errorf("np_cnp_sent = %d: want %d", v, total)
				}
				if v, _ := counter(fin, "np_ecn_marked_roce_packets"); v != 6 {
					t.Errorf("np_ecn_marked_roce_packets = %d: want 6", v)
				}
			}
		})
	}
}

func sameMultiset(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	cnt := map[int]int{}
	for _, v := range a {
		cnt[v]++
	}
	for _, v := range b {
		cnt[v]--
	}
	for _, v := range cnt {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestCNPHiddenIntervalE810 is seed 000 §6.3: marking every packet, E810 generates CNPs ~50 us apart.
func TestCNPHiddenIntervalE810(t *testing.T) {
	cfg := baseConfig(t, "e810", "e810")
	cfg.Traffic.MsgSize = 4 << 20
	cfg.Requester.DCQCNRPEnable = false
	cfg.Responder.DCQCNNPEnable = true
	cfg.NewSwitch = newTestSwitch(&rule{conn: 0, every: 1, action: tECN})
	res, c := run(t, cfg)
	n, ts := cnpsPerConn(t, res, c)
	if n[0] < 3 {
		t.Fatalf("%d CNPs: want several", n[0])
	}
	for i := 1; i < len(ts); i++ {
		if d := ts[i] - ts[i-1]; d < 49000 || d > 52000 {
			t.Errorf("CNP interval %d ns: want ~50 us", d)
		}
	}
}

// TestNAKTriggeredCNP is nic-behaviors.md §2: on cx5 and cx6dx an out-of-order arrival (NAK) also generates a
// CNP when the NP is enabled; cx4lx and e810 do not.
func TestNAKTriggeredCNP(t *testing.T) {
	for card, want := range map[string]int{"cx5": 1, "cx6dx": 1, "cx4lx": 0, "e810": 0} {
		t.Run(card, func(t *testing.T) {
			cfg := baseConfig(t, card, card)
			cfg.Traffic.MsgSize = 100 * 1024
			cfg.Responder.DCQCNNPEnable = true
			cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 50, action: tDrop, times: 1})
			res, c := run(t, cfg)
			n, _ := cnpsPerConn(t, res, c)
			if n[0] != want {
				t.Errorf("%d CNPs after one NAK: want %d", n[0], want)
			}
		})
	}
}
