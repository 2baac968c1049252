package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/scenario"
)

func newSwitchCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		in, out, events, control, status, netns, ring, dataplane string
		dumpers                                                  []string
		learn                                                    bool
	)
	cmd := &cobra.Command{
		Use:   "switch --in IF1 --out IF2 [--dumper IF]... [--events scenario.yaml] [--learn] [--control :PORT] [--dataplane ring|tc|xdp]",
		Short: "Run the real-time event-injecting switch between two Linux interfaces",
		Long: `switch forwards frames between two interfaces through AF_PACKET rings, runs the same event
injector as the simulator, and mirrors every RoCE packet with Lumina's metadata to the dumper interfaces
(weighted round robin from the scenario's network.dumper-weights).

The scenario's events need each connection's QPNs and initial PSNs. With --control the traffic generator
sends them over TCP (one JSON line, {"conns":[...]}); the switch installs the events and answers
{"ready":true}, the start barrier. With --learn the switch learns each connection at its first SEND or WRITE
packet and takes its PSN as the initial PSN (data events only), for traffic from any generator.

With --dataplane tc or xdp the kernel does the forwarding: a BPF program at the TC ingress (tc, Linux 6.6 or
later, any driver) or at the XDP hook (xdp, drivers with native XDP; the dumper and the other port must take
redirected XDP frames) of both ports runs the same event table, filled from the same injector, and mirrors
every RoCE frame (tc: bpf_clone_redirect; xdp: a broadcast devmap). Both implement drop, ecn and corrupt
events on IPv4 RoCEv2; a scenario with any other event is refused (exit 2), and --learn needs the ring data
plane. See docs/switch-bpf.md.

On SIGINT or SIGTERM it releases held frames and prints its counters as JSON (or writes them to --status,
which it also refreshes every second).`,
		Example: `  ip netns exec sw lumina switch --in sw-req --out sw-resp --dumper sw-d0 --control 127.0.0.1:7700 \
      --events examples/listing2.yaml
  lumina switch --in veth0 --out veth1 --dumper veth2 --events drop.yaml --learn`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in == "" || out == "" {
				return badInput("--in and --out name the two interfaces to forward between")
			}
			if learn && control != "" {
				return badInput("--learn and --control exclude each other: connections come from the generator or from the traffic")
			}
			bpf := false
			switch dataplane {
			case "ring":
			case live.HookTC, live.HookXDP:
				bpf = true
				if learn {
					return badInput("--learn needs --dataplane ring: learning connections from the traffic runs in Go")
				}
			default:
				return badInput("--dataplane %q; expected ring, tc or xdp", dataplane)
			}
			var rc live.RingConfig
			switch ring {
			case "v2":
				rc.Version = live.RingV2
			case "v3":
				rc.Version = live.RingV3
			default:
				return badInput("--ring %q; expected v2 or v3", ring)
			}
			var sc *scenario.Scenario
			var intents []inject.Intent
			if events != "" {
				var err error
				if sc, err = scenario.Load(events); err != nil {
					return fail(exitBadArgs, err)
				}
				if intents, err = inject.Intents(sc); err != nil {
					return badInput("%s: %v", events, err)
				}
				if bpf {
					if err := live.CheckBPFIntents(intents); err != nil {
						return badInput("%v", err) // the intent's source names the file and line
					}
				}
				if len(intents) > 0 && !learn && control == "" {
					return badInput("%s has %d events, which need connection metadata: add --control ADDR (our generator reports it) or --learn (learn it from the traffic)", events, len(intents))
				}
			}
			weights := make([]int, len(dumpers))
			for i := range weights {
				weights[i] = 1
			}
			var rewrite uint16
			var seed uint64
			capacity := 0
			if sc != nil {
				if w := sc.Network.DumperWeights; len(w) > 0 {
					if len(w) != len(dumpers) {
						return badInput("%s has %d dumper weights but %d --dumper interfaces were given", events, len(w), len(dumpers))
					}
					weights = w
				}
				rewrite, seed, capacity = uint16(sc.RewriteUDPDstPort), sc.Seed, sc.Network.EventTableCapacity
			}
			if len(dumpers) == 0 {
				weights = nil
			}
			var logic inject.Logic
			if learn {
				l, err := live.NewLearner(live.LearnConfig{Intents: intents, DumperWeights: weights, RewritePort: rewrite, Seed: seed, TableCapacity: capacity})
				if err != nil {
					return badInput("%v", err)
				}
				logic = l
			} else {
				sw, err := inject.New(inject.Config{DumperWeights: weights, RewritePort: rewrite, Seed: seed})
				if err != nil {
					return badInput("%v", err)
				}
				logic = sw
			}
			var dp dataPlane
			err := live.InNetns(netns, func() error {
				if bpf {
					s, e := live.NewBPFSwitch(live.BPFSwitchConfig{Ports: [2]string{in, out}, Dumpers: dumpers, DumperWeights: weights,
						RewritePort: rewrite, TableCapacity: capacity, StatusFile: status, Hook: dataplane})
					if e != nil {
						return fail(exitBadArgs, e)
					}
					dp = s
					return s.Install(cmd.Context(), logic)
				}
				s, e := live.NewSwitch(live.SwitchConfig{Ports: [2]string{in, out}, Dumpers: dumpers, Logic: logic, Ring: rc, StatusFile: status})
				if e == nil {
					dp = s
				}
				return e
			})
			if dp != nil {
				defer dp.Close()
			}
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if control != "" {
				ln, err := net.Listen("tcp", control)
				if err != nil {
					return badInput("--control %s: %v", control, err)
				}
				build := func(cs []inject.ConnMeta) (inject.Logic, error) {
					sw, err := inject.New(inject.Config{Conns: cs, Intents: intents, DumperWeights: weights, RewritePort: rewrite, Seed: seed, TableCapacity: capacity})
					if err == nil && bpf {
						err = live.CheckBPF(sw)
					}
					return sw, err
				}
				go func() {
					if err := live.ServeControl(ctx, ln, build, dp.Install); err != nil {
						fmt.Fprintln(stderr, "lumina switch:", err)
					}
				}()
				fmt.Fprintf(stderr, "lumina switch: control plane on %s\n", ln.Addr())
			}
			fmt.Fprintf(stderr, "lumina switch: forwarding %s <-> %s (%s data plane), mirroring to [%s]; SIGINT or SIGTERM stops\n", in, out, dataplane, strings.Join(dumpers, " "))
			st, err := dp.Run(ctx)
			if status == "" {
				if e := writeIndentedJSON(stdout, st); e != nil && err == nil {
					err = e
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "interface of port 0 (requester side)")
	f.StringVar(&out, "out", "", "interface of port 1 (responder side)")
	f.StringArrayVar(&dumpers, "dumper", nil, "mirror interface (repeat for several dumpers)")
	f.StringVar(&events, "events", "", "scenario whose events the switch injects")
	f.BoolVar(&learn, "learn", false, "learn connections and initial PSNs from the traffic")
	f.StringVar(&control, "control", "", "listen address of the control plane for runtime metadata, e.g. :7700")
	f.StringVar(&status, "status", "", "write counters as JSON to this file every second and at exit (default: stdout at exit)")
	f.StringVar(&netns, "netns", "", "open the switch's sockets in this named network namespace")
	f.StringVar(&ring, "ring", "v2", "receive ring layout: v2 (per-frame, lowest latency) or v3 (blocks)")
	f.StringVar(&dataplane, "dataplane", "ring", "ring (AF_PACKET rings, every event), tc or xdp (a BPF program at that hook: drop, ecn and corrupt events)")
	return cmd
}

// dataPlane is what `lumina switch` runs: the ring path (*live.Switch) or a BPF program (*live.BPFSwitch).
type dataPlane interface {
	Install(ctx context.Context, l inject.Logic) error
	Run(ctx context.Context) (live.SwitchStatus, error)
	Close() error
}
