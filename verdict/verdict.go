// Package verdict is the stage after the testbed: it reads a results directory, checks the trace's integrity,
// runs the analyzers, evaluates the scenario's expectations, decides pass / fail / invalid and writes
// analysis.json. It runs no traffic; `lumina run` calls it after the testbed and `lumina analyze DIR` calls it
// alone.
package verdict

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/version"
)

// Verdicts of a test.
const (
	Pass    = "pass"
	Fail    = "fail"
	Invalid = "invalid"
)

// Document is analysis.json: the integrity verdict, every analyzer's result and the scenario's expectations.
type Document struct {
	// Version is the build of lumina that wrote the document.
	Version   version.Info    `json:"version"`
	Scenario  string          `json:"scenario"`
	Testbed   string          `json:"testbed"`
	Seed      uint64          `json:"seed"`
	IndexBase int             `json:"index_base"`
	Integrity trace.Integrity `json:"integrity"`
	*analyze.Analysis
	Expectations []scenario.ExpectResult `json:"expectations"`
	// Workload is a workload: run's measurement on the NIC micro-architecture model (no trace then).
	Workload *resultsdir.WorkloadAnalysis `json:"workload,omitempty"`
	// Verdict is pass (every check and expectation passed), fail, or invalid (the trace failed the integrity
	// check and nothing was analyzed).
	Verdict string `json:"verdict"`
}

// Outcome is what the verdict stage made of a results directory: the document it wrote as analysis.json and
// the records the report shows beside it.
type Outcome struct {
	Dir      string
	Doc      *Document
	Scenario *scenario.Scenario
	Traffic  []resultsdir.TrafficRecord
	Counters *resultsdir.CountersFile
	// Entries are the installed event-table entries as written in switch.json.
	Entries []json.RawMessage
	// Streamed says the trace was judged as it was written (JudgeStream), not read back from the directory.
	Streamed bool
}

// ExitCode is the command's exit status for this outcome (spec/scenario-and-cli.md).
func (o *Outcome) ExitCode() int {
	switch o.Doc.Verdict {
	case Pass:
		return 0
	case Invalid:
		return 3
	}
	return 1
}

// RecordInvalid is the verdict on a run that started and could not finish: analysis.json says invalid, with
// the reason as a failed "run-completed" integrity condition, and the scenario's expectations are evaluated on
// that (so none that needs a result passes).
func RecordInvalid(dir string, sc *scenario.Scenario, reason string) (*Outcome, error) {
	doc := &Document{Version: version.Get(), Scenario: sc.Path, Testbed: sc.Testbed, Seed: sc.Seed, IndexBase: sc.IndexBase,
		Integrity: trace.Integrity{OK: false, Checks: []trace.CheckResult{{Name: "run-completed", OK: false, Detail: reason}}},
		Analysis:  &analyze.Analysis{}, Verdict: Invalid}
	if err := evaluate(sc, doc); err != nil {
		return nil, err
	}
	if err := resultsdir.WriteJSON(dir, resultsdir.FileAnalysis, doc); err != nil {
		return nil, err
	}
	return &Outcome{Dir: dir, Doc: doc, Scenario: sc, Counters: &resultsdir.CountersFile{}}, nil
}

// Reanalyze re-runs the integrity check, the analyzers and the expectations on a results directory, with the
// effective scenario it holds. A directory a run left incomplete (its INCOMPLETE marker) is refused with an
// error wrapping resultsdir.ErrIncomplete (exit status 3).
func Reanalyze(dir string) (*Outcome, error) {
	if err := resultsdir.CheckComplete(dir); err != nil {
		return nil, err
	}
	sc, err := scenario.Load(filepath.Join(dir, resultsdir.FileScenario))
	if err != nil {
		return nil, badInputf("%s is not a results directory: %w", dir, err)
	}
	return Judge(dir, sc)
}

// Judge reads the results directory the testbed wrote for sc, checks the trace's integrity, runs the
// analyzers and the expectations, and writes analysis.json. Errors wrapping resultsdir.ErrInput are the input's
// fault (exit status 2).
func Judge(dir string, sc *scenario.Scenario) (*Outcome, error) {
	if sc.Workload != nil {
		return judgeWorkload(dir, sc)
	}
	return analyzeDir(dir, sc, nil)
}

// JudgeStream is Judge for a run whose trace s read while it was written (NewStream): the same analysis.json,
// without reading trace.pcapng back. When s could not stand for that reading (s nil, or see Stream) it is
// Judge.
func JudgeStream(dir string, sc *scenario.Scenario, s *Stream) (*Outcome, error) {
	if sc.Workload != nil || s == nil {
		return Judge(dir, sc)
	}
	return analyzeDir(dir, sc, s)
}

// analyzeDir checks the trace's integrity, runs the analyzers and the expectations, and writes analysis.json;
// with a stream whose result stands for the trace's, from that.
func analyzeDir(dir string, sc *scenario.Scenario, s *Stream) (*Outcome, error) {
	out := &Outcome{Dir: dir, Scenario: sc}
	var cf resultsdir.CountersFile
	if err := readJSON(dir, resultsdir.FileCounters, &cf); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	out.Counters = &cf
	if err := resultsdir.ReadList(dir, resultsdir.FileTraffic, &out.Traffic); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	var conns []resultsdir.ConnRecord
	if err := resultsdir.ReadList(dir, resultsdir.FileConnections, &conns); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	var sw struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := readJSON(dir, resultsdir.FileSwitch, &sw); err == nil {
		out.Entries = sw.Entries
	}

	doc := &Document{Version: version.Get(), Scenario: sc.Path, Testbed: sc.Testbed, Seed: sc.Seed, IndexBase: sc.IndexBase}
	out.Doc = doc
	// The analyzers run while the integrity check does (each reads the trace on its own core); their result
	// counts only when the trace passes the check.
	opts := analyzeOptions(sc, conns, &cf, out.Traffic)
	if s != nil {
		if integ, an, ok := s.result(dir, conns, cf, opts); ok {
			out.Streamed = true
			return decide(out, dir, sc, integ, an)
		}
	}
	type analysis struct {
		an  *analyze.Analysis
		err error
	}
	// An analyzer that panics (on a broken trace, say) gives an error, which counts only when the trace passes
	// the check: a trace that fails it is judged invalid whatever the analyzers did.
	analyzed := make(chan analysis, 1)
	var stop atomic.Bool
	go func() {
		var res analysis
		defer func() {
			if r := recover(); r != nil {
				res = analysis{err: fmt.Errorf("analyzing %s: the analyzers failed (a bug in lumina): %v", filepath.Join(dir, resultsdir.FileTrace), r)}
			}
			analyzed <- res
		}()
		res.an, res.err = runAnalyzers(dir, opts, &stop)
	}()
	integ, err := checkTrace(dir, cf)
	if err != nil || !integ.OK {
		stop.Store(true) // the analysis will not be used: it ends at its next packet
	}
	res := <-analyzed
	if err != nil {
		return nil, err
	}
	if integ.OK && res.err != nil {
		return nil, res.err
	}
	return decide(out, dir, sc, integ, res.an)
}

// decide writes analysis.json from the trace's integrity and, when it holds, the analysis.
func decide(out *Outcome, dir string, sc *scenario.Scenario, integ trace.Integrity, an *analyze.Analysis) (*Outcome, error) {
	doc := out.Doc
	doc.Integrity = integ
	if !integ.OK {
		doc.Verdict = Invalid // whatever the expectations say
		doc.Analysis = &analyze.Analysis{}
		if err := evaluate(sc, doc); err != nil {
			return nil, err
		}
		return out, writeJSON(dir, resultsdir.FileAnalysis, doc)
	}
	doc.Analysis = an
	if err := judge(sc, doc); err != nil {
		return nil, err
	}
	return out, writeJSON(dir, resultsdir.FileAnalysis, doc)
}

// runAnalyzers is analyzeTrace (tests replace it).
var runAnalyzers = analyzeTrace

// errAnalysisStopped ends an analysis whose result will not be used (the trace failed its check).
var errAnalysisStopped = errors.New("analysis stopped: the trace failed its integrity check")

// stoppable is a trace.Reader that ends with errAnalysisStopped once stop is set.
type stoppable struct {
	r    trace.Reader
	stop *atomic.Bool
}

func (s stoppable) Next() (*trace.Packet, error) {
	if s.stop.Load() {
		return nil, errAnalysisStopped
	}
	return s.r.Next()
}

// analyzeTrace runs the analyzers over the directory's trace; it stops early when stop is set.
func analyzeTrace(dir string, opts analyze.Options, stop *atomic.Bool) (*analyze.Analysis, error) {
	f, err := trace.Open(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		return nil, badInputf("%w", err)
	}
	defer f.Close()
	an, err := analyze.Analyze(stoppable{f, stop}, opts)
	if err != nil {
		return nil, fmt.Errorf("analyzing %s: %w", filepath.Join(dir, resultsdir.FileTrace), err)
	}
	return an, nil
}

// judge evaluates the scenario's expectations against the document and sets its verdict.
func judge(sc *scenario.Scenario, doc *Document) error {
	if err := evaluate(sc, doc); err != nil {
		return err
	}
	v, err := verdict(sc, doc)
	doc.Verdict = v
	return err
}

// evaluate evaluates the scenario's expectations against the document.
func evaluate(sc *scenario.Scenario, doc *Document) error {
	tree, err := docTree(doc)
	if err != nil {
		return err
	}
	doc.Expectations = make([]scenario.ExpectResult, len(sc.Expect))
	for i, e := range sc.Expect {
		doc.Expectations[i] = e.Evaluate(tree)
	}
	return nil
}

// docTree is the document as encoding/json decodes it, the form a path expectation selects from (a path names
// analysis.json's fields). The expectations' results are left out: they are what is being decided.
func docTree(doc *Document) (any, error) {
	d := *doc
	d.Expectations = nil
	b, err := json.Marshal(&d)
	if err != nil {
		return nil, fmt.Errorf("encoding the analysis for the expectations: %w", err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, fmt.Errorf("decoding the analysis for the expectations: %w", err)
	}
	return tree, nil
}

// verdict is pass when every expectation holds and every failed check or counter check is one the scenario
// expects to fail: a test that reproduces a known NIC bug (a counter that lies) asserts that the counter check
// fails, and passes when it does. A failure counts as expected when an expectation that holds asserts
// "ok equals false" and stops holding once that entry is flipped to ok.
func verdict(sc *scenario.Scenario, doc *Document) (string, error) {
	for _, e := range doc.Expectations {
		if !e.OK {
			return Fail, nil
		}
	}
	if doc.Analysis == nil {
		return Pass, nil
	}
	var failed []*bool
	for i := range doc.Checks {
		if !doc.Checks[i].OK {
			failed = append(failed, &doc.Checks[i].OK)
		}
	}
	for i := range doc.Counters {
		if !doc.Counters[i].OK {
			failed = append(failed, &doc.Counters[i].OK)
		}
	}
	for _, ok := range failed {
		expected, err := expectedFailure(sc, doc, ok)
		if err != nil || !expected {
			return Fail, err
		}
	}
	return Pass, nil
}

// expectedFailure flips one failed entry's ok to true and reports whether an "ok equals false" expectation
// then stops holding.
func expectedFailure(sc *scenario.Scenario, doc *Document, ok *bool) (bool, error) {
	var asserts []scenario.Expectation
	for _, e := range sc.Expect {
		if e.Kind == scenario.ExpectPath && e.Op == scenario.OpEquals && e.Want == false && strings.HasSuffix(e.Path, ".ok") {
			asserts = append(asserts, e)
		}
	}
	if len(asserts) == 0 {
		return false, nil
	}
	*ok = true
	defer func() { *ok = false }()
	tree, err := docTree(doc)
	if err != nil {
		return false, err
	}
	for _, e := range asserts {
		if !e.Evaluate(tree).OK {
			return true, nil
		}
	}
	return false, nil
}

// analyzeOptions describes the run to the analyzers: its connections, NICs, counters and traffic log.
func analyzeOptions(sc *scenario.Scenario, conns []resultsdir.ConnRecord, cf *resultsdir.CountersFile, traffic []resultsdir.TrafficRecord) analyze.Options {
	opts := analyze.Options{IndexBase: sc.IndexBase, Metadata: analyze.MetaComment}
	for _, c := range conns {
		opts.Conns = append(opts.Conns, analyze.Conn{Index: c.QP - sc.IndexBase, Verb: c.Verb, ReqIP: c.RequesterIP,
			RespIP: c.ResponderIP, ReqQPN: c.RequesterQPN, RespQPN: c.ResponderQPN, ReqIPSN: roce.PSN(c.RequesterIPSN),
			PacketsPerMsg: c.PacketsPerMsg, NumMsgs: c.NumMsgs, MTU: c.MTU})
	}
	// Each NIC's profile, loaded once; a profile that does not load leaves its NIC undescribed.
	reqP, reqErr := rnic.LoadProfile(sc.ProfileRef(sc.Requester.NIC.Type))
	respP, respErr := rnic.LoadProfile(sc.ProfileRef(sc.Responder.NIC.Type))
	if reqErr == nil {
		opts.Requester = nicInfo(sc.Requester, reqP)
	}
	if respErr == nil {
		opts.Responder = nicInfo(sc.Responder, respP)
	}
	opts.Counters = []analyze.HostCounters{
		{Host: "requester", Vendor: cf.Requester.Vendor, Start: cf.Requester.Start, Finish: cf.Requester.Finish},
		{Host: "responder", Vendor: cf.Responder.Vendor, Start: cf.Responder.Start, Finish: cf.Responder.Finish},
	}
	for _, t := range traffic {
		dp, rt := int64(t.DataPackets), int64(t.Retransmissions)
		opts.Traffic = append(opts.Traffic, analyze.TrafficIn{DataPackets: &dp, Retransmissions: &rt, Conn: t.QP - sc.IndexBase, MCTUs: t.MCTUs,
			GoodputGbps: t.GoodputGbps, Class: trafficClass(sc, t.QP-sc.IndexBase), Status: t.Status})
	}
	opts.LinkGbps = sc.Network.LinkGbps
	if reqErr == nil && opts.LinkGbps == 0 {
		opts.LinkGbps = reqP.LinkGbps
		if respErr == nil && respP.LinkGbps < reqP.LinkGbps {
			opts.LinkGbps = respP.LinkGbps
		}
	}
	return opts
}

// trafficClass is the ETS class of connection i on the requester (the data sender of write/send traffic).
func trafficClass(sc *scenario.Scenario, i int) int {
	ets := sc.Requester.NIC.ETS
	if ets == nil || len(sc.Traffic.DSCPList) == 0 {
		return 0
	}
	return ets.DSCPToTC[sc.Traffic.DSCPList[i%len(sc.Traffic.DSCPList)]]
}

// nicInfo describes a host's NIC to the analyzers: its profile with the scenario's RoCE parameters.
func nicInfo(h scenario.Host, p *rnic.Profile) analyze.NICInfo {
	var configured float64 = -1
	if h.RoCEParameters.MinTimeBetweenCNPsUs != nil {
		configured = *h.RoCEParameters.MinTimeBetweenCNPsUs
	}
	np, rp := h.RoCEParameters.DCQCNNPEnable, h.RoCEParameters.DCQCNRPEnable
	if h.RoCEParameters.DCQCNEnable != nil {
		np, rp = *h.RoCEParameters.DCQCNEnable, *h.RoCEParameters.DCQCNEnable
	}
	np = np && !p.CNP.None // a NIC without a notification point (rxe) sends no CNPs whatever the setting
	return analyze.NICInfo{Vendor: p.Vendor, Profile: p.Name, CNPScope: p.CNP.Scope,
		CNPIntervalNs: p.CNPInterval(configured), NAKTriggersCNP: p.CNP.NAKTriggersCNP, NPEnabled: np, RPEnabled: rp}
}

// checkTrace runs the integrity check over trace.pcapng. Beside the four conditions it reports a trace cut
// short in the middle of a packet, a dump cut so (the trace reconstructed from it stops at its last whole
// packet, so the dumps are scanned when the packet count is short or could not be compared) and the live
// dumpers' own drop reports (DUMP.stats.json).
func checkTrace(dir string, cf resultsdir.CountersFile) (trace.Integrity, error) {
	f, err := trace.Open(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		return trace.Integrity{}, badInputf("%w", err)
	}
	defer f.Close()
	ic := trace.NewIntegrityChecker(trace.IntegrityOptions{})
	for {
		p, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return trace.Integrity{}, badInputf("%w", err)
		}
		mir, ok := roce.DecodeMirror(p.Data)
		if !ok {
			return trace.Integrity{}, badInputf("%s: trace packet %d has no mirror metadata", f.Name(), p.Index)
		}
		ic.Add(p.Index, mir)
	}
	return finishIntegrity(dir, ic, f, cf), nil
}

// finishIntegrity ends the integrity check of the trace read from f, with the notes on a trace or dump cut short
// and the dumpers' own drop reports.
func finishIntegrity(dir string, ic *trace.IntegrityChecker, f *trace.File, cf resultsdir.CountersFile) trace.Integrity {
	integ := ic.Finish(cf.Switch.Mirrored, cf.Switch.RxRoCE)
	noteTruncation(&integ, f)
	dumps, _ := filepath.Glob(filepath.Join(dir, resultsdir.DirDump, "*.pcap"))
	sort.Strings(dumps)
	if countShort(integ) {
		for _, p := range dumps {
			if cut := dumpCut(p); cut != nil {
				noteTruncation(&integ, cut)
			}
		}
	}
	if d := summary.DumperDrops(dumps); d != nil { // the live dumpers' own reports (netns, rxe-vm, remote)
		integ.Checks = append(integ.Checks, *d)
		integ.OK = integ.OK && d.OK
	}
	return integ
}

// countShort tells whether the packet-count condition failed or could not be checked.
func countShort(integ trace.Integrity) bool {
	for _, c := range integ.Checks {
		if c.Name == trace.CheckCountEqualsMirrored {
			return !c.OK || c.Skipped
		}
	}
	return true
}

// dumpCut reads a dump to its end and returns it when it is cut short in the middle of a packet (nil when it is
// whole or unreadable: the trace reconstructed from it already stands for it).
func dumpCut(path string) *trace.File {
	f, err := trace.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	for {
		if _, err := f.Next(); err != nil {
			break
		}
	}
	if f.Truncated() == nil {
		return nil
	}
	return f
}

// noteTruncation fails the packet-count condition when a file of the trace is cut short in the middle of a
// packet: packets were lost whatever the counters say (they may be unknown), and the detail says where.
func noteTruncation(integ *trace.Integrity, files ...*trace.File) {
	for _, f := range files {
		c := f.Truncated()
		if c == nil {
			continue
		}
		for i := range integ.Checks {
			if integ.Checks[i].Name == trace.CheckCountEqualsMirrored {
				integ.Checks[i].OK = false
				integ.Checks[i].Detail += fmt.Sprintf("; %s is cut short in the middle of a packet at byte offset %d after %d whole packets",
					f.Name(), c.Offset, c.Packets)
			}
		}
		integ.OK = false
	}
}

var (
	badInputf = resultsdir.BadInputf
	writeJSON = resultsdir.WriteJSON
	readJSON  = resultsdir.ReadJSON
)
