package netsim

import (
	"net/netip"
	"testing"

	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

func mustProfile(t testing.TB, name string) *rnic.Profile {
	t.Helper()
	p, err := rnic.LoadProfile(name)
	if err != nil {
		t.Fatalf("loading profile %s: %v", name, err)
	}
	return p
}

// baseConfig is the paper's testbed: two hosts cabled to one switch, 1 KB MTU, one connection.
func baseConfig(t testing.TB, req, resp string) lab.Config {
	t.Helper()
	rp, sp := mustProfile(t, req), mustProfile(t, resp)
	host := func(p *rnic.Profile, ip string, mac byte) lab.HostConfig {
		return lab.HostConfig{Profile: p, IPs: []netip.Addr{netip.MustParseAddr(ip)}, MAC: [6]byte{2, 0, 0, 0, 0, mac},
			AdaptiveRetrans: false, SlowRestart: p.Defaults.SlowRestart, DCQCNRPEnable: p.Defaults.DCQCNRPEnable,
			DCQCNNPEnable: p.Defaults.DCQCNNPEnable}
	}
	return lab.Config{
		Seed:            1,
		Requester:       host(rp, "10.0.0.2", 2),
		Responder:       host(sp, "10.0.0.1", 1),
		Link:            lab.LinkConfig{PropagationNs: DefaultPropagationNs},
		SwitchLatencyNs: DefaultSwitchLatencyNs,
		Traffic: lab.TrafficConfig{Verb: "write", NumConns: 1, MsgsPerConn: 1, MsgSize: 10240, MTU: 1024, TxDepth: 1,
			Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		Dumpers: 2,
	}
}

// capture records every mirrored frame with its timestamp, decoded.
type capture struct {
	frames [][]byte
	ts     []int64
	dumper []int
}

func (c *capture) dump(d int, ts int64, f []byte) {
	c.frames = append(c.frames, append([]byte(nil), f...))
	c.ts = append(c.ts, ts)
	c.dumper = append(c.dumper, d)
}

func (c *capture) decode(t testing.TB, i int) *roce.Packet {
	t.Helper()
	var p roce.Packet
	if !p.Decode(c.frames[i], len(c.frames[i])) {
		t.Fatalf("mirrored frame %d does not decode as RoCE: %v", i, p.Reason)
	}
	return &p
}

func run(t testing.TB, cfg lab.Config) (*lab.Result, *capture) {
	t.Helper()
	c := &capture{}
	cfg.Dump = c.dump
	res, err := Run(cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, c
}
