package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lumina-go/lumina/hostnic"
	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/version"
)

// Version is the protocol version an agent and a controller must share (the binary's hash is checked too).
const Version = "lumina-agent/1"

// JournalFile is the undo journal in the run directory: every change to the host, appended before it is made,
// so that a cleanup after a killed agent can undo it.
const JournalFile = "undo.json"

// Agent serves the protocol on one host. It owns what it starts (switch, dumper, endpoint run in its own
// process) and undoes what it changed, in reverse order, when its input ends: the controller finished, died,
// or the SSH session dropped.
type Agent struct {
	RunDir string
	Log    io.Writer
	// Run executes a command (tests replace it); nil runs it with os/exec.
	Run func(argv []string) (string, error)
	// VerbsDir is where the deployed lumina-verbs binaries are (tests); "" = the agent binary's directory.
	VerbsDir string
	// NIC is how nic-setup, nic-undo and counters touch the host (tests give a fake); nil is hostnic.OSRunner.
	NIC hostnic.Runner

	ctx     context.Context
	undo    []journalEntry
	nicSet  bool
	vsrv    *agentVerbs
	vcli    *agentVerbs
	sw      *agentSwitch
	dump    *agentDump
	ep      *agentEndpoint
	started time.Time
	// cleanupErr is what the final cleanup could not undo: the agent then exits with an error.
	cleanupErr error
}

type agentSwitch struct {
	s      *live.Switch
	cfg    SwitchStart
	rec    *inject.Recorder
	cancel context.CancelFunc
	done   chan struct{}
	status live.SwitchStatus
	err    error
}

type agentDump struct {
	d      *live.Dumper
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

type agentEndpoint struct {
	e      *live.Endpoint
	req    bool
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		fmt.Fprintf(a.Log, "lumina agent: "+format+"\n", args...)
	}
}

func (a *Agent) exec(argv []string) (string, error) {
	a.logf("exec %s", strings.Join(argv, " "))
	if a.Run != nil {
		return a.Run(argv)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Serve reads requests from in and answers on out until in ends or ctx is done, then stops everything it
// started, undoes its changes and removes the run directory.
func (a *Agent) Serve(ctx context.Context, in io.Reader, out io.Writer) (err error) {
	if a.RunDir == "" {
		return errors.New("agent: no run directory")
	}
	if err := os.MkdirAll(a.RunDir, 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.started = time.Now()
	ctx, cancel := context.WithCancel(ctx)
	a.ctx = ctx
	defer func() {
		cancel()
		a.shutdown()
		if a.cleanupErr != nil && err == nil {
			err = fmt.Errorf("agent: cleanup: %w", a.cleanupErr)
		}
	}()
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			b := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- b:
			case <-ctx.Done():
				return
			}
		}
		// The controller is gone (or closed the session): stop whatever runs, at once.
		cancel()
	}()
	enc := json.NewEncoder(out)
	for {
		var line []byte
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ctx.Done():
		}
		if !ok {
			return nil
		}
		resp := a.handle(ctx, line)
		if err := enc.Encode(resp); err != nil {
			return fmt.Errorf("agent: answering: %w", err)
		}
	}
}

func (a *Agent) handle(ctx context.Context, line []byte) Response {
	req, op, err := DecodeRequest(line)
	if err != nil {
		a.logf("rejected: %v", err)
		return Response{ID: req.ID, Error: err.Error()}
	}
	a.logf("%s", req.Op)
	res, err := a.do(ctx, op)
	if err != nil {
		a.logf("%s failed: %v", req.Op, err)
		return Response{ID: req.ID, Error: err.Error()}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return Response{ID: req.ID, Error: fmt.Sprintf("encoding the result: %v", err)}
	}
	return Response{ID: req.ID, OK: true, Result: b}
}

func (a *Agent) do(ctx context.Context, op Op) (any, error) {
	switch o := op.(type) {
	case *Hello:
		return a.hello(o), nil
	case *IfaceSetup:
		return struct{}{}, a.ifaceSetup(o)
	case *EndpointStart:
		return struct{}{}, a.endpointStart(o)
	case *TrafficRun:
		return a.trafficRun(ctx, o)
	case *EndpointStop:
		return a.endpointStop()
	case *SwitchStart:
		return struct{}{}, a.switchStart(o)
	case *SwitchInstall:
		return a.switchInstall(ctx, o)
	case *SwitchStop:
		return a.switchStop()
	case *DumpStart:
		return struct{}{}, a.dumpStart(o)
	case *DumpStop:
		return a.dumpStop()
	case *Fetch:
		return a.fetch(o)
	case *NICSetup:
		return a.nicSetup(ctx, o)
	case *NICUndo:
		return a.nicUndo(ctx)
	case *Counters:
		return hostnic.ReadCounters(ctx, a.nicRunner(), o.NIC)
	case *VerbsServerStart:
		return struct{}{}, a.verbsServerStart(o)
	case *VerbsServerStop:
		return a.verbsServerStop(ctx, o)
	case *VerbsClientStart:
		return a.verbsClientStart(ctx, o)
	case *VerbsClientRun:
		return a.verbsClientRun(ctx, o)
	}
	return nil, fmt.Errorf("operation %s is not served", op.Name())
}

func (a *Agent) hello(o *Hello) HelloResult {
	h, _ := os.Hostname()
	r := HelloResult{Version: Version, PID: os.Getpid(), UID: os.Geteuid(), Hostname: h, RunDir: a.RunDir}
	if r.UID != 0 && a.Run == nil {
		r.Problems = append(r.Problems, fmt.Sprintf("the agent runs as uid %d; it needs root (AF_PACKET, interface settings): log in as root or give the user password-less sudo", r.UID))
	}
	if a.Run == nil {
		for _, c := range []string{"ip", "ethtool"} {
			if _, err := exec.LookPath(c); err != nil {
				r.Problems = append(r.Problems, fmt.Sprintf("%s is not installed (apt-get install -y %s)", c, map[string]string{"ip": "iproute2", "ethtool": "ethtool"}[c]))
			}
		}
	}
	for _, t := range o.Tools {
		if _, err := a.nicRunner().LookPath(t); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s is not installed on %s (the NIC setup needs it; docs/nic-setup.md)", t, h))
		}
	}
	for _, f := range o.Ifaces {
		if _, err := os.Stat(filepath.Join("/sys/class/net", f)); err != nil {
			ents, _ := os.ReadDir("/sys/class/net")
			var have []string
			for _, e := range ents {
				have = append(have, e.Name())
			}
			r.Problems = append(r.Problems, fmt.Sprintf("interface %s does not exist on %s (it has %s)", f, h, strings.Join(have, ", ")))
		}
	}
	return r
}

// journalKey is the key of the undo journal's entry list (the journal is a JSON document with
// schema_version; a bare list, as older agents wrote it, is read too).
const journalKey = "undo"

// journalEntry is one undo: an ip or ethtool command, or a hostnic undo step (a sysfs write-back or the
// inverse command hostnic computed from the state read before the change). In the journal file a command is a
// JSON array and a hostnic step an object {"nic": STEP}.
type journalEntry struct {
	Argv []string
	NIC  *hostnic.Step
}

func (e journalEntry) MarshalJSON() ([]byte, error) {
	if e.NIC != nil {
		return json.Marshal(struct {
			NIC *hostnic.Step `json:"nic"`
		}{e.NIC})
	}
	return json.Marshal(e.Argv)
}

func (e *journalEntry) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &e.Argv)
	}
	var o struct {
		NIC *hostnic.Step `json:"nic"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return err
	}
	if o.NIC == nil {
		return errors.New("journal entry is neither a command nor {\"nic\": step}")
	}
	e.NIC = o.NIC
	return nil
}

// journal appends an undo command before the change it undoes is made.
func (a *Agent) journal(undo []string) error {
	return a.journalEntries(journalEntry{Argv: undo})
}

func (a *Agent) journalEntries(e ...journalEntry) error {
	a.undo = append(a.undo, e...)
	return a.writeJournal()
}

func (a *Agent) writeJournal() error {
	b, err := version.MarshalList(journalKey, a.undo)
	if err != nil {
		return err
	}
	tmp := filepath.Join(a.RunDir, "."+JournalFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the undo journal: %w", err)
	}
	return os.Rename(tmp, filepath.Join(a.RunDir, JournalFile))
}

func (a *Agent) ifaceSetup(o *IfaceSetup) error {
	sys := filepath.Join("/sys/class/net", o.Iface)
	if _, err := os.Stat(sys); err != nil {
		return fmt.Errorf("interface %s: %w", o.Iface, err)
	}
	if o.MTU != 0 {
		b, err := os.ReadFile(filepath.Join(sys, "mtu"))
		if err != nil {
			return fmt.Errorf("interface %s: reading its MTU: %w", o.Iface, err)
		}
		old := strings.TrimSpace(string(b))
		if old != strconv.Itoa(o.MTU) {
			if err := a.journal([]string{"ip", "link", "set", "dev", o.Iface, "mtu", old}); err != nil {
				return err
			}
		}
	}
	// The administrative state (IFF_UP), not operstate: an interface that is up without a link reads "down"
	// there, and must not be set down at the end.
	fb, err := os.ReadFile(filepath.Join(sys, "flags"))
	if err != nil {
		return fmt.Errorf("interface %s: reading its flags: %w", o.Iface, err)
	}
	flags, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(fb)), "0x"), 16, 32)
	if err != nil {
		return fmt.Errorf("interface %s: flags %q: %w", o.Iface, fb, err)
	}
	const iffUp = 0x1
	if flags&iffUp == 0 {
		if err := a.journal([]string{"ip", "link", "set", "dev", o.Iface, "down"}); err != nil {
			return err
		}
	}
	if o.Promisc {
		if flags&0x100 == 0 { // IFF_PROMISC
			if err := a.journal([]string{"ip", "link", "set", "dev", o.Iface, "promisc", "off"}); err != nil {
				return err
			}
		}
	}
	for _, p := range o.Addrs {
		if err := a.journal([]string{"ip", "addr", "del", p.String(), "dev", o.Iface}); err != nil {
			return err
		}
	}
	if o.OffloadOff {
		out, err := a.exec([]string{"ethtool", "-k", o.Iface})
		if err != nil {
			return err
		}
		restore := []string{"ethtool", "-K", o.Iface}
		state := parseOffloads(out)
		for _, f := range offloads {
			if v, ok := state[f]; ok && v == "on" {
				restore = append(restore, f, "on")
			}
		}
		if len(restore) > 3 {
			if err := a.journal(restore); err != nil {
				return err
			}
		}
	}
	for _, c := range o.Commands() {
		if _, err := a.exec(c); err != nil {
			return err
		}
	}
	return nil
}

// parseOffloads reads `ethtool -k` output into the short feature names ethtool -K takes.
func parseOffloads(out string) map[string]string {
	long := map[string]string{"tx-checksumming": "tx", "rx-checksumming": "rx", "tcp-segmentation-offload": "tso",
		"generic-segmentation-offload": "gso", "generic-receive-offload": "gro"}
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		if s, ok := long[k]; ok {
			m[s] = strings.Fields(v + " x")[0]
		}
	}
	return m
}

func (a *Agent) endpointStart(o *EndpointStart) error {
	if a.ep != nil {
		return errors.New("an endpoint is already running on this agent")
	}
	var prof *rnic.Profile
	var err error
	if o.ProfileYAML != "" {
		prof, err = rnic.ParseProfile(o.Profile, []byte(o.ProfileYAML))
	} else {
		prof, err = rnic.LoadProfile(o.Profile)
	}
	if err != nil {
		return fmt.Errorf("NIC profile: %w", err)
	}
	e, err := live.NewEndpoint(o.Spec.Config(o.Iface, prof))
	if err != nil {
		return err
	}
	ep := &agentEndpoint{e: e, req: o.Requester, done: make(chan struct{})}
	a.ep = ep
	if !o.Requester {
		ctx, cancel := context.WithCancel(a.ctx)
		ep.cancel = cancel
		go func() { ep.err = e.Run(ctx, nil); close(ep.done) }()
	}
	return nil
}

func (a *Agent) trafficRun(ctx context.Context, o *TrafficRun) (any, error) {
	ep := a.ep
	if ep == nil || !ep.req {
		return nil, errors.New("no requester endpoint: endpoint-start with requester true first")
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(o.LimitMs)*time.Millisecond)
	defer cancel()
	start := make(chan struct{})
	close(start)
	err := ep.e.Run(rctx, start)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("traffic interrupted: %w", ctx.Err())
	}
	r := endpointResult(ep.e)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		r.Error = err.Error()
	}
	return r, nil
}

func endpointResult(e *live.Endpoint) EndpointResult {
	return EndpointResult{Results: e.Results(), DataStats: e.DataStats(), Counters: e.Counters(), Unknown: e.Unknown}
}

func (a *Agent) endpointStop() (any, error) {
	ep := a.ep
	if ep == nil {
		return nil, errors.New("no endpoint runs on this agent")
	}
	if ep.cancel != nil {
		ep.cancel()
		<-ep.done
	}
	r := endpointResult(ep.e)
	if ep.err != nil {
		r.Error = ep.err.Error()
	}
	return r, nil
}

func (a *Agent) switchStart(o *SwitchStart) error {
	if a.sw != nil {
		return errors.New("a switch is already running on this agent")
	}
	s, err := live.NewSwitch(live.SwitchConfig{Ports: o.Ports, Dumpers: o.Dumpers, Ring: live.RingConfig{FrameSize: o.FrameSize}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	as := &agentSwitch{s: s, cfg: *o, cancel: cancel, done: make(chan struct{})}
	a.sw = as
	go func() { as.status, as.err = s.Run(ctx); close(as.done) }()
	return nil
}

func (a *Agent) switchInstall(ctx context.Context, o *SwitchInstall) (any, error) {
	as := a.sw
	if as == nil {
		return nil, errors.New("no switch runs on this agent: switch-start first")
	}
	c := as.cfg
	sw, err := inject.New(inject.Config{Conns: o.Conns, Intents: c.Intents, TableCapacity: c.TableCapacity,
		DumperWeights: c.DumperWeights, RewritePort: c.RewritePort, Seed: c.Seed, Ports: 2})
	if err != nil {
		return nil, fmt.Errorf("building the switch: %w", err)
	}
	rec := &inject.Recorder{Switch: sw}
	n := len(sw.Entries())
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := as.s.Install(ictx, rec); err != nil {
		return nil, err
	}
	as.rec = rec
	return InstallResult{Entries: n}, nil
}

func (a *Agent) switchStop() (any, error) {
	as := a.sw
	if as == nil {
		return nil, errors.New("no switch runs on this agent")
	}
	as.cancel()
	<-as.done
	r := SwitchResult{Status: as.status}
	if as.rec != nil {
		r.Iter, r.Conn = as.rec.Iter, as.rec.Conn
	}
	if as.err != nil {
		r.Error = as.err.Error()
	}
	return r, nil
}

func (a *Agent) dumpStart(o *DumpStart) error {
	if a.dump != nil {
		return errors.New("a dumper is already running on this agent")
	}
	d, err := live.NewDumper(live.DumpConfig{Iface: o.Iface, Workers: o.Workers, SnapLen: o.SnapLen,
		RewritePort: o.RewritePort, MaxPackets: o.MaxPackets, FanoutGroup: o.FanoutGroup})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ad := &agentDump{d: d, cancel: cancel, done: make(chan struct{})}
	a.dump = ad
	go func() { ad.err = d.Run(ctx); close(ad.done) }()
	return nil
}

// DumpFile is the pcap a dumper agent writes in its run directory.
const DumpFile = "dump.pcap"

func (a *Agent) dumpStop() (any, error) {
	ad := a.dump
	if ad == nil {
		return nil, errors.New("no dumper runs on this agent")
	}
	ad.cancel()
	<-ad.done
	if ad.err != nil {
		return nil, ad.err
	}
	path := filepath.Join(a.RunDir, DumpFile)
	st, err := ad.d.Write(path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return DumpResult{File: DumpFile, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:]), Stats: st}, nil
}

func (a *Agent) fetch(o *Fetch) (any, error) {
	f, err := os.Open(filepath.Join(a.RunDir, o.File))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, o.Length)
	n, err := f.ReadAt(buf, o.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return FetchResult{Data: buf[:n], EOF: errors.Is(err, io.EOF)}, nil
}

// shutdown stops what runs, closes the sockets, undoes the journal and removes the run directory.
func (a *Agent) shutdown() {
	for _, v := range []*agentVerbs{a.vcli, a.vsrv} {
		if v != nil {
			v.stop()
		}
	}
	if ep := a.ep; ep != nil {
		if ep.cancel != nil {
			ep.cancel()
			<-ep.done
		}
		ep.e.Close()
	}
	if as := a.sw; as != nil {
		as.cancel()
		<-as.done
		as.s.Close()
	}
	if ad := a.dump; ad != nil {
		ad.cancel()
		<-ad.done
		ad.d.Close()
	}
	if err := Cleanup(a.RunDir, a.exec, a.nicRunner()); err != nil {
		a.logf("cleanup: %v", err)
		a.cleanupErr = err
	}
	a.logf("done after %s", time.Since(a.started).Round(time.Millisecond))
}

// Cleanup undoes a run directory's journal in reverse order and removes the directory. The controller runs
// it (lumina agent --cleanup DIR) for an agent that was killed and could not clean up itself. nic runs the
// hostnic undo steps (nil: hostnic.OSRunner).
func Cleanup(runDir string, run func([]string) (string, error), nic hostnic.Runner) error {
	if nic == nil {
		nic = hostnic.OSRunner{}
	}
	var errs []error
	b, err := os.ReadFile(filepath.Join(runDir, JournalFile))
	if err == nil {
		var undo []journalEntry
		if err := version.UnmarshalList(b, journalKey, &undo); err != nil {
			errs = append(errs, fmt.Errorf("reading the undo journal: %w", err))
		}
		var failed []journalEntry // in journal order, for a later lumina agent --cleanup
		for i := len(undo) - 1; i >= 0; i-- {
			if s := undo[i].NIC; s != nil {
				if err := hostnic.Undo(context.Background(), nic, []hostnic.Step{*s}, nil); err != nil {
					errs = append(errs, err)
					failed = append([]journalEntry{undo[i]}, failed...)
				}
				continue
			}
			c := undo[i].Argv
			if len(c) == 0 || (c[0] != "ip" && c[0] != "ethtool") {
				errs = append(errs, fmt.Errorf("undo journal entry %d %q is not an ip or ethtool command; skipped", i, c))
				continue
			}
			if _, err := run(c); err != nil {
				errs = append(errs, err)
				failed = append([]journalEntry{undo[i]}, failed...)
			}
		}
		if len(errs) > 0 {
			// Keep the run directory with what is still to undo, so that the host is not left changed with
			// no record: lumina agent --cleanup DIR retries it.
			if len(failed) > 0 {
				if jb, err := version.MarshalList(journalKey, failed); err == nil {
					_ = os.WriteFile(filepath.Join(runDir, JournalFile), jb, 0o600)
				}
			}
			return fmt.Errorf("%w; the host is not fully restored: %s keeps what is left to undo (lumina agent --cleanup %s)",
				errors.Join(errs...), runDir, runDir)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading the undo journal: %w; %s is kept", err, runDir)
	}
	return os.RemoveAll(runDir)
}

func (a *Agent) nicRunner() hostnic.Runner {
	if a.NIC != nil {
		return a.NIC
	}
	return hostnic.OSRunner{}
}

// nicSetup runs the vendor's hostnic plan one step at a time, journaling each change's undo as soon as the
// step is done (hostnic computes an undo from the state it reads just before the change, so the undo exists
// only once the step ran). A failure stops the plan with hostnic's error naming the host and the step; what
// was done stays journaled and is undone by nic-undo or at the end of the session.
func (a *Agent) nicSetup(ctx context.Context, o *NICSetup) (any, error) {
	if a.nicSet {
		return nil, errors.New("nic-setup already ran in this session; nic-undo first")
	}
	steps, err := hostnic.Plan(o.NIC)
	if err != nil {
		return nil, err
	}
	a.nicSet = true
	r := a.nicRunner()
	var res NICResult
	for i, s := range steps {
		var rep hostnic.StepReport
		undo, err := hostnic.Apply(ctx, r, []hostnic.Step{s}, func(sr hostnic.StepReport) { rep = sr })
		var ents []journalEntry
		for _, u := range undo {
			ents = append(ents, journalEntry{NIC: &u})
		}
		if len(ents) > 0 {
			if jerr := a.journalEntries(ents...); jerr != nil {
				return nil, jerr
			}
		}
		if err != nil {
			if se, ok := err.(*hostnic.StepError); ok {
				se.Index = i
			}
			a.logf("nic-setup: %v", err)
			return nil, err
		}
		a.logf("nic-setup: %s%s", s, noteSuffix(rep.Note))
		res.Steps = append(res.Steps, NICStep{Step: s.String(), Note: rep.Note})
	}
	return res, nil
}

func noteSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

// nicUndo undoes the journaled hostnic changes in reverse order and drops them from the journal.
func (a *Agent) nicUndo(ctx context.Context) (any, error) {
	var nic []hostnic.Step
	var keep []journalEntry
	for _, e := range a.undo {
		if e.NIC != nil {
			nic = append(nic, *e.NIC)
		} else {
			keep = append(keep, e)
		}
	}
	var res NICResult
	failed := map[int]bool{}
	err := hostnic.Undo(ctx, a.nicRunner(), nic, func(sr hostnic.StepReport) {
		if sr.Err != nil {
			failed[sr.Index] = true
			return
		}
		a.logf("nic-undo: %s%s", sr.Step, noteSuffix(sr.Note))
		res.Steps = append(res.Steps, NICStep{Step: sr.Step.String(), Note: sr.Note})
	})
	// An undo that failed stays journaled: the end of the session (or lumina agent --cleanup) tries it again.
	for i, s := range nic {
		if failed[i] {
			keep = append(keep, journalEntry{NIC: &s})
		}
	}
	a.undo = keep
	a.nicSet = false
	if jerr := a.writeJournal(); jerr != nil {
		err = errors.Join(err, jerr)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
