package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lumina-go/lumina/hostnic"
	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/remote"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
)

// The remote testbed: each role (requester, responder, switch, dumpers) is a host reached over SSH, where
// the lumina binary runs as the agent (package remote). The controller (this process) plans every operation
// from the scenario, deploys the agents, runs the operations, fetches the dumps and writes the same results
// directory as the netns testbed, then the same analysis runs.

// step is one operation on one host.
type step struct {
	host int // index into remotePlan.hosts
	op   remote.Op
}

// remoteHost is one role's host.
type remoteHost struct {
	role   string
	spec   scenario.RemoteHost
	target remote.Target
	deploy remote.Deployment
}

// remotePlan is everything the run does, host by host, computed before anything is contacted.
type remotePlan struct {
	runID    string
	agentSum string
	agentBin string
	hosts    []remoteHost // requester, responder, switch, dumpers...
	setup    []step       // interfaces, switch, dumpers, endpoints (in this order)
	install  step         // the switch's table: the start barrier
	traffic  step         // the requester's traffic
	stop     []step       // responder, switch, dumpers
	meta     []inject.ConnMeta
	limit    time.Duration
	cfg      lab.Config
	rec      *inject.Recorder
	// real is the real-RNIC path (nic.ib-device on requester and responder); nil = software RNICs.
	real *realPlan
}

// realPlan is what a run on real RNICs does beyond the switch and the dumpers: hostnic's NIC setup on both
// ends, counter snapshots before and after, the verbs generator (deployed by hash) and the NIC's undo.
type realPlan struct {
	verbsBin, verbsSum string
	nic                [2]hostnic.Config // requester, responder
	setup              []step            // nic-setup on the responder, then the requester
	counters           [2]step           // counters on the requester, the responder
	server             step              // verbs-server-start on the responder
	client             step              // verbs-client-start on the requester: the connections' metadata
	run                step              // verbs-client-run: the start barrier lifted, the traffic
	serverStop         step              // verbs-server-stop
	undo               []step            // nic-undo on the requester, the responder
}

const (
	hostReq  = 0
	hostResp = 1
	hostSw   = 2
	hostDump = 3 // first dumper
)

// RemoteOptions are the remote testbed's own settings.
type RemoteOptions struct {
	// AgentBinary is the lumina executable copied to the hosts (default: this executable).
	AgentBinary string
	// VerbsBinary is the verbs traffic generator (lumina-verbs, built with -tags verbs and cgo for the hosts'
	// libibverbs) copied to the requester and responder when they name an RDMA device (nic.ib-device).
	// Default: $LUMINA_VERBS_BINARY. It is never built on a host.
	VerbsBinary string
}

// InvalidRunError is a run that started and could not finish (a remote host or agent failed, or the run was
// interrupted): its partial results stay in the staging directory Dir, marked INCOMPLETE (resultsdir.Begin),
// the results directory asked for keeps the previous run's, and the verdict stage records an invalid verdict
// with the reason in Dir (verdict.RecordInvalid), never something that looks like a valid result.
type InvalidRunError struct {
	Reason string
	// Dir is the staging directory with the partial results (set by Run).
	Dir string
}

// EnvVerbsBinary names the lumina-verbs binary when RemoteOptions.VerbsBinary (--verbs-binary) is empty.
const EnvVerbsBinary = "LUMINA_VERBS_BINARY"

func (e *InvalidRunError) Error() string { return e.Reason }

// planRemote validates the scenario's remote section and computes every operation. Errors are bad input.
func planRemote(sc *scenario.Scenario, opts Options) (*remotePlan, error) {
	r := sc.Remote
	if r == nil {
		return nil, badInputf("%s: testbed remote needs the hosts: control-ip, username and ssh-key-filepath in requester, responder, switch and requester-mirror (docs/testbed-remote.md)", sc.Path)
	}
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	hosts := []scenario.RemoteHost{r.Requester, r.Responder, r.Switch}
	if len(r.Dumpers) == 0 {
		bad("no dumper host: add requester-mirror (and responder-mirror) with control-ip, username, ssh-key-filepath and nic.if-name, nic.switch-port")
	}
	hosts = append(hosts, r.Dumpers...)
	for _, h := range hosts {
		if h.ControlIP == "" {
			bad("%s.control-ip is missing; expected the host's address for SSH", h.Role)
		}
		if h.Username == "" {
			bad("%s.username is missing; expected the SSH user", h.Role)
		}
		if h.KeyFile != "" {
			if f, err := os.Open(remote.ExpandHome(h.KeyFile)); err != nil {
				bad("%s.ssh-key-filepath: %v", h.Role, err)
			} else {
				f.Close()
			}
		} else if os.Getenv("SSH_AUTH_SOCK") == "" {
			bad("%s.ssh-key-filepath is missing and no ssh-agent runs (SSH_AUTH_SOCK); expected a key", h.Role)
		}
		kh := h.KnownHosts
		if kh == "" {
			kh = remote.DefaultKnownHosts()
		}
		if _, err := os.Stat(remote.ExpandHome(kh)); err != nil {
			bad("%s: known_hosts %s: %v; lumina verifies every host key: add the hosts' keys with ssh-keyscan (docs/testbed-remote.md)", h.Role, kh, err)
		}
		if h.Jump != "" {
			if _, _, err := remote.ParseJump(h.Jump, h.Username); err != nil {
				bad("%s.jump: %v", h.Role, err)
			}
		}
		if h.Role == "switch" {
			continue
		}
		if h.IfName == "" {
			bad("%s.nic.if-name is missing; expected the data interface on that host", h.Role)
		}
		if h.SwitchPort == "" {
			bad("%s.nic.switch-port is missing; expected the switch host's interface cabled to this NIC", h.Role)
		} else if strings.Trim(h.SwitchPort, "0123456789") == "" {
			bad("%s.nic.switch-port %s is a Tofino port number; the remote testbed's switch is a Linux host: expected its interface name", h.Role, h.SwitchPort)
		}
	}
	seen := map[string]string{}
	for _, h := range hosts {
		if h.Role == "switch" || h.SwitchPort == "" {
			continue
		}
		if o, dup := seen[h.SwitchPort]; dup {
			bad("%s.nic.switch-port %s is also %s's; expected one switch interface per host", h.Role, h.SwitchPort, o)
		}
		seen[h.SwitchPort] = h.Role
	}
	if (r.Requester.IBDevice == "") != (r.Responder.IBDevice == "") {
		bad("requester.nic.ib-device %q and responder.nic.ib-device %q: expected both (real RNICs, the verbs generator) or neither (software RNICs on nic.if-name)", r.Requester.IBDevice, r.Responder.IBDevice)
	}
	if sc.Network.SwitchClockStartNs != 0 {
		bad("network.switch-clock-start-ns %d: the remote testbed's switch runs on the switch host's clock; the setting is for the sim and netns testbeds", sc.Network.SwitchClockStartNs)
	}
	if r.Requester.IBDevice != "" && sc.Traffic.InitialPSN != nil {
		bad("traffic.initial-psn: real RNICs choose their initial PSNs (the verbs generator reports them); the setting is for software RNICs")
	}
	ips := map[netip.Addr]bool{}
	for _, p := range sc.Requester.NIC.IPList {
		ips[p.Addr()] = true
	}
	for _, p := range sc.Responder.NIC.IPList {
		if ips[p.Addr()] {
			bad("requester and responder both have data IP %s; expected distinct addresses", p.Addr())
		}
	}
	if len(errs) > 0 {
		return nil, badInputf("%s: testbed remote:\n  %s", sc.Path, strings.Join(errs, "\n  "))
	}
	// One dumper per mirror host: the default two equal weights follow the number of mirrors.
	nd := len(r.Dumpers)
	if w := sc.Network.DumperWeights; len(w) != nd {
		if slices.Equal(w, []int{1, 1}) {
			sc.Network.DumperWeights = slices.Repeat([]int{1}, nd)
			sc.Network.Dumpers = nd
		} else {
			return nil, badInputf("%s: network.dumper-weights has %d entries for %d mirror hosts; expected one each", sc.Path, len(w), nd)
		}
	}
	cfg, err := netsimConfig(sc)
	if err != nil {
		return nil, err
	}
	rec, _, err := switchSetup(sc, &cfg)
	if err != nil {
		return nil, err
	}
	intents, err := inject.Intents(sc)
	if err != nil {
		return nil, badInput(err)
	}
	tp, err := live.PlanTraffic(&cfg)
	if err != nil {
		return nil, badInputf("%s: %w", sc.Path, err)
	}

	bin := opts.Remote.AgentBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding the lumina executable to deploy: %w", err)
		}
	}
	sum, _, err := remote.FileSHA256(bin)
	if err != nil {
		return nil, fmt.Errorf("hashing the agent binary: %w", err)
	}
	p := &remotePlan{runID: remote.RunID(), agentSum: sum, agentBin: bin, meta: tp.Meta, cfg: cfg, rec: rec}
	for _, h := range hosts {
		t := remote.Target{Role: h.Role, Host: h.ControlIP, Port: h.Port(), User: h.Username, KeyFile: h.KeyFile,
			KnownHosts: h.KnownHosts, Jump: h.Jump}
		p.hosts = append(p.hosts, remoteHost{role: h.Role, spec: h, target: t,
			deploy: remote.PlanDeployment(h.Workspace, h.Username, p.runID, h.Role, sum)})
	}
	mtu := max(1500, cfg.Traffic.MTU+200)
	add := func(host int, op remote.Op) { p.setup = append(p.setup, step{host: host, op: op}) }
	var dumpIfs []string
	for _, h := range r.Dumpers {
		dumpIfs = append(dumpIfs, h.SwitchPort)
	}
	for _, ifn := range append([]string{r.Requester.SwitchPort, r.Responder.SwitchPort}, dumpIfs...) {
		add(hostSw, &remote.IfaceSetup{Iface: ifn, MTU: mtu, OffloadOff: true, Promisc: true})
	}
	add(hostSw, &remote.SwitchStart{Ports: [2]string{r.Requester.SwitchPort, r.Responder.SwitchPort}, Dumpers: dumpIfs,
		Intents: intents, TableCapacity: sc.Network.EventTableCapacity, DumperWeights: sc.Network.DumperWeights,
		RewritePort: uint16(sc.RewriteUDPDstPort), Seed: sc.Seed, FrameSize: tp.Requester.FrameSize})
	for i, h := range r.Dumpers {
		add(hostDump+i, &remote.IfaceSetup{Iface: h.IfName, MTU: mtu, OffloadOff: true, Promisc: true})
		add(hostDump+i, &remote.DumpStart{Iface: h.IfName, Workers: 2, SnapLen: sc.Network.SnapLen,
			RewritePort: uint16(sc.RewriteUDPDstPort), MaxPackets: h.MaxPackets, FanoutGroup: uint16(0x4c00 + i)})
	}
	prof := func(h scenario.Host) (string, string, error) {
		t := h.NIC.Type
		if strings.HasSuffix(t, ".yaml") || strings.HasSuffix(t, ".yml") {
			b, err := os.ReadFile(sc.ResolvePath(t))
			if err != nil {
				return "", "", badInputf("%s: %w", sc.Path, err)
			}
			return t, string(b), nil
		}
		return t, "", nil
	}
	respProf, respYAML, err := prof(sc.Responder)
	if err != nil {
		return nil, err
	}
	reqProf, reqYAML, err := prof(sc.Requester)
	if err != nil {
		return nil, err
	}
	if r.Requester.IBDevice != "" {
		if err := p.planReal(sc, opts, mtu); err != nil {
			return nil, err
		}
		return p, nil
	}
	add(hostResp, &remote.IfaceSetup{Iface: r.Responder.IfName, MTU: mtu, OffloadOff: true, Promisc: true})
	add(hostResp, &remote.EndpointStart{Iface: r.Responder.IfName, Profile: respProf, ProfileYAML: respYAML, Spec: tp.Responder})
	add(hostReq, &remote.IfaceSetup{Iface: r.Requester.IfName, MTU: mtu, OffloadOff: true, Promisc: true})
	add(hostReq, &remote.EndpointStart{Requester: true, Iface: r.Requester.IfName, Profile: reqProf, ProfileYAML: reqYAML, Spec: tp.Requester})
	p.install = step{host: hostSw, op: &remote.SwitchInstall{Conns: tp.Meta}}
	p.limit = time.Duration(cfg.RunLimitNs)
	if p.limit <= 0 {
		p.limit = 30 * time.Second
	}
	p.traffic = step{host: hostReq, op: &remote.TrafficRun{LimitMs: p.limit.Milliseconds()}}
	p.stop = append(p.stop, step{host: hostResp, op: &remote.EndpointStop{}}, step{host: hostSw, op: &remote.SwitchStop{}})
	for i := range r.Dumpers {
		p.stop = append(p.stop, step{host: hostDump + i, op: &remote.DumpStop{}})
	}
	for _, s := range append(append([]step{}, p.setup...), append([]step{p.install, p.traffic}, p.stop...)...) {
		if err := s.op.Validate(); err != nil {
			return nil, badInputf("%s: testbed remote: %s on %s: %w", sc.Path, s.op.Name(), p.hosts[s.host].role, err)
		}
	}
	return p, nil
}

// ifaces are the interfaces the plan's operations name on host i.
func (p *remotePlan) ifaces(i int) []string {
	var out []string
	for _, s := range p.setup {
		if s.host != i {
			continue
		}
		if o, ok := s.op.(*remote.IfaceSetup); ok && !slices.Contains(out, o.Iface) {
			out = append(out, o.Iface)
		}
	}
	if p.real != nil && (i == hostReq || i == hostResp) {
		out = append(out, p.real.nic[i].IfName)
	}
	return out
}

// tools are the commands the NIC setup on host i looks up (hostnic's lookpath steps): the agent's hello checks
// them before anything changes.
func (p *remotePlan) tools(i int) []string {
	if p.real == nil || (i != hostReq && i != hostResp) {
		return nil
	}
	var out []string
	for _, s := range (&remote.NICSetup{NIC: p.real.nic[i]}).Steps() {
		if s.Op == hostnic.OpLookPath && len(s.Argv) > 0 && !slices.Contains(out, s.Argv[0]) {
			out = append(out, s.Argv[0])
		}
	}
	return out
}

// DryRun prints, host by host, what a run of the scenario would do: the SSH connection, the deployment
// commands, the agent command, every operation with its arguments and every command the agent would run.
// It connects to nothing and writes nothing.
func DryRun(sc *scenario.Scenario, opts Options, w io.Writer) error {
	if sc.Testbed != "remote" {
		fmt.Fprintf(w, "testbed %s runs on this machine; nothing is sent to other hosts. Without --dry-run, lumina run writes %s.\n", sc.Testbed, opts.OutDir)
		return nil
	}
	p, err := planRemote(sc, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "# lumina run --dry-run %s: testbed remote, run %s, agent %s (sha256 %s)\n", sc.Path, p.runID, p.agentBin, p.agentSum)
	fmt.Fprintf(w, "# results would go to %s; connections, PSNs and messages counted from %d (index-base)\n", opts.OutDir, sc.IndexBase)
	steps := append(append([]step{}, p.setup...), append([]step{p.install, p.traffic}, p.stop...)...)
	if p.real != nil {
		steps = p.realOrder()
	}
	for i, h := range p.hosts {
		d := h.deploy
		kh := h.target.KnownHosts
		if kh == "" {
			kh = remote.DefaultKnownHosts()
		}
		fmt.Fprintf(w, "\nhost %s: ssh %s (key %s, host key checked against %s)\n", h.role, h.target, orAgent(h.target.KeyFile), kh)
		fmt.Fprintf(w, "  deploy: %s\n  deploy: %s\n  deploy (when missing or different): %s  < %s\n",
			remote.ArchCommand(), d.HashCommand(), d.InstallCommand(), p.agentBin)
		if p.real != nil && (i == hostReq || i == hostResp) {
			fmt.Fprintf(w, "  %s\n", describeVerbs(p.real, d))
		}
		fmt.Fprintf(w, "  agent:  %s\n", d.AgentCommand())
		if t := p.tools(i); len(t) > 0 {
			fmt.Fprintf(w, "  op hello ifaces=%v tools=%v (checks root, ip, ethtool, the NIC setup's tools and the interfaces before any change)\n", p.ifaces(i), t)
		} else {
			fmt.Fprintf(w, "  op hello ifaces=%v (checks root, ip, ethtool and the interfaces before any change)\n", p.ifaces(i))
		}
		for _, s := range steps {
			if s.host != i {
				continue
			}
			fmt.Fprintf(w, "  op %s\n", strings.TrimSpace(s.op.Name()+" "+opSummary(s.op)))
			if o, ok := s.op.(*remote.IfaceSetup); ok {
				fmt.Fprintf(w, "    read /sys/class/net/%s/{mtu,flags}", o.Iface)
				if o.OffloadOff {
					fmt.Fprintf(w, "; exec ethtool -k %s", o.Iface)
				}
				fmt.Fprintf(w, " (the state to restore, journaled before each change)\n")
			}
			if p.real != nil {
				dryRunReal(w, s)
			}
			if _, ok := s.op.(*remote.NICSetup); ok {
				continue // its steps name every command
			}
			for _, c := range s.op.Commands() {
				fmt.Fprintf(w, "    exec %s\n", strings.Join(c, " "))
			}
		}
		if i >= hostDump {
			fmt.Fprintf(w, "  op fetch file=%s (in chunks of at most %d bytes, checked by SHA-256)\n", remote.DumpFile, remote.MaxFetch)
		}
		fmt.Fprintf(w, "  end of session: the agent stops what it started, undoes its changes in reverse order, removes %s\n", d.RunDir)
	}
	if p.real != nil {
		fmt.Fprintf(w, "\norder: %d setup operations (switch, dumpers), nic-setup (responder, requester), counters (start), verbs-server-start, verbs-client-start (the connections' QPNs and PSNs), switch-install with them (the start barrier), verbs-client-run (at most %s), verbs-server-stop, counters (finish), switch-stop, dump-stop and fetch, nic-undo\n",
			len(p.setup), p.limit)
		return nil
	}
	fmt.Fprintf(w, "\norder: %d setup operations (switch, dumpers, responder, requester), switch-install (the start barrier), traffic-run (at most %s), then endpoint-stop, switch-stop, dump-stop and fetch\n",
		len(p.setup), p.limit)
	return nil
}

func orAgent(k string) string {
	if k == "" {
		return "ssh-agent"
	}
	return k
}

// opSummary is an operation's arguments, short enough to read (QP lists and intents are counted).
func opSummary(op remote.Op) string {
	switch o := op.(type) {
	case *remote.IfaceSetup:
		return fmt.Sprintf("iface=%s mtu=%d addrs=%v offload_off=%v promisc=%v", o.Iface, o.MTU, o.Addrs, o.OffloadOff, o.Promisc)
	case *remote.SwitchStart:
		return fmt.Sprintf("ports=%v mirror=%v intents=%d weights=%v rewrite_port=%d seed=%d", o.Ports, o.Dumpers, len(o.Intents), o.DumperWeights, o.RewritePort, o.Seed)
	case *remote.DumpStart:
		return fmt.Sprintf("iface=%s workers=%d snaplen=%d max_packets=%d", o.Iface, o.Workers, o.SnapLen, o.MaxPackets)
	case *remote.EndpointStart:
		return fmt.Sprintf("iface=%s requester=%v profile=%s qps=%d mac=%x peer_mac=%x", o.Iface, o.Requester, o.Profile, len(o.Spec.QPs), o.Spec.MAC, o.Spec.PeerMAC)
	case *remote.SwitchInstall:
		var b strings.Builder
		for i, c := range o.Conns {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "[%d %s %v->%v qpn %#x/%#x ipsn %d/%d]", c.Index, c.Verb, c.ReqIP, c.RespIP, c.ReqQPN, c.RespQPN, c.ReqIPSN, c.RespIPSN)
		}
		return fmt.Sprintf("conns=%d %s", len(o.Conns), b.String())
	case *remote.TrafficRun:
		return fmt.Sprintf("limit_ms=%d", o.LimitMs)
	case *remote.NICSetup:
		return fmt.Sprintf("vendor=%s if-name=%s ib-device=%s/%d ip-list=%v mtu=%d", o.NIC.Vendor, o.NIC.IfName, o.NIC.IBDevice, max(o.NIC.IBPort, 1), o.NIC.IPs, o.NIC.MTU)
	case *remote.Counters:
		return fmt.Sprintf("ib-device=%s/%d (start and finish snapshots)", o.NIC.IBDevice, max(o.NIC.IBPort, 1))
	case *remote.VerbsServerStart:
		return fmt.Sprintf("device=%s listen=%s", o.Device, o.Listen)
	case *remote.VerbsClientStart:
		return fmt.Sprintf("device=%s connect=%s (returns the connections' QPNs and PSNs)", o.Device, o.Connect)
	case *remote.VerbsClientRun:
		return fmt.Sprintf("limit_ms=%d (answers the generator ready: the start barrier)", o.LimitMs)
	}
	return ""
}

// runRemote runs the plan. Problems before the traffic (unreachable host, authentication, host key,
// deployment) are environment errors (exit 2); a failure after the agents started leaves an invalid verdict
// with the reason. Every agent is told to clean up in every case; a dead agent's run directory is cleaned by
// a fresh session.
func runRemote(sc *scenario.Scenario, opts Options) (*rawResults, error) {
	p, err := planRemote(sc, opts)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := opts.Progress
	if log == nil {
		log = io.Discard
	}
	warn := opts.Progress // what the user must see even in a quiet run: a host left changed
	if warn == nil {
		warn = os.Stderr
	}
	_, bin, err := remote.FileSHA256(p.agentBin)
	if err != nil {
		return nil, fmt.Errorf("reading the agent binary: %w", err)
	}
	var verbsBytes []byte
	if p.real != nil {
		var vsum string
		if vsum, verbsBytes, err = remote.FileSHA256(p.real.verbsBin); err != nil || vsum != p.real.verbsSum {
			return nil, badInputf("%s: testbed remote: the verbs generator %s changed or is unreadable since it was planned (%v)", sc.Path, p.real.verbsBin, err)
		}
	}
	// Connect, deploy and start every agent in parallel.
	clients := make([]*remote.Client, len(p.hosts))
	agents := make([]*remote.AgentConn, len(p.hosts))
	errs := make([]error, len(p.hosts))
	var wg sync.WaitGroup
	for i, h := range p.hosts {
		wg.Go(func() {
			c, err := remote.Dial(ctx, h.target)
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = c
			if err := remote.Deploy(c, h.deploy, p.agentSum, bin, log); err != nil {
				errs[i] = &remote.HostError{Host: h.target.String(), Step: "deploying the agent", Env: true, Err: err}
				return
			}
			if p.real != nil && (i == hostReq || i == hostResp) {
				if err := remote.Deploy(c, verbsDeployment(h.deploy, p.real.verbsSum), p.real.verbsSum, verbsBytes, log); err != nil {
					errs[i] = &remote.HostError{Host: h.target.String(), Step: "deploying the verbs generator lumina-verbs", Env: true, Err: err}
					return
				}
			}
			a, err := remote.StartAgent(ctx, c, h.deploy, h.role, remote.Hello{Ifaces: p.ifaces(i), Tools: p.tools(i)})
			if err != nil {
				errs[i] = &remote.HostError{Host: h.target.String(), Step: "starting the agent", Env: true, Err: err}
				return
			}
			agents[i] = a
		})
	}
	wg.Wait()
	defer func() {
		// Every agent cleans up when its input ends; an agent that is gone gets a cleanup session.
		var cw sync.WaitGroup
		for i, a := range agents {
			if a == nil {
				continue
			}
			cw.Go(func() {
				alive := a.Alive()
				if !alive || !a.Close() {
					if _, err := clients[i].Output(a.Deploy.CleanupCommand(), nil); err != nil {
						fmt.Fprintf(warn, "lumina: %s: cleaning up after the agent: %v\n", p.hosts[i].target, err)
					}
				} else if err := a.ExitErr(); err != nil {
					// The agent could not undo everything it changed: say so whatever the verbosity.
					fmt.Fprintf(warn, "lumina: %s: the agent's cleanup failed (%v); its log:\n%s\n", p.hosts[i].target, err, a.Log())
				}
			})
		}
		cw.Wait()
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	if ctx.Err() != nil {
		// Ctrl-C while connecting or deploying: the run started, so it ends invalid (exit 3), not as bad input.
		return nil, &InvalidRunError{Reason: "remote run " + p.runID + " interrupted (SIGINT/SIGTERM) while the agents were starting"}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, badInputf("%s: testbed remote: %w", sc.Path, err)
	}
	fmt.Fprintf(log, "lumina: remote run %s: %d agents up\n", p.runID, len(agents))
	// Every operation has a deadline (the traffic: its limit and a margin), so that a hung host ends the run
	// with its name instead of hanging it; a dead connection is found by the keepalives sooner.
	call := func(s step, res any) error {
		d := time.Minute
		switch s.op.(type) {
		case *remote.TrafficRun, *remote.VerbsClientStart, *remote.VerbsClientRun:
			d = p.limit + time.Minute
		}
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if err := agents[s.host].Call(cctx, s.op, res); err != nil {
			return fmt.Errorf("%s: %w", p.hosts[s.host].target, err)
		}
		return nil
	}
	invalid := func(err error) (*rawResults, error) {
		reason := err.Error()
		if ctx.Err() != nil {
			reason = "interrupted (SIGINT/SIGTERM): " + reason
		}
		return nil, &InvalidRunError{Reason: "remote run " + p.runID + " did not complete: " + reason}
	}
	fmt.Fprintf(log, "lumina: remote run %s: setting up the switch, %d dumper(s) and the endpoints\n", p.runID, len(p.hosts)-hostDump)
	for _, s := range p.setup {
		if err := call(s, nil); err != nil {
			return invalid(err)
		}
	}
	if p.real != nil {
		rr, err := p.runReal(ctx, sc, opts, agents, call, log)
		if err != nil {
			return invalid(err)
		}
		return rr, nil
	}
	var inst remote.InstallResult
	if err := call(p.install, &inst); err != nil {
		return invalid(err)
	}
	fmt.Fprintf(log, "lumina: remote run %s: %d event-table entries installed; traffic (at most %s)\n", p.runID, inst.Entries, p.limit)
	var reqRes remote.EndpointResult
	if err := call(p.traffic, &reqRes); err != nil {
		return invalid(err)
	}
	time.Sleep(50 * time.Millisecond) // the last ACKs are forwarded and mirrored
	var respRes remote.EndpointResult
	if err := call(p.stop[0], &respRes); err != nil {
		return invalid(err)
	}
	var swRes remote.SwitchResult
	if err := call(p.stop[1], &swRes); err != nil {
		return invalid(err)
	}
	time.Sleep(10 * time.Millisecond)
	fmt.Fprintf(log, "lumina: remote run %s: traffic done; fetching the dumps\n", p.runID)
	res := &live.NetnsResult{Status: swRes.Status}
	dumps, err := p.fetchDumps(ctx, opts, agents, call)
	if err != nil {
		return invalid(err)
	}
	res.Dumps = dumps
	for _, e := range []string{reqRes.Error, respRes.Error, swRes.Error} {
		if e != "" {
			return invalid(errors.New(e))
		}
	}
	if ctx.Err() != nil {
		return invalid(ctx.Err())
	}
	st := swRes.Status
	res.Account(p.meta, reqRes.Results, reqRes.DataStats, respRes.DataStats, reqRes.Counters, respRes.Counters, st) // as the netns testbed
	if err := writeRemoteRaw(opts.OutDir, st, agents, p); err != nil {
		return nil, err
	}
	if err := writeRunFilesWith(opts.OutDir, sc, &res.Result, st.Injector, st.Entries); err != nil {
		return nil, err
	}
	return rawOf(&inject.Recorder{Iter: swRes.Iter, Conn: swRes.Conn}), nil // what the switch agent recorded
}

// fetchDumps stops every dumper and fetches its pcap into the results' dump directory.
func (p *remotePlan) fetchDumps(ctx context.Context, opts Options, agents []*remote.AgentConn, call func(step, any) error) ([]live.DumpFile, error) {
	var dumps []live.DumpFile
	i := 0
	for _, s := range p.stop {
		if _, ok := s.op.(*remote.DumpStop); !ok {
			continue
		}
		var dr remote.DumpResult
		if err := call(s, &dr); err != nil {
			return nil, err
		}
		path := filepath.Join(opts.OutDir, resultsdir.DirDump, fmt.Sprintf("dumper-%d.pcap", i))
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("writing results: %w", err)
		}
		err = agents[s.host].FetchFile(ctx, dr.File, dr.Size, dr.SHA256, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: fetching the dump: %w", p.hosts[s.host].target, err)
		}
		if err := writeJSON(filepath.Join(opts.OutDir, resultsdir.DirDump), fmt.Sprintf("dumper-%d.stats.json", i), dr.Stats); err != nil {
			return nil, err
		}
		dumps = append(dumps, live.DumpFile{Path: path, Stats: dr.Stats})
		i++
	}
	return dumps, nil
}

// RemoteRawDir is the results subdirectory with the switch's full status (ports, rings, transmit statistics)
// and each agent's log, for the curious and for debugging.
const RemoteRawDir = resultsdir.DirRemoteRaw

func writeRemoteRaw(dir string, st live.SwitchStatus, agents []*remote.AgentConn, p *remotePlan) error {
	raw := filepath.Join(dir, RemoteRawDir)
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	if err := writeJSON(raw, "switch-status.json", st); err != nil {
		return err
	}
	for i, a := range agents {
		if err := os.WriteFile(filepath.Join(raw, p.hosts[i].role+".log"), []byte(a.Log()+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing results: %w", err)
		}
	}
	return nil
}
