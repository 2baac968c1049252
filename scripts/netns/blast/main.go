// Command blast measures the live switch's data planes (the AF_PACKET ring path, the BPF program at TC and at XDP)
// against the Linux bridge on the same veth pairs: for each it builds a netns testbed, blasts RoCEv2 SEND frames from the requester's namespace with batched AF_PACKET writes, counts what
// reaches the responder and the dumper, and measures the one-way latency of a paced stream (kernel receive
// time minus the send time carried in the payload). Run it through scripts/netns/bench-switch.sh.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/roce"
)

type result struct {
	name                string
	sent, fwd, mirrored uint64
	fwdPPS, mirPPS      float64
	latMedian, latP99   int64
	latGot              int
	ringDrops           uint64
	hits                []uint64 // event-table hits reported by the switch (with -conn)
}

func main() {
	count := flag.Int("count", 200000, "frames in the throughput phase")
	latN := flag.Int("lat", 3000, "frames in the latency phase")
	gapUs := flag.Int("gap-us", 100, "gap between latency frames (us)")
	payload := flag.Int("payload", 64, "RoCE payload bytes per frame")
	ring := flag.String("ring", "v2", "switch receive ring: v2 or v3")
	spin := flag.Duration("spin", 0, "switch: keep polling this long after the last frame before sleeping")
	withConn := flag.Bool("conn", false, "switches: install a connection matching the blast and an event it never hits, so every frame takes the connection lookup, the ITER update and the table lookups")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	serve := flag.String("serve-switch", "", "internal: run the switch in this namespace until SIGTERM")
	dataplane := flag.String("dataplane", "ring", "internal, with -serve-switch: ring, tc or xdp")
	modes := flag.String("modes", "bridge,ring,tc,xdp", "forwarders to measure, in order: bridge, ring, tc, xdp (lumina switch --dataplane ring|tc|xdp)")
	flag.Parse()
	if *serve != "" {
		if err := serveSwitch(*serve, *dataplane, *ring, int64(*spin), *withConn); err != nil {
			fmt.Fprintln(os.Stderr, "blast switch:", err)
			os.Exit(1)
		}
		return
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if err := live.RequireRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "blast:", err)
		os.Exit(2)
	}
	var res []result
	for _, mode := range strings.Split(*modes, ",") {
		if mode != "bridge" && mode != "ring" && mode != "tc" && mode != "xdp" {
			fmt.Fprintf(os.Stderr, "blast: -modes: %q is not bridge, ring, tc or xdp\n", mode)
			os.Exit(2)
		}
	}
	for _, mode := range strings.Split(*modes, ",") {
		r, err := run(mode, *count, *latN, *gapUs, *payload, *ring, int64(*spin), *withConn)
		if err != nil {
			fmt.Fprintln(os.Stderr, "blast:", err)
			return
		}
		res = append(res, r)
	}
	fmt.Printf("%-14s %9s %9s %9s %8s %10s %12s %12s %10s %10s %s\n", "forwarder", "sent", "forwarded", "mirrored", "drops", "ring drops", "fwd pps", "mirror pps", "lat p50", "lat p99", "event hits")
	for _, r := range res {
		fmt.Printf("%-14s %9d %9d %9d %8d %10d %12.0f %12.0f %8.1fus %8.1fus %v\n", r.name, r.sent, r.fwd, r.mirrored, r.sent-r.fwd,
			r.ringDrops, r.fwdPPS, r.mirPPS, float64(r.latMedian)/1e3, float64(r.latP99)/1e3, r.hits)
	}
	if len(res) > 1 && res[0].name == "bridge" {
		for _, r := range res[1:] {
			fmt.Printf("added latency of %s over the bridge: p50 %+.1f us, p99 %+.1f us (latency phase: %d frames, %d us apart)\n",
				r.name, float64(r.latMedian-res[0].latMedian)/1e3, float64(r.latP99-res[0].latP99)/1e3, *latN, *gapUs)
		}
	}
}

func frame(payload int, psn int) []byte {
	p := roce.Packet{EthDst: [6]byte{2, 0, 0, 0, 0, 3}, EthSrc: [6]byte{2, 0, 0, 0, 0, 2}, Version: roce.RoCEv2,
		TOS: 2, TTL: 64, SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"),
		UDPSrc: 0xc000, BTH: roce.BTH{Opcode: roce.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: roce.PSN(psn)},
		PayloadLen: payload}
	b, _ := p.AppendTo(nil)
	return b
}

// payloadOff is where a SEND ONLY frame's payload starts (Ethernet, IPv4, UDP, BTH).
const payloadOff = 14 + 20 + 8 + 12

type counter struct {
	ring        *live.Ring
	n           atomic.Uint64
	first, last atomic.Int64
	lat         []int64
	measure     atomic.Bool
	stop        atomic.Bool
	done        chan struct{}
}

func (c *counter) loop() {
	defer close(c.done)
	for !c.stop.Load() {
		if c.ring.Poll(0, func(f []byte, ts int64, _ int) {
			if len(f) < payloadOff+8 || f[23] != 17 {
				return
			}
			if c.n.Add(1) == 1 {
				c.first.Store(ts)
			}
			c.last.Store(ts)
			if c.measure.Load() {
				sent := int64(binary.BigEndian.Uint64(f[payloadOff:]))
				c.lat = append(c.lat, ts-sent)
			}
		}) == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func run(mode string, count, latN, gapUs, payload int, ringName string, spin int64, withConn bool) (result, error) {
	r := result{name: mode}
	tb, err := live.NewTestbed(live.TestbedConfig{Tag: len(mode)})
	if err != nil {
		return r, err
	}
	defer tb.Close()
	var stopSwitch func() switchStatus
	if mode == "bridge" {
		for _, args := range [][]string{
			{"-n", tb.Sw, "link", "add", "br0", "type", "bridge"},
			{"-n", tb.Sw, "link", "set", live.SwReqIf, "master", "br0"},
			{"-n", tb.Sw, "link", "set", live.SwRespIf, "master", "br0"},
			{"-n", tb.Sw, "link", "set", "br0", "up"},
		} {
			if err := ip(args...); err != nil {
				return r, err
			}
		}
	} else {
		if mode == live.HookXDP {
			// A veth takes redirected XDP frames only when its peer runs NAPI: GRO on (docs/switch-bpf.md).
			for _, ns := range []string{tb.Req, tb.Resp, tb.Dump[0]} {
				if out, err := exec.Command("ip", "netns", "exec", ns, "ethtool", "-K", live.HostIf, "gro", "on").CombinedOutput(); err != nil {
					return r, fmt.Errorf("ethtool -K %s gro on in %s: %w: %s", live.HostIf, ns, err, out)
				}
			}
		}
		// The switch runs in its own process, as `lumina switch` would: in-process it would share the Go
		// scheduler with the blaster's busy loops and measure the scheduler instead of the switch.
		cmd := exec.Command(os.Args[0], "-serve-switch", tb.Sw, "-dataplane", mode, "-ring", ringName, "-spin", time.Duration(spin).String(),
			"-conn="+strconv.FormatBool(withConn))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return r, err
		}
		if err := cmd.Start(); err != nil {
			return r, err
		}
		dec := json.NewDecoder(out)
		var ready map[string]any
		if err := dec.Decode(&ready); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return r, fmt.Errorf("switch process did not start: %w", err)
		}
		defer func() {
			if stopSwitch != nil {
				stopSwitch()
			}
		}()
		stopSwitch = func() switchStatus {
			cmd.Process.Signal(syscall.SIGTERM)
			var st switchStatus
			if err := dec.Decode(&st); err != nil {
				fmt.Fprintln(os.Stderr, "blast: reading switch status:", err)
			}
			cmd.Wait()
			return st
		}
	}
	big := live.RingConfig{Version: live.RingV2, BlockSize: 1 << 20, NumBlocks: 64}
	rx := &counter{done: make(chan struct{})}
	mir := &counter{done: make(chan struct{})}
	var tx *live.Tx
	if err := live.InNetns(tb.Resp, func() (e error) { rx.ring, e = live.OpenRing(live.HostIf, big); return e }); err != nil {
		return r, err
	}
	defer rx.ring.Close()
	if err := live.InNetns(tb.Dump[0], func() (e error) { mir.ring, e = live.OpenRing(live.HostIf, big); return e }); err != nil {
		return r, err
	}
	defer mir.ring.Close()
	if err := live.InNetns(tb.Req, func() (e error) { tx, e = live.OpenTx(live.HostIf, 64); return e }); err != nil {
		return r, err
	}
	defer tx.Close()
	go rx.loop()
	go mir.loop()
	time.Sleep(200 * time.Millisecond) // let the bridge come up (it starts in listening state briefly)

	// Throughput: as fast as batched writes go.
	f := frame(payload, 0)
	start := time.Now().UnixNano()
	for i := 0; i < count; i++ {
		binary.BigEndian.PutUint32(f[14+20+8+8:], uint32(i)&0xffffff) // PSN
		tx.Send(f)
	}
	tx.Flush()
	time.Sleep(500 * time.Millisecond)
	r.sent = uint64(count) - tx.Stats().Errors
	r.fwd = rx.n.Load()
	r.mirrored = mir.n.Load()
	if d := rx.last.Load() - start; d > 0 {
		r.fwdPPS = float64(r.fwd) / (float64(d) / 1e9)
	}
	if d := mir.last.Load() - start; d > 0 && r.mirrored > 0 {
		r.mirPPS = float64(r.mirrored) / (float64(d) / 1e9)
	}

	// Latency: a paced stream, each frame stamped with its send time.
	rx.measure.Store(true)
	gap := time.Duration(gapUs) * time.Microsecond
	next := time.Now()
	for i := 0; i < latN; i++ {
		for time.Now().Before(next) {
		}
		binary.BigEndian.PutUint64(f[payloadOff:], uint64(time.Now().UnixNano()))
		tx.Send(f)
		tx.Flush()
		next = next.Add(gap)
	}
	time.Sleep(200 * time.Millisecond)
	rx.stop.Store(true)
	mir.stop.Store(true)
	<-rx.done
	<-mir.done
	lat := slices.Clone(rx.lat)
	slices.Sort(lat)
	r.latGot = len(lat)
	if len(lat) > 0 {
		r.latMedian = lat[len(lat)/2]
		r.latP99 = lat[len(lat)*99/100]
	}
	if stopSwitch != nil {
		st := stopSwitch()
		r.ringDrops = st.Ports[0].Ring.Drops
		for _, e := range st.Entries {
			r.hits = append(r.hits, e.Hits)
		}
		stopSwitch = nil
	}
	return r, nil
}

// serveSwitch runs the switch in namespace ns until SIGTERM, announcing itself with one JSON line on stdout
// and printing its final status as JSON.
func serveSwitch(ns, dataplane, ringName string, spin int64, withConn bool) error {
	var logic *inject.Switch
	if withConn {
		// The blast's frames: 10.0.0.1 -> 10.0.0.2, SEND to QP 0x11, PSNs from 0. The event ECN-marks PSN 1000
		// of round 1: its hit shows that the switch classified the blast; every frame took the lookups.
		var err error
		logic, err = inject.New(inject.Config{Conns: []inject.ConnMeta{{Index: 0, Verb: "send",
			ReqIP: netip.MustParseAddr("10.0.0.1"), RespIP: netip.MustParseAddr("10.0.0.2"), ReqQPN: 0x10, RespQPN: 0x11}},
			Intents: []inject.Intent{{Kind: inject.KindData, PSN: 1000, Iter: 1, Action: roce.EventECN, Source: "blast"}}})
		if err != nil {
			return err
		}
	}
	if dataplane == live.HookTC || dataplane == live.HookXDP {
		return serveBPF(ns, dataplane, logic)
	}
	rc := live.RingConfig{Version: live.RingV2, BlockSize: 1 << 20, NumBlocks: 8}
	if ringName == "v3" {
		rc = live.RingConfig{Version: live.RingV3, BlockSize: 1 << 20, NumBlocks: 8}
	}
	var sw *live.Switch
	if err := live.InNetns(ns, func() (e error) {
		cfg := live.SwitchConfig{Ports: [2]string{live.SwReqIf, live.SwRespIf}, Dumpers: []string{"sw-d0"}, Ring: rc, SpinNs: spin}
		if logic != nil {
			cfg.Logic = logic
		}
		sw, e = live.NewSwitch(cfg)
		return e
	}); err != nil {
		return err
	}
	defer sw.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	enc := json.NewEncoder(os.Stdout)
	enc.Encode(map[string]bool{"ready": true})
	st, err := sw.Run(ctx)
	enc.Encode(st)
	return err
}

// serveBPF attaches the BPF data plane in namespace ns until SIGTERM, as serveSwitch does for the ring path.
func serveBPF(ns, hook string, logic *inject.Switch) error {
	var sw *live.BPFSwitch
	if err := live.InNetns(ns, func() (e error) {
		sw, e = live.NewBPFSwitch(live.BPFSwitchConfig{Ports: [2]string{live.SwReqIf, live.SwRespIf}, Dumpers: []string{"sw-d0"}, Hook: hook})
		return e
	}); err != nil {
		return err
	}
	defer sw.Close()
	if logic != nil {
		if err := sw.Install(context.Background(), logic); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	enc := json.NewEncoder(os.Stdout)
	enc.Encode(map[string]bool{"ready": true})
	st, err := sw.Run(ctx)
	enc.Encode(st)
	return err
}

// switchStatus is the part of the switch's final status the blaster reports (live.SwitchStatus's entries
// name their kinds and actions as text, which does not decode back).
type switchStatus struct {
	Ports [2]struct {
		Ring live.RingStats `json:"ring"`
	} `json:"ports"`
	Entries []struct {
		Hits uint64 `json:"hits"`
	} `json:"entries"`
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %v: %w: %s", args, err, out)
	}
	return nil
}
