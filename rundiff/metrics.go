// Package rundiff compares two runs metric by metric: the firmware A/B check (`lumina diff A B`). A run is
// reduced to its key metrics (Extract, from the verdict document analysis.json); Compare says, per metric, the
// old and new value, the change, whether it moved beyond its tolerance and whether that move is a regression.
// The result is a plain struct with JSON tags, for the command line and for the HTML report alike.
package rundiff

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/verdict"
	"github.com/lumina-go/lumina/version"
)

// Direction says which move of a metric is a regression.
type Direction string

const (
	// Up: a higher value is worse (latencies, retransmissions, failed checks).
	Up Direction = "up"
	// Down: a lower value is worse (goodput, integrity).
	Down Direction = "down"
	// Either: a move either way beyond the tolerance is a regression (a behaviour that should not change,
	// such as the number of CNPs a NIC sends for the same marks).
	Either Direction = "either"
)

// Tolerance is how far a metric may move before it counts: a move counts when |new - old| > max(Abs, Rel*|old|).
type Tolerance struct {
	Abs float64 `json:"abs"`
	Rel float64 `json:"rel"` // a fraction: 0.1 = 10%
}

func (t Tolerance) String() string {
	switch {
	case t.Abs == 0 && t.Rel == 0:
		return "0"
	case t.Rel == 0:
		return trimFloat(t.Abs)
	case t.Abs == 0:
		return trimFloat(t.Rel*100) + "%"
	}
	return trimFloat(t.Rel*100) + "% or " + trimFloat(t.Abs)
}

// Allowed is the move the tolerance allows from old: max(Abs, Rel*|old|).
func (t Tolerance) Allowed(old float64) float64 {
	return max(t.Abs, t.Rel*math.Abs(old))
}

// exceeds reports whether the move from old to new is beyond the tolerance.
func (t Tolerance) exceeds(old, new float64) bool {
	return math.Abs(new-old) > t.Allowed(old)+1e-12
}

// CountFloor is the least a percentage tolerance of a count allows: a share of a count below one thing (of a
// zero baseline, nothing) is no tolerance at all.
const CountFloor = 1

// effective is the tolerance as applied to metric d: a count's percentage allows at least CountFloor.
func (t Tolerance) effective(d Def) Tolerance {
	if d.Unit == "count" && t.Rel > 0 && t.Abs < CountFloor {
		t.Abs = CountFloor
	}
	return t
}

// Def is one metric: its name (the key in Metrics), unit, meaning, which direction is worse and its default
// tolerance.
type Def struct {
	Name      string    `json:"name"`
	Unit      string    `json:"unit"`
	Help      string    `json:"help"`
	Worse     Direction `json:"worse"`
	Tolerance Tolerance `json:"tolerance"`
}

// Defs are the metrics of a run, in the order they are shown, with their default tolerances. Counts of things
// that should not happen move on any change; latencies and completion times get 10% (the simulator is
// deterministic, a real NIC is not); goodput 5%. A count with a percentage allows at least CountFloor.
var Defs = []Def{
	{"integrity_ok", "bool", "the trace passed the integrity check (1) or not (0)", Down, Tolerance{}},
	{"checks_failed", "count", "analyzer checks (gbn, gbn-read, irn, cnp, ...) that failed", Up, Tolerance{}},
	{"violations", "count", "protocol violations found by the checkers", Up, Tolerance{}},
	{"expectations_failed", "count", "the scenario's expect: entries that failed", Up, Tolerance{}},
	{"counter_mismatches", "count", "NIC counters whose delta differs from what the trace implies", Up, Tolerance{}},
	{"packets", "count", "packets in the trace (fewer can mean missing CNPs or ACKs)", Either, Tolerance{Rel: 0.01, Abs: 1}},
	{"retransmissions", "count", "lost data packets and their recoveries", Up, Tolerance{}},
	{"timeouts", "count", "retransmission rounds started by a timeout", Up, Tolerance{}},
	{"nack_generation_us_mean", "us", "mean NACK generation latency (loss seen -> NAK sent)", Up, Tolerance{Rel: 0.1}},
	{"nack_generation_us_max", "us", "largest NACK generation latency", Up, Tolerance{Rel: 0.1}},
	{"nack_reaction_us_mean", "us", "mean NACK reaction latency (NAK -> retransmission)", Up, Tolerance{Rel: 0.1}},
	{"nack_reaction_us_max", "us", "largest NACK reaction latency", Up, Tolerance{Rel: 0.1}},
	{"retx_latency_us_mean", "us", "mean retransmission latency (lost packet -> its retransmission)", Up, Tolerance{Rel: 0.1}},
	{"retx_latency_us_max", "us", "largest retransmission latency", Up, Tolerance{Rel: 0.1}},
	{"timeout_interval_us_mean", "us", "mean interval of the timeout ladder", Either, Tolerance{Rel: 0.1}},
	{"ecn_marked", "count", "CE-marked data packets delivered to a notification point", Either, Tolerance{Rel: 0.1, Abs: 1}},
	{"cnps", "count", "CNPs sent", Either, Tolerance{Rel: 0.1, Abs: 1}},
	{"mct_us_mean", "us", "mean message completion time", Up, Tolerance{Rel: 0.1}},
	{"mct_us_p99", "us", "99th percentile message completion time", Up, Tolerance{Rel: 0.1}},
	{"mct_us_max", "us", "largest message completion time", Up, Tolerance{Rel: 0.1}},
	{"goodput_gbps", "Gb/s", "goodput summed over the connections", Down, Tolerance{Rel: 0.05}},
	{"pause_duration_ratio", "ratio", "workload runs: the larger NIC pause duration ratio", Up, Tolerance{Abs: 0.001}},
	{"workload_goodput_gbps", "Gb/s", "workload runs: the busier direction's goodput", Down, Tolerance{Rel: 0.05}},
	{"workload_goodput_mpps", "Mpps", "workload runs: the busier direction's packet rate", Down, Tolerance{Rel: 0.05}},
}

// DefOf returns the definition of a metric.
func DefOf(name string) (Def, bool) {
	for _, d := range Defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Metrics are a run's key metrics by name (Defs); a metric the run has no value for is absent.
type Metrics map[string]float64

// Run is one run as compared: who it is and its metrics.
type Run struct {
	// Label names the run for people: a results directory or a history id ("#12").
	Label        string  `json:"label"`
	Dir          string  `json:"dir,omitempty"`
	Scenario     string  `json:"scenario"`
	ScenarioHash string  `json:"scenario_hash,omitempty"`
	Testbed      string  `json:"testbed"`
	NIC          string  `json:"nic"`
	Seed         uint64  `json:"seed"`
	Verdict      string  `json:"verdict"`
	Version      string  `json:"version,omitempty"`
	Metrics      Metrics `json:"metrics"`
}

// Extract reduces a verdict document (analysis.json) to the run's key metrics.
func Extract(doc *verdict.Document) Metrics {
	m := Metrics{"integrity_ok": b2f(doc.Integrity.OK)}
	failed := 0
	for _, e := range doc.Expectations {
		if !e.OK {
			failed++
		}
	}
	m["expectations_failed"] = float64(failed)
	if w := doc.Workload; w != nil {
		m["pause_duration_ratio"] = w.PauseRatio
		m["workload_goodput_gbps"] = w.GoodputGbps
		m["workload_goodput_mpps"] = w.GoodputMpps
	}
	an := doc.Analysis
	if an == nil || !doc.Integrity.OK {
		return m // nothing was analyzed: no value is known beyond the integrity and the expectations
	}
	checks, violations := 0, 0
	for _, c := range an.Checks {
		if !c.OK {
			checks++
		}
		violations += c.ViolationCount
	}
	m["checks_failed"] = float64(checks)
	m["violations"] = float64(violations)
	mismatches := 0
	for _, c := range an.Counters {
		if !c.OK {
			mismatches++
		}
	}
	m["counter_mismatches"] = float64(mismatches)
	if doc.Workload == nil {
		m["packets"] = float64(an.Packets)
		m["retransmissions"] = float64(len(an.Retransmissions))
		m["ecn_marked"] = float64(an.CNP.ECNMarked)
		m["cnps"] = float64(an.CNP.CNPs)
	}
	timeouts := 0
	var intervals []float64
	for _, t := range an.Timeouts {
		timeouts += t.Timeouts
		intervals = append(intervals, t.TimeoutIntervalsUs...)
	}
	if doc.Workload == nil {
		m["timeouts"] = float64(timeouts)
	}
	setMeanMax := func(prefix string, get func(analyze.Retransmission) *float64) {
		var xs []float64
		for _, r := range an.Retransmissions {
			if v := get(r); v != nil {
				xs = append(xs, *v)
			}
		}
		if len(xs) > 0 {
			m[prefix+"_mean"] = mean(xs)
			m[prefix+"_max"] = maxOf(xs)
		}
	}
	setMeanMax("nack_generation_us", func(r analyze.Retransmission) *float64 { return r.NACKGenerationUs })
	setMeanMax("nack_reaction_us", func(r analyze.Retransmission) *float64 { return r.NACKReactionUs })
	setMeanMax("retx_latency_us", func(r analyze.Retransmission) *float64 { return r.LatencyUs })
	if len(intervals) > 0 {
		m["timeout_interval_us_mean"] = mean(intervals)
	}
	var mcts []float64
	goodput := 0.0
	for _, q := range an.Traffic {
		mcts = append(mcts, q.MCTUs...)
		goodput += q.GoodputGbps
	}
	if len(mcts) > 0 {
		sort.Float64s(mcts)
		m["mct_us_mean"] = mean(mcts)
		m["mct_us_p99"] = mcts[(len(mcts)*99+99)/100-1] // nearest rank
		m["mct_us_max"] = mcts[len(mcts)-1]
	}
	if len(an.Traffic) > 0 {
		m["goodput_gbps"] = goodput
	}
	return m
}

// ErrInput marks errors that are the input's fault (exit status 2): not a results directory, no analysis.
var ErrInput = errors.New("bad input")

// LoadDir reads a results directory's verdict document (analysis.json) and effective scenario into a Run.
// A directory a run left incomplete is refused.
func LoadDir(dir string) (*Run, error) {
	doc, _, err := ReadDoc(dir)
	if err != nil {
		return nil, err
	}
	return FromDoc(dir, doc)
}

// ReadDoc reads a results directory's verdict document (analysis.json), refusing a directory a run left
// incomplete. raw is the file as read, whenever it was read (also when it is then refused): the campaign's
// history names a recorded result by it.
func ReadDoc(dir string) (doc *verdict.Document, raw []byte, err error) {
	if !resultsdir.IsDir(dir) {
		return nil, nil, fmt.Errorf("%w: %s is not a results directory of lumina run (no %s)", ErrInput, dir, resultsdir.FileScenario)
	}
	if err := resultsdir.CheckComplete(dir); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	p := filepath.Join(dir, resultsdir.FileAnalysis)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: %s has no %s: run lumina analyze %s first", ErrInput, dir, resultsdir.FileAnalysis, dir)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if _, err := version.CheckSchema(b); err != nil {
		return nil, b, fmt.Errorf("%w: %s: %v", ErrInput, p, err)
	}
	doc = new(verdict.Document)
	if err := json.Unmarshal(b, doc); err != nil {
		return nil, b, fmt.Errorf("%w: %s: not an analysis document: %v", ErrInput, p, err)
	}
	return doc, b, nil
}

// FromDoc is the Run of results directory dir whose verdict document (analysis.json) doc was read already
// (the HTML report reads it once for its page and its comparison); it reads the effective scenario.
func FromDoc(dir string, doc *verdict.Document) (*Run, error) {
	p := filepath.Join(dir, resultsdir.FileAnalysis)
	switch doc.Verdict {
	case verdict.Pass, verdict.Fail, verdict.Invalid:
	case "":
		return nil, fmt.Errorf("%w: %s: no verdict in it; expected the analysis.json of lumina run", ErrInput, p)
	default:
		return nil, fmt.Errorf("%w: %s: verdict %q; expected %s, %s or %s", ErrInput, p, doc.Verdict, verdict.Pass, verdict.Fail, verdict.Invalid)
	}
	eff := filepath.Join(dir, resultsdir.FileScenario)
	hash, err := HashScenario(eff)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	sc, err := scenario.Load(eff)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	return &Run{Label: dir, Dir: dir, Scenario: ScenarioName(doc.Scenario), ScenarioHash: hash, Testbed: orSim(doc.Testbed),
		NIC: NICOf(sc), Seed: doc.Seed, Verdict: doc.Verdict, Version: doc.Version.String(), Metrics: Extract(doc)}, nil
}

// HashScenario is the scenario hash of a run: the SHA-256, in hex, of the effective scenario it wrote
// (scenario.yaml of its results directory) without its comment lines, which name the build and the source
// path. Two runs of the same test have the same hash, wherever the file lives and whichever build ran it.
func HashScenario(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			h.Write([]byte(line))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// NICOf names a scenario's NICs: the profiles ("cx5", or "cx5/e810" when they differ); for the remote
// testbed, each host's address and device as known ("cx6dx@10.0.0.1:mlx5_0").
func NICOf(sc *scenario.Scenario) string {
	req, resp := sc.Requester.NIC.Type, sc.Responder.NIC.Type
	if r := sc.Remote; r != nil {
		req, resp = remoteNIC(req, r.Requester), remoteNIC(resp, r.Responder)
	}
	return NICPair(req, resp)
}

func remoteNIC(typ string, h scenario.RemoteHost) string {
	dev := h.IBDevice
	if dev == "" {
		dev = h.IfName
	}
	s := typ + "@" + h.ControlIP
	if dev != "" {
		s += ":" + dev
	}
	return s
}

// ScenarioName is a scenario path's file name without its extension.
func ScenarioName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// NICPair names the two NICs of a run: one name when both are the same.
func NICPair(req, resp string) string {
	if req == resp || resp == "" {
		return req
	}
	if req == "" {
		return resp
	}
	return req + "/" + resp
}

func orSim(tb string) string {
	if tb == "" {
		return "sim"
	}
	return tb
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}

func trimFloat(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.6f", f), "0"), ".")
}
