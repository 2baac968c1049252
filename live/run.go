package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// NetnsConfig is one run on the netns testbed. Sim carries the same description the simulator gets (hosts,
// NIC profiles, traffic, seed, number of dumpers, and NewSwitch, which builds the switch logic from the
// metadata the generator reports over the control plane); the rest is what only a real run needs.
type NetnsConfig struct {
	Sim           lab.Config
	OutDir        string // dumper-<i>.pcap and dumper-<i>.stats.json are written here
	SnapLen       int    // dumper snap length (0: 128)
	RewritePort   uint16 // the RSS rewrite port the switch logic uses, for the dumpers to undo (0: none)
	DumperWorkers int    // fan-out sockets per dumper (0: 2)
	// Grace is how long the switch and dumpers keep running after the traffic ends (0: 50 ms), so that the
	// last ACKs are forwarded and mirrored.
	Grace time.Duration
}

// DumpFile is one dumper's output.
type DumpFile struct {
	Path  string    `json:"path"`
	Stats DumpStats `json:"stats"`
}

// NetnsResult mirrors the simulator's result (per-connection outcomes, NIC counters, switch port counters)
// plus the real switch's status and the dumpers' files and loss statistics.
type NetnsResult struct {
	lab.Result
	Status SwitchStatus
	Dumps  []DumpFile
}

// netnsConn is one connection's addressing.
type netnsConn struct {
	verb              string
	reqQPN, respQPN   uint32
	reqIPSN, respIPSN roce.PSN
	reqIP, respIP     netip.Addr
	tos               uint8
}

// RunNetns builds the namespaces, runs the switch, the dumpers and two software RNICs, sends the metadata
// over the control plane, runs the traffic, and tears everything down, also when ctx is cancelled or the
// process gets SIGINT or SIGTERM.
func RunNetns(ctx context.Context, cfg NetnsConfig) (*NetnsResult, error) {
	sc := &cfg.Sim
	t := &sc.Traffic
	plan, err := PlanTraffic(sc)
	if err != nil {
		return nil, fmt.Errorf("netns run: %w", err)
	}
	if cfg.OutDir == "" {
		return nil, errors.New("netns run: no output directory for the dumps")
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("netns run: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	dumpers := max(sc.Dumpers, 1)
	tb, err := NewTestbed(TestbedConfig{Dumpers: dumpers, MTU: max(1500, t.MTU+200)})
	if err != nil {
		return nil, fmt.Errorf("netns run: %w", err)
	}
	defer tb.Close()

	meta := plan.Meta
	ring := RingConfig{FrameSize: plan.Requester.FrameSize}

	var sw *Switch
	if err := InNetns(tb.Sw, func() (e error) {
		sw, e = NewSwitch(SwitchConfig{Ports: [2]string{SwReqIf, SwRespIf}, Dumpers: tb.SwDump, Ring: ring})
		return e
	}); err != nil {
		return nil, fmt.Errorf("netns run: %w", err)
	}
	defer sw.Close()
	dumps := make([]*Dumper, dumpers)
	for i := range dumps {
		err := InNetns(tb.Dump[i], func() (e error) {
			dumps[i], e = NewDumper(DumpConfig{Iface: HostIf, Workers: max(cfg.DumperWorkers, 2), SnapLen: cfg.SnapLen,
				RewritePort: cfg.RewritePort, FanoutGroup: uint16(0x4c00 + i)})
			return e
		})
		if err != nil {
			return nil, fmt.Errorf("netns run: %w", err)
		}
		defer dumps[i].Close()
	}
	req, resp, err := endpoints(sc, plan, tb)
	if err != nil {
		return nil, fmt.Errorf("netns run: %w", err)
	}
	defer req.Close()
	defer resp.Close()

	// The control plane listens on loopback in the process's own namespace.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netns run: control plane: %w", err)
	}
	build := func(cs []inject.ConnMeta) (inject.Logic, error) {
		if sc.NewSwitch != nil {
			return sc.NewSwitch(cs)
		}
		return inject.New(inject.Config{Conns: cs, DumperWeights: equalWeights(dumpers)})
	}

	var wg sync.WaitGroup
	swCtx, swStop := context.WithCancel(context.Background())
	dumpCtx, dumpStop := context.WithCancel(context.Background())
	respCtx, respStop := context.WithCancel(context.Background())
	ctlCtx, ctlStop := context.WithCancel(ctx)
	defer func() { ctlStop(); respStop(); swStop(); dumpStop(); wg.Wait() }()
	var swStatus SwitchStatus
	var swErr, respErr, ctlErr error
	dumpErrs := make([]error, dumpers)
	swDone := make(chan struct{})
	wg.Go(func() { swStatus, swErr = sw.Run(swCtx); close(swDone) })
	for i, d := range dumps {
		wg.Go(func() { dumpErrs[i] = d.Run(dumpCtx) })
	}
	wg.Go(func() { respErr = resp.Run(respCtx, nil) })
	wg.Go(func() { ctlErr = ServeControl(ctlCtx, ln, build, sw.Install) })

	limit := time.Duration(sc.RunLimitNs)
	if limit <= 0 {
		limit = 30 * time.Second
	}
	runCtx, runStop := context.WithTimeout(ctx, limit)
	defer runStop()
	start := make(chan struct{})
	reqDone := make(chan error, 1)
	go func() { reqDone <- req.Run(runCtx, start) }()
	if _, err := SendMetadata(runCtx, ln.Addr().String(), meta); err != nil {
		runStop()
		<-reqDone
		return nil, fmt.Errorf("netns run: metadata barrier: %w", err)
	}
	close(start)
	reqErr := <-reqDone
	interrupted := ctx.Err()

	grace := cfg.Grace
	if grace == 0 {
		grace = 50 * time.Millisecond
	}
	time.Sleep(grace)
	ctlStop()
	respStop()
	swStop()
	// The switch flushes its last batches when Run returns; the dumpers stop a moment after that.
	<-swDone
	time.Sleep(10 * time.Millisecond)
	dumpStop()
	wg.Wait()

	res := &NetnsResult{Status: swStatus}
	for i, d := range dumps {
		path := filepath.Join(cfg.OutDir, fmt.Sprintf("dumper-%d.pcap", i))
		st, err := d.Write(path)
		if err != nil {
			return nil, fmt.Errorf("netns run: %w", err)
		}
		res.Dumps = append(res.Dumps, DumpFile{Path: path, Stats: st})
	}
	res.Account(meta, req.Results(), req.DataStats(), resp.DataStats(), req.Counters(), resp.Counters(), swStatus)
	errs := []error{swErr, respErr, ctlErr, errors.Join(dumpErrs...)}
	if reqErr != nil && !errors.Is(reqErr, context.DeadlineExceeded) {
		errs = append(errs, reqErr)
	}
	if interrupted != nil {
		errs = append(errs, fmt.Errorf("interrupted: %w", interrupted))
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("netns run: %w", err)
	}
	return res, nil
}

// Account fills the result from what the endpoints and the switch reported: per connection its completion
// (incomplete when the requester reported none), data packets and retransmissions (the responder's count wins
// for the connections it carried data on: READ responses), both NICs' counters, and the switch's ports,
// injector and flushed frames. The netns testbed and the remote testbed account alike.
func (res *NetnsResult) Account(meta []inject.ConnMeta, results map[int]lab.ConnResult, reqData, respData map[int][2]uint64,
	reqCounters, respCounters lab.CounterSnapshot, st SwitchStatus) {
	res.Conns = meta
	data := maps.Clone(reqData)
	if data == nil {
		data = map[int][2]uint64{}
	}
	maps.Copy(data, respData)
	res.PerConn = make([]lab.ConnResult, len(meta))
	for i := range res.PerConn {
		r, ok := results[i]
		if !ok {
			r = lab.ConnResult{Verb: meta[i].Verb, Status: rnic.ConnIncomplete}
		}
		r.DataPackets, r.Retransmissions = data[i][0], data[i][1]
		res.PerConn[i] = r
		res.EndNs = max(res.EndNs, r.LastCompletionNs)
	}
	res.Counters.Requester, res.Counters.Responder = reqCounters, respCounters
	for p := range 2 {
		ps := st.Ports[p]
		res.SwitchPorts[p] = inject.PortCounters{RxRoCE: ps.RxRoCE, TxRoCE: ps.TxRoCE, Mirrored: ps.Mirrored}
	}
	if st.Injector != nil {
		res.Switch = st.Injector
	}
	res.FlushedFrames = int(st.Flushed)
}

// frameSizeFor picks a V2 ring slot that holds a whole frame of the RoCE MTU plus headers.
func frameSizeFor(mtu int) int {
	need := mtu + 200 + 64
	fs := 2048
	for fs < need {
		fs *= 2
	}
	return fs
}

// planConns draws each connection's QPNs and initial PSNs from the seed (one stream per use, as the simulator
// does, so the same seed gives the same connections).
func planConns(sc *lab.Config, n int) []netnsConn {
	t := &sc.Traffic
	qpnRng := rand.New(rand.NewPCG(sc.Seed, 0x71706e)) // "qpn"
	psnRng := rand.New(rand.NewPCG(sc.Seed, 0x70736e)) // "psn"
	used := map[uint32]bool{}
	newQPN := func() uint32 {
		for {
			q := qpnRng.Uint32() & 0xffffff
			if q > 1 && !used[q] {
				used[q] = true
				return q
			}
		}
	}
	out := make([]netnsConn, n)
	for i := range out {
		verb := t.Verb
		if verb == "send_read" {
			verb = "send"
			if i >= t.NumSendConns {
				verb = "read"
			}
		}
		c := netnsConn{verb: verb, reqQPN: newQPN(), respQPN: newQPN(),
			reqIPSN: roce.PSN(psnRng.Uint32() & roce.PSNMask), respIPSN: roce.PSN(psnRng.Uint32() & roce.PSNMask)}
		if sc.ForceIPSN != nil {
			if p, ok := sc.ForceIPSN(i); ok {
				c.reqIPSN = p & roce.PSNMask
			}
		}
		pick := func(ips []netip.Addr) netip.Addr {
			if t.MultiGID {
				return ips[i%len(ips)]
			}
			return ips[0]
		}
		c.reqIP, c.respIP = pick(sc.Requester.IPs), pick(sc.Responder.IPs)
		dscp := 0
		if len(t.DSCPList) > 0 {
			dscp = t.DSCPList[i%len(t.DSCPList)]
		}
		c.tos = uint8(dscp)<<2 | 2
		out[i] = c
	}
	return out
}

// endpoints creates the requester's and the responder's software RNICs in their namespaces.
func endpoints(sc *lab.Config, plan *Plan, tb *Testbed) (*Endpoint, *Endpoint, error) {
	var req, resp *Endpoint
	err := InNetns(tb.Req, func() (e error) {
		req, e = NewEndpoint(plan.Requester.Config(HostIf, sc.Requester.Profile))
		return e
	})
	if err != nil {
		return nil, nil, err
	}
	err = InNetns(tb.Resp, func() (e error) {
		resp, e = NewEndpoint(plan.Responder.Config(HostIf, sc.Responder.Profile))
		return e
	})
	if err != nil {
		req.Close()
		return nil, nil, err
	}
	return req, resp, nil
}
