package refdir

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
	"github.com/lumina-go/lumina/version"
)

// Verdicts of one repetition, as the verdict stage's.
const (
	VerdictPass    = verdict.Pass
	VerdictFail    = verdict.Fail
	VerdictInvalid = verdict.Invalid
)

// CheckDirectionTimestamps is the reference's second timestamp condition: the packets each host sent have
// strictly non-decreasing timestamps (zero tolerance), while the whole trace may step back by 50 ns.
const CheckDirectionTimestamps = "timestamps-increasing-per-direction"

// ToleranceNs is the reference integrity check's tolerance for timestamps of the whole trace.
const ToleranceNs = 50

// Document is what `lumina analyze REFERENCE_RESULTS_DIR --json` prints.
type Document struct {
	Version version.Info `json:"version"`
	Dir     string       `json:"dir"`
	Config  string       `json:"config"`
	// Iterations are the repetitions <i>/ of the directory, in order.
	Iterations []Iteration `json:"iterations"`
	// Verdict is invalid if a repetition failed its integrity check, fail if one failed a check, else pass.
	Verdict string `json:"verdict"`
}

// Iteration is the analysis of one repetition.
type Iteration struct {
	Iteration string `json:"iteration"`
	// Pcaps are the captures merged (the two dumpers', or the merge when they are absent).
	Pcaps     []string        `json:"pcaps"`
	Integrity trace.Integrity `json:"integrity"`
	*analyze.Analysis
	Verdict string `json:"verdict"`
}

// ExitCode is the command's exit status for the document.
func (d *Document) ExitCode() int {
	switch d.Verdict {
	case VerdictPass:
		return 0
	case VerdictInvalid:
		return 3
	}
	return 1
}

// FindConfig returns the configuration of a reference results directory: config.yml at its root or, for a
// single repetition, in its parent.
func FindConfig(dir string) (string, error) {
	for _, p := range []string{filepath.Join(dir, FileConfig), filepath.Join(filepath.Dir(filepath.Clean(dir)), FileConfig)} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", badf("%s: no %s beside the repetitions; give the reference configuration the run used with --config FILE", dir, FileConfig)
}

// Analyze analyzes every repetition of the reference results directory dir with the configuration at config.
func Analyze(dir, config string) (*Document, error) {
	its := Iterations(dir)
	if len(its) == 0 {
		return nil, badf("%s: no repetition directory <i>/%s; not a reference Lumina results directory", dir, DirPcap)
	}
	sc, err := scenario.Load(config)
	if err != nil {
		return nil, badf("%w", err)
	}
	rc, err := readRefConfig(config)
	if err != nil {
		return nil, err
	}
	doc := &Document{Version: version.Get(), Dir: dir, Config: config, Verdict: VerdictPass}
	for _, it := range its {
		r, err := analyzeIteration(it, sc, rc, config)
		if err != nil {
			return nil, err
		}
		doc.Iterations = append(doc.Iterations, *r)
		switch {
		case r.Verdict == VerdictInvalid:
			doc.Verdict = VerdictInvalid
		case r.Verdict == VerdictFail && doc.Verdict == VerdictPass:
			doc.Verdict = VerdictFail
		}
	}
	return doc, nil
}

func analyzeIteration(dir string, sc *scenario.Scenario, rc *refConfig, config string) (*Iteration, error) {
	reqPort, rspPort, reqMirror, rspMirror, err := rc.ports(config)
	if err != nil {
		return nil, err
	}
	var st switchState
	if err := readYAML(filepath.Join(dir, DirSwitch, FileSwitchState), &st); err != nil {
		return nil, err
	}
	port := func(m map[int]uint64, p int, what string) (uint64, error) {
		v, ok := m[p]
		if !ok {
			return 0, badf("%s: no %s counter for port %d; expected the ports of the configuration", filepath.Join(dir, DirSwitch, FileSwitchState), what, p)
		}
		return v, nil
	}
	var counts [4]uint64
	for i, q := range []struct {
		m    map[int]uint64
		p    int
		what string
	}{{st.Counter.Ingress, reqPort, "ingress"}, {st.Counter.Ingress, rspPort, "ingress"},
		{st.Counter.Egress, reqMirror, "egress"}, {st.Counter.Egress, rspMirror, "egress"}} {
		if counts[i], err = port(q.m, q.p, q.what); err != nil {
			return nil, err
		}
	}
	var qps []qpInfo
	if err := readYAML(filepath.Join(dir, DirSwitch, FileSwitchMessage), &qps); err != nil {
		return nil, err
	}
	conns, err := connections(sc, qps, filepath.Join(dir, DirSwitch, FileSwitchMessage))
	if err != nil {
		return nil, err
	}
	cf := &resultsdir.CountersFile{}
	cf.Requester.NIC, cf.Responder.NIC = sc.Requester.NIC.Type, sc.Responder.NIC.Type
	cf.Requester.Vendor, cf.Responder.Vendor = verdict.VendorOf(sc, sc.Requester), verdict.VendorOf(sc, sc.Responder)
	for _, h := range []struct {
		dst           *resultsdir.HostCounters
		start, finish string
	}{{&cf.Requester, FileReqCountStart, FileReqCountFinish}, {&cf.Responder, FileRspCountStart, FileRspCountFinish}} {
		if h.dst.Start, err = readHostCounters(filepath.Join(dir, DirRDMA, h.start)); err != nil {
			return nil, err
		}
		if h.dst.Finish, err = readHostCounters(filepath.Join(dir, DirRDMA, h.finish)); err != nil {
			return nil, err
		}
	}

	pcaps := dumpPcaps(dir, rc)
	if len(pcaps) == 0 {
		return nil, badf("%s: no capture; expected the dumpers' %s and %s (or %s)", filepath.Join(dir, DirPcap),
			rc.ReqMirror.Dump.File, rc.RspMirror.Dump.File, rc.Aggregate)
	}
	it := &Iteration{Iteration: filepath.Base(dir), Pcaps: pcaps}
	var readers []trace.Reader
	var files []*trace.File
	for _, p := range pcaps {
		f, err := trace.Open(p)
		if err != nil {
			return nil, badf("%w", err)
		}
		defer f.Close()
		readers, files = append(readers, f), append(files, f)
	}
	// The reference's switch counts its sequence numbers in a 31-bit register (1 .. 0x7fffffff).
	m := trace.NewMerger(trace.MergeOptions{ByMirrorSeq: true, Seq: trace.SeqLumina31}, readers...)
	ic := trace.NewIntegrityChecker(trace.IntegrityOptions{Seq: trace.SeqLumina31, ToleranceNs: ToleranceNs})
	dir2 := newDirectionCheck(sc)
	opts := verdict.AnalyzeOptions(sc, conns, cf)
	opts.Metadata = analyze.MetaMirror
	// The analysis runs on the merged stream while the integrity check counts it; a trace that fails the
	// check is not judged.
	tr := &teeReader{m: m, add: func(p *trace.Packet, mir roce.Mirror) {
		ic.Add(p.Index, mir)
		dir2.add(p.Index, p.Data, mir)
	}}
	an, err := analyze.Analyze(tr, opts)
	if err != nil {
		return nil, badf("%s: %w", dir, err)
	}
	if tr.err != nil {
		return nil, badf("%s: %w", dir, tr.err)
	}
	integ := ic.Finish(counts[2]+counts[3], counts[0]+counts[1])
	integ.Checks = append(integ.Checks, dir2.result())
	for _, f := range files {
		if c := f.Truncated(); c != nil {
			integ.Checks = append(integ.Checks, trace.CheckResult{Name: "dumps-whole",
				Detail: fmt.Sprintf("%s is cut short in the middle of a packet at byte offset %d after %d whole packets", f.Name(), c.Offset, c.Packets)})
		}
	}
	integ.OK = true
	for _, c := range integ.Checks {
		integ.OK = integ.OK && c.OK
	}
	it.Integrity = integ
	if !integ.OK {
		it.Analysis = &analyze.Analysis{Checks: []analyze.Check{}, Retransmissions: []analyze.Retransmission{}}
		it.Verdict = VerdictInvalid
		return it, nil
	}
	it.Analysis = an
	it.Verdict = VerdictPass
	for _, c := range an.Checks {
		if !c.OK {
			it.Verdict = VerdictFail
		}
	}
	for _, c := range an.Counters {
		if !c.OK {
			it.Verdict = VerdictFail
		}
	}
	return it, nil
}

// dumpPcaps are the captures of a repetition: the two dumpers' files named in the configuration when present
// (the merge is derived from them), else the aggregate.
func dumpPcaps(dir string, rc *refConfig) []string {
	var out []string
	for _, name := range []string{rc.ReqMirror.Dump.File, rc.RspMirror.Dump.File} {
		if name == "" {
			continue
		}
		p := filepath.Join(dir, DirPcap, name)
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 2 {
		return out
	}
	if rc.Aggregate != "" {
		p := filepath.Join(dir, DirPcap, rc.Aggregate)
		if _, err := os.Stat(p); err == nil {
			return []string{p}
		}
	}
	return out
}

// connections turns the switch's QP list into the analyzers' connections, in the scenario's order.
func connections(sc *scenario.Scenario, qps []qpInfo, path string) ([]resultsdir.ConnRecord, error) {
	t := sc.Traffic
	if len(qps) != t.NumConnections {
		return nil, badf("%s: %d connections, the configuration has %d", path, len(qps), t.NumConnections)
	}
	out := make([]resultsdir.ConnRecord, len(qps))
	for i, q := range qps {
		snd, err1 := netip.ParseAddr(q.IPSnd)
		rcv, err2 := netip.ParseAddr(q.IPRcv)
		if err1 != nil || err2 != nil {
			return nil, badf("%s: connection %d: addresses %q and %q; expected IPv4 addresses", path, i, q.IPSnd, q.IPRcv)
		}
		verb := t.Verb
		if verb == scenario.VerbSendRead {
			verb = scenario.VerbSend
			if i >= t.NumSendQPs {
				verb = scenario.VerbRead
			}
		}
		c := resultsdir.ConnRecord{QP: i + sc.IndexBase, Verb: verb, PacketsPerMsg: t.PacketsPerMessage(), NumMsgs: t.NumMsgsPerQP, MTU: t.MTU}
		if verb == scenario.VerbRead {
			// The data sender is the responder; psn_snd is the requester's initial PSN (the responses use it).
			c.RequesterIP, c.ResponderIP, c.RequesterQPN, c.ResponderQPN = rcv, snd, q.QPNRcv, q.QPNSnd
			c.RequesterIPSN, c.ResponderIPSN = q.PSNSnd, q.PSNRcv
		} else {
			c.RequesterIP, c.ResponderIP, c.RequesterQPN, c.ResponderQPN = snd, rcv, q.QPNSnd, q.QPNRcv
			c.RequesterIPSN, c.ResponderIPSN = q.PSNSnd, q.PSNRcv
		}
		c.RequesterIPSN &= uint32(roce.PSNMask)
		out[i] = c
	}
	return out, nil
}

// teeReader hands the merged stream to the analyzers and each packet's mirror metadata to the checks.
type teeReader struct {
	m   *trace.Merger
	add func(*trace.Packet, roce.Mirror)
	n   int
	err error
}

func (t *teeReader) Next() (*trace.Packet, error) {
	p, err := t.m.Next()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			t.err = err
		}
		return nil, err
	}
	mir, ok := t.m.Mirror()
	if !ok {
		t.err = fmt.Errorf("merged packet %d has no mirror metadata", t.n)
		return nil, t.err
	}
	p.Index = t.n
	t.n++
	t.add(p, mir)
	return p, nil
}

// directionCheck is the reference's per-direction timestamp condition: the packets sent from each host's
// addresses have non-decreasing timestamps, with no tolerance.
type directionCheck struct {
	role    map[netip.Addr]int
	clock   [2]trace.Unwrap48
	last    [2]int64
	have    [2]bool
	n       [2]int
	problem string
	bad     int
}

func newDirectionCheck(sc *scenario.Scenario) *directionCheck {
	d := &directionCheck{role: map[netip.Addr]int{}}
	for _, p := range sc.Requester.NIC.IPList {
		d.role[p.Addr()] = 0
	}
	for _, p := range sc.Responder.NIC.IPList {
		d.role[p.Addr()] = 1
	}
	return d
}

func (d *directionCheck) add(index int, frame []byte, mir roce.Mirror) {
	var p roce.Packet
	p.Decode(frame, len(frame))
	r, ok := d.role[p.SrcIP]
	if !ok {
		return
	}
	t := d.clock[r].Extend(mir.TimestampNs)
	d.n[r]++
	if d.have[r] && t < d.last[r] {
		d.bad++
		if d.problem == "" {
			d.problem = fmt.Sprintf("%s packet at trace packet %d is %d ns before the previous one from the same host",
				[2]string{"requester", "responder"}[r], index, d.last[r]-t)
		}
		return
	}
	d.have[r], d.last[r] = true, t
}

func (d *directionCheck) result() trace.CheckResult {
	r := trace.CheckResult{Name: CheckDirectionTimestamps, OK: d.bad == 0}
	if r.OK {
		r.Detail = fmt.Sprintf("%d requester and %d responder packets, each host's timestamps non-decreasing (tolerance 0 ns)", d.n[0], d.n[1])
	} else {
		r.Detail = fmt.Sprintf("%s; %d decreases", d.problem, d.bad)
	}
	return r
}
