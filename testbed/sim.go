package testbed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/netsim"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
)

// Options are how a run is carried out; none of them changes the results.
type Options struct {
	// OutDir is the results directory. Run writes a staging directory beside it and moves it into place whole
	// (resultsdir.Begin); the backends write into OutDir, which Run sets to the staging directory.
	OutDir string
	// Progress, if not nil, receives progress lines when a run takes longer than a moment (unless Meter is set),
	// and the testbeds' messages.
	Progress io.Writer
	// Meter, if not nil, is told the run's phase and how far it is: done of total, total 0 when unknown. The
	// simulator reports the packets mirrored so far against the number expected without retransmissions
	// (EstimateDumpBytes), so done can pass total. It only observes: the results are the same with or without.
	Meter func(phase string, done, total int64)
	// Remote configures the remote testbed.
	Remote RemoteOptions
	// Staged, if not nil, is told the staging directory the run writes into before anything runs (so that
	// an interrupted command can mark it: resultsdir.MarkInterrupted).
	Staged func(dir string)
	// Finish, if not nil, runs on the staging directory once the testbed has written everything, before the
	// directory is moved into place: `lumina run` judges it there (verdict.Judge), so that analysis.json is
	// part of the directory committed whole. An error from it aborts the run like the testbed's own.
	Finish func(dir string) error
	// Trace, if not nil, is given a simulator run's connections before its traffic starts (the records of
	// connections.json) and returns what hears trace.pcapng while it is written: `lumina run` wires the
	// verdict's analysis of the trace there (verdict.NewStream), which then needs not read the file back in
	// Finish. The other testbeds ignore it (their trace is reconstructed after the run).
	Trace func(dir string, conns []resultsdir.ConnRecord) TraceConsumer

	// SimHooks, if not nil, hear a simulator run's progress from its start (for a progress display; the
	// lines on Progress do not need it).
	SimHooks *SimHooks

	// flushes, when not nil, runs the fsyncs a run starts early (the simulator's dumps and trace, while the
	// verdict stage works); Run waits for them before it commits the directory, and their error fails the run.
	flushes *flushes
	// recordAll keeps every mirrored packet's annotation in a simulator run (a test compares the trace it
	// wrote as it ran with reconstruct's merge of its dumps).
	recordAll bool
}

// TraceConsumer hears trace.pcapng as a simulator run writes it, on the goroutine that writes it.
type TraceConsumer interface {
	// Write is given the file's next bytes, once they are written to the file, in order and ending at a block
	// boundary: from the first byte of the file on, the bytes of all calls are the file. p is the consumer's
	// from then on (no copy); it returns a buffer the writer may fill next (one it is done with, or nil).
	Write(p []byte) (spare []byte)
	// End says the trace is complete (err nil: every byte of the file was given) or will not be (the run or
	// the writing failed); nothing is written after it.
	End(err error)
}

// SimHooks report a simulator run's progress while it runs. Both are called on the simulation's goroutine
// and must return quickly.
type SimHooks struct {
	// Setup hears how many of the run's connections are set up, every 1,024 and once all are, before any
	// traffic (a run of 65,536 connections spends a noticeable time there).
	Setup func(conns, total int)
	// Events hears the simulated time and the events so far, every SimHookEvery events.
	Events func(simNs int64, events uint64)
}

// SimHookEvery is how many simulated events SimHooks.Events hears about at a time (also the interval of the
// progress lines).
const SimHookEvery = 200_000

// Run runs the scenario on its testbed and writes the results directory: the effective scenario, the dumps,
// the trace reconstructed from them, the counters and the traffic log (package resultsdir). Judging them is the
// verdict stage's job (Options.Finish, or after Run). The directory is written whole or not at all
// (resultsdir.Begin): a run that fails or is killed leaves the previous results in place and its partial
// results in a staging directory marked INCOMPLETE. A run that started and could not finish is an
// *InvalidRunError whose Dir is that staging directory. Errors wrapping ErrInput are the scenario's or the
// environment's fault (exit status 2).
func Run(sc *scenario.Scenario, opts Options) error {
	if err := preflight(sc); err != nil {
		return err
	}
	st, err := resultsdir.Begin(opts.OutDir, "lumina run of "+sc.Path)
	if err != nil {
		return err
	}
	announce(opts.Progress, sc, st.Final)
	if opts.Staged != nil {
		opts.Staged(st.Dir)
	}
	staged := opts
	staged.OutDir = st.Dir
	staged.flushes = new(flushes)
	err = runStaged(sc, staged)
	if err == nil && opts.Finish != nil {
		meter(opts, "analyzing")
		err = opts.Finish(st.Dir)
	}
	if ferr := staged.flushes.wait(); ferr != nil && err == nil {
		err = ferr // not committed: a file may not be what was written
	}
	if err != nil {
		var inv *InvalidRunError
		if errors.As(err, &inv) {
			inv.Dir = st.Dir
		}
		return st.Abort(err)
	}
	return st.Commit()
}

// runStaged runs the scenario's testbed writing into opts.OutDir, the staging directory.
func runStaged(sc *scenario.Scenario, opts Options) error {
	if sc.Workload != nil {
		meter(opts, "running the workload on the NIC model")
		return runWorkload(sc, opts) // a Collie-style workload on the NIC micro-architecture model (workload.go)
	}
	var backend func(*scenario.Scenario, Options) (*rawResults, error)
	switch sc.Testbed {
	case "", "sim":
		backend = runSim
	case "netns":
		backend = runNetns
	case "rxe-vm":
		backend = runRxeVM
	case "remote":
		backend = runRemote
	default:
		return badInputf("%s: testbed %q is not available in this version; expected sim, netns, rxe-vm or remote", sc.Path, sc.Testbed)
	}
	meter(opts, "running on testbed "+orSim(sc.Testbed))
	raw, err := backend(sc, opts)
	if err != nil {
		return err
	}
	if raw.traceDone {
		return nil
	}
	meter(opts, "reconstructing the trace")
	return reconstruct(opts.OutDir, raw, sc.IndexBase)
}

// loadProfile resolves a scenario NIC type: a profile name, or a file path relative to the scenario.
func loadProfile(sc *scenario.Scenario, host, typ string) (*rnic.Profile, error) {
	prof, err := rnic.LoadProfile(sc.ProfileRef(typ))
	if err != nil {
		return nil, badInputf("%s: %s.nic.type: %w", sc.Path, host, err)
	}
	return prof, nil
}

func hostConfig(sc *scenario.Scenario, h scenario.Host, name string, mac byte) (lab.HostConfig, error) {
	prof, err := loadProfile(sc, name, h.NIC.Type)
	if err != nil {
		return lab.HostConfig{}, err
	}
	hc := lab.HostConfig{
		Profile:         prof,
		MAC:             [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, mac},
		AdaptiveRetrans: h.RoCEParameters.AdaptiveRetrans,
		SlowRestart:     h.RoCEParameters.SlowRestart,
		DCQCNRPEnable:   h.RoCEParameters.DCQCNRPEnable,
		DCQCNNPEnable:   h.RoCEParameters.DCQCNNPEnable,
	}
	if d := h.RoCEParameters.DCQCNEnable; d != nil {
		hc.DCQCNRPEnable, hc.DCQCNNPEnable = *d, *d
	}
	if us := h.RoCEParameters.MinTimeBetweenCNPsUs; us != nil {
		ns := int64(*us * 1000)
		hc.MinTimeBetweenCNPsNs = &ns
	}
	for _, p := range h.NIC.IPList {
		hc.IPs = append(hc.IPs, p.Addr())
	}
	if h.NIC.ETS != nil {
		hc.ETS.DSCPToTC = h.NIC.ETS.DSCPToTC
		for _, c := range h.NIC.ETS.Classes {
			hc.ETS.Classes = append(hc.ETS.Classes, lab.TrafficClass{TC: c.TC, Weight: c.Weight, Strict: c.Strict})
		}
	}
	return hc, nil
}

// netsimConfig converts a scenario into the simulator's configuration.
func netsimConfig(sc *scenario.Scenario) (lab.Config, error) {
	req, err := hostConfig(sc, sc.Requester, "requester", 0x02)
	if err != nil {
		return lab.Config{}, err
	}
	resp, err := hostConfig(sc, sc.Responder, "responder", 0x03)
	if err != nil {
		return lab.Config{}, err
	}
	t := sc.Traffic
	cfg := lab.Config{
		Seed:            sc.Seed,
		Requester:       req,
		Responder:       resp,
		Link:            lab.LinkConfig{Gbps: sc.Network.LinkGbps, PropagationNs: sc.Network.PropagationNs},
		SwitchLatencyNs: sc.Network.SwitchLatencyNs,
		Traffic: lab.TrafficConfig{
			Verb:         t.Verb,
			NumConns:     t.NumConnections,
			NumSendConns: t.NumSendQPs,
			NumReadConns: t.NumReadQPs,
			MsgsPerConn:  t.NumMsgsPerQP,
			MsgSize:      t.MessageSize,
			MTU:          t.MTU,
			TxDepth:      t.TxDepth,
			Barrier:      t.BarrierSync,
			MultiGID:     t.MultiGID,
			DSCPList:     t.DSCPList,
			Timeout:      uint8(t.MinRetransmitTimeout),
			RetryCnt:     uint8(t.MaxRetransmitRetry),
			RNRRetry:     uint8(t.RNRRetry),
		},
		Dumpers:    max(sc.Network.Dumpers, 1),
		RunLimitNs: sc.Network.RunTimeoutMs * 1_000_000,
	}
	if p := t.InitialPSN; p != nil {
		cfg.ForceIPSN = func(int) (roce.PSN, bool) { return roce.PSN(*p), true }
	}
	return cfg, nil
}

// rawResults is what a testbed run leaves for the analysis besides the files.
type rawResults struct {
	annotate func(seq uint64) (conn, iter int, ok bool)
	// traceDone: the testbed wrote trace.pcapng itself, exactly as reconstruct would from the dumps (the
	// simulator: simstream.go).
	traceDone bool
}

// dumpWrites is held while a dumper writes to its file.
var dumpWrites sync.Mutex

// Quiesce waits until no dump write is in progress and keeps new ones from starting: a command about to exit
// on a signal calls it first, so that the dumps it leaves end at packet boundaries (a SIGKILL can still cut a
// write short; readers take a capture up to its last whole packet).
func Quiesce() { dumpWrites.Lock() }

// dumper writes one dumper's mirrored frames as a nanosecond pcap (the RSS port rewrite undone, as Lumina's
// dumper does before it writes: simStream.dump).
type dumper struct {
	w   *trace.PcapWriter
	err error
}

// write appends one record; after an error it writes nothing more and keeps the error.
func (dp *dumper) write(ts int64, data []byte, orig int) error {
	if dp.err != nil {
		return dp.err
	}
	if dp.w.Available() < 16+len(data) {
		// Write whole records only, and never while the process stops on a signal (Quiesce): an
		// interrupted run leaves dumps cut at packet boundaries.
		dumpWrites.Lock()
		dp.err = dp.w.Flush()
		dumpWrites.Unlock()
		if dp.err != nil {
			return dp.err
		}
	}
	dp.err = dp.w.WritePacket(ts, data, orig)
	return dp.err
}

// switchSetup gives a lab.Config (also the netns testbed's description) the injector built from the
// scenario's events, behind a recorder that remembers each mirrored packet's ITER and connection.
func switchSetup(sc *scenario.Scenario, cfg *lab.Config) (*inject.Recorder, *error, error) {
	intents, err := inject.Intents(sc)
	if err != nil {
		return nil, nil, badInput(err)
	}
	weights := sc.Network.DumperWeights
	if len(weights) == 0 {
		weights = make([]int, cfg.Dumpers)
		for i := range weights {
			weights[i] = 1
		}
	}
	cfg.Dumpers = len(weights)
	rec := &inject.Recorder{}
	injectErr := new(error)
	cfg.NewSwitch = func(conns []inject.ConnMeta) (inject.Logic, error) {
		sw, err := inject.New(inject.Config{
			Conns:         conns,
			Intents:       intents,
			TableCapacity: sc.Network.EventTableCapacity,
			DumperWeights: weights,
			RewritePort:   uint16(sc.RewriteUDPDstPort),
			Seed:          sc.Seed,
			Ports:         2,
			ClockStartNs:  uint64(sc.Network.SwitchClockStartNs),
		})
		if err != nil {
			*injectErr = err
			return nil, err
		}
		rec.Switch = sw
		return rec, nil
	}
	return rec, injectErr, nil
}

// rawOf is what the recorder remembered, for the trace's annotations.
func rawOf(r *inject.Recorder) *rawResults { return &rawResults{annotate: r.Annotation} }

// meter tells Options.Meter, if any, that a phase of unknown extent began.
func meter(opts Options, phase string) {
	if opts.Meter != nil {
		opts.Meter(phase, 0, 0)
	}
}

// progress sets the netsim progress callbacks: to Options.Meter, the connections set up, then the packets
// mirrored so far against the number expected; else, to Options.Progress, a line per second while
// connections are set up and, once a run takes more than a second, a line per second of the simulation.
func progress(opts Options, sc *scenario.Scenario, cfg *lab.Config) {
	if m := opts.Meter; m != nil {
		pkts, _ := EstimateDumpBytes(sc)
		total := pkts + int64(max(sc.Traffic.NumConnections, 1))*int64(max(sc.Traffic.NumMsgsPerQP, 1)) // and an ACK a message
		var mirrored int64                                                                              // the simulation's goroutine calls both Dump and Progress
		dump := cfg.Dump
		cfg.Dump = func(d int, ts int64, frame []byte) {
			mirrored++
			dump(d, ts, frame)
		}
		cfg.ProgressEvery = SimHookEvery
		cfg.Progress = func(simNs int64, events uint64) { m("simulating", mirrored, total) }
		cfg.SetupProgress = func(conns, total int) { m("setting up connections", int64(conns), int64(total)) }
		return
	}
	w := opts.Progress
	if w == nil {
		return
	}
	start := time.Now()
	last := start
	cfg.ProgressEvery = SimHookEvery
	cfg.Progress = func(simNs int64, events uint64) {
		now := time.Now()
		if now.Sub(start) < time.Second || now.Sub(last) < time.Second {
			return
		}
		last = now
		fmt.Fprintf(w, "lumina: simulating... %s simulated, %.1f M events, %.0fs\n",
			fmtDuration(simNs), float64(events)/1e6, now.Sub(start).Seconds())
	}
	cfg.SetupProgress = func(conns, total int) {
		now := time.Now()
		if conns < total && now.Sub(last) < time.Second {
			return
		}
		if conns == total && now.Sub(start) < time.Second {
			return
		}
		last = now
		fmt.Fprintf(w, "lumina: setting up connections... %d of %d, %.0fs\n", conns, total, now.Sub(start).Seconds())
	}
}

// hook adds the SimHooks to the progress callbacks already set (progress).
func hook(h *SimHooks, cfg *lab.Config) {
	if h == nil {
		return
	}
	cfg.ProgressEvery = SimHookEvery
	if h.Events != nil {
		prev := cfg.Progress
		cfg.Progress = func(simNs int64, events uint64) {
			if prev != nil {
				prev(simNs, events)
			}
			h.Events(simNs, events)
		}
	}
	if h.Setup != nil {
		prev := cfg.SetupProgress
		cfg.SetupProgress = func(conns, total int) {
			if prev != nil {
				prev(conns, total)
			}
			h.Setup(conns, total)
		}
	}
}

func runSim(sc *scenario.Scenario, opts Options) (*rawResults, error) {
	cfg, err := netsimConfig(sc)
	if err != nil {
		return nil, err
	}
	rec, injectErr, err := switchSetup(sc, &cfg)
	if err != nil {
		return nil, err
	}
	// The trace is written as packets are mirrored: the recorder need not remember them all (simstream.go).
	rec.Latest = !opts.recordAll
	dumps := make([]*dumper, cfg.Dumpers)
	snap := sc.Network.SnapLen
	if snap <= 0 {
		snap = 65535
	}
	for i := range dumps {
		f, err := os.Create(filepath.Join(opts.OutDir, resultsdir.DirDump, fmt.Sprintf("dumper-%d.pcap", i)))
		if err != nil {
			return nil, fmt.Errorf("creating dump file: %w", err)
		}
		defer f.Close()
		// The writer's own buffer goes straight to the file, flushed only between records (below).
		w, err := trace.NewPcapWriter(&writeback{f: f}, trace.PcapWriterOptions{Nanosecond: true, SnapLen: uint32(snap), LinkType: trace.LinkTypeEthernet})
		if err != nil {
			return nil, err
		}
		dumps[i] = &dumper{w: w}
	}
	// The dumps and trace.pcapng are written by a second goroutine while the simulation runs (simstream.go).
	st, err := newSimStream(opts.OutDir, dumps, snap, uint16(sc.RewriteUDPDstPort), sc.IndexBase, rec.Annotation)
	if err != nil {
		return nil, err
	}
	cfg.Dump = st.dump
	if opts.Trace != nil {
		// The switch is built once the connections are set up, before any traffic: the trace's consumer
		// starts then, with the header written so far (simStream.setConsumer).
		newSwitch := cfg.NewSwitch
		cfg.NewSwitch = func(conns []inject.ConnMeta) (inject.Logic, error) {
			l, err := newSwitch(conns)
			if err == nil {
				st.setConsumer(opts.Trace(opts.OutDir, connRecords(sc, conns)))
			}
			return l, err
		}
	}
	progress(opts, sc, &cfg)
	hook(opts.SimHooks, &cfg)

	res, err := netsim.Run(cfg)
	if *injectErr != nil {
		st.abandon()
		return nil, badInputf("%s: %w", sc.Path, *injectErr)
	}
	if err != nil {
		st.abandon()
		if strings.Contains(err.Error(), "run limit") {
			return nil, fmt.Errorf("simulation: %w; the traffic needs more simulated time: raise network.run-timeout-ms (now %d)",
				err, sc.Network.RunTimeoutMs)
		}
		return nil, fmt.Errorf("simulation: %w", err)
	}
	traceErr := st.finish()
	for i, dp := range dumps {
		if dp.err == nil {
			dumpWrites.Lock()
			dp.err = dp.w.Close()
			dumpWrites.Unlock()
		}
		if dp.err != nil {
			return nil, fmt.Errorf("writing dumper %d: %w", i, dp.err)
		}
	}
	if traceErr != nil {
		return nil, traceErr
	}
	// The disk writes the dumps and the trace while the verdict stage reads them from memory.
	if opts.flushes != nil {
		paths := []string{filepath.Join(opts.OutDir, resultsdir.FileTrace)}
		for i := range dumps {
			paths = append(paths, filepath.Join(opts.OutDir, resultsdir.DirDump, fmt.Sprintf("dumper-%d.pcap", i)))
		}
		for _, p := range paths { // each file on its own: the disk may write them together
			opts.flushes.start(p)
		}
	}
	if err := writeRunFiles(opts.OutDir, sc, res, rec); err != nil {
		return nil, err
	}
	raw := rawOf(rec)
	raw.traceDone = true
	return raw, nil
}

func fmtDuration(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3f s", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.1f us", float64(ns)/1e3)
}

func counterMap(cs []rnic.Counter) map[string]uint64 {
	m := make(map[string]uint64, len(cs))
	for _, c := range cs {
		m[c.Name] = c.Value
	}
	return m
}

func writeRunFiles(dir string, sc *scenario.Scenario, res *lab.Result, rec *inject.Recorder) error {
	var counters *inject.Counters
	var entries []inject.Entry
	if rec.Switch != nil {
		c := rec.Counters()
		counters, entries = &c, rec.Entries()
	}
	return writeRunFilesWith(dir, sc, res, counters, entries)
}

// writeRunFilesWith writes the effective scenario, connections, traffic, counters and switch files from a
// run's result and the injector's counters and table.
func writeRunFilesWith(dir string, sc *scenario.Scenario, res *lab.Result, injCounters *inject.Counters, injEntries []inject.Entry) error {
	if err := writeEffective(filepath.Join(dir, resultsdir.FileScenario), sc); err != nil {
		return err
	}
	if err := writeList(dir, resultsdir.FileConnections, connRecords(sc, res.Conns)); err != nil {
		return err
	}
	traffic := make([]resultsdir.TrafficRecord, len(res.PerConn))
	for i, pc := range res.PerConn {
		tr := resultsdir.TrafficRecord{QP: i + sc.IndexBase, Verb: pc.Verb, Status: pc.Status, Posted: pc.Posted,
			Completed: pc.Completed, GoodputGbps: pc.GoodputGbps, DataPackets: pc.DataPackets,
			Retransmissions: pc.Retransmissions, MCTUs: make([]float64, len(pc.MCTNs))}
		for j, ns := range pc.MCTNs {
			tr.MCTUs[j] = float64(ns) / 1e3
		}
		traffic[i] = tr
	}
	if err := writeList(dir, resultsdir.FileTraffic, traffic); err != nil {
		return err
	}
	cf := resultsdir.CountersFile{
		Requester: resultsdir.HostCounters{NIC: sc.Requester.NIC.Type, Start: counterMap(res.Counters.Requester.Start),
			Finish: counterMap(res.Counters.Requester.Finish)},
		Responder: resultsdir.HostCounters{NIC: sc.Responder.NIC.Type, Start: counterMap(res.Counters.Responder.Start),
			Finish: counterMap(res.Counters.Responder.Finish)},
		Switch: resultsdir.SwitchCounters{Ports: res.SwitchPorts[:]},
	}
	for _, p := range res.SwitchPorts {
		cf.Switch.Mirrored += p.Mirrored
		cf.Switch.RxRoCE += p.RxRoCE
	}
	cf.Switch.Injector = injCounters
	cf.Requester.Vendor, cf.Responder.Vendor = vendorOf(sc, sc.Requester), vendorOf(sc, sc.Responder)
	if err := writeJSON(dir, resultsdir.FileCounters, cf); err != nil {
		return err
	}
	var sw struct {
		Entries []inject.Entry `json:"entries"`
	}
	sw.Entries = injEntries
	return writeJSON(dir, resultsdir.FileSwitch, sw)
}

// connRecords are the records of connections.json.
func connRecords(sc *scenario.Scenario, cs []inject.ConnMeta) []resultsdir.ConnRecord {
	conns := make([]resultsdir.ConnRecord, len(cs))
	for i, c := range cs {
		conns[i] = resultsdir.ConnRecord{QP: c.Index + sc.IndexBase, Verb: c.Verb, RequesterIP: c.ReqIP, ResponderIP: c.RespIP,
			RequesterQPN: c.ReqQPN, ResponderQPN: c.RespQPN, RequesterIPSN: uint32(c.ReqIPSN),
			ResponderIPSN: uint32(c.RespIPSN), PacketsPerMsg: c.PacketsPerMsg, NumMsgs: c.NumMsgs, MTU: sc.Traffic.MTU}
	}
	return conns
}

func vendorOf(sc *scenario.Scenario, h scenario.Host) string {
	p, err := loadProfile(sc, "", h.NIC.Type)
	if err != nil {
		return ""
	}
	return p.Vendor
}
