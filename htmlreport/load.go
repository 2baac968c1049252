package htmlreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
	"github.com/lumina-go/lumina/version"
)

// ErrInput marks an input the report cannot be made of (exit status 2): resultsdir.ErrInput.
var ErrInput = resultsdir.ErrInput

func badInput(f string, a ...any) error { return resultsdir.BadInputf(f, a...) }

// Search directory files (lumina search's output, package search).
const (
	searchAnomalies = "anomalies.json"
	searchLog       = "search.jsonl"
)

// Load makes the page for the command line's arguments: one results directory, one search directory, two
// results directories (side by side), or capture files (pcap / pcapng).
func Load(args []string) (*Page, error) {
	if len(args) == 0 {
		return nil, badInput("no input: give a results directory, a search directory, two results directories or capture files")
	}
	for _, a := range args {
		if _, err := os.Stat(a); err != nil {
			return nil, badInput("%s: no such file or directory", a)
		}
	}
	dirs := 0
	for _, a := range args {
		if st, _ := os.Stat(a); st.IsDir() {
			dirs++
		}
	}
	switch {
	case dirs == 0:
		return LoadCapture(args)
	case dirs != len(args):
		return nil, badInput("%s: mixes directories and files; give results directories, or capture files", strings.Join(args, " "))
	case len(args) == 1 && isSearchDir(args[0]):
		return LoadSearch(args[0])
	case len(args) == 1 && isCampaignDir(args[0]):
		return LoadSuite(args[0])
	case len(args) == 1:
		r, err := LoadResults(args[0])
		if err != nil {
			return nil, err
		}
		return &Page{Kind: KindResults, Title: "lumina report: " + r.Source, MaxPoints: DefaultMaxPoints, Runs: []*Run{r}}, nil
	case len(args) == 2:
		a, err := LoadResults(args[0])
		if err != nil {
			return nil, err
		}
		b, err := LoadResults(args[1])
		if err != nil {
			return nil, err
		}
		return ComparePage(a, b)
	}
	return nil, badInput("%d directories: give one results directory, one search directory, or two results directories to compare", len(args))
}

// DefaultMaxPoints is the most points the page draws per series before it aggregates.
const DefaultMaxPoints = 4000

// ResultsPage is the page of one judged run.
func ResultsPage(r *Run) *Page {
	return &Page{Kind: KindResults, Title: "lumina report: " + r.Source, MaxPoints: DefaultMaxPoints, Runs: []*Run{r}}
}

func isSearchDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, searchAnomalies))
	_, err2 := os.Stat(filepath.Join(dir, searchLog))
	return err == nil || err2 == nil
}

// LoadResults reads a judged results directory: its analysis.json as the verdict stage wrote it, counters,
// traffic, and the trace for the plots. It changes nothing in the directory.
func LoadResults(dir string) (*Run, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, badInput("%s: no such directory", dir)
	}
	if !st.IsDir() {
		return nil, badInput("%s: not a directory", dir)
	}
	if err := resultsdir.CheckComplete(dir); err != nil {
		return nil, badInput("%v; a report is made of complete results only", err)
	}
	if !resultsdir.IsDir(dir) {
		return nil, badInput("%s is not a results directory of lumina run (no %s) nor a search directory (no %s)", dir, resultsdir.FileScenario, searchAnomalies)
	}
	var doc verdict.Document
	if err := resultsdir.ReadJSON(dir, resultsdir.FileAnalysis, &doc); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, badInput("%s has no %s: judge it first with lumina analyze %s", dir, resultsdir.FileAnalysis, dir)
		}
		return nil, badInput("%v", err)
	}
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(dir, resultsdir.FileCounters, &cf); err != nil && doc.Workload == nil {
		return nil, badInput("%s: %v", dir, err)
	}
	return fromDoc(dir, &doc, &cf)
}

// FromOutcome is the report's run of what the verdict stage just decided (lumina run --report).
func FromOutcome(o *verdict.Outcome) (*Run, error) {
	return fromDoc(o.Dir, o.Doc, o.Counters)
}

func fromDoc(dir string, doc *verdict.Document, cf *resultsdir.CountersFile) (*Run, error) {
	r := &Run{Source: dir, Verdict: doc.Verdict, Scenario: doc.Scenario, Testbed: doc.Testbed, Seed: doc.Seed,
		IndexBase: doc.IndexBase, Expectations: doc.Expectations, doc: doc}
	integ := doc.Integrity
	r.Integrity = &integ
	an := doc.Analysis
	if an == nil {
		an = &analyze.Analysis{}
	}
	r.fillAnalysis(an, "")
	r.Counters = counterRows(an.Counters, cf)
	if doc.Workload != nil {
		b, err := json.Marshal(doc.Workload)
		if err != nil {
			return nil, err
		}
		r.Workload = b
	}
	tp := filepath.Join(dir, resultsdir.FileTrace)
	if _, err := os.Stat(tp); err != nil {
		if doc.Workload != nil {
			if len(integ.Checks) == 0 {
				r.Integrity, r.IntegrityNote = nil, "a workload run on the NIC micro-architecture model: no trace, no integrity check"
			}
			return r, nil
		}
		return nil, badInput("%s: no %s", dir, resultsdir.FileTrace)
	}
	conns := an.Connections
	if len(conns) == 0 { // an invalid run is not analyzed: its connections come from the testbed's record
		var recs []resultsdir.ConnRecord
		if err := resultsdir.ReadList(dir, resultsdir.FileConnections, &recs); err == nil {
			for _, c := range recs {
				conns = append(conns, analyze.Conn{Index: c.QP - doc.IndexBase, Verb: c.Verb, ReqIP: c.RequesterIP, RespIP: c.ResponderIP,
					ReqQPN: c.RequesterQPN, RespQPN: c.ResponderQPN, ReqIPSN: roce.PSN(c.RequesterIPSN)})
			}
		}
	}
	f, err := trace.Open(tp)
	if err != nil {
		return nil, badInput("%v", err)
	}
	defer f.Close()
	tv, err := readTrace(f, conns, doc.IndexBase, analyze.MetaComment)
	if err != nil {
		return nil, badInput("%v", err)
	}
	r.Trace = tv
	return r, nil
}

// LoadCapture analyzes plain captures as lumina analyze does (summary, then the checkers that need no
// scenario) and reads them again for the plots.
func LoadCapture(paths []string) (*Page, error) {
	for _, p := range paths {
		if !isCapture(p) {
			return nil, badInput("%s: not a pcap or pcapng capture (and not a directory); lumina report takes a results directory, a search directory or capture files", p)
		}
	}
	opts := summary.Options{Order: summary.OrderAuto}
	if c, ok := verdict.FindSwitchCounts(paths); ok {
		opts.Counters = &c
	}
	src, err := summary.Open(paths, opts)
	if err != nil {
		return nil, badInput("%v", err)
	}
	an, err := analyze.Analyze(src, analyze.Options{IndexBase: 1})
	for err == nil {
		_, err = src.Next()
	}
	src.Close()
	rep, rerr := src.Report()
	if rerr != nil {
		return nil, badInput("%v", rerr)
	}
	if !errors.Is(err, io.EOF) {
		return nil, badInput("%v", err)
	}
	r := &Run{Source: strings.Join(paths, " "), IndexBase: 1, Verdict: verdict.Pass,
		IntegrityNote: "not Lumina dumps (no mirror sequence numbers): no integrity check; every packet counts as delivered"}
	r.Summary = captureSummary(rep)
	if rep.Integrity != nil {
		r.Integrity = &trace.Integrity{OK: rep.Integrity.OK, Checks: rep.Integrity.Checks}
	}
	if rep.Integrity != nil && !rep.Integrity.OK {
		r.Verdict = verdict.Invalid // not judged: its gaps are not the NIC's
		r.fillAnalysis(&analyze.Analysis{}, "")
	} else {
		r.fillAnalysis(an, "")
		for _, c := range an.Checks {
			if !c.OK {
				r.Verdict = verdict.Fail
			}
		}
	}
	src2, err := summary.Open(paths, opts)
	if err != nil {
		return nil, badInput("%v", err)
	}
	defer src2.Close()
	tv, err := readTrace(src2, an.Connections, 1, analyze.MetaAuto)
	if err != nil {
		return nil, badInput("%v", err)
	}
	r.Trace = tv
	return &Page{Kind: KindCapture, Title: "lumina report: " + r.Source, MaxPoints: DefaultMaxPoints, Runs: []*Run{r}}, nil
}

// isCapture tells whether the file starts with a pcap or pcapng magic number.
func isCapture(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [4]byte
	if _, err := io.ReadFull(f, m[:]); err != nil {
		return false
	}
	switch string(m[:]) {
	case "\xd4\xc3\xb2\xa1", "\xa1\xb2\xc3\xd4", "\x4d\x3c\xb2\xa1", "\xa1\xb2\x3c\x4d", "\x0a\x0d\x0d\x0a":
		return true
	}
	return false
}

// Search is a lumina search directory: its anomalies and the score of every evaluation.
type Search struct {
	Dir       string       `json:"dir"`
	Anomalies []AnomalyRow `json:"anomalies"`
	// Evals are the evaluations' energies (lower is more anomalous) per evaluation kind: [eval, energy] points.
	Evals       []EvalSeries `json:"evals"`
	Best        [][2]float64 `json:"best"` // the lowest energy so far, at each evaluation that lowered it
	Evaluations int          `json:"evaluations"`
}

// AnomalyRow is one anomaly of anomalies.json.
type AnomalyRow struct {
	ID       int             `json:"id"`
	Symptom  json.RawMessage `json:"symptom"`
	MFS      json.RawMessage `json:"mfs"`
	Scenario string          `json:"scenario"`
	FoundAt  int             `json:"found_at_evaluation"`
	Minimal  bool            `json:"minimal"`
	// MFSCut: the budget ran out during the feature set's probes (it may not be minimal).
	MFSCut   bool            `json:"mfs_cut,omitempty"`
	Counters json.RawMessage `json:"counters,omitempty"`
	// Published: the published anomalies (Collie's numbers) whose conditions hold at the point the search hit;
	// [] none, absent when nothing is published for the profile.
	Published *[]int `json:"published,omitempty"`
}

// EvalSeries is the evaluations of one kind (warmup, search, mfs, ...).
type EvalSeries struct {
	Kind   string       `json:"kind"`
	Points [][2]float64 `json:"points"`
}

// LoadSearch reads a lumina search directory.
func LoadSearch(dir string) (*Page, error) {
	s := &Search{Dir: dir}
	if b, err := os.ReadFile(filepath.Join(dir, searchAnomalies)); err == nil {
		if _, err := version.CheckSchema(b); err != nil {
			return nil, badInput("%s: %v", filepath.Join(dir, searchAnomalies), err)
		}
		var doc struct {
			Anomalies []AnomalyRow `json:"anomalies"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, badInput("%s: %v", filepath.Join(dir, searchAnomalies), err)
		}
		s.Anomalies = doc.Anomalies
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, badInput("%v", err)
	}
	f, err := os.Open(filepath.Join(dir, searchLog))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, badInput("%v", err)
	}
	if err == nil {
		defer f.Close()
		byKind := map[string]int{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		line := 0
		best, last, haveBest := 0.0, 0.0, false
		for sc.Scan() {
			line++
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			var rec struct {
				Eval   int     `json:"eval"`
				Kind   string  `json:"kind"`
				Energy float64 `json:"energy"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				if !sc.Scan() { // a torn last line (an interrupted search) is left out, as --resume drops it
					break
				}
				return nil, badInput("%s:%d: %v", filepath.Join(dir, searchLog), line, err)
			}
			k, ok := byKind[rec.Kind]
			if !ok {
				k = len(s.Evals)
				byKind[rec.Kind] = k
				s.Evals = append(s.Evals, EvalSeries{Kind: rec.Kind})
			}
			p := [2]float64{float64(rec.Eval), rec.Energy}
			last = max(last, p[0])
			s.Evals[k].Points = append(s.Evals[k].Points, p)
			// The lowest so far is the search's own best (search/engine.go): the minimal-feature-set probes
			// (mfs, verify, reduce) do not count.
			if probe := rec.Kind == "mfs" || rec.Kind == "verify" || rec.Kind == "reduce"; !probe && (!haveBest || rec.Energy < best) {
				best, haveBest = rec.Energy, true
				s.Best = append(s.Best, p)
			}
			s.Evaluations++
		}
		if err := sc.Err(); err != nil {
			return nil, badInput("%s: %v", filepath.Join(dir, searchLog), err)
		}
		if n := len(s.Best); n > 0 && last > s.Best[n-1][0] {
			s.Best = append(s.Best, [2]float64{last, best}) // the lowest so far holds to the last evaluation
		}
	}
	return &Page{Kind: KindSearch, Title: "lumina search report: " + dir, MaxPoints: DefaultMaxPoints, Search: s}, nil
}
