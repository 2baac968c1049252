package htmlreport

import (
	"encoding/json"
	"sort"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
)

// Page kinds.
const (
	KindResults = "results" // one results directory of lumina run
	KindCapture = "capture" // a plain capture
	KindSearch  = "search"  // a lumina search directory
	KindCompare = "compare" // two results directories side by side
	KindSuite   = "suite"   // a lumina campaign directory
)

// Page is the report's data: everything the page shows, embedded as JSON and rendered by the page's script.
// It holds no time of its own making, so the same input gives the same page.
type Page struct {
	Kind  string `json:"kind"`
	Title string `json:"title"`
	// MaxPoints is the most points the page draws per series before it aggregates (min/max envelopes per
	// time bucket, the full data rendered once zoomed in far enough).
	MaxPoints int      `json:"max_points"`
	Runs      []*Run   `json:"runs,omitempty"`
	Compare   []Metric `json:"compare,omitempty"`
	// CompareNotes are the lines above the metric table (lumina diff's notes and regression summary).
	CompareNotes []string `json:"compare_notes,omitempty"`
	Search       *Search  `json:"search,omitempty"`
	Suite        *Suite   `json:"suite,omitempty"`
}

// Run is one results directory or capture.
type Run struct {
	Source    string           `json:"source"` // the directory or capture files, as given
	Verdict   string           `json:"verdict"`
	Scenario  string           `json:"scenario,omitempty"`
	Testbed   string           `json:"testbed,omitempty"`
	Seed      uint64           `json:"seed"`
	IndexBase int              `json:"index_base"`
	Integrity *trace.Integrity `json:"integrity"` // nil: not checked (IntegrityNote says why)
	// IntegrityNote says why there is no integrity check.
	IntegrityNote string     `json:"integrity_note,omitempty"`
	Checks        []CheckRow `json:"checks"`
	// Retransmissions lists the first MaxRows lost packets; RetransmissionsTotal counts them all.
	Retransmissions      []analyze.Retransmission `json:"retransmissions"`
	RetransmissionsTotal int                      `json:"retransmissions_total"`
	Positions            []analyze.PositionRow    `json:"positions"`
	// PositionSplit is the retransmission latency per drop position, NACK- (or READ re-issue-) triggered
	// recoveries apart from timeout-triggered ones, one row per row of Positions.
	PositionSplit []PositionSplit          `json:"position_split"`
	Timeouts      []analyze.MessageRetries `json:"timeouts"`
	CNP           *CNPView                 `json:"cnp"`
	Counters      []CounterRow             `json:"counters"`
	Traffic       []TrafficRow             `json:"traffic"`
	MCT           []MCTCurve               `json:"mct"`
	Expectations  []scenario.ExpectResult  `json:"expectations"`
	Skipped       []analyze.Skipped        `json:"skipped"`
	Summary       []KV                     `json:"summary,omitempty"` // a plain capture's packet summary
	Workload      json.RawMessage          `json:"workload,omitempty"`
	Trace         *TraceView               `json:"trace"` // nil: no trace (a workload run)
	// doc is the verdict document of a results directory, which the page's metric table compares (rundiff).
	doc *verdict.Document
}

// PositionSplit is one drop position's mean retransmission latency by what triggered the retransmission.
type PositionSplit struct {
	NACKCount        int      `json:"nack_count"` // recoveries by a NAK or a re-issued READ, with a latency
	NACKLatencyUs    *float64 `json:"nack_latency_us_mean"`
	TimeoutCount     int      `json:"timeout_count"`
	TimeoutLatencyUs *float64 `json:"timeout_latency_us_mean"`
}

// positionSplit means the latencies of each position row's retransmissions, NACK-triggered apart from
// timeout-triggered (a timeout's hundreds of ms beside µs NACK recoveries made one mean meaningless).
func positionSplit(an *analyze.Analysis, indexBase int) []PositionSplit {
	verb := map[int]string{}
	for _, c := range an.Connections {
		verb[c.Index+indexBase] = c.Verb
	}
	type key struct {
		verb string
		pos  int
	}
	type acc struct {
		n, t   int
		sn, st float64
	}
	m := map[key]*acc{}
	for _, x := range an.Retransmissions {
		if x.LatencyUs == nil {
			continue
		}
		k := key{verb[x.QP], x.Position}
		a := m[k]
		if a == nil {
			a = &acc{}
			m[k] = a
		}
		if x.Trigger != nil && *x.Trigger == analyze.TriggerTimeout {
			a.t++
			a.st += *x.LatencyUs
		} else {
			a.n++
			a.sn += *x.LatencyUs
		}
	}
	out := make([]PositionSplit, len(an.Tables))
	for i, row := range an.Tables {
		a := m[key{row.Verb, row.Position}]
		if a == nil {
			continue
		}
		out[i].NACKCount, out[i].TimeoutCount = a.n, a.t
		if a.n > 0 {
			out[i].NACKLatencyUs = num(a.sn / float64(a.n))
		}
		if a.t > 0 {
			out[i].TimeoutLatencyUs = num(a.st / float64(a.t))
		}
	}
	return out
}

// MaxRows bounds the rows of the per-packet tables embedded in the page (retransmissions, violations).
const MaxRows = 1000

// CheckRow is one analyzer's verdict on one connection, with its first violations.
type CheckRow struct {
	Analyzer   string              `json:"analyzer"`
	QP         int                 `json:"qp"`
	OK         bool                `json:"ok"`
	Count      int                 `json:"violation_count"`
	Violations []analyze.Violation `json:"violations"`
}

// CNPView is the CNP analysis beside the timeline.
type CNPView struct {
	ECNMarked       int                 `json:"ecn_marked"`
	CNPs            int                 `json:"cnps"`
	Expected        *int                `json:"expected"`
	ScopeInferred   string              `json:"scope_inferred"`
	ScopeConfigured string              `json:"scope_configured"`
	MinIntervalUs   *float64            `json:"min_interval_us"`
	NAKTriggered    int                 `json:"nak_triggered"`
	Unsolicited     int                 `json:"unsolicited"`
	Mismatches      map[string]int      `json:"mismatches"`
	IntervalUs      map[string]*float64 `json:"interval_us"`
	Truncated       bool                `json:"truncated"`
}

// CounterRow is one NIC counter: its snapshots, its delta and what the trace implies.
type CounterRow struct {
	Host string `json:"host"`
	Name string `json:"name"`
	// The counts go into the page as decimal strings: JSON.parse would round those above 2^53.
	Start    *uint64 `json:"start,string"`
	Finish   *uint64 `json:"finish,string"`
	Delta    *int64  `json:"delta,string"`
	Expected *int64  `json:"expected,string"` // null: the trace implies nothing for it
	OK       bool    `json:"ok"`
	Note     string  `json:"note,omitempty"`
}

// TrafficRow is one connection's traffic.
type TrafficRow struct {
	QP              int     `json:"qp"`
	Messages        int     `json:"messages"`
	MCTMeanUs       float64 `json:"mct_mean_us"`
	MCTP50Us        float64 `json:"mct_p50_us"`
	MCTP99Us        float64 `json:"mct_p99_us"`
	MCTMaxUs        float64 `json:"mct_max_us"`
	GoodputGbps     float64 `json:"goodput_gbps"`
	Source          string  `json:"source"`
	Status          string  `json:"status,omitempty"`
	DataPackets     *int64  `json:"data_packets"`
	Retransmissions *int64  `json:"retransmissions"`
}

// MCTCurve is one connection's message completion time CDF: (µs, fraction) points, at most maxCDFPoints.
type MCTCurve struct {
	QP     int          `json:"qp"`
	Points [][2]float64 `json:"points"`
}

const maxCDFPoints = 500

// KV is one line of a key/value table.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// fillAnalysis fills a run's analysis sections.
func (r *Run) fillAnalysis(an *analyze.Analysis, scope string) {
	for _, c := range an.Checks {
		v := c.Violations
		if len(v) > 20 {
			v = v[:20]
		}
		r.Checks = append(r.Checks, CheckRow{Analyzer: c.Analyzer, QP: c.QP, OK: c.OK, Count: c.ViolationCount, Violations: v})
	}
	r.RetransmissionsTotal = len(an.Retransmissions)
	r.Retransmissions = an.Retransmissions
	if len(r.Retransmissions) > MaxRows {
		r.Retransmissions = r.Retransmissions[:MaxRows]
	}
	r.Positions, r.Timeouts, r.Skipped = an.Tables, an.Timeouts, an.Skipped
	r.PositionSplit = positionSplit(an, r.IndexBase)
	c := an.CNP
	r.CNP = &CNPView{ECNMarked: c.ECNMarked, CNPs: c.CNPs, Expected: c.Expected, ScopeInferred: c.ScopeInferred,
		ScopeConfigured: scope, MinIntervalUs: c.MinIntervalUs, NAKTriggered: c.NAKTriggered, Unsolicited: c.Unsolicited,
		Mismatches: c.Mismatches, IntervalUs: c.IntervalUs, Truncated: c.Truncated}
	for _, t := range an.Traffic {
		row := TrafficRow{QP: t.QP, Messages: len(t.MCTUs), GoodputGbps: t.GoodputGbps, Source: t.Source, Status: t.Status,
			DataPackets: t.DataPackets, Retransmissions: t.Retransmissions}
		s := append([]float64(nil), t.MCTUs...)
		sort.Float64s(s)
		if n := len(s); n > 0 {
			sum := 0.0
			for _, v := range s {
				sum += v
			}
			row.MCTMeanUs, row.MCTP50Us, row.MCTP99Us, row.MCTMaxUs = sum/float64(n), quantile(s, 0.5), quantile(s, 0.99), s[n-1]
			r.MCT = append(r.MCT, MCTCurve{QP: t.QP, Points: cdf(s)})
		}
		r.Traffic = append(r.Traffic, row)
	}
}

// num is a pointer to v (for optional JSON numbers).
func num(v float64) *float64 { return &v }

// quantile is the nearest-rank quantile of sorted values.
func quantile(s []float64, q float64) float64 {
	i := int(q*float64(len(s))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// cdf is the empirical CDF of sorted values: every value when there are few, else maxCDFPoints evenly spaced
// ranks (the first and last always kept).
func cdf(s []float64) [][2]float64 {
	n := len(s)
	step := 1
	if n > maxCDFPoints {
		step = (n + maxCDFPoints - 2) / (maxCDFPoints - 1)
	}
	var pts [][2]float64
	for i := 0; i < n; i += step {
		pts = append(pts, [2]float64{s[i], float64(i+1) / float64(n)})
	}
	if pts[len(pts)-1][0] != s[n-1] || pts[len(pts)-1][1] != 1 {
		pts = append(pts, [2]float64{s[n-1], 1})
	}
	return pts
}

// counterRows joins the counter checks with the snapshots of counters.json: every counter the trace implies
// something for, then every other counter that moved.
func counterRows(checks []analyze.CounterCheck, cf *resultsdir.CountersFile) []CounterRow {
	snap := map[string]*resultsdir.HostCounters{}
	if cf != nil {
		snap["requester"], snap["responder"] = &cf.Requester, &cf.Responder
	}
	get := func(host, name string) (s, f *uint64) {
		h := snap[host]
		if h == nil {
			return nil, nil
		}
		if v, ok := h.Start[name]; ok {
			s = &v
		}
		if v, ok := h.Finish[name]; ok {
			f = &v
		}
		return s, f
	}
	var rows []CounterRow
	done := map[[2]string]bool{}
	for _, c := range checks {
		s, f := get(c.Host, c.Name)
		e := c.Expected
		rows = append(rows, CounterRow{Host: c.Host, Name: c.Name, Start: s, Finish: f, Delta: c.Actual, Expected: &e, OK: c.OK, Note: c.Note})
		done[[2]string{c.Host, c.Name}] = true
	}
	for _, host := range []string{"requester", "responder"} {
		h := snap[host]
		if h == nil {
			continue
		}
		var names []string
		for n := range h.Finish {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if done[[2]string{host, n}] {
				continue
			}
			s, f := get(host, n)
			if s == nil || f == nil || *s == *f {
				continue
			}
			d := int64(*f - *s)
			rows = append(rows, CounterRow{Host: host, Name: n, Start: s, Finish: f, Delta: &d, OK: true})
		}
	}
	return rows
}

// captureSummary is the packet summary of a plain capture as key/value lines.
func captureSummary(rep *summary.Report) []KV {
	b, err := json.Marshal(rep)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var kv []KV
	for _, k := range keys {
		v := string(m[k])
		if v == "null" || v == "{}" || v == "[]" {
			continue
		}
		if len(v) > 2000 {
			v = v[:2000] + "…"
		}
		kv = append(kv, KV{Key: k, Value: v})
	}
	return kv
}
