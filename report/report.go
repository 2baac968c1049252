// Package report renders analysis results for people: the summary `lumina run` and `lumina analyze` print.
// JSON output is the analysis documents themselves (packages verdict and analyze/summary define them).
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
)

// CaptureDoc is `lumina analyze CAPTURE` output: the packet summary plus the scenario-free checkers.
type CaptureDoc struct {
	*summary.Report
	Checks          []analyze.Check          `json:"checks"`
	Retransmissions []analyze.Retransmission `json:"retransmissions"`
	Timeouts        []analyze.MessageRetries `json:"timeouts"`
	CNPAnalysis     *analyze.CNPResult       `json:"cnp_analysis"`
	Connections     []analyze.Conn           `json:"connections"`
	Skipped         []analyze.Skipped        `json:"skipped"`
}

// Set fills the checker part from an analysis.
func (d *CaptureDoc) Set(a *analyze.Analysis) {
	d.Checks, d.Retransmissions, d.Timeouts = a.Checks, a.Retransmissions, a.Timeouts
	d.CNPAnalysis = &a.CNP
	d.Connections, d.Skipped = a.Connections, a.Skipped
}

// ChecksOK reports whether every checker passed.
func (d *CaptureDoc) ChecksOK() bool {
	for _, c := range d.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Capture prints the capture summary followed by the checkers' verdicts.
func Capture(w io.Writer, d *CaptureDoc) {
	d.Report.WriteText(w)
	if in := d.Integrity; in != nil {
		fmt.Fprintln(w)
		counted := in.Counted()
		if in.OK {
			fmt.Fprintf(w, "integrity  ok (%s)\n", counted)
		} else {
			fmt.Fprintf(w, "integrity  INVALID TRACE (%s): the checkers were not run\n", counted)
		}
		integrityConditions(w, in.Checks)
		if in.Hint != "" {
			fmt.Fprintf(w, "  hint: %s\n", in.Hint)
		}
	}
	if d.CNPAnalysis == nil {
		return
	}
	fmt.Fprintln(w)
	checks(w, d.Checks, 5)
	flowAccount(w, d)
	retransmissions(w, d.Retransmissions, 20)
}

// flowAccount says, in flows of the table, what the checkers judged and what not and why, so that the counts
// add up to the flows listed: a judged connection covers its request flow and its response flow.
func flowAccount(w io.Writer, d *CaptureDoc) {
	if d.Report == nil || len(d.Flows) == 0 {
		skipped(w, d.Skipped)
		return
	}
	key := func(src, dst string, qp uint32) string { return fmt.Sprintf("%s > %s qp 0x%06x", src, dst, qp) }
	judged := map[string]bool{}
	conns := 0
	byQP := make(map[int][]int, len(d.Connections)) // a check's connections, in order: linear in connections
	for i, cn := range d.Connections {
		byQP[cn.Index+1] = append(byQP[cn.Index+1], i) // the capture analysis numbers connections from 1
	}
	for _, c := range d.Checks {
		switch c.Analyzer {
		case "gbn", "gbn-read", "irn":
		default:
			continue
		}
		for _, i := range byQP[c.QP] {
			cn := d.Connections[i]
			{
				conns++
				judged[key(cn.ReqIP.String(), cn.RespIP.String(), cn.RespQPN)] = true
				judged[key(cn.RespIP.String(), cn.ReqIP.String(), cn.ReqQPN)] = true
			}
		}
	}
	why := map[string]string{}
	for _, s := range d.Skipped {
		if _, ok := why[s.Flow]; !ok {
			why[s.Flow] = s.Reason
		}
	}
	for _, cn := range d.Connections { // a skipped connection's responses are skipped for the same reason
		if r, ok := why[key(cn.ReqIP.String(), cn.RespIP.String(), cn.RespQPN)]; ok {
			if k := key(cn.RespIP.String(), cn.ReqIP.String(), cn.ReqQPN); why[k] == "" {
				why[k] = r
			}
		}
	}
	covered := 0
	reasons := map[string]int{}
	for _, f := range d.Flows {
		k := key(f.Src, f.Dst, f.DestQP)
		if judged[k] {
			covered++
			continue
		}
		r, ok := why[k]
		if !ok {
			r = "no connection the checkers could pair it with"
		}
		reasons[r]++
	}
	fmt.Fprintf(w, "flows      %d: %d in the %d judged connection(s), %d not judged", len(d.Flows), covered, conns, len(d.Flows)-covered)
	if len(reasons) > 0 {
		fmt.Fprint(w, " (")
		for i, k := range sortedKeys(reasons) {
			if i > 0 {
				fmt.Fprint(w, "; ")
			}
			fmt.Fprintf(w, "%s: %d", k, reasons[k])
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
}

// skipped says what was not judged, and why.
func skipped(w io.Writer, list []analyze.Skipped) {
	if len(list) == 0 {
		return
	}
	fmt.Fprintf(w, "  not judged (")
	reasons := map[string]int{}
	for _, s := range list {
		reasons[s.Reason]++
	}
	keys := sortedKeys(reasons)
	for i, k := range keys {
		if i > 0 {
			fmt.Fprint(w, "; ")
		}
		fmt.Fprintf(w, "%s: %d", k, reasons[k])
	}
	fmt.Fprintln(w, ")")
}

// Run prints the summary of a test run (or of a re-analysis of its results directory).
func Run(w io.Writer, o *verdict.Outcome) {
	sc, doc := o.Scenario, o.Doc
	fmt.Fprintf(w, "scenario   %s  (testbed %s, seed %d, index-base %d)\n", sc.Path, sc.Testbed, sc.Seed, sc.IndexBase)
	fmt.Fprintf(w, "hosts      requester %s %s  ->  responder %s %s\n", sc.Requester.NIC.Type,
		prefixes(sc.Requester.NIC.IPList), sc.Responder.NIC.Type, prefixes(sc.Responder.NIC.IPList))
	if wl := sc.Workload; wl != nil {
		fmt.Fprintf(w, "workload   %s %s, %d QP(s), MTU %d, batch %d, %d SGE(s), depth %d, %d MR(s) of %d B, sizes %v, %s, memory %s\n",
			strings.ToUpper(wl.QPType), wl.Opcode, wl.NumQPs, wl.MTU, wl.WQEBatch, wl.SGE, wl.WQDepth, wl.NumMRs, wl.MRSize,
			wl.MsgSizes, wl.Direction, wl.Memory)
	} else {
		t := sc.Traffic
		fmt.Fprintf(w, "traffic    %s, %d connection(s) x %d message(s) x %d B, MTU %d (%d packets/message)\n",
			t.Verb, t.NumConnections, t.NumMsgsPerQP, t.MessageSize, t.MTU, t.PacketsPerMessage())
	}
	if len(o.Entries) > 0 {
		fmt.Fprintf(w, "events     %d table entr%s installed (see switch.json for each entry's hits)\n",
			len(o.Entries), plural(len(o.Entries), "y", "ies"))
	}
	fmt.Fprintf(w, "results    %s\n\n", o.Dir)

	if doc.Workload != nil {
		workload(w, doc) // no trace: Collie's monitor on the micro-architecture model
		expectations(w, doc)
		fmt.Fprintf(w, "\n%s\n", strings.ToUpper(doc.Verdict))
		return
	}
	if judged(w, doc.Integrity, doc.Analysis) {
		traffic(w, o, doc.Analysis)
	}
	expectations(w, doc)
	fmt.Fprintf(w, "\n%s\n", strings.ToUpper(doc.Verdict))
}

func expectations(w io.Writer, doc *verdict.Document) {
	if len(doc.Expectations) > 0 {
		pass := 0
		for _, e := range doc.Expectations {
			if e.OK {
				pass++
			}
		}
		fmt.Fprintf(w, "\nexpect     %d/%d passed\n", pass, len(doc.Expectations))
		for _, e := range doc.Expectations {
			mark := "[ok]  "
			if !e.OK {
				mark = "[FAIL]"
			}
			fmt.Fprintf(w, "  %s %s", mark, e.Expect)
			if e.Detail != "" {
				fmt.Fprintf(w, "  (%s)", e.Detail)
			}
			fmt.Fprintln(w)
		}
	}
}

// integrityConditions lists every integrity condition with its verdict.
func integrityConditions(w io.Writer, cs []trace.CheckResult) {
	for _, c := range cs {
		tag := "[ok]"
		switch {
		case c.Skipped:
			tag = "[n/a]"
		case !c.OK:
			tag = "[FAIL]"
		}
		fmt.Fprintf(w, "  %-6s %s: %s\n", tag, c.Name, c.Detail)
	}
}

func checks(w io.Writer, cs []analyze.Check, maxViolations int) {
	if len(cs) == 0 {
		fmt.Fprintln(w, "checks     none applied")
		return
	}
	type agg struct{ pass, total int }
	by := map[string]*agg{}
	for _, c := range cs {
		a := by[c.Analyzer]
		if a == nil {
			a = &agg{}
			by[c.Analyzer] = a
		}
		a.total++
		if c.OK {
			a.pass++
		}
	}
	var parts []string
	for _, k := range sortedKeys(by) {
		parts = append(parts, fmt.Sprintf("%s %d/%d", k, by[k].pass, by[k].total))
	}
	fmt.Fprintf(w, "checks     %s connection(s) pass\n", strings.Join(parts, ", "))
	shown := 0
	for _, c := range cs {
		if c.OK {
			continue
		}
		fmt.Fprintf(w, "  [FAIL] %s qp %d: %d violation(s)\n", c.Analyzer, c.QP, c.ViolationCount)
		for _, v := range c.Violations {
			if shown >= maxViolations {
				break
			}
			if v.Packet < 0 { // a verdict on the whole run, not on a packet
				fmt.Fprintf(w, "         %s\n", v.Message)
			} else {
				fmt.Fprintf(w, "         packet %d: %s\n", v.Packet, v.Message)
			}
			shown++
		}
	}
}

// workload prints a workload run: Collie's monitor on the NIC micro-architecture model.
func workload(w io.Writer, doc *verdict.Document) {
	wl := doc.Workload
	fmt.Fprintf(w, "workload   %.0f us measured: goodput %.1f Gb/s, %.2f Mpps (limits %.0f Gb/s, %.1f Mpps: %.0f%%), pause %.3f%%\n",
		wl.WindowUs, wl.GoodputGbps, wl.GoodputMpps, wl.LimitGbps, wl.LimitMpps, 100*wl.LimitShare, 100*wl.PauseRatio)
	if wl.InFlightGbps > 0 {
		var bound []string
		if wl.LimitGbps >= wl.InFlightGbps {
			bound = append(bound, fmt.Sprintf("%.1f Gb/s", wl.InFlightGbps))
		}
		if wl.LimitMpps >= wl.InFlightMpps {
			bound = append(bound, fmt.Sprintf("%.2f Mpps", wl.InFlightMpps))
		}
		if len(bound) > 0 {
			fmt.Fprintf(w, "           limited by what the workload keeps in flight (its QPs and queue depth): %s\n", strings.Join(bound, ", "))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "HOST\tNIC\tTX Gb/s\tRX Gb/s\tTX Mpps\tRX Mpps\tPAUSE %\t")
	for _, h := range wl.Hosts {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t%.3f\t\n", h.Host, h.NIC, h.TxGbps, h.RxGbps, h.TxMpps, h.RxMpps,
			100*h.PauseRatio)
	}
	tw.Flush()
	symptom := "none: no pause, throughput at a limit"
	if wl.Symptom != "none" {
		symptom = strings.ToUpper(wl.Symptom)
	}
	fmt.Fprintf(w, "symptom    %s\n", symptom)
	if wl.Published != nil {
		if len(*wl.Published) == 0 {
			fmt.Fprintln(w, "published  none: no anomaly Collie (NSDI 2022) publishes for this NIC holds at this workload")
		}
		for _, a := range *wl.Published {
			note := ""
			if a.Symptom != wl.Symptom {
				note = fmt.Sprintf("; this run shows %s", wl.Symptom)
			}
			fmt.Fprintf(w, "published  #%d (Collie, NSDI 2022: %s%s): %s\n", a.ID, a.Symptom, note, a.Title)
		}
	}
	if doc.Analysis != nil {
		checks(w, doc.Analysis.Checks, 5)
	}
	fmt.Fprintln(w, "counters   per second in workload.json (diagnostic: cache misses, PCIe back-pressure, staging refetches, RX buffer)")
}

func retransmissions(w io.Writer, rs []analyze.Retransmission, max int) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nretransmissions (%d lost packet%s)\n", len(rs), plural(len(rs), "", "s"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QP\tPSN\tMSG\tITER\tEVENT\tTRIGGER\tNEXT-DELIV us\tNACK-GEN us\tNACK-REACT us\tTOTAL us\t")
	for i, r := range rs {
		if i == max {
			break
		}
		trig := "-"
		if r.Trigger != nil {
			trig = *r.Trigger
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.QP, r.PSN, r.Msg, r.Iter, r.Event, trig,
			fnum(r.NextDeliveredUs), fnum(r.NACKGenerationUs), fnum(r.NACKReactionUs), fnum(r.LatencyUs))
	}
	tw.Flush()
	if len(rs) > max {
		fmt.Fprintf(w, "  ... %d more (analysis.json has them all)\n", len(rs)-max)
	}
}

func cnp(w io.Writer, c *analyze.CNPResult) {
	if c.ECNMarked == 0 && c.CNPs == 0 {
		return
	}
	interval := "-"
	if c.MinIntervalUs != nil {
		interval = fmt.Sprintf("%.1f us", *c.MinIntervalUs)
	}
	expected := "unknown"
	if c.Expected != nil {
		expected = fmt.Sprint(*c.Expected)
	}
	fmt.Fprintf(w, "\ncnp        %d CE-marked, %d CNP(s) (%s expected), %d NAK-triggered, scope inferred: %s, min interval %s\n",
		c.ECNMarked, c.CNPs, expected, c.NAKTriggered, c.ScopeInferred, interval)
}

func counters(w io.Writer, cs []analyze.CounterCheck) {
	if len(cs) == 0 {
		return
	}
	ok := 0
	for _, c := range cs {
		if c.OK {
			ok++
		}
	}
	fmt.Fprintf(w, "\ncounters   %d/%d read what the trace implies\n", ok, len(cs))
	for _, c := range cs {
		if !c.OK {
			fmt.Fprintf(w, "  [FAIL] %s %s: reads %s, the trace implies %d", c.Host, c.Name, inum(c.Actual), c.Expected)
			if c.Note != "" {
				fmt.Fprintf(w, " (%s)", c.Note)
			}
			fmt.Fprintln(w)
		}
	}
}

func traffic(w io.Writer, o *verdict.Outcome, a *analyze.Analysis) {
	if len(o.Traffic) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntraffic")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QP\tMSGS\tMCT avg us\tMCT max us\tGOODPUT Gb/s\tRETX\tSTATUS\t")
	more := 0
	for i, t := range o.Traffic {
		if i == 16 && len(o.Traffic) > 20 {
			more = len(o.Traffic) - 16
			break
		}
		avg, mx := 0.0, 0.0
		for _, m := range t.MCTUs {
			avg += m
			mx = max(mx, m)
		}
		if len(t.MCTUs) > 0 {
			avg /= float64(len(t.MCTUs))
		}
		fmt.Fprintf(tw, "%d\t%d/%d\t%.1f\t%.1f\t%.2f\t%d\t%s\t\n", t.QP, t.Completed, t.Posted, avg, mx,
			t.GoodputGbps, t.Retransmissions, t.Status)
	}
	tw.Flush()
	if more > 0 {
		fmt.Fprintf(w, "  ... %d more connections (traffic.json has them all)\n", more)
	}
	if nn := a.NoisyNeighbor; nn != nil && nn.Flagged {
		fmt.Fprintf(w, "  [PROBLEM] noisy neighbor: innocent connections' median MCT %.1f us is %.0fx the baseline %.1f us\n",
			nn.InnocentMedianMCTUs, nn.Ratio, nn.BaselineUs)
	}
	if e := a.ETS; e != nil {
		verdict := "work-conserving"
		if !e.WorkConserving {
			verdict = "NOT work-conserving"
		}
		fmt.Fprintf(w, "  ets: qp %d slowed to %.1f Gb/s, qp %d at %.1f Gb/s (guarantee %.1f Gb/s): %s\n",
			e.SlowedQP, e.SlowedGbps, e.OtherQP, e.OtherGbps, e.GuaranteeGbps, verdict)
	}
}

func fnum(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *p)
}

func inum(p *int64) string {
	if p == nil {
		return "not exposed"
	}
	return fmt.Sprint(*p)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func prefixes[T fmt.Stringer](ps []T) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "(" + strings.Join(s, ", ") + ")"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// judged prints the integrity verdict and its conditions and, when the trace passed it, the analysis a results
// directory and a reference repetition share; it tells whether the analysis was printed.
func judged(w io.Writer, integ trace.Integrity, a *analyze.Analysis) bool {
	ok := 0
	for _, c := range integ.Checks {
		if c.OK {
			ok++
		}
	}
	if integ.OK {
		fmt.Fprintf(w, "integrity  ok (%d/%d checks)\n", ok, len(integ.Checks))
	} else {
		fmt.Fprintf(w, "integrity  INVALID TEST (%d/%d checks pass): nothing was analyzed\n", ok, len(integ.Checks))
	}
	integrityConditions(w, integ.Checks)
	if a == nil || !integ.OK {
		return false
	}
	fmt.Fprintf(w, "trace      %d packets (%d RoCE)\n", a.Packets, a.RoCEPackets)
	checks(w, a.Checks, 5)
	skipped(w, a.Skipped)
	retransmissions(w, a.Retransmissions, 20)
	cnp(w, &a.CNP)
	counters(w, a.Counters)
	return true
}
