package htmlreport

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rundiff"
	"github.com/lumina-go/lumina/verdict"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden report data in testdata from the current output")

// The embedded plotting library is the one assets/README.md records.
func TestEmbeddedEChartsIsThePinnedBuild(t *testing.T) {
	sum := sha256.Sum256([]byte(echartsJS))
	const want = "b66b25aeb4df84e33199dc21694014d336d222cbd9deb0e5a7c14bd6aa0d0fd0"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("assets/echarts.min.js has sha256 %s, assets/README.md records %s", got, want)
	}
	readme, err := os.ReadFile("assets/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), want) || !strings.Contains(string(readme), "6.1.0") {
		t.Error("assets/README.md does not record the embedded build's version and hash")
	}
	for _, js := range []string{echartsJS, reportJS} {
		if strings.Contains(strings.ToLower(js), "</script") {
			t.Error("an embedded script contains </script: the page would break")
		}
	}
}

func load(t *testing.T, args ...string) *Page {
	t.Helper()
	p, err := Load(args)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// golden compares the page's data with testdata/NAME.golden.json (indented), or rewrites it.
func golden(t *testing.T, name string, p *Page) {
	t.Helper()
	data, err := DataJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, data, "", " "); err != nil {
		t.Fatal(err)
	}
	ind.WriteByte('\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *rewrite {
		if err := os.WriteFile(path, ind.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./htmlreport -rewrite writes it)", err)
	}
	if !bytes.Equal(ind.Bytes(), want) {
		t.Errorf("the report data of %s differs from %s (go test ./htmlreport -rewrite, then review the diff)", name, path)
	}
}

func TestGoldenData(t *testing.T) {
	golden(t, "listing2", load(t, "testdata/listing2"))
	golden(t, "cnp-scope", load(t, "testdata/cnp-scope"))
	golden(t, "capture", load(t, "testdata/listing2/trace.pcapng"))
	golden(t, "search", load(t, "testdata/search"))
	golden(t, "compare", load(t, "testdata/listing2", "testdata/cnp-scope"))
}

func u32col(t *testing.T, s string) []uint32 {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return v
}

func f64col(t *testing.T, s string) []float64 {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

// The listing2 scenario (examples/listing2.yaml) drops the 5th packet of QP 2's first message twice (iter 1 and
// 2) and ECN-marks one packet of QP 1: the plots must carry exactly those events, and the packets the analyzers
// name.
func TestListing2TraceColumns(t *testing.T) {
	p := load(t, "testdata/listing2")
	r := p.Runs[0]
	if r.Verdict != "pass" || r.Trace == nil || len(r.Trace.Conns) != 2 {
		t.Fatalf("verdict %q, trace %v", r.Verdict, r.Trace)
	}
	total := 0
	for _, c := range r.Trace.Conns {
		n := 0
		for k := 0; k < numKinds; k++ {
			n += c.Counts[k]
		}
		if n != c.Packets.N {
			t.Errorf("QP %d: series counts %v sum to %d, columns hold %d", c.QP, c.Counts, n, c.Packets.N)
		}
		total += n
		ts := f64col(t, c.Packets.T)
		for i := 1; i < len(ts); i++ {
			if ts[i] < ts[i-1] {
				t.Fatalf("QP %d: row %d is earlier than row %d", c.QP, i, i-1)
			}
		}
	}
	if total+r.Trace.Unmatched != r.Trace.Packets || r.Trace.Packets != 254 {
		t.Errorf("%d packets plotted + %d unmatched, trace has %d (254)", total, r.Trace.Unmatched, r.Trace.Packets)
	}
	q1, q2 := r.Trace.Conns[0], r.Trace.Conns[1]
	if q2.Counts[numKinds] != 2 || q1.Counts[numKinds] != 1 {
		t.Errorf("injected events: QP1 %d (want 1 ECN mark), QP2 %d (want 2 drops)", q1.Counts[numKinds], q2.Counts[numKinds])
	}
	if q2.Counts[KindNAK] < 1 || q2.Counts[KindRetx] < 2 || q1.Counts[KindRetx] != 0 {
		t.Errorf("QP2 NAKs %d, retransmitted %d; QP1 retransmitted %d", q2.Counts[KindNAK], q2.Counts[KindRetx], q1.Counts[KindRetx])
	}
	if q1.Counts[KindCNP] != 1 || r.Trace.CNPCounts[0] != 1 || r.Trace.CNPCounts[1] != 1 {
		t.Errorf("CNPs on QP1 %d, CNP timeline %v; want one ECN mark answered by one CNP", q1.Counts[KindCNP], r.Trace.CNPCounts)
	}
	// Every lost packet the analyzers name is in QP 2's columns, as an injected drop.
	pk, ev := u32col(t, q2.Packets.Pkt), q2.Packets.Ev
	evs, _ := base64.StdEncoding.DecodeString(ev)
	for _, x := range r.Retransmissions {
		found := false
		for i, v := range pk {
			if int(v) == x.Packet {
				found = true
				if evs[i] != 1 {
					t.Errorf("lost packet %d has event %d in the columns, want 1 (drop)", x.Packet, evs[i])
				}
			}
		}
		if !found {
			t.Errorf("lost packet %d is not in QP 2's columns", x.Packet)
		}
	}
	if len(r.Retransmissions) != 2 || len(r.Positions) != 1 || len(r.MCT) != 2 {
		t.Errorf("%d retransmissions, %d position rows, %d MCT curves; want 2, 1, 2", len(r.Retransmissions), len(r.Positions), len(r.MCT))
	}
}

// Counters: every counter the trace implies something for carries its snapshots, and the delta is finish-start.
func TestCounterRowsJoinSnapshots(t *testing.T) {
	r := load(t, "testdata/listing2").Runs[0]
	if len(r.Counters) == 0 {
		t.Fatal("no counter rows")
	}
	checked := 0
	for _, c := range r.Counters {
		if c.Start != nil && c.Finish != nil && c.Delta != nil {
			if int64(*c.Finish-*c.Start) != *c.Delta {
				t.Errorf("%s %s: start %d finish %d delta %d", c.Host, c.Name, *c.Start, *c.Finish, *c.Delta)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no counter row has start, finish and delta")
	}
}

// The metric table of two runs is lumina diff's comparison of them, row for row (no second computation of
// the metrics beside rundiff.Extract): each row's values, tolerance, direction and status, and diff's notes.
func TestCompareIsTheDiff(t *testing.T) {
	for _, pair := range [][2]string{{"testdata/listing2", "testdata/cnp-scope"}, {"testdata/cnp-scope", "testdata/listing2"}, {"testdata/listing2", "testdata/listing2"}} {
		p := load(t, pair[0], pair[1])
		ra, err := rundiff.LoadDir(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		rb, err := rundiff.LoadDir(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		res := rundiff.Compare(ra, rb, nil)
		if len(p.Runs) != 2 || len(p.Compare) != len(res.Rows)+1 {
			t.Fatalf("%v: %d runs, %d rows; want 2 runs and the verdict + %d rows of lumina diff", pair, len(p.Runs), len(p.Compare), len(res.Rows))
		}
		if v := p.Compare[0]; v.Name != "verdict" || v.AText != ra.Verdict || v.BText != rb.Verdict || v.Moved != res.VerdictChanged || v.Status != res.VerdictStatus() {
			t.Errorf("%v: verdict row %+v", pair, v)
		}
		for i, r := range res.Rows {
			m := p.Compare[i+1]
			if m.Name != r.Metric || m.Unit != r.Unit || !samePtr(m.A, r.Old) || !samePtr(m.B, r.New) || m.Moved != r.Moved ||
				m.Tolerance != r.Tolerance.String() || m.Status != r.Status || m.Worse != string(r.Worse) {
				t.Errorf("%v: row %d is %+v; lumina diff's is %+v", pair, i+1, m, r)
			}
		}
		var text bytes.Buffer
		rundiff.WriteText(&text, res)
		for _, n := range p.CompareNotes {
			if !strings.Contains(text.String(), "\n"+n+"\n") {
				t.Errorf("%v: note %q is not a line of lumina diff's text:\n%s", pair, n, text.String())
			}
		}
		if len(p.CompareNotes) == 0 {
			t.Errorf("%v: no notes (want at least the regression summary)", pair)
		}
		moved := map[string]bool{}
		for _, m := range p.Compare {
			moved[m.Name] = m.Moved
		}
		if pair[0] == pair[1] {
			for n, mv := range moved {
				if mv {
					t.Errorf("a run against itself: %s moved", n)
				}
			}
			continue
		}
		// listing2 retransmits two packets, cnp-scope none; their packet counts differ.
		for _, n := range []string{"retransmissions", "packets", "ecn_marked"} {
			if !moved[n] {
				t.Errorf("%v: %s not moved (%v)", pair, n, moved)
			}
		}
	}
}

func samePtr(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// A run that is not a results directory (a capture) cannot be compared: a clear error, no page.
func TestCompareNeedsResultsDirs(t *testing.T) {
	a := load(t, "testdata/listing2").Runs[0]
	c := load(t, "testdata/listing2/trace.pcapng").Runs[0]
	if _, err := ComparePage(a, c); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "trace.pcapng") {
		t.Errorf("compare with a capture: %v; want bad input naming it", err)
	}
}

// The same input gives the same bytes: the page holds no time or map order of its own.
func TestDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, load(t, "testdata/listing2")); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, load(t, "testdata/listing2")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two reports of the same directory differ")
	}
	s := a.String()
	if strings.Count(s, `<script type="application/json" id="lumina-data">`) != 1 || !strings.Contains(s, "Apache") {
		t.Error("the page lacks its data element or the embedded library")
	}
	for _, bad := range []string{"http://", "https://cdn", "src=\"http"} {
		if strings.Contains(s, "<script src=") || strings.Contains(s, "<link ") {
			t.Errorf("the page loads something from outside (%s)", bad)
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	incomplete := filepath.Join(dir, "incomplete")
	if err := os.MkdirAll(incomplete, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(incomplete, resultsdir.FileIncomplete), []byte("interrupted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unjudged := filepath.Join(dir, "unjudged")
	if err := os.MkdirAll(unjudged, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unjudged, resultsdir.FileScenario), []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{filepath.Join(dir, "missing")}, "no such file or directory"},
		{[]string{incomplete}, "incomplete"},
		{[]string{unjudged}, "no analysis.json"},
		{[]string{dir}, "not a results directory"},
		{[]string{text}, "not a pcap or pcapng capture"},
		{[]string{"testdata/listing2", text}, "mixes directories and files"},
		{[]string{"testdata/listing2", "testdata/listing2", "testdata/listing2"}, "3 directories"},
	} {
		_, err := Load(c.args)
		if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v) = %v; want a bad-input error saying %q", c.args, err, c.want)
		}
	}
}

// An invalid run is not analyzed: its plots come from the testbed's connection record, with PSNs from each
// connection's initial PSN, and the failed integrity condition is there.
func TestInvalidRunStillPlotted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"analysis.json", "connections.json", "counters.json", "scenario.yaml", "switch.json", "trace.pcapng", "traffic.json"} {
		b, err := os.ReadFile(filepath.Join("testdata/listing2", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "counters.json" {
			b = bytes.Replace(b, []byte(`"mirrored": 254`), []byte(`"mirrored": 999`), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if o, err := verdict.Reanalyze(dir); err != nil || o.Doc.Verdict != verdict.Invalid {
		t.Fatalf("re-judging with 999 mirrored: %v", err)
	}
	r := load(t, dir).Runs[0]
	if r.Verdict != verdict.Invalid || r.Integrity == nil || r.Integrity.OK || len(r.Trace.Conns) != 2 {
		t.Fatalf("verdict %s, integrity %+v, %d connections", r.Verdict, r.Integrity, len(r.Trace.Conns))
	}
	for _, c := range r.Trace.Conns {
		for _, y := range u32col(t, c.Packets.Y) {
			if y >= 100 { // 100 packets per connection
				t.Fatalf("QP %d: PSN offset %d; the offsets must count from the connection's initial PSN", c.QP, y)
			}
		}
	}
}

// The CNP timeline shows what the CNP analyzer counted: every CE-marked data packet and every CNP.
func TestCNPTimelineMatchesAnalyzer(t *testing.T) {
	// hexvec_cx4lx_cnp: one CNP and no connection to learn; it is on the timeline all the same, by its QPN.
	for _, in := range []string{"testdata/listing2", "testdata/cnp-scope", "testdata/cnp-scope/trace.pcapng", "../testdata/real-captures/hexvec_cx4lx_cnp_from_scapy_test.pcap"} {
		r := load(t, in).Runs[0]
		if r.CNP == nil || r.Trace.CNPCounts[0] != r.CNP.ECNMarked || r.Trace.CNPCounts[1]+r.Trace.CNPCounts[2] != r.CNP.CNPs || r.CNP.CNPs == 0 || r.Trace.CNP.N != r.CNP.ECNMarked+r.CNP.CNPs {
			t.Errorf("%s: timeline has %v (CE marks, CNPs), the analyzer counted %+v", in, r.Trace.CNPCounts, r.CNP)
		}
	}
}

func i32col(t *testing.T, s string) []int32 {
	v := u32col(t, s)
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// Two connections on one QP pair (each side a requester of its own): each keeps its own packets, attributed
// by opcode as the analyzers do (requests to the one whose responder is the destination, ACKs, READ responses
// and CNPs to the one whose requester is), and PSN offsets stay small (from the right initial PSN).
func TestSharedQPPairAttribution(t *testing.T) {
	r := load(t, "../testdata/real-captures/oferby-proxy_roce.pcap").Runs[0]
	if len(r.Trace.Conns) != 2 {
		t.Fatalf("%d connections, want 2", len(r.Trace.Conns))
	}
	// The capture: .4 sends 1 message (1 packet, 1 ACK); .6 sends 67 packets, ACKed 36 times.
	q1, q2 := r.Trace.Conns[0].Counts, r.Trace.Conns[1].Counts
	if q1[KindData] != 1 || q1[KindACK] != 1 || q2[KindData] != 67 || q2[KindACK] != 36 {
		t.Errorf("QP1 %v, QP2 %v; want 1 data 1 ACK, 67 data 36 ACKs", q1, q2)
	}
	for _, f := range []string{"oferby-proxy_roce.pcap", "magnate3_cx_nvmeof_rdma_discover.pcap", "magnate3_cx_rocev2_send_multiqp.pcap"} {
		r := load(t, filepath.Join("..", "testdata", "real-captures", f)).Runs[0]
		for _, c := range r.Trace.Conns {
			if c.Counts[KindRetx] != 0 {
				t.Errorf("%s QP %d: %d retransmitted, the capture has none", f, c.QP, c.Counts[KindRetx])
			}
			for _, y := range i32col(t, c.Packets.Y) {
				if y < -1000 || y > 1000 {
					t.Errorf("%s QP %d: PSN offset %d; the capture's connections span a few hundred PSNs", f, c.QP, y)
					break
				}
			}
		}
	}
}

// The search page's lowest-so-far line is the search's own best: the mfs/verify/reduce probes (whose energies
// can be lower, testdata/search's mfs evaluation 2 is) do not count, as search/engine.go excludes them.
func TestSearchBestExcludesProbes(t *testing.T) {
	p := load(t, "testdata/search")
	probe := map[float64]bool{}
	best := math.Inf(1)
	for _, e := range p.Search.Evals {
		for _, pt := range e.Points {
			if e.Kind == "mfs" || e.Kind == "verify" || e.Kind == "reduce" {
				probe[pt[0]] = true
			} else {
				best = min(best, pt[1])
			}
		}
	}
	if len(probe) == 0 || len(p.Search.Best) == 0 {
		t.Fatalf("testdata/search has %d probe evaluations, best line %v", len(probe), p.Search.Best)
	}
	for i, pt := range p.Search.Best {
		if probe[pt[0]] && i != len(p.Search.Best)-1 { // the last point only holds the line to the last evaluation
			t.Errorf("the lowest-so-far line steps at evaluation %v, a probe", pt[0])
		}
	}
	if got := p.Search.Best[len(p.Search.Best)-1][1]; got != best {
		t.Errorf("lowest so far ends at %v, the lowest search energy is %v", got, best)
	}
}

// A re-issued READ request (from the dropped response's PSN, inside the PSNs the first request covered) is a
// retransmission, not new data: testdata/read-reissue has two READs, each re-issued once.
func TestReadReissueIsRetransmission(t *testing.T) {
	r := load(t, "testdata/read-reissue").Runs[0]
	if len(r.Trace.Conns) != 1 || r.RetransmissionsTotal != 2 {
		t.Fatalf("%d connections, %d retransmissions; want 1, 2", len(r.Trace.Conns), r.RetransmissionsTotal)
	}
	c := r.Trace.Conns[0]
	ops, _ := base64.StdEncoding.DecodeString(c.Packets.Op)
	kinds, _ := base64.StdEncoding.DecodeString(c.Packets.Kind)
	per := map[int]int{}
	for i, op := range ops {
		if op == 12 { // RC RDMA READ Request
			per[int(kinds[i])]++
		}
	}
	if per[KindData] != 2 || per[KindRetx] != 2 {
		t.Errorf("READ requests: %d data, %d retransmitted; want 2 and 2 (the re-issues)", per[KindData], per[KindRetx])
	}
}

// The latency by drop position keeps NACK-triggered and timeout-triggered retransmissions apart: listing2's
// position 5 recovered once by NAK (5.069 µs) and once by timeout (536870.912 µs), whose single mean was
// 268 ms.
func TestPositionSplitByTrigger(t *testing.T) {
	r := load(t, "testdata/listing2").Runs[0]
	if len(r.PositionSplit) != len(r.Positions) || len(r.Positions) != 1 {
		t.Fatalf("%d split rows for %d positions", len(r.PositionSplit), len(r.Positions))
	}
	s := r.PositionSplit[0]
	if s.NACKCount != 1 || s.TimeoutCount != 1 || s.NACKLatencyUs == nil || *s.NACKLatencyUs != 5.069 ||
		s.TimeoutLatencyUs == nil || *s.TimeoutLatencyUs != 536870.912 {
		t.Errorf("position 5 split: %+v; want 1 NACK at 5.069 µs, 1 timeout at 536870.912 µs", s)
	}
}

// Write streams the packet columns into the page where their markers are; the page's data is DataJSON's,
// byte for byte, also when a string of the page reads like a marker (then the data is encoded whole).
func TestWriteStreamsTheSameData(t *testing.T) {
	for _, title := range []string{"", "\x000\x00 \x001\x00"} {
		p := load(t, "testdata/listing2")
		if title != "" {
			p.Title = title
		}
		want, err := DataJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Write(&b, p); err != nil {
			t.Fatal(err)
		}
		const open = `<script type="application/json" id="lumina-data">`
		s := b.String()
		i := strings.Index(s, open)
		j := strings.Index(s[i:], "</script>")
		if i < 0 || j < 0 || s[i+len(open):i+j] != string(want) {
			t.Errorf("title %q: the page's data differs from DataJSON", title)
		}
		if p.Runs[0].Trace.Conns[0].Packets.T == "" || strings.Contains(p.Runs[0].Trace.Conns[0].Packets.T, "\x00") {
			t.Error("Write left a marker in the page's columns")
		}
	}
}

// Counters go into the page as decimal strings (JSON.parse rounds numbers above 2^53); each connection's label
// names its initial PSN; the page carries ECharts' NOTICE and licences in a comment.
func TestCountersLabelsAndLicence(t *testing.T) {
	p := load(t, "testdata/listing2")
	r := p.Runs[0]
	big := uint64(1)<<60 + 1
	r.Counters[0].Finish = &big
	data, err := DataJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"finish":"1152921504606846977"`)) {
		t.Error("a counter of 2^60+1 is not in the page as an exact decimal string")
	}
	an := r.doc.Analysis
	for i, c := range r.Trace.Conns {
		want := fmt.Sprintf(", initial PSN %d", an.Connections[i].ReqIPSN)
		if !strings.HasSuffix(c.Label, want) {
			t.Errorf("label %q lacks %q", c.Label, want)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	i, j := strings.Index(s, "<!--\nThe script below is Apache ECharts"), strings.Index(s, "-->\n<script>\n"+echartsJS[:40])
	if i < 0 || j < i {
		t.Fatal("no licence comment just before the ECharts script")
	}
	for _, want := range []string{"Copyright 2017-2026 The Apache Software Foundation", "TERMS AND CONDITIONS FOR USE, REPRODUCTION", "Mike Bostock"} {
		if !strings.Contains(s[i:j], want) {
			t.Errorf("the licence comment lacks %q", want)
		}
	}
}
