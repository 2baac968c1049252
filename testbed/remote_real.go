package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/lumina-go/lumina/hostnic"
	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/remote"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
)

// The remote testbed on real RNICs: a role whose nic section names an RDMA device (nic.ib-device) is set up by
// hostnic through the agent (nic-setup: the vendor's steps, each undone at the end), its counters are read
// from their real sources before and after the traffic (counters), and the traffic is the verbs generator
// (lumina-verbs), which reports the connections' QPNs and PSNs to the requester's agent; the controller
// installs the switch with them, then lets the traffic go. For rxe, nic.ib-device is the Soft-RoCE device
// created on nic.if-name (its parent netdev).

// planReal plans the real-RNIC operations on the requester and responder.
func (p *remotePlan) planReal(sc *scenario.Scenario, opts Options, mtu int) error {
	r := sc.Remote
	bin := opts.Remote.VerbsBinary
	if bin == "" {
		bin = os.Getenv(EnvVerbsBinary)
	}
	if bin == "" {
		return badInputf("%s: testbed remote: requester.nic.ib-device %s names a real RNIC, whose traffic is the verbs generator: give its binary with lumina run --verbs-binary PATH or %s=PATH (build it once with CGO_ENABLED=1 go build -tags verbs -o lumina-verbs ./verbs/cmd/lumina-verbs on a machine with the hosts' libibverbs-dev; it is copied to the hosts, never built there)",
			sc.Path, r.Requester.IBDevice, EnvVerbsBinary)
	}
	sum, _, err := remote.FileSHA256(bin)
	if err != nil {
		return badInputf("%s: testbed remote: the verbs generator: %v", sc.Path, err)
	}
	rp := &realPlan{verbsBin: bin, verbsSum: sum}
	for i, h := range []scenario.RemoteHost{r.Requester, r.Responder} {
		hw := hostnic.Hardware{IfName: h.IfName, PCIAddr: h.PCIAddr, IBDevice: h.IBDevice, IBPort: h.IBPort, MTU: mtu}
		if h.IBPort == 0 {
			hw.IBPort = 1
		}
		cfg, err := hostnic.FromScenario(sc, h.Role, hw)
		if err != nil {
			return badInputf("%s: testbed remote: %w", sc.Path, err)
		}
		cfg.Host = p.hosts[i].target.String()
		rp.nic[i] = cfg
	}
	var reqIP, respIP netip.Addr
	if l := sc.Requester.NIC.IPList; len(l) > 0 {
		reqIP = l[0].Addr()
	}
	if l := sc.Responder.NIC.IPList; len(l) > 0 {
		respIP = l[0].Addr()
	}
	if !reqIP.IsValid() || !respIP.IsValid() {
		return badInputf("%s: testbed remote: real RNICs need requester.nic.ip-list and responder.nic.ip-list (the generator's addresses)", sc.Path)
	}
	var yaml bytes.Buffer
	if err := sc.WriteEffective(&yaml); err != nil {
		return fmt.Errorf("writing the effective scenario: %w", err)
	}
	p.limit = time.Duration(p.cfg.RunLimitNs)
	if p.limit <= 0 {
		p.limit = 30 * time.Second
	}
	timeout := (p.limit + 30*time.Second).Milliseconds()
	listen := netip.AddrPortFrom(respIP, remote.VerbsPort)
	srv := &remote.VerbsServerStart{Listen: listen}
	srv.SHA256, srv.Device, srv.GIDIndex, srv.TimeoutMs = sum, rp.nic[hostResp].IBDevice, -1, timeout
	cli := &remote.VerbsClientStart{Connect: listen, ScenarioYAML: yaml.String()}
	cli.SHA256, cli.Device, cli.GIDIndex, cli.TimeoutMs = sum, rp.nic[hostReq].IBDevice, -1, timeout
	rp.setup = []step{{hostResp, &remote.NICSetup{NIC: rp.nic[hostResp]}}, {hostReq, &remote.NICSetup{NIC: rp.nic[hostReq]}}}
	rp.counters = [2]step{{hostReq, &remote.Counters{NIC: rp.nic[hostReq]}}, {hostResp, &remote.Counters{NIC: rp.nic[hostResp]}}}
	rp.server = step{hostResp, srv}
	rp.client = step{hostReq, cli}
	rp.run = step{hostReq, &remote.VerbsClientRun{LimitMs: timeout}}
	rp.serverStop = step{hostResp, &remote.VerbsServerStop{LimitMs: 30_000}}
	rp.undo = []step{{hostReq, &remote.NICUndo{}}, {hostResp, &remote.NICUndo{}}}
	p.real = rp
	// The switch's table is built from the connections the generator reports: install has none yet.
	p.install = step{host: hostSw, op: &remote.SwitchInstall{}}
	p.traffic = rp.run
	p.stop = []step{{hostSw, &remote.SwitchStop{}}}
	for i := range r.Dumpers {
		p.stop = append(p.stop, step{host: hostDump + i, op: &remote.DumpStop{}})
	}
	for _, s := range append(append(append([]step{}, p.setup...), rp.setup...), rp.counters[0], rp.counters[1], rp.server, rp.client, rp.run, rp.serverStop) {
		if err := s.op.Validate(); err != nil {
			return badInputf("%s: testbed remote: %s on %s: %w", sc.Path, s.op.Name(), p.hosts[s.host].role, err)
		}
	}
	return nil
}

// realOrder is the order of a real-RNIC run, host by host, for the dry run.
func (p *remotePlan) realOrder() []step {
	rp := p.real
	out := append([]step{}, p.setup...)
	out = append(out, rp.setup...)
	out = append(out, rp.counters[0], rp.counters[1], rp.server, rp.client, p.install, rp.run, rp.serverStop,
		rp.counters[0], rp.counters[1])
	out = append(out, p.stop...)
	return append(out, rp.undo...)
}

// dryRunReal prints the hostnic steps of nic-setup and what counters reads.
func dryRunReal(w io.Writer, s step) {
	switch o := s.op.(type) {
	case *remote.NICSetup:
		for _, st := range o.Steps() {
			fmt.Fprintf(w, "    step %s\n", st)
		}
	case *remote.Counters:
		port := o.NIC.IBPort
		if port == 0 {
			port = 1
		}
		fmt.Fprintf(w, "    read /sys/class/infiniband/%s/ports/%d/hw_counters/*", o.NIC.IBDevice, port)
		if o.NIC.Vendor == hostnic.VendorNVIDIA {
			fmt.Fprintf(w, " and counters/*")
		}
		fmt.Fprintln(w)
	case *remote.NICUndo:
		fmt.Fprintf(w, "    the undo of every nic-setup step that changed state, in reverse order\n")
	case *remote.SwitchInstall:
		if len(o.Conns) == 0 {
			fmt.Fprintf(w, "    (the connections are the QPNs and PSNs verbs-client-start returns)\n")
		}
	}
}

// verbsDeployment is where the generator goes on a host: next to the agent.
func verbsDeployment(d remote.Deployment, sum string) remote.Deployment {
	v := d
	v.Bin = path.Join(path.Dir(d.Bin), remote.VerbsBinName(sum))
	return v
}

// runReal runs the real-RNIC part once the agents are up and the switch and dumpers are set up; it returns the
// results or an error for invalid().
func (p *remotePlan) runReal(ctx context.Context, sc *scenario.Scenario, opts Options, agents []*remote.AgentConn,
	call func(step, any) error, log io.Writer) (*rawResults, error) {
	rp := p.real
	for _, s := range rp.setup {
		var nr remote.NICResult
		if err := call(s, &nr); err != nil {
			return nil, err
		}
		for _, st := range nr.Steps {
			fmt.Fprintf(log, "lumina: %s%s\n", st.Step, noteOf(st.Note))
		}
	}
	var snaps [2][2]hostnic.Snapshot // [start/finish][requester/responder]
	for i, s := range rp.counters {
		if err := call(s, &snaps[0][i]); err != nil {
			return nil, err
		}
	}
	if err := call(rp.server, nil); err != nil {
		return nil, err
	}
	var msg live.ControlMsg
	if err := call(rp.client, &msg); err != nil {
		return nil, err
	}
	if len(msg.Conns) != p.cfg.Traffic.NumConns {
		return nil, fmt.Errorf("%s: the verbs generator reported %d connections; the scenario has %d", p.hosts[hostReq].target, len(msg.Conns), p.cfg.Traffic.NumConns)
	}
	install := step{host: hostSw, op: &remote.SwitchInstall{Conns: msg.Conns}}
	if err := install.op.Validate(); err != nil {
		return nil, fmt.Errorf("%s: the verbs generator's connections: %w", p.hosts[hostReq].target, err)
	}
	var inst remote.InstallResult
	if err := call(install, &inst); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "lumina: remote run %s: %d connections reported by the generator, %d event-table entries installed; traffic (at most %s)\n",
		p.runID, len(msg.Conns), inst.Entries, p.limit)
	rp.run.op.(*remote.VerbsClientRun).Entries = inst.Entries
	var cres remote.VerbsResult
	if err := call(rp.run, &cres); err != nil {
		return nil, err
	}
	var sres remote.VerbsResult
	if err := call(rp.serverStop, &sres); err != nil {
		return nil, err
	}
	time.Sleep(200 * time.Millisecond) // late retransmissions and ACKs still cross the switch
	for i, s := range rp.counters {
		if err := call(s, &snaps[1][i]); err != nil {
			return nil, err
		}
	}
	var swRes remote.SwitchResult
	if err := call(p.stop[0], &swRes); err != nil {
		return nil, err
	}
	if _, err := p.fetchDumps(ctx, opts, agents, call); err != nil {
		return nil, err
	}
	for _, s := range rp.undo {
		var nr remote.NICResult
		if err := call(s, &nr); err != nil {
			return nil, err
		}
		for _, st := range nr.Steps {
			fmt.Fprintf(log, "lumina: undone: %s%s\n", st.Step, noteOf(st.Note))
		}
	}
	var rep VerbsReport
	if len(cres.Output) == 0 || json.Unmarshal(cres.Output, &rep) != nil {
		return nil, fmt.Errorf("%s: lumina-verbs client (exit %d) printed no report: %s", p.hosts[hostReq].target, cres.Exit, cres.Log)
	}
	if rep.Error != "" || cres.Exit != 0 {
		return nil, fmt.Errorf("%s: lumina-verbs client failed (exit %d): %s; %s", p.hosts[hostReq].target, cres.Exit, rep.Error, cres.Log)
	}
	if sres.Exit != 0 {
		return nil, fmt.Errorf("%s: lumina-verbs server failed (exit %d): %s", p.hosts[hostResp].target, sres.Exit, sres.Log)
	}
	if swRes.Error != "" {
		return nil, errors.New(swRes.Error)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := writeRealFiles(opts.OutDir, sc, rp, swRes.Status, rep, snaps); err != nil {
		return nil, err
	}
	if err := writeRemoteRaw(opts.OutDir, swRes.Status, agents, p); err != nil {
		return nil, err
	}
	return rawOf(&inject.Recorder{Iter: swRes.Iter, Conn: swRes.Conn}), nil // what the switch agent recorded
}

func noteOf(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

// writeRealFiles writes the results of a real-RNIC run in the shape every testbed writes: the effective
// scenario, connections and traffic from the generator's report, counters.json with hostnic's start and finish
// snapshots under the vendor's names, and the switch's table.
func writeRealFiles(dir string, sc *scenario.Scenario, rp *realPlan, st live.SwitchStatus, rep VerbsReport, snaps [2][2]hostnic.Snapshot) error {
	if err := writeEffective(filepath.Join(dir, resultsdir.FileScenario), sc); err != nil {
		return err
	}
	conns, traffic, err := verbsResults(sc, rep)
	if err != nil {
		return err
	}
	if err := writeList(dir, resultsdir.FileConnections, conns); err != nil {
		return err
	}
	if err := writeList(dir, resultsdir.FileTraffic, traffic); err != nil {
		return err
	}
	cf := resultsdir.CountersFile{
		Requester: resultsdir.HostCounters{NIC: sc.Requester.NIC.Type, Vendor: rp.nic[hostReq].Vendor, Start: snaps[0][hostReq].Values, Finish: snaps[1][hostReq].Values},
		Responder: resultsdir.HostCounters{NIC: sc.Responder.NIC.Type, Vendor: rp.nic[hostResp].Vendor, Start: snaps[0][hostResp].Values, Finish: snaps[1][hostResp].Values},
	}
	for q := range 2 {
		ps := st.Ports[q]
		cf.Switch.Ports = append(cf.Switch.Ports, inject.PortCounters{RxRoCE: ps.RxRoCE, TxRoCE: ps.TxRoCE, Mirrored: ps.Mirrored})
		cf.Switch.Mirrored += ps.Mirrored
		cf.Switch.RxRoCE += ps.RxRoCE
	}
	cf.Switch.Injector = st.Injector
	if err := writeJSON(dir, resultsdir.FileCounters, cf); err != nil {
		return err
	}
	sw := struct {
		Entries []inject.Entry `json:"entries"`
	}{Entries: st.Entries}
	if sw.Entries == nil {
		sw.Entries = []inject.Entry{}
	}
	return writeJSON(dir, resultsdir.FileSwitch, sw)
}

// describeVerbs is the dry run's line for the generator's deployment.
func describeVerbs(rp *realPlan, d remote.Deployment) string {
	v := verbsDeployment(d, rp.verbsSum)
	return fmt.Sprintf("deploy (when missing or different): %s  < %s (lumina-verbs, sha256 %s)", v.InstallCommand(), rp.verbsBin, rp.verbsSum)
}
