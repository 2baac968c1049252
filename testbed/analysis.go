package testbed

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/version"
)

// Verdicts of a test.
const (
	VerdictPass    = "pass"
	VerdictFail    = "fail"
	VerdictInvalid = "invalid"
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
	Workload *WorkloadAnalysis `json:"workload,omitempty"`
	// Verdict is pass (every check and expectation passed), fail, or invalid (the trace failed the integrity
	// check and nothing was analyzed).
	Verdict string `json:"verdict"`
}

// Outcome is the result of a run or a re-analysis.
type Outcome struct {
	Dir      string
	Doc      *Document
	Scenario *scenario.Scenario
	Traffic  []TrafficRecord
	Counters *CountersFile
	// Entries are the installed event-table entries as written in switch.json.
	Entries []json.RawMessage
}

// ExitCode is the command's exit status for this outcome (spec/scenario-and-cli.md).
func (o *Outcome) ExitCode() int {
	switch o.Doc.Verdict {
	case VerdictPass:
		return 0
	case VerdictInvalid:
		return 3
	}
	return 1
}

// Reanalyze re-runs the integrity check, the analyzers and the expectations on a results directory.
func Reanalyze(dir string) (*Outcome, error) {
	if err := checkComplete(dir); err != nil {
		return nil, err
	}
	sc, err := scenario.Load(filepath.Join(dir, FileScenario))
	if err != nil {
		return nil, badInputf("%s is not a results directory: %w", dir, err)
	}
	if sc.Workload != nil {
		return reanalyzeWorkload(dir, sc)
	}
	return analyzeDir(dir, sc, nil)
}

// IsResultsDir tells whether path looks like a results directory (a complete one, or one a run left
// incomplete).
func IsResultsDir(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	for _, f := range []string{FileScenario, FileIncomplete} {
		if _, err := os.Stat(filepath.Join(path, f)); err == nil {
			return true
		}
	}
	return false
}

// analyzeDir reconstructs the trace from the dumps (when raw is given, i.e. right after a run), checks its
// integrity, runs the analyzers and the expectations, and writes analysis.json.
func analyzeDir(dir string, sc *scenario.Scenario, raw *rawResults) (*Outcome, error) {
	out := &Outcome{Dir: dir, Scenario: sc}
	var cf CountersFile
	if err := readJSON(dir, FileCounters, &cf); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	out.Counters = &cf
	if err := readList(dir, FileTraffic, &out.Traffic); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	var conns []ConnRecord
	if err := readList(dir, FileConnections, &conns); err != nil {
		return nil, badInputf("%s: %w", dir, err)
	}
	var sw struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := readJSON(dir, FileSwitch, &sw); err == nil {
		out.Entries = sw.Entries
	}

	doc := &Document{Version: version.Get(), Scenario: sc.Path, Testbed: sc.Testbed, Seed: sc.Seed, IndexBase: sc.IndexBase}
	out.Doc = doc
	var integ trace.Integrity
	var err error
	if raw != nil {
		integ, err = reconstruct(dir, cf, raw, sc.IndexBase)
	} else {
		integ, err = checkTrace(dir, cf)
	}
	if err != nil {
		return nil, err
	}
	doc.Integrity = integ
	if !integ.OK {
		doc.Verdict = VerdictInvalid
		doc.Analysis = &analyze.Analysis{}
		doc.Expectations = evaluate(sc, doc)
		return out, writeJSON(dir, FileAnalysis, doc)
	}

	opts := analyzeOptions(sc, conns, &cf, out.Traffic)
	f, err := trace.Open(filepath.Join(dir, FileTrace))
	if err != nil {
		return nil, badInputf("%w", err)
	}
	defer f.Close()
	an, err := analyze.Analyze(f, opts)
	if err != nil {
		return nil, fmt.Errorf("analyzing %s: %w", filepath.Join(dir, FileTrace), err)
	}
	doc.Analysis = an
	tree := docTree(doc)
	doc.Expectations = evaluateTree(sc, tree)
	doc.Verdict = verdict(sc, tree, doc)
	return out, writeJSON(dir, FileAnalysis, doc)
}

// evaluate runs the scenario's expectations against the document as JSON.
func evaluate(sc *scenario.Scenario, doc *Document) []scenario.ExpectResult {
	return evaluateTree(sc, docTree(doc))
}

func evaluateTree(sc *scenario.Scenario, tree any) []scenario.ExpectResult {
	res := make([]scenario.ExpectResult, len(sc.Expect))
	for i, e := range sc.Expect {
		res[i] = e.Evaluate(tree)
	}
	return res
}

// docTree is the document as encoding/json decodes it, the form expectations select from.
func docTree(doc *Document) any {
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // the document is plain data
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		panic(err)
	}
	return tree
}

// verdict is pass when every expectation holds and every failed check or counter check is one the scenario
// expects to fail: a test that reproduces a known NIC bug (a counter that lies) asserts that the counter check
// fails, and passes when it does. A failure counts as expected when an expectation that holds asserts
// "ok equals false" and stops holding once that entry is flipped to ok.
func verdict(sc *scenario.Scenario, tree any, doc *Document) string {
	for _, e := range doc.Expectations {
		if !e.OK {
			return VerdictFail
		}
	}
	for _, list := range []string{"checks", "counters"} {
		entries, _ := tree.(map[string]any)[list].([]any)
		for _, en := range entries {
			m, _ := en.(map[string]any)
			if ok, _ := m["ok"].(bool); ok || m == nil {
				continue
			}
			if !expectedFailure(sc, tree, m) {
				return VerdictFail
			}
		}
	}
	return VerdictPass
}

func expectedFailure(sc *scenario.Scenario, tree any, entry map[string]any) bool {
	entry["ok"] = true
	defer func() { entry["ok"] = false }()
	for _, e := range sc.Expect {
		if e.Kind != scenario.ExpectPath || e.Op != scenario.OpEquals || e.Want != false ||
			!strings.HasSuffix(e.Path, ".ok") {
			continue
		}
		if !e.Evaluate(tree).OK {
			return true
		}
	}
	return false
}

func analyzeOptions(sc *scenario.Scenario, conns []ConnRecord, cf *CountersFile, traffic []TrafficRecord) analyze.Options {
	opts := analyze.Options{IndexBase: sc.IndexBase, Metadata: analyze.MetaComment}
	for _, c := range conns {
		opts.Conns = append(opts.Conns, analyze.Conn{Index: c.QP - sc.IndexBase, Verb: c.Verb, ReqIP: c.RequesterIP,
			RespIP: c.ResponderIP, ReqQPN: c.RequesterQPN, RespQPN: c.ResponderQPN, ReqIPSN: roce.PSN(c.RequesterIPSN),
			PacketsPerMsg: c.PacketsPerMsg, NumMsgs: c.NumMsgs, MTU: c.MTU})
	}
	opts.Requester = nicInfo(sc, sc.Requester)
	opts.Responder = nicInfo(sc, sc.Responder)
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
	if p, err := loadProfile(sc, "requester", sc.Requester.NIC.Type); err == nil && opts.LinkGbps == 0 {
		opts.LinkGbps = p.LinkGbps
		if q, err := loadProfile(sc, "responder", sc.Responder.NIC.Type); err == nil && q.LinkGbps < p.LinkGbps {
			opts.LinkGbps = q.LinkGbps
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

func nicInfo(sc *scenario.Scenario, h scenario.Host) analyze.NICInfo {
	p, err := loadProfile(sc, "", h.NIC.Type)
	if err != nil {
		return analyze.NICInfo{}
	}
	var configured float64 = -1
	if h.RoCEParameters.MinTimeBetweenCNPsUs != nil {
		configured = *h.RoCEParameters.MinTimeBetweenCNPsUs
	}
	np, rp := h.RoCEParameters.DCQCNNPEnable, h.RoCEParameters.DCQCNRPEnable
	if h.RoCEParameters.DCQCNEnable != nil {
		np, rp = *h.RoCEParameters.DCQCNEnable, *h.RoCEParameters.DCQCNEnable
	}
	return analyze.NICInfo{Vendor: p.Vendor, Profile: p.Name, CNPScope: p.CNP.Scope,
		CNPIntervalNs: p.CNPInterval(configured), NAKTriggersCNP: p.CNP.NAKTriggersCNP, NPEnabled: np, RPEnabled: rp}
}

// reconstruct merges the dumps by mirror sequence number into trace.pcapng (nanosecond timestamps, each packet
// annotated in a comment: event, mirror sequence number, ITER and the connection with the scenario's index base)
// and runs the integrity check on the way.
func reconstruct(dir string, cf CountersFile, raw *rawResults, base int) (trace.Integrity, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, DirDump, "*.pcap"))
	sort.Strings(paths)
	var readers []trace.Reader
	var files []*trace.File
	for _, p := range paths {
		f, err := trace.Open(p)
		if err != nil {
			return trace.Integrity{}, err
		}
		defer f.Close()
		readers = append(readers, f)
		files = append(files, f)
	}
	m := trace.MergeByMirrorSeq(readers...)
	tf, err := os.Create(filepath.Join(dir, FileTrace))
	if err != nil {
		return trace.Integrity{}, fmt.Errorf("writing trace: %w", err)
	}
	defer tf.Close()
	bw := bufio.NewWriterSize(tf, 1<<20)
	w, err := trace.NewPcapngWriter(bw, trace.PcapngWriterOptions{UserAppl: "lumina",
		Comment:    "Lumina trace: mirrored packets in mirror-sequence order",
		Interfaces: []trace.InterfaceSpec{{LinkType: trace.LinkTypeEthernet, SnapLen: 65535, Name: "switch-mirror"}}})
	if err != nil {
		return trace.Integrity{}, err
	}
	ic := trace.NewIntegrityChecker(trace.IntegrityOptions{})
	var sb strings.Builder
	var clock trace.Unwrap48 // the trace's timeline goes on across a wrap of the 48-bit mirror timestamps
	for {
		p, err := m.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return trace.Integrity{}, fmt.Errorf("merging dumps: %w", err)
		}
		mir, ok := m.Mirror()
		if !ok {
			return trace.Integrity{}, fmt.Errorf("merging dumps: packet without mirror metadata")
		}
		ic.Add(p.Index, mir)
		sb.Reset()
		fmt.Fprintf(&sb, "event=%s seq=%d", mir.Event, mir.Seq)
		if conn, iter, ok := raw.annotate(mir.Seq); ok && conn >= 0 {
			if iter > 0 {
				fmt.Fprintf(&sb, " iter=%d", iter)
			}
			fmt.Fprintf(&sb, " qp=%d", conn+base)
		}
		if err := w.WritePacket(0, clock.Extend(mir.TimestampNs), p.Data, p.OrigLen, sb.String()); err != nil {
			return trace.Integrity{}, fmt.Errorf("writing trace: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return trace.Integrity{}, err
	}
	if err := bw.Flush(); err != nil {
		return trace.Integrity{}, fmt.Errorf("writing trace: %w", err)
	}
	integ := ic.Finish(cf.Switch.Mirrored, cf.Switch.RxRoCE)
	noteTruncation(&integ, files...)
	if d := summary.DumperDrops(paths); d != nil { // the live dumpers' own reports (netns, rxe-vm)
		integ.Checks = append(integ.Checks, *d)
		integ.OK = integ.OK && d.OK
	}
	return integ, nil
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

// checkTrace re-runs the integrity check over an existing trace.pcapng.
func checkTrace(dir string, cf CountersFile) (trace.Integrity, error) {
	f, err := trace.Open(filepath.Join(dir, FileTrace))
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
		mir, ok := trace.DecodeMirror(p.Data)
		if !ok {
			return trace.Integrity{}, badInputf("%s: trace packet %d has no mirror metadata", f.Name(), p.Index)
		}
		ic.Add(p.Index, mir)
	}
	integ := ic.Finish(cf.Switch.Mirrored, cf.Switch.RxRoCE)
	noteTruncation(&integ, f)
	dumps, _ := filepath.Glob(filepath.Join(dir, DirDump, "*.pcap"))
	if d := summary.DumperDrops(dumps); d != nil {
		integ.Checks = append(integ.Checks, *d)
		integ.OK = integ.OK && d.OK
	}
	return integ, nil
}
