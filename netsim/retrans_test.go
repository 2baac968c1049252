package netsim

import (
	"testing"

	"github.com/lumina-go/lumina/lab"
)

// retxTimes measures, at the switch, for a drop of the data packet at psn offset off of connection 0: the NACK
// generation latency (first later data packet -> NAK, or READ re-request for reads) and the NACK reaction
// latency (NAK -> first retransmission of the dropped packet).
func retxTimes(t *testing.T, res *lab.Result, c *capture, off int) (gen, react int64) {
	t.Helper()
	m := res.Conns[0]
	drop := m.ReqIPSN.Add(off)
	var tOOO, tNAK, tRetx int64 = -1, -1, -1
	seen := 0
	for i := range c.frames {
		p := c.decode(t, i)
		op := p.BTH.Opcode
		isData := op.CarriesPayload() && (m.Verb == "read") == op.IsReadResponse()
		switch {
		case isData && p.BTH.PSN == drop:
			seen++
			if seen == 2 && tRetx < 0 {
				tRetx = c.ts[i]
			}
		case isData && tOOO < 0 && seen == 1 && drop.Less(p.BTH.PSN):
			tOOO = c.ts[i]
		case m.Verb != "read" && p.IsNAK() && tNAK < 0:
			tNAK = c.ts[i]
		case m.Verb == "read" && op.IsReadRequest() && p.BTH.PSN == drop && tNAK < 0:
			tNAK = c.ts[i]
		}
	}
	if tOOO < 0 || tNAK < 0 || tRetx < 0 {
		t.Fatalf("drop at offset %d: out-of-order at %d, NAK at %d, retransmission at %d: want all seen", off, tOOO, tNAK, tRetx)
	}
	if m.Verb == "read" {
		// The re-issued READ request is the NAK and the retransmission at once: reaction is at the responder.
		return tNAK - tOOO, tRetx - tNAK
	}
	return tNAK - tOOO, tRetx - tNAK
}

// TestRetransmissionBehindPipelineCX6 is seed 001 §6.2 Fig. 10: with the 5th packet of each message dropped,
// CX6's retransmission latency grows with the message size from ~50 KB and is flat above ~120 KB, because the
// retransmission joins the tail of the transmit pipeline.
func TestRetransmissionBehindPipelineCX6(t *testing.T) {
	lat := map[int]int64{}
	for _, kb := range []int{10, 30, 50, 80, 100, 120, 160, 200} {
		cfg := baseConfig(t, "cx6dx", "cx6dx")
		cfg.Traffic.MsgSize = kb * 1024
		cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 4, action: tDrop, times: 1})
		res, c := run(t, cfg)
		gen, react := retxTimes(t, res, c, 4)
		lat[kb] = gen + react
		t.Logf("%3d KB: retransmission latency %d ns (generation %d, reaction %d)", kb, gen+react, gen, react)
	}
	if d := lat[30] - lat[10]; d < -300 || d > 300 {
		t.Errorf("10 KB -> 30 KB: latency changed by %d ns: want flat below ~50 KB", d)
	}
	if lat[100]-lat[50] < 1500 {
		t.Errorf("50 KB %d ns -> 100 KB %d ns: want growth of > 1.5 us between 50 and 120 KB", lat[50], lat[100])
	}
	if d := lat[200] - lat[120]; d < -300 || d > 300 {
		t.Errorf("120 KB -> 200 KB: latency changed by %d ns: want flat above ~120 KB", d)
	}
	if lat[200] < 6000 || lat[200] > 12000 || lat[10] > 6000 {
		t.Errorf("latency 10 KB %d ns, 200 KB %d ns: want ~4-5 us for small and ~4.5+3..6 us for large messages", lat[10], lat[200])
	}
}

// TestNAKGenerationTailCX4 is seed 001 §6.2 Fig. 8(a): on CX4 Lx, dropping one of the last packets of a 20 KB
// message makes the NAK take ~13 us instead of ~1.1 us.
func TestNAKGenerationTailCX4(t *testing.T) {
	gens := map[int]int64{}
	for _, off := range []int{5, 18} {
		cfg := baseConfig(t, "cx4lx", "cx4lx")
		cfg.Traffic.MsgSize = 20 * 1024
		cfg.Traffic.MsgsPerConn = 2
		cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: off, action: tDrop, times: 1})
		res, c := run(t, cfg)
		gens[off], _ = retxTimes(t, res, c, off)
		t.Logf("drop of packet %d of 20: NAK generation %d ns", off+1, gens[off])
	}
	if gens[5] > 2000 {
		t.Errorf("middle drop: NAK generation %d ns: want ~1.1 us", gens[5])
	}
	if gens[18] < 11000 || gens[18] > 15000 {
		t.Errorf("tail drop: NAK generation %d ns: want ~13 us", gens[18])
	}
}

func TestRetransmissionLatencyPerCard(t *testing.T) {
	cases := []struct {
		card, verb     string
		genMin, genMax int64 // ns
		reMin, reMax   int64
	}{
		// Published (nic-behaviors.md §2, seed 000 §6.1, seed 001 §6.2), measured at the switch as the paper
		// did; ranges allow the ~0.6 us the switch round trip adds to the NIC's own delay.
		{"cx4lx", "write", 900, 2000, 150000, 200000}, // ~1.1 us; 150-200 us
		{"cx5", "write", 1000, 2000, 2000, 6000},      // ~1-2 us; 2-6 us
		{"cx6dx", "write", 1000, 2000, 2000, 6000},    // ~1-2 us; 2-6 us
		{"e810", "write", 9000, 11500, 8000, 13000},   // ~10 us; reaction not published: the profile's 8-12 us
		{"cx4lx", "read", 140000, 160000, 0, 0},       // ~150 us
		{"cx5", "read", 1500, 3000, 0, 0},             // ~2 us
		{"cx6dx", "read", 1500, 3000, 0, 0},           // ~2 us
		{"e810", "read", 80e6, 86e6, 0, 0},            // ~83 ms
	}
	for _, tc := range cases {
		t.Run(tc.card+"/"+tc.verb, func(t *testing.T) {
			cfg := baseConfig(t, tc.card, tc.card)
			cfg.Traffic.Verb = tc.verb
			cfg.Traffic.MsgSize = 100 * 1024
			cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 50, action: tDrop, times: 1})
			res, c := run(t, cfg)
			gen, react := retxTimes(t, res, c, 50)
			t.Logf("%s %s: NACK generation %d ns, reaction %d ns, MCT %v", tc.card, tc.verb, gen, react, res.PerConn[0].MCTNs)
			if gen < tc.genMin || gen > tc.genMax {
				t.Errorf("NACK generation %d ns: want %d..%d", gen, tc.genMin, tc.genMax)
			}
			if tc.reMax > 0 && (react < tc.reMin || react > tc.reMax) {
				t.Errorf("NACK reaction %d ns: want %d..%d", react, tc.reMin, tc.reMax)
			}
		})
	}
}
