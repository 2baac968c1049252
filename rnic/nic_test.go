package rnic

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// Seed 001 §6.4 Tables 3/4: three QPs from three source IPs marked at ~9, 16, 17 us with a 50 us interval.
// Port scope (cx5/cx6dx) answers only the first; dest-ip scope (cx4lx) and qp scope (e810) answer each.
func TestNPLimiterScopes(t *testing.T) {
	marks := []struct {
		at  Time
		key CNPKey
	}{
		{9000, CNPKey{Port: 1, DstIP: netip.MustParseAddr("10.0.0.2"), QPN: 0x101}},
		{16000, CNPKey{Port: 1, DstIP: netip.MustParseAddr("10.0.0.12"), QPN: 0x102}},
		{17000, CNPKey{Port: 1, DstIP: netip.MustParseAddr("10.0.0.22"), QPN: 0x103}},
		// a second mark of QP1 within 50 us: suppressed in every scope
		{30000, CNPKey{Port: 1, DstIP: netip.MustParseAddr("10.0.0.2"), QPN: 0x101}},
		// a second mark of QP1 after 50 us: answered where the scope's timer expired
		{60000, CNPKey{Port: 1, DstIP: netip.MustParseAddr("10.0.0.2"), QPN: 0x101}},
	}
	for _, tc := range []struct {
		prof string
		want []bool
	}{
		{"cx6dx", []bool{true, false, false, false, true}},
		{"cx5", []bool{true, false, false, false, true}},
		{"cx4lx", []bool{true, true, true, false, true}},
		{"e810", []bool{true, true, true, false, true}},
	} {
		np := NewNP(mustProfile(t, tc.prof), 50000, true)
		for i, m := range marks {
			if got := np.OnCE(m.at, m.key); got != tc.want[i] {
				t.Errorf("%s (%s scope): mark %d at %d ns: CNP %v, want %v", tc.prof, np.Scope(), i, m.at, got, tc.want[i])
			}
		}
	}
	// qp scope separates two QPs of the same IP; dest-ip does not.
	a := CNPKey{DstIP: netip.MustParseAddr("10.0.0.2"), QPN: 1}
	b := CNPKey{DstIP: netip.MustParseAddr("10.0.0.2"), QPN: 2}
	qp, ip := NewNP(mustProfile(t, "e810"), 50000, true), NewNP(mustProfile(t, "cx4lx"), 50000, true)
	qp.OnCE(0, a)
	ip.OnCE(0, a)
	if !qp.OnCE(1000, b) || ip.OnCE(1000, b) {
		t.Errorf("qp scope must answer another QP of the same IP, dest-ip scope must not")
	}
	// Disabled NP and NAK triggers.
	if NewNP(mustProfile(t, "cx5"), 0, false).OnCE(0, a) {
		t.Errorf("disabled NP sent a CNP")
	}
	if !NewNP(mustProfile(t, "cx5"), 0, true).OnNAK(0, a) || NewNP(mustProfile(t, "cx4lx"), 0, true).OnNAK(0, a) {
		t.Errorf("NAK-triggered CNP: want on cx5, not on cx4lx")
	}
	n := NewNP(mustProfile(t, "cx5"), 0, true)
	n.SetNAKTrigger(false)
	if n.OnNAK(0, a) {
		t.Errorf("SetNAKTrigger(false) ignored")
	}
	// Interval 0: every mark answered.
	z := NewNP(mustProfile(t, "cx5"), 0, true)
	if !z.OnCE(5, a) || !z.OnCE(5, b) {
		t.Errorf("interval 0 must answer every mark")
	}
}

func TestCountersVendorNamesAndBugs(t *testing.T) {
	nv := NewCounters(mustProfile(t, "cx5"))
	nv.Inc(CtrNPCNPSent, 3)
	nv.Inc(CtrRxPrio0Pause+3, 2)
	nv.Inc(NumCounters, 1) // out of range: ignored
	snap := map[string]uint64{}
	for _, c := range nv.Snapshot() {
		snap[c.Name] = c.Value
	}
	for _, name := range []string{"out_of_sequence", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err",
		"duplicate_request", "rnr_nak_retry_err", "out_of_buffer", "rx_icrc_encapsulated", "np_ecn_marked_roce_packets",
		"np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart",
		"roce_slow_restart_cnps", "rx_discards_phy", "tx_packets_phy", "rx_packets_phy", "tx_bytes_phy", "rx_bytes_phy",
		"rx_prio3_pause", "tx_prio7_pause"} {
		if _, ok := snap[name]; !ok {
			t.Errorf("nvidia snapshot lacks %s", name)
		}
	}
	if snap["np_cnp_sent"] != 3 || snap["rx_prio3_pause"] != 2 {
		t.Errorf("values: np_cnp_sent %d, rx_prio3_pause %d", snap["np_cnp_sent"], snap["rx_prio3_pause"])
	}

	in := NewCounters(mustProfile(t, "e810"))
	in.Inc(CtrNPCNPSent, 5)
	in.Inc(CtrNPECNMarked, 5)
	in.Inc(CtrOutOfSequence, 1)
	isnap := map[string]uint64{}
	for _, c := range in.Snapshot() {
		isnap[c.Name] = c.Value
	}
	if v, ok := isnap["cnpSent"]; !ok || v != 0 {
		t.Errorf("e810 cnpSent = %d (present %v), want 0 (counter bug)", v, ok)
	}
	if in.Actual(CtrNPCNPSent) != 5 || isnap["RxECNMrkd"] != 5 {
		t.Errorf("e810: actual CNPs %d, RxECNMrkd %d, want 5, 5", in.Actual(CtrNPCNPSent), isnap["RxECNMrkd"])
	}
	if _, ok := isnap["out_of_sequence"]; ok {
		t.Errorf("intel snapshot must not carry NVIDIA names")
	}
	for _, name := range []string{"cnpHandled", "cnpIgnored", "RxUDP", "TxUDP", "ip4InDiscards"} {
		if _, ok := isnap[name]; !ok {
			t.Errorf("intel snapshot lacks %s", name)
		}
	}
}

func TestProfilesLoadAndValidate(t *testing.T) {
	names := ProfileNames()
	want := []string{"collie-f", "cx4lx", "cx5", "cx6dx", "cx6vpi-200g", "e810", "ideal", "irn", "p2100g", "rxe"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("ProfileNames = %v, want %v", names, want)
	}
	for _, n := range names {
		p := mustProfile(t, n)
		if p.Name != n {
			t.Errorf("profile %s has name %q", n, p.Name)
		}
	}
	// Every value in a shipped file carries a comment naming its source or saying it is an assumption.
	for _, n := range names {
		data, err := profileFS.ReadFile("profiles/" + n + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			trim := strings.TrimSpace(line)
			if trim == "" || strings.HasPrefix(trim, "#") || strings.HasSuffix(trim, ":") || strings.Contains(trim, ": #") {
				continue
			}
			unused := strings.HasSuffix(trim, ": 0") || strings.HasSuffix(trim, ": false") || strings.HasSuffix(trim, ": []")
			if !strings.Contains(line, "#") && !unused && !strings.HasPrefix(trim, "name:") && !strings.HasPrefix(trim, "description:") {
				t.Errorf("profiles/%s.yaml:%d: %q has no source comment", n, i+1, trim)
			}
		}
	}
	for alias, name := range map[string]string{"CX4": "cx4lx", "cx6": "cx6dx", "E810": "e810", "CX5": "cx5"} {
		if p, err := LoadProfile(alias); err != nil || p.Name != name {
			t.Errorf("LoadProfile(%s) = %v, %v; want %s", alias, p, err, name)
		}
	}
	if _, err := LoadProfile("cx9"); err == nil || !strings.Contains(err.Error(), "cx4lx") {
		t.Errorf("unknown profile error %v should list the known ones", err)
	}
}

func TestUserProfileErrors(t *testing.T) {
	base, err := profileFS.ReadFile("profiles/cx5.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A good user file loads.
	good := write("mine.yaml", strings.Replace(string(base), "name: cx5", "name: mine", 1))
	if p, err := LoadProfile(good); err != nil || p.Name != "mine" {
		t.Fatalf("user profile: %v", err)
	}
	lines := strings.Split(string(base), "\n")
	lineOf := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return i + 1
			}
		}
		t.Fatalf("no line %q", prefix)
		return 0
	}
	// Unknown key: file:line of the key.
	ln := lineOf("nak-generation-ns:")
	bad := strings.Replace(string(base), "  nak-generation-ns:", "  nack-generation-ns:", 1)
	_, err = LoadProfile(write("bad.yaml", bad))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:"+itoa(ln)) || !strings.Contains(err.Error(), "nack-generation-ns") {
		t.Errorf("unknown key error = %v, want bad.yaml:%d naming the key", err, ln)
	}
	// Invalid value: file:line and what was expected.
	ln = lineOf("scope:")
	bad = strings.Replace(string(base), "  scope: port", "  scope: rack", 1)
	_, err = LoadProfile(write("scope.yml", bad))
	if err == nil || !strings.Contains(err.Error(), "scope.yml:"+itoa(ln)) || !strings.Contains(err.Error(), "want port, dest-ip or qp") {
		t.Errorf("validation error = %v, want scope.yml:%d and the allowed values", err, ln)
	}
	if _, err := LoadProfile(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file error = %v", err)
	}
}

func TestDCQCNReactionPoint(t *testing.T) {
	prof := mustProfile(t, "cx5")
	ctr := NewCounters(prof)
	q, err := NewQP(QPConfig{Profile: prof, Counters: ctr, MTU: 1024, DCQCNRP: true})
	if err != nil {
		t.Fatal(err)
	}
	line := prof.LineRateBps()
	if q.RateBps() != line {
		t.Fatalf("initial rate %v, want line rate", q.RateBps())
	}
	var out Output
	q.OnCNP(0, &out)
	// alpha starts at 1 and stays 1 on a CNP: the cut keeps max(1 - 1/2, min-dec-fac) = 50%.
	if r := q.RateBps(); r != line/2 {
		t.Errorf("after first CNP rate %v, want %v", r, line/2)
	}
	if len(out.Timers) != 1 || out.Timers[0].Kind != TimerDCQCN || out.Timers[0].At != 300000 {
		t.Errorf("timers %+v, want the rate-increase timer at 300 us", out.Timers)
	}
	out.Reset()
	q.OnCNP(2000, &out) // within the 4 us monitor period: handled, no second cut
	if q.RateBps() != line/2 || ctr.Value(CtrRPCNPHandled) != 2 {
		t.Errorf("second CNP within 4 us: rate %v handled %d", q.RateBps(), ctr.Value(CtrRPCNPHandled))
	}
	q.OnCNP(10000, &out) // after the period: cut again, alpha slightly below 1
	r2 := q.RateBps()
	if !(r2 < line/2 && r2 >= line/4) {
		t.Errorf("third CNP: rate %v, want in [%v, %v)", r2, line/4, line/2)
	}
	// One timer expiry with rpg_threshold 1: additive increase (target += AI) and the rate moves halfway to it.
	out.Reset()
	q.OnTimer(310000, TimerDCQCN, &out)
	if want := (r2 + line/2 + prof.DCQCN.AIRateMbps*1e6) / 2; q.RateBps() != want {
		t.Errorf("after one increase: %v, want %v", q.RateBps(), want)
	}
	if len(out.Timers) != 1 || out.Timers[0].Kind != TimerDCQCN {
		t.Errorf("increase timer not re-armed: %+v", out.Timers)
	}
	// Timer alone: additive only (slow). Timer and byte counter together: hyper increase back to line rate.
	for i := 0; i < 400 && q.RateBps() < line; i++ {
		out.Reset()
		q.rp.onBytes(int(prof.DCQCN.ByteReset))
		q.OnTimer(Time(310000+i*300000), TimerDCQCN, &out)
	}
	if q.RateBps() != line {
		t.Errorf("rate did not recover to line rate: %v", q.RateBps())
	}
	// Byte counter: sending rpg_byte_reset bytes also advances the increase stages.
	q.OnCNP(1e9, &out)
	before := q.RateBps()
	q.rp.onBytes(int(prof.DCQCN.ByteReset))
	if q.RateBps() <= before {
		t.Errorf("byte counter did not increase the rate")
	}
	// RP disabled: CNPs are ignored.
	qd, _ := NewQP(QPConfig{Profile: prof, Counters: ctr, MTU: 1024})
	qd.OnCNP(0, &out)
	if qd.RateBps() != line || ctr.Value(CtrRPCNPIgnored) != 1 {
		t.Errorf("disabled RP: rate %v ignored %d", qd.RateBps(), ctr.Value(CtrRPCNPIgnored))
	}
}

// IRN: one loss among 10 packets: the receiver NAKs each later arrival with the cumulative ACK and a SACK; the
// sender retransmits only the lost packet.
func TestIRNSelectiveRepeat(t *testing.T) {
	h := newPair(t, mustProfile(t, "irn"), 21, nil)
	h.post(0, WorkRequest{ID: 1, Verb: VerbWrite, Length: 10 * 1024})
	first := h.qp[0].cfg.SendPSN
	lost := first.Add(3)
	once := false
	h.drop = func(from int, p *Pkt) bool {
		if from == 0 && p.PSN == lost && !once {
			once = true
			return true
		}
		return false
	}
	h.run(1e9)
	naks := 0
	for _, s := range h.sent[1] {
		if s.pkt.AETH.IsNAK() {
			naks++
			if s.pkt.PSN != lost || !s.pkt.HasSACK || s.pkt.PayloadLen != SACKLen {
				t.Errorf("NAK %+v: want cumulative PSN %d with a SACK payload", s.pkt, lost)
			}
		}
	}
	if naks != 6 {
		t.Errorf("NAKs = %d, want 6 (one per out-of-order arrival)", naks)
	}
	if n := len(h.sent[0]); n != 11 {
		t.Errorf("sender sent %d packets, want 11 (10 + only the lost one)", n)
	}
	if ts := h.sends(0, lost); len(ts) != 2 {
		t.Errorf("lost packet sent %d times, want 2", len(ts))
	}
	if len(h.comps[0]) != 1 || h.comps[0][0].Status != StatusSuccess {
		t.Errorf("completions %+v", h.comps[0])
	}

	// Go-back-N for contrast: the same loss resends everything from the lost packet.
	g := newPair(t, mustProfile(t, "ideal"), 21, nil)
	g.post(0, WorkRequest{ID: 1, Verb: VerbWrite, Length: 10 * 1024})
	gfirst := g.qp[0].cfg.SendPSN
	gonce := false
	g.drop = func(from int, p *Pkt) bool {
		if from == 0 && p.PSN == gfirst.Add(3) && !gonce {
			gonce = true
			return true
		}
		return false
	}
	g.run(1e9)
	if n := len(g.sent[0]); n != 17 {
		t.Errorf("go-back-N sent %d packets, want 17 (10 + 7 from the lost one)", n)
	}
}

func TestIRNBDPCapAndRTO(t *testing.T) {
	prof := mustProfile(t, "irn")
	o := &one{t: t, ctr: NewCounters(prof)}
	q, err := NewQP(QPConfig{Profile: prof, Counters: o.ctr, LocalQPN: 0x11, RemoteQPN: 0x22, SendPSN: 5, MTU: 1024, Timeout: 14, RetryCnt: 7})
	if err != nil {
		t.Fatal(err)
	}
	o.q = q
	o.post(WorkRequest{ID: 1, Verb: VerbWrite, Length: 300 * 1024})
	if n := len(o.drain()); n != prof.IRN.BDPPackets {
		t.Fatalf("sent %d packets without ACKs, want the BDP cap %d", n, prof.IRN.BDPPackets)
	}
	if to := q.timeoutNs(); to != prof.IRN.RTOHighNs {
		t.Errorf("RTO with %d in flight = %d, want RTO_high %d", prof.IRN.BDPPackets, to, prof.IRN.RTOHighNs)
	}
	o.recv(ack(roce.PSN(5).Add(prof.IRN.BDPPackets - 3)))
	if n := len(o.drain()); n != prof.IRN.BDPPackets-2 { // BDP-2 packets acknowledged
		t.Errorf("after ACK sent %d, want %d more", n, prof.IRN.BDPPackets-2)
	}
	o2 := newOne(t, "irn", nil)
	o2.post(WorkRequest{ID: 1, Verb: VerbWrite, Length: 2 * 1024})
	o2.drain()
	if to := o2.q.timeoutNs(); to != prof.IRN.RTOLowNs {
		t.Errorf("RTO with 2 in flight = %d, want RTO_low %d", to, prof.IRN.RTOLowNs)
	}
}

func TestNAKTailFlag(t *testing.T) {
	o := newOne(t, "cx4lx", nil)
	// 20-packet WRITE; packet 18 (of 0..19) missing: the gap is within the last 3 packets.
	o.recv(Pkt{Opcode: roce.RCWriteFirst, DestQP: 0x11, PSN: 1000, RETH: roce.RETH{DMALen: 20 * 1024}})
	for i := 1; i < 18; i++ {
		o.recv(write(roce.PSN(1000+i), roce.RCWriteMiddle, false))
	}
	out := o.recv(write(1019, roce.RCWriteLast, true))
	if !out.NAKSent || !out.NAKTail {
		t.Errorf("tail gap: NAKSent %v NAKTail %v, want both", out.NAKSent, out.NAKTail)
	}
	o2 := newOne(t, "cx4lx", nil)
	o2.recv(Pkt{Opcode: roce.RCWriteFirst, DestQP: 0x11, PSN: 1000, RETH: roce.RETH{DMALen: 20 * 1024}})
	out = o2.recv(write(1005, roce.RCWriteMiddle, false))
	if !out.NAKSent || out.NAKTail {
		t.Errorf("early gap: NAKSent %v NAKTail %v, want NAK without tail", out.NAKSent, out.NAKTail)
	}
}

// Receive never panics on arbitrary packets, in any state, and the QP stays usable.
func TestReceiveArbitraryPacketsNeverPanics(t *testing.T) {
	for _, prof := range []string{"ideal", "cx5", "irn"} {
		rng := rand.New(rand.NewPCG(42, 1))
		o := newOne(t, prof, nil)
		o.q.PostRecv(3)
		o.post(WorkRequest{ID: 1, Verb: VerbRead, Length: 5000})
		o.post(WorkRequest{ID: 2, Verb: VerbWrite, Length: 3000})
		for i := 0; i < 20000; i++ {
			p := Pkt{Opcode: roce.Opcode(rng.UintN(256)), DestQP: rng.Uint32(), PSN: roce.PSN(rng.Uint32()),
				AckReq: rng.IntN(2) == 0, AETH: roce.AETH{Syndrome: uint8(rng.UintN(256)), MSN: rng.Uint32()},
				RETH:       roce.RETH{VA: rng.Uint64(), DMALen: rng.Uint32N(1 << 20)},
				PayloadLen: int(rng.Int32()) - 1<<30, SACK: roce.PSN(rng.Uint32()), HasSACK: rng.IntN(2) == 0}
			if rng.IntN(3) == 0 { // near the interesting PSNs
				p.PSN = roce.PSN(100 + rng.IntN(20) - 10)
				if rng.IntN(2) == 0 {
					p.PSN = roce.PSN(1000 + rng.IntN(20) - 10)
				}
			}
			o.now += Time(rng.IntN(1e6))
			o.recv(p)
			if rng.IntN(50) == 0 {
				o.out.Reset()
				o.q.OnTimer(o.now, TimerKind(rng.UintN(8)), &o.out)
			}
			o.drain()
			if o.q.State() == QPStateError && rng.IntN(10) == 0 { // keep exercising the RTS paths too
				o = newOne(t, prof, nil)
				o.q.PostRecv(3)
				o.post(WorkRequest{ID: 1, Verb: VerbRead, Length: 5000})
				o.post(WorkRequest{ID: 2, Verb: VerbWrite, Length: 3000})
			}
		}
	}
}

func FuzzReceive(f *testing.F) {
	f.Add(uint8(0x0c), uint32(1000), uint8(0), uint32(4096), false)
	f.Add(uint8(0x11), uint32(100), uint8(0x60), uint32(0), true)
	f.Fuzz(func(t *testing.T, op uint8, psn uint32, syn uint8, dmaLen uint32, sack bool) {
		for _, prof := range []string{"cx5", "irn"} {
			o := newOne(t, prof, nil)
			o.post(WorkRequest{ID: 1, Verb: VerbRead, Length: 3000})
			o.drain()
			o.recv(Pkt{Opcode: roce.Opcode(op), PSN: roce.PSN(psn), AETH: roce.AETH{Syndrome: syn},
				RETH: roce.RETH{DMALen: dmaLen}, HasSACK: sack, SACK: roce.PSN(psn + 1)})
			o.drain()
		}
	})
}
