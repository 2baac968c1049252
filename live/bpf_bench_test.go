package live

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/roce"
)

// BenchmarkBPFProgram runs the data plane's programs on one frame with BPF_PROG_TEST_RUN: the program's own
// cost per frame, without veth, sockets or the sender. Port 0 is the loopback interface (test runs present
// frames as arriving there), port 1 and the dumper are veths in a namespace of their own. TC: the whole
// program, the clone to the dumper included (the clone is sent into the dumper veth, whose peer's stack
// drops it later, outside the timed run); the final redirect is only returned, not carried out. XDP: the ingress program only (the devmap's copy and its program run when the
// kernel carries the redirect out, which a test run does not).
//
//	go test -run '^$' -bench BPFProgram ./live
func BenchmarkBPFProgram(b *testing.B) {
	if err := RequireRoot(); err != nil {
		b.Fatalf("benchmark needs root: %v", err)
	}
	ns := fmt.Sprintf("%s%d-bench", TestbedPrefix, os.Getpid())
	if err := sh("ip", "netns", "add", ns); err != nil {
		b.Fatal(err)
	}
	defer sh("ip", "netns", "del", ns)
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"link", "add", "p1", "type", "veth", "peer", "name", "p1peer"},
		{"link", "add", "d0", "type", "veth", "peer", "name", "d0peer"}, {"link", "set", "p1", "up"}, {"link", "set", "d0", "up"},
		{"link", "set", "p1peer", "up"}, {"link", "set", "d0peer", "up"}} {
		if err := sh("ip", append([]string{"-n", ns}, args...)...); err != nil {
			b.Fatal(err)
		}
	}
	reqIP, respIP := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	pk := roce.Packet{EthDst: [6]byte{2, 0, 0, 0, 0, 3}, EthSrc: [6]byte{2, 0, 0, 0, 0, 2}, Version: roce.RoCEv2, TOS: 2,
		TTL: 64, SrcIP: reqIP, DstIP: respIP, UDPSrc: 0xc000, BTH: roce.BTH{Opcode: roce.RCSendOnly, PKey: 0xffff,
			DestQP: 0x11, PSN: 7}, PayloadLen: 64}
	frame, err := pk.AppendTo(nil)
	if err != nil {
		b.Fatal(err)
	}
	other := append([]byte(nil), frame...)
	other[12], other[13] = 0x88, 0xb5
	conn := inject.Config{Conns: []inject.ConnMeta{{Index: 0, Verb: "send", ReqIP: reqIP, RespIP: respIP, ReqQPN: 0x10, RespQPN: 0x11}},
		Intents: []inject.Intent{{Kind: inject.KindData, PSN: 1000, Iter: 1, Action: roce.EventECN, Source: "bench"}}}
	for _, hook := range []string{HookTC, HookXDP} {
		for _, c := range []struct {
			name  string
			frame []byte
			table bool
		}{{"non-RoCE", other, false}, {"RoCE unknown connection", frame, false}, {"RoCE known connection", frame, true}} {
			b.Run(hook+"/"+c.name, func(b *testing.B) {
				var sw *BPFSwitch
				if err := InNetns(ns, func() (e error) {
					sw, e = NewBPFSwitch(BPFSwitchConfig{Ports: [2]string{"lo", "p1"}, Dumpers: []string{"d0"}, Hook: hook, detached: true})
					return e
				}); err != nil {
					b.Fatal(err)
				}
				defer sw.Close()
				if c.table {
					logic, err := inject.New(conn)
					if err != nil {
						b.Fatal(err)
					}
					if err := sw.Install(context.Background(), logic); err != nil {
						b.Fatal(err)
					}
				}
				prog := sw.objs.tc.LuminaSwitch
				if hook == HookXDP {
					prog = sw.objs.xdp.LuminaXdp
				}
				var ret uint32
				var per time.Duration
				if err := InNetns(ns, func() (e error) {
					ret, per, e = prog.Benchmark(c.frame, b.N, b.ResetTimer)
					return e
				}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(per.Nanoseconds()), "kernel-ns/frame")
				st, err := sw.Status(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				// The program ran on every repetition and did what the case says.
				wantRet := map[string]uint32{HookTC: 7, HookXDP: 4}[hook] // TC_ACT_REDIRECT, XDP_REDIRECT
				mirrored := st.Injector.Mirrored
				if ret != wantRet || st.Ports[0].RxFrames < uint64(b.N) || (c.frame[12] == 0x08) != (mirrored >= uint64(b.N)) {
					b.Fatalf("returned %d (want %d), port 0 received %d, mirrored %d, for %d runs", ret, wantRet, st.Ports[0].RxFrames, mirrored, b.N)
				}
				if hook == HookTC && c.frame[12] == 0x08 && st.Dumpers[0].Tx.Frames < uint64(b.N) {
					b.Fatalf("the dumper got %d clones for %d runs", st.Dumpers[0].Tx.Frames, b.N)
				}
			})
		}
	}
}
