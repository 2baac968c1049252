package summary

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// defaultTopFlows is how many flows the text summary lists unless told otherwise.
const defaultTopFlows = 20

// WriteText writes the human summary: a header block (files, packets, time, rates), the ICRC verdict line,
// aligned tables (opcodes, ECN, DSCP, NAKs, flows by packets) and the health lines with [ok], [warn] and
// [PROBLEM]. It lists the Options.TopFlows busiest flows (default 20). Plain text, no colours.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	r.writeHeader(bw)
	r.writeTables(bw)
	r.writeFlows(bw, r.topFlows)
	r.writeHealth(bw)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}

func (r *Report) writeHeader(w *bufio.Writer) {
	var kv [][2]string
	for _, f := range r.Files {
		line := fmt.Sprintf("%s (%s, %d packets)", f.Path, f.Format, f.Packets)
		if f.Truncated != nil {
			line += fmt.Sprintf(" CUT SHORT at byte offset %d: the last packet is incomplete and not analyzed", f.Truncated.Offset)
		}
		kv = append(kv, [2]string{"file", line})
	}
	if len(r.Files) > 1 {
		kv = append(kv, [2]string{"merged", "by " + r.Order})
	}
	kv = append(kv, [2]string{"packets", fmt.Sprintf("%d (%d bytes on the wire, %d captured)", r.Packets, r.Bytes, r.CapBytes)})
	roceLine := fmt.Sprintf("%d: %d RoCEv2 (%d over IPv6), %d RoCEv1", r.RoCEPackets, r.RoCEv2, r.RoCEv2IPv6, r.RoCEv1)
	kv = append(kv, [2]string{"RoCE", roceLine})
	if nr := r.notRoCELine(); nr != "" {
		kv = append(kv, [2]string{"not RoCE", nr})
	}
	if len(r.LinkTypes) > 0 {
		var parts []string
		for _, lt := range r.LinkTypes {
			s := fmt.Sprintf("%s %d", lt.Name, lt.Packets)
			if !lt.Decoded {
				s += " (not decoded)"
			}
			parts = append(parts, s)
		}
		kv = append(kv, [2]string{"link types", strings.Join(parts, ", ")})
	}
	if r.FirstNs != 0 {
		kv = append(kv, [2]string{"time", fmt.Sprintf("%s to %s", fmtTime(r.FirstNs), fmtTime(r.LastNs))})
	}
	kv = append(kv, [2]string{"duration", fmtDuration(r.DurationS)})
	if r.DurationS > 0 {
		kv = append(kv, [2]string{"rate", fmt.Sprintf("%s packets/s, %s Gb/s", fmtRate(r.PacketsPerS),
			strconv.FormatFloat(r.Gbps, 'f', 3, 64))})
	}
	if len(r.VLANs) > 0 {
		var parts []string
		for _, v := range r.VLANs {
			parts = append(parts, fmt.Sprintf("%d: %d", v.Key, v.Count))
		}
		kv = append(kv, [2]string{"VLANs", strings.Join(parts, ", ") + fmt.Sprintf(" (untagged %d)", r.Untagged)})
	}
	if m := r.Mirror; m != nil {
		kv = append(kv, [2]string{"mirror", fmt.Sprintf("Lumina-tagged: events %s; seq %d..%d, %d gaps (%d missing)",
			sortedCounts(m.Events), m.FirstSeq, m.LastSeq, m.SeqGaps, m.SeqMissing)})
	}
	width := 0
	for _, e := range kv {
		width = max(width, len(e[0]))
	}
	fmt.Fprintln(w, "Capture summary")
	for _, e := range kv {
		fmt.Fprintf(w, "  %-*s  %s\n", width, e[0], e[1])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.ICRCLine())
}

// ICRCLine is the one-line ICRC verdict, e.g. "ICRC: 705 good, 3 BAD (0.4%), 0 not checkable (truncated)".
func (r *Report) ICRCLine() string {
	if !r.ICRC.Checked {
		return fmt.Sprintf("ICRC: not checked (%d RoCE packets)", r.RoCEPackets)
	}
	checked := r.ICRC.Good + r.ICRC.Bad
	bad := "0 bad"
	if r.ICRC.Bad > 0 {
		bad = fmt.Sprintf("%d BAD", r.ICRC.Bad)
	}
	frac := 0.0
	if checked > 0 {
		frac = float64(r.ICRC.Bad) / float64(checked)
	}
	return fmt.Sprintf("ICRC: %d good, %s (%s), %d not checkable (truncated)", r.ICRC.Good, bad, pct(frac),
		r.ICRC.NotCheckable)
}

func (r *Report) notRoCELine() string {
	nonRoCE := r.Packets - r.RoCEPackets
	if nonRoCE == 0 {
		return ""
	}
	var parts []string
	if r.NotDecoded > 0 {
		parts = append(parts, fmt.Sprintf("%d not Ethernet", r.NotDecoded))
	}
	keys := make([]string, 0, len(r.NotRoCE))
	for k := range r.NotRoCE {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(r.NotRoCE[b], r.NotRoCE[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", r.NotRoCE[k], k))
	}
	s := fmt.Sprintf("%d", nonRoCE)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if len(r.OtherEtherTypes) > 0 {
		s += " (EtherTypes " + sortedCounts(r.OtherEtherTypes) + ")"
	}
	return s
}

func (r *Report) writeTables(w *bufio.Writer) {
	if r.RoCEPackets == 0 {
		return
	}
	total := r.RoCEPackets
	fmt.Fprintln(w)
	t := newTable("opcode", "name", ">packets", ">%")
	for _, o := range r.Opcodes {
		t.row(fmt.Sprintf("0x%02x", o.Opcode), o.Name, itoa(o.Count), pctOf(o.Count, total))
	}
	t.write(w, "Opcodes")

	fmt.Fprintln(w)
	t = newTable("ECN", ">packets", ">%")
	for _, e := range []struct {
		name string
		n    int64
	}{{"not-ECT", r.ECN.NotECT}, {"ECT(0)", r.ECN.ECT0}, {"ECT(1)", r.ECN.ECT1}, {"CE", r.ECN.CE}} {
		t.row(e.name, itoa(e.n), pctOf(e.n, total))
	}
	t.write(w, "ECN (RoCE packets)")

	fmt.Fprintln(w)
	t = newTable(">DSCP", ">packets", ">%")
	for _, d := range r.DSCP {
		t.row(strconv.Itoa(d.Key), itoa(d.Count), pctOf(d.Count, total))
	}
	t.write(w, "DSCP (RoCE packets)")

	fmt.Fprintln(w)
	ratio := "n/a (no CNP)"
	if r.CEPerCNP != nil {
		ratio = strconv.FormatFloat(*r.CEPerCNP, 'f', 1, 64) + ":1"
	}
	fmt.Fprintf(w, "Congestion: %d CE-marked, %d CNPs, CE-to-CNP ratio %s\n", r.ECN.CE, r.CNPs, ratio)
	fmt.Fprintf(w, "ACKs: %d, of which NAKs %d and RNR NAKs %d\n", r.ACKs, sumMap(r.NAKs), r.RNRNAKs)
	if sumMap(r.NAKs) > 0 {
		t = newTable("NAK code", ">count")
		keys := make([]string, 0, len(r.NAKs))
		for k := range r.NAKs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if r.NAKs[k] > 0 {
				t.row(k, itoa(r.NAKs[k]))
			}
		}
		t.write(w, "")
	}
	fmt.Fprintf(w, "PSNs: %d retransmitted, %d gaps (%d PSNs missing)\n", r.Retransmitted, r.Gaps, r.MissingPSNs)
	pfc := fmt.Sprintf("Pause: %d PFC frames, %d 802.3x PAUSE frames", r.PFC.PFCFrames, r.PFC.PauseFrames)
	for _, p := range r.PFC.Priorities {
		pfc += fmt.Sprintf("; priority %d: %d pause, %d resume", p.Priority, p.Pause, p.Resume)
	}
	fmt.Fprintln(w, pfc)
}

func (r *Report) writeFlows(w *bufio.Writer, top int) {
	if len(r.Flows) == 0 {
		return
	}
	if top == 0 {
		top = defaultTopFlows
	}
	flows := slices.Clone(r.Flows)
	slices.SortStableFunc(flows, func(a, b Flow) int { return cmp.Compare(b.Packets, a.Packets) })
	n := len(flows)
	if top > 0 && n > top {
		n = top
	}
	fmt.Fprintln(w)
	t := newTable("src", "dst", ">dest QP", "transport", ">packets", ">bytes", ">first PSN", ">last PSN", ">retx", ">gaps", ">CE", ">CNPs")
	for _, f := range flows[:n] {
		t.row(f.Src, f.Dst, fmt.Sprintf("0x%06x", f.DestQP), f.Transport, itoa(f.Packets), itoa(f.Bytes),
			itoa(int64(f.FirstPSN)), itoa(int64(f.LastPSN)), itoa(f.Retransmitted), itoa(f.Gaps), itoa(f.CE), itoa(f.CNPs))
	}
	title := fmt.Sprintf("Flows (%d, by packets)", len(flows))
	t.write(w, title)
	if rest := len(flows) - n; rest > 0 {
		fmt.Fprintf(w, "  ... %d more\n", rest)
	}
}

func (r *Report) writeHealth(w *bufio.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Health")
	if len(r.Health) == 0 {
		fmt.Fprintln(w, "  (nothing to grade: no RoCE packets)")
	}
	for _, h := range r.Health {
		tag := "[ok]"
		switch h.Verdict {
		case VerdictWarn:
			tag = "[warn]"
		case VerdictProblem:
			tag = "[PROBLEM]"
		}
		fmt.Fprintf(w, "  %-9s %s\n", tag, h.Detail)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "  %-9s %s\n", "[note]", s)
	}
}

// table is a small aligned text table; a header starting with '>' marks a right-aligned column.
type table struct {
	head  []string
	right []bool
	rows  [][]string
}

func newTable(cols ...string) *table {
	t := &table{}
	for _, c := range cols {
		r := strings.HasPrefix(c, ">")
		t.head = append(t.head, strings.TrimPrefix(c, ">"))
		t.right = append(t.right, r)
	}
	return t
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w *bufio.Writer, title string) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = len(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	if title != "" {
		fmt.Fprintln(w, title)
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("  ")
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len(c))
			if t.right[i] {
				b.WriteString(pad + c)
			} else if i < len(cells)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.head)
	for _, r := range t.rows {
		line(r)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func pctOf(n, total int64) string {
	if total == 0 {
		return "-"
	}
	return pct(float64(n) / float64(total))
}

func sumMap(m map[string]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// sortedCounts renders a map as "a 1, b 2" in key order.
func sortedCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func fmtTime(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000000000 UTC")
}

func fmtDuration(s float64) string {
	switch {
	case s == 0:
		return "0 s"
	case s < 1e-3:
		return strconv.FormatFloat(s*1e6, 'f', 3, 64) + " us"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'f', 3, 64) + " ms"
	}
	return strconv.FormatFloat(s, 'f', 6, 64) + " s"
}

func fmtRate(r float64) string {
	switch {
	case r >= 1e6:
		return strconv.FormatFloat(r/1e6, 'f', 3, 64) + " M"
	case r >= 1e3:
		return strconv.FormatFloat(r/1e3, 'f', 3, 64) + " k"
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}
