package netsim

import (
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/micro"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

func TestSubSeedIndependent(t *testing.T) {
	a, b := SubSeed(7, "qpn/requester"), SubSeed(7, "qpn/responder")
	if a == b || SubSeed(8, "qpn/requester") == a {
		t.Fatalf("sub-seeds collide: %x %x", a, b)
	}
	if SubSeed(7, "qpn/requester") != a {
		t.Fatal("sub-seed is not a function of (seed, name)")
	}
}

// traceHash runs cfg and hashes every mirrored frame with its timestamp and dumper.
func traceHash(t *testing.T, cfg lab.Config) ([32]byte, int) {
	h := sha256.New()
	n := 0
	cfg.Dump = func(d int, ts int64, f []byte) {
		h.Write([]byte{byte(d), byte(ts), byte(ts >> 8), byte(ts >> 16), byte(ts >> 24), byte(ts >> 32)})
		h.Write(f)
		n++
	}
	if _, err := Run(cfg); err != nil {
		t.Fatalf("run: %v", err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s, n
}

func TestDeterminism(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.Traffic.NumConns = 4
	cfg.Traffic.MsgsPerConn = 5
	cfg.Traffic.MsgSize = 20 * 1024
	cfg.Traffic.TxDepth = 2
	mk := func() func([]inject.ConnMeta) (inject.Logic, error) {
		return newTestSwitch(&rule{conn: 1, psnOff: 7, action: tDrop, times: 1}, &rule{conn: 2, every: 9, action: tECN})
	}
	cfg.NewSwitch = mk()
	h1, n1 := traceHash(t, cfg)
	cfg.NewSwitch = mk()
	h2, n2 := traceHash(t, cfg)
	if h1 != h2 || n1 != n2 {
		t.Fatalf("same config and seed: %d frames %x vs %d frames %x: want identical traces", n1, h1[:8], n2, h2[:8])
	}
	cfg.Seed = 2
	cfg.NewSwitch = mk()
	h3, _ := traceHash(t, cfg)
	if h3 == h1 {
		t.Fatal("a different seed gave the identical trace: want different QPNs and PSNs")
	}
}

func TestRunLimit(t *testing.T) {
	cfg := timeoutConfig(t, "cx5", false, []int{-1})
	cfg.RunLimitNs = 1e8 // the first timeout alone is 0.2-0.4 s
	_, err := Run(cfg)
	if !errors.Is(err, ErrRunLimit) || !strings.Contains(err.Error(), "0 of 1 messages completed") {
		t.Fatalf("err = %v: want a run-limit error saying what is unfinished", err)
	}
	cfg = baseConfig(t, "cx5", "cx5")
	cfg.MaxEvents = 10
	if _, err := Run(cfg); !errors.Is(err, ErrRunLimit) || !strings.Contains(err.Error(), "event limit 10") {
		t.Fatalf("err = %v: want an event-limit error", err)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		mod  func(*lab.Config)
		want string
	}{
		{func(c *lab.Config) { c.Traffic.Verb = "atomic" }, `verb "atomic"`},
		{func(c *lab.Config) { c.Traffic.MTU = 1500 }, "mtu 1500"},
		{func(c *lab.Config) { c.Traffic.Barrier, c.Traffic.TxDepth = true, 4 }, "barrier needs tx-depth 1"},
		{func(c *lab.Config) { c.Requester.Profile = nil }, "requester: no NIC profile"},
		{func(c *lab.Config) { c.Responder.IPs = nil }, "responder: no IP address"},
		{func(c *lab.Config) { c.Traffic.MsgsPerConn = 0 }, "messages per connection 0"},
		{func(c *lab.Config) { c.Traffic.DSCPList = []int{3, 64} }, "dscp-list[1] = 64"},
		{func(c *lab.Config) { c.Link.PropagationNs = -1 }, "propagation -1"},
		{func(c *lab.Config) { c.Link.LossProb = 1.5 }, "loss probability 1.5"},
	}
	for _, tc := range cases {
		cfg := baseConfig(t, "cx5", "cx5")
		tc.mod(&cfg)
		_, err := Run(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v: want it to mention %q", err, tc.want)
		}
	}
}

func TestIncrementalChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := make([]byte, 20)
	for i := 0; i < 1000; i++ {
		for k := range h {
			h[k] = byte(r.Uint32())
		}
		ck := roce.IPv4Checksum(h)
		h[10], h[11] = byte(ck>>8), byte(ck)
		old := uint16(h[4])<<8 | uint16(h[5])
		nw := uint16(r.Uint32())
		h[4], h[5] = byte(nw>>8), byte(nw)
		got := csumUpdate(ck, old, nw)
		if want := roce.IPv4Checksum(h); got != want {
			t.Fatalf("case %d: incremental %#x, full %#x", i, got, want)
		}
	}
}

func TestZeroPayloadICRC(t *testing.T) {
	// Every frame size a NIC builds: the incremental ICRC must equal the codec's.
	z := newZeroOps()
	for _, n := range []int{0, 1, 3, 4, 255, 1024, 4093, 4096} {
		p := roce.Packet{Version: roce.RoCEv2, TOS: 0x6a, TTL: 64, IPID: 77, SrcIP: netip.MustParseAddr("10.0.0.2"),
			DstIP: netip.MustParseAddr("10.0.0.1"), UDPSrc: 0xc123, PayloadLen: n,
			BTH: roce.BTH{Opcode: roce.RCWriteFirst, PKey: 0xffff, DestQP: 0x1234, PSN: 99}, RETH: roce.RETH{VA: 1, RKey: 2, DMALen: 3}}
		f, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		var d roce.Packet
		d.Decode(f, len(f))
		if got := z.icrcZeroPayload(f, d.PayloadOffset); got != d.ICRC {
			t.Fatalf("payload %d: incremental ICRC %#x, codec %#x", n, got, d.ICRC)
		}
	}
}

// TestParallelRuns: independent runs share no state, so concurrent runs give the traces a lone run gives.
func TestParallelRuns(t *testing.T) {
	mk := func() lab.Config {
		cfg := baseConfig(t, "cx6dx", "cx6dx")
		cfg.Traffic.NumConns = 2
		cfg.Traffic.MsgsPerConn = 3
		cfg.NewSwitch = newTestSwitch(&rule{conn: 0, psnOff: 3, action: tDrop, times: 1})
		return cfg
	}
	want, _ := traceHash(t, mk())
	got := make(chan [32]byte, 4)
	for range 4 {
		go func() {
			h := sha256.New()
			cfg := mk()
			cfg.Dump = func(d int, ts int64, f []byte) {
				h.Write([]byte{byte(d), byte(ts), byte(ts >> 8), byte(ts >> 16), byte(ts >> 24), byte(ts >> 32)})
				h.Write(f)
			}
			var s [32]byte
			if _, err := Run(cfg); err == nil {
				copy(s[:], h.Sum(nil))
			}
			got <- s
		}()
	}
	for range 4 {
		if g := <-got; g != want {
			t.Fatalf("concurrent run trace %x: want %x", g[:8], want[:8])
		}
	}
}

// TestRandomConfigs runs small random scenarios (verbs, sizes, MTUs, drops, ECN, cards): none may panic, and
// each either completes every connection or returns an error.
func TestRandomConfigs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	cards := []string{"cx4lx", "cx5", "cx6dx", "e810", "ideal", "irn"}
	verbs := []string{"write", "send", "read", "send_read"}
	mtus := []int{256, 512, 1024, 2048, 4096}
	errs := 0
	for i := 0; i < 60; i++ {
		cfg := baseConfig(t, cards[r.IntN(len(cards))], cards[r.IntN(len(cards))])
		cfg.Seed = r.Uint64()
		cfg.Traffic.Verb = verbs[r.IntN(len(verbs))]
		cfg.Traffic.NumConns = 1 + r.IntN(4)
		cfg.Traffic.NumSendConns, cfg.Traffic.NumReadConns = r.IntN(3), 1+r.IntN(2)
		cfg.Traffic.MsgsPerConn = 1 + r.IntN(4)
		cfg.Traffic.MsgSize = 1 + r.IntN(40000)
		cfg.Traffic.MTU = mtus[r.IntN(len(mtus))]
		cfg.Traffic.TxDepth = 1 + r.IntN(3)
		cfg.Traffic.Timeout = uint8(8 + r.IntN(8))
		cfg.RunLimitNs = 30e9
		var rules []*rule
		for k := 0; k < 3; k++ {
			rules = append(rules, &rule{conn: r.IntN(4), psnOff: r.IntN(30), action: 1 + r.IntN(3), times: 1 + r.IntN(2)})
		}
		cfg.NewSwitch = newTestSwitch(rules...)
		res, err := Run(cfg)
		if err != nil {
			errs++
			t.Logf("case %d: %v\n%s->%s %+v rules %+v %+v %+v", i, err, cfg.Requester.Profile.Name, cfg.Responder.Profile.Name, cfg.Traffic, *rules[0], *rules[1], *rules[2])
			continue
		}
		for k, pc := range res.PerConn {
			if pc.Status == rnic.ConnIncomplete || (pc.Status == rnic.ConnOK && pc.Completed != cfg.Traffic.MsgsPerConn) {
				t.Fatalf("case %d connection %d: %+v", i, k, pc)
			}
		}
	}
	if errs > 10 {
		t.Fatalf("%d of 60 random scenarios failed to run: want most to run", errs)
	}
}

// TestDefaultSwitchFastPath: the switch node's in-place mirroring for DefaultSwitch gives the trace that
// DefaultSwitch.Process gives through the generic inject.Logic path.
func TestDefaultSwitchFastPath(t *testing.T) {
	cfg := baseConfig(t, "cx5", "cx5")
	cfg.Traffic.NumConns = 3
	cfg.Traffic.MsgsPerConn = 3
	cfg.Dumpers = 3
	fast, n := traceHash(t, cfg)
	cfg.NewSwitch = func([]inject.ConnMeta) (inject.Logic, error) {
		return struct{ *DefaultSwitch }{NewDefaultSwitch(3)}, nil
	}
	generic, m := traceHash(t, cfg)
	if fast != generic || n != m || n == 0 {
		t.Fatalf("fast path %d frames %x, generic %d frames %x: want identical", n, fast[:8], m, generic[:8])
	}
}

// The micro-architecture model describes the same testbed by default.
func TestMicroDefaultsMatch(t *testing.T) {
	if micro.DefaultPropagationNs != DefaultPropagationNs || micro.DefaultSwitchLatencyNs != DefaultSwitchLatencyNs {
		t.Errorf("micro's testbed defaults %d/%d ns differ from netsim's %d/%d ns", micro.DefaultPropagationNs,
			micro.DefaultSwitchLatencyNs, DefaultPropagationNs, DefaultSwitchLatencyNs)
	}
}
