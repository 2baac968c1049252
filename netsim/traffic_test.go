package netsim

import (
	"net/netip"
	"testing"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// TestCleanRuns: without events every verb completes, every mirrored frame is a valid RoCEv2 frame (headers,
// ICRC, DSCP/ECT(0), UDP 4791, MigReq as the NIC sends it) and the packet counts are what the verb implies.
func TestCleanRuns(t *testing.T) {
	for _, verb := range []string{"write", "send", "read", "send_read"} {
		t.Run(verb, func(t *testing.T) {
			cfg := baseConfig(t, "cx6dx", "e810")
			cfg.Traffic.Verb = verb
			cfg.Traffic.NumConns = 3
			cfg.Traffic.NumSendConns, cfg.Traffic.NumReadConns = 2, 1
			cfg.Traffic.MsgsPerConn = 4
			cfg.Traffic.MsgSize = 5000 // 5 packets, the last one short
			cfg.Traffic.DSCPList = []int{26, 10}
			res, c := run(t, cfg)
			data, readReq := map[uint32]int{}, 0
			for i := range c.frames {
				p := c.decode(t, i)
				if p.CheckICRC() != roce.ICRCGood {
					t.Fatalf("frame %d: ICRC %v: want good", i, p.CheckICRC())
				}
				if p.UDPDst != roce.UDPPort || p.ECN() != 2 || p.IPTotLen+14 != len(c.frames[i]) {
					t.Fatalf("frame %d: udp dport %d, ecn %d, ip length %d of %d bytes", i, p.UDPDst, p.ECN(), p.IPTotLen, len(c.frames[i]))
				}
				fromReq := p.SrcIP == cfg.Requester.IPs[0]
				if p.BTH.MigReq != fromReq { // cx6dx sends MigReq=1, e810 MigReq=0
					t.Fatalf("frame %d from requester=%v: MigReq %v", i, fromReq, p.BTH.MigReq)
				}
				op := p.BTH.Opcode
				if op.CarriesPayload() {
					data[p.BTH.DestQP]++
					want := 1024
					if op.IsLast() || op == roce.RCWriteOnly || op == roce.RCSendOnly || op == roce.RCReadResponseOnly {
						want = 5000 - 4*1024
					}
					if p.PayloadLen != want {
						t.Fatalf("frame %d %v: payload %d: want %d", i, op, p.PayloadLen, want)
					}
					for k, b := range p.Payload {
						if b != 0 {
							t.Fatalf("frame %d: payload byte %d = %#x: want zeros", i, k, b)
						}
					}
				}
				if op.IsReadRequest() {
					readReq++
				}
			}
			wantReads := 0
			for k, m := range res.Conns {
				pc := res.PerConn[k]
				if pc.Status != rnic.ConnOK || pc.Completed != 4 || len(pc.MCTNs) != 4 {
					t.Fatalf("connection %d: %+v: want 4 completed messages", k, pc)
				}
				sink := m.RespQPN
				if m.Verb == "read" {
					sink = m.ReqQPN
					wantReads += 4
				}
				if data[sink] != 20 || pc.DataPackets != 20 || pc.Retransmissions != 0 {
					t.Errorf("connection %d (%s): %d data packets on the wire, %d counted, %d retransmissions: want 20, 20, 0",
						k, m.Verb, data[sink], pc.DataPackets, pc.Retransmissions)
				}
				if m.PacketsPerMsg != 5 || m.NumMsgs != 4 {
					t.Errorf("metadata %+v: want 5 packets per message, 4 messages", m)
				}
			}
			if readReq != wantReads {
				t.Errorf("%d READ requests: want %d", readReq, wantReads)
			}
			fromReq := uint64(0)
			for i := range c.frames {
				if c.decode(t, i).SrcIP == cfg.Requester.IPs[0] {
					fromReq++
				}
			}
			if v, _ := counter(res.Counters.Requester.Finish, "tx_packets_phy"); v != fromReq {
				t.Errorf("requester tx_packets_phy %d: want the %d frames it put on the wire", v, fromReq)
			}
			if v, _ := counter(res.Counters.Requester.Finish, "rx_packets_phy"); v != uint64(len(c.frames))-fromReq {
				t.Errorf("requester rx_packets_phy %d: want %d", v, uint64(len(c.frames))-fromReq)
			}
			sp := res.SwitchPorts
			if got := sp[0].RxRoCE + sp[1].RxRoCE; got != uint64(len(c.frames)) || sp[0].Mirrored+sp[1].Mirrored != got ||
				sp[0].TxRoCE != sp[1].RxRoCE || sp[1].TxRoCE != sp[0].RxRoCE {
				t.Errorf("switch counters %+v: want every RoCE frame received, mirrored and forwarded (%d frames)", sp, len(c.frames))
			}
			d0 := 0
			for _, d := range c.dumper {
				if d == 0 {
					d0++
				}
			}
			if d0*2 != len(c.frames) && d0*2 != len(c.frames)+1 {
				t.Errorf("dumper 0 got %d of %d frames: want round robin over 2", d0, len(c.frames))
			}
		})
	}
}

// TestCNPAndDataFormat checks a CNP against the real ConnectX-4 Lx CNP's facts (PROVENANCE.md) and the data
// packets' DSCP per connection and UDP source port per QP.
func TestDSCPAndSourcePort(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.Traffic.NumConns = 2
	cfg.Traffic.DSCPList = []int{26, 10}
	res, c := run(t, cfg)
	sport := map[uint32]uint16{}
	for i := range c.frames {
		p := c.decode(t, i)
		if !p.BTH.Opcode.CarriesPayload() {
			continue
		}
		k := 0
		if p.BTH.DestQP == res.Conns[1].RespQPN {
			k = 1
		}
		if want := cfg.Traffic.DSCPList[k]; int(p.DSCP()) != want {
			t.Fatalf("connection %d: DSCP %d: want %d", k, p.DSCP(), want)
		}
		if s, ok := sport[p.BTH.DestQP]; ok && s != p.UDPSrc {
			t.Fatalf("QP %#x: UDP source port changed %d -> %d", p.BTH.DestQP, s, p.UDPSrc)
		}
		sport[p.BTH.DestQP] = p.UDPSrc
	}
	if len(sport) != 2 || sport[res.Conns[0].RespQPN] == sport[res.Conns[1].RespQPN] {
		t.Fatalf("source ports %v: want one distinct port per QP", sport)
	}
}

// TestMCTAndGoodputAtLineRate: a 10 KB WRITE at 100 Gb/s takes its serialization (~0.9 us) plus a round trip
// and the ACK generation; back-to-back 100 KB messages with 4 outstanding reach near line rate.
func TestMCTAndGoodputAtLineRate(t *testing.T) {
	cfg := baseConfig(t, "cx6dx", "cx6dx")
	cfg.Traffic.MsgsPerConn = 10
	var calls int
	var last int64
	cfg.ProgressEvery = 50
	cfg.Progress = func(ns int64, ev uint64) {
		if ns < last || ev != uint64(calls+1)*50 {
			t.Fatalf("progress(%d ns, %d events) after %d ns, call %d: want monotonic time every 50 events", ns, ev, last, calls)
		}
		calls++
		last = ns
	}
	res, _ := run(t, cfg)
	if calls == 0 || uint64(calls) != res.Events/50 {
		t.Fatalf("%d progress calls for %d events: want one per 50", calls, res.Events)
	}
	for _, m := range res.PerConn[0].MCTNs {
		if m < 2000 || m > 5000 {
			t.Fatalf("10 KB MCT %d ns: want 2-5 us (0.9 us on the wire + RTT + ACK generation)", m)
		}
	}
	cfg.Progress = nil
	cfg.Traffic.MsgsPerConn = 50
	cfg.Traffic.MsgSize = 100 * 1024
	cfg.Traffic.TxDepth = 4
	res, _ = run(t, cfg)
	// 1024 B of payload per 1082 B frame + 24 B of Ethernet overhead: at most 92.6 Gb/s of goodput.
	if g := res.PerConn[0].GoodputGbps; g < 85 || g > 92.6 {
		t.Fatalf("goodput %.2f Gb/s: want 85-92.6 at 100 Gb/s", g)
	}
}

// TestPSNWrap runs a connection whose initial PSN is 5 below 2^24: PSNs wrap to 0 and everything completes
// without retransmission.
func TestPSNWrap(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.Traffic.MsgsPerConn = 3
	cfg.ForceIPSN = func(int) (roce.PSN, bool) { return 1<<24 - 5, true }
	cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 7, action: tDrop, times: 1}) // PSN 2, after the wrap
	res, c := run(t, cfg)
	if res.Conns[0].ReqIPSN != 1<<24-5 {
		t.Fatalf("initial PSN %d: want forced 2^24-5", res.Conns[0].ReqIPSN)
	}
	pc := res.PerConn[0]
	if pc.Status != rnic.ConnOK || pc.Completed != 3 {
		t.Fatalf("%+v: want 3 completed", pc)
	}
	sawWrap := false
	for i := range c.frames {
		p := c.decode(t, i)
		if p.BTH.Opcode.CarriesPayload() && p.BTH.PSN < 10 {
			sawWrap = true
		}
	}
	if !sawWrap || pc.Retransmissions == 0 {
		t.Fatalf("wrap seen %v, %d retransmissions: want PSNs past 2^24 and the go-back-N recovery after it", sawWrap, pc.Retransmissions)
	}
}

// TestBarrierAndMultiGID: with barrier, no connection starts message k+1 before all finished message k; with
// multi-GID connection i uses IPs[i % len].
func TestBarrierAndMultiGID(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.Traffic.NumConns = 3
	cfg.Traffic.MsgsPerConn = 3
	cfg.Traffic.Barrier = true
	cfg.Traffic.MultiGID = true
	cfg.Requester.IPs = []netip.Addr{netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.12")}
	cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 3, action: tDrop, times: 1}) // slows round 1 of conn 0
	res, c := run(t, cfg)
	for i, m := range res.Conns {
		if want := cfg.Requester.IPs[i%2]; m.ReqIP != want {
			t.Errorf("connection %d: source IP %v: want %v", i, m.ReqIP, want)
		}
	}
	// The last completion of round 1 precedes every first packet of round 2.
	var endRound1 int64
	for _, pc := range res.PerConn {
		endRound1 = max(endRound1, pc.FirstPostNs+pc.MCTNs[0])
	}
	for i := range c.frames {
		p := c.decode(t, i)
		for _, m := range res.Conns {
			if p.BTH.DestQP == m.RespQPN && p.BTH.Opcode.CarriesPayload() && p.BTH.PSN.Diff(m.ReqIPSN) >= 10 && c.ts[i] < endRound1 {
				t.Fatalf("round 2 packet at %d ns before round 1 ended at %d ns", c.ts[i], endRound1)
			}
		}
	}
}

// TestWithInjector drives the real event injector (package inject) through inject.Logic: a drop intent on
// connection 0 causes exactly one retransmission round.
func TestWithInjector(t *testing.T) {
	cfg := baseConfig(t, "cx6dx", "cx6dx")
	cfg.NewSwitch = func(conns []inject.ConnMeta) (inject.Logic, error) {
		return inject.New(inject.Config{Conns: conns, DumperWeights: []int{1, 1},
			Intents: []inject.Intent{{Conn: 0, Kind: inject.KindData, PSN: 4, Iter: 1, Action: roce.EventDrop}}})
	}
	res, c := run(t, cfg)
	if res.PerConn[0].Status != rnic.ConnOK || res.PerConn[0].Retransmissions == 0 {
		t.Fatalf("%+v: want ok after a go-back-N retransmission", res.PerConn[0])
	}
	ic, ok := res.Switch.(inject.Counters)
	if !ok || ic.Dropped != 1 || ic.Mirrored != uint64(len(c.frames)) {
		t.Fatalf("injector counters %+v: want 1 drop and every frame mirrored (%d)", res.Switch, len(c.frames))
	}
}

// TestCorruptedFrameDropped: a frame whose ICRC no longer matches is dropped by the receiving NIC and counted
// (rx_icrc_encapsulated), and go-back-N recovers the message.
func TestCorruptedFrameDropped(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 4, action: tCorrupt, times: 1})
	res, _ := run(t, cfg)
	v, ok := counter(res.Counters.Responder.Finish, "rx_icrc_encapsulated")
	if !ok || v != 1 {
		t.Fatalf("rx_icrc_encapsulated = %d (exposed %v): want 1", v, ok)
	}
	if pc := res.PerConn[0]; pc.Status != rnic.ConnOK || pc.Retransmissions == 0 {
		t.Fatalf("%+v: want ok after retransmission", pc)
	}
}

// TestRNRExceeded: SENDs beyond the receive WQEs posted get RNR NAKs; with rnr_retry 2 the WQE fails with
// IBV_WC_RNR_RETRY_EXC_ERR after the first message completed.
func TestRNRExceeded(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.Traffic.Verb = "send"
	cfg.Traffic.MsgsPerConn = 3
	cfg.Traffic.RecvWQEs = 1
	cfg.Traffic.RNRRetry = 2
	res, c := run(t, cfg)
	pc := res.PerConn[0]
	if pc.Status != rnic.ConnRNRExceeded || pc.Completed != 1 {
		t.Fatalf("%+v: want rnr-retry-exceeded after 1 completed message", pc)
	}
	rnr := 0
	for i := range c.frames {
		if c.decode(t, i).IsRNRNAK() {
			rnr++
		}
	}
	if rnr != 3 {
		t.Fatalf("%d RNR NAKs on the wire: want 3 (the first try and 2 retries)", rnr)
	}
}

// TestIRNSelectiveRepeat: with the irn profile one drop in a 100 KB WRITE costs one retransmitted packet
// instead of go-back-N's tail of the message.
func TestIRNSelectiveRepeat(t *testing.T) {
	retx := map[string]uint64{}
	for _, card := range []string{"irn", "cx6dx"} {
		cfg := baseConfig(t, card, card)
		cfg.Traffic.MsgSize = 100 * 1024
		cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 20, action: tDrop, times: 1})
		res, _ := run(t, cfg)
		if res.PerConn[0].Status != rnic.ConnOK {
			t.Fatalf("%s: %+v", card, res.PerConn[0])
		}
		retx[card] = res.PerConn[0].Retransmissions
	}
	if retx["irn"] != 1 || retx["cx6dx"] < 10 {
		t.Fatalf("retransmissions %v: want 1 for irn and a go-back-N tail for cx6dx", retx)
	}
}

// TestLossyLinks: random cable loss (seeded per link) is recovered by the transport, and the same seed loses
// the same frames.
func TestLossyLinks(t *testing.T) {
	cfg := baseConfig(t, "cx6dx", "cx6dx")
	cfg.Traffic.MsgsPerConn = 20
	cfg.Traffic.MsgSize = 100 * 1024
	cfg.Link.LossProb = 0.002
	cfg.RunLimitNs = 60e9
	res, _ := run(t, cfg)
	pc := res.PerConn[0]
	if res.LinkLosses == 0 || pc.Status != rnic.ConnOK || pc.Completed != 20 || pc.Retransmissions == 0 {
		t.Fatalf("%d losses, %+v: want losses recovered by retransmission", res.LinkLosses, pc)
	}
	again, _ := run(t, cfg)
	if again.LinkLosses != res.LinkLosses || again.EndNs != res.EndNs {
		t.Fatalf("second run: %d losses ending at %d ns, first %d at %d: want identical", again.LinkLosses, again.EndNs, res.LinkLosses, res.EndNs)
	}
}

// TestInjectorReorderDuplicateDelay drives the injector's frame-moving actions through the switch node: frames
// the injector copies (duplicates, released reordered frames) and delays must still reach the NIC intact.
func TestInjectorReorderDuplicateDelay(t *testing.T) {
	cfg := baseConfig(t, "cx6dx", "cx6dx")
	cfg.Traffic.MsgsPerConn = 2
	cfg.NewSwitch = func(conns []inject.ConnMeta) (inject.Logic, error) {
		return inject.New(inject.Config{Conns: conns, DumperWeights: []int{1}, Intents: []inject.Intent{
			{Conn: 0, Kind: inject.KindData, PSN: 2, Iter: 1, Action: roce.EventReorder, Behind: 2},
			// The reorder's recovery starts ITER 2 on the connection: the later intents match any round.
			{Conn: 0, Kind: inject.KindData, PSN: 13, Action: roce.EventDuplicate, Copies: 1},
			{Conn: 0, Kind: inject.KindData, PSN: 16, Action: roce.EventDelay, DelayNs: 20000},
		}})
	}
	res, _ := run(t, cfg)
	if pc := res.PerConn[0]; pc.Status != rnic.ConnOK || pc.Completed != 2 {
		t.Fatalf("%+v: want both messages completed", pc)
	}
	fin := res.Counters.Responder.Finish
	oos, _ := counter(fin, "out_of_sequence")
	dup, _ := counter(fin, "duplicate_request")
	if oos == 0 || dup == 0 {
		t.Fatalf("out_of_sequence %d, duplicate_request %d: want both > 0 (reorder, duplicate)", oos, dup)
	}
	if icrc, _ := counter(fin, "rx_icrc_encapsulated"); icrc != 0 {
		t.Fatalf("rx_icrc_encapsulated %d: want 0 (copies and delayed frames are intact)", icrc)
	}
	if mct := res.PerConn[0].MCTNs[1]; mct < 20000 {
		t.Fatalf("second message MCT %d ns: want > the 20 us delay of its packet", mct)
	}
}
