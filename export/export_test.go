package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/internal/tracetest"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
)

// eventsScenario is the events scenario this test shares with the Wireshark tests (testdata/events.yaml): drops
// (a NAK-triggered retransmission, then a timeout), an ECN mark the responder answers with a CNP, and a
// corrupted packet (bad ICRC).
const eventsScenario = "../testdata/events.yaml"

// runEvents runs the scenario on the simulator and judges it: a results directory with analysis.json.
func runEvents(t *testing.T) (string, *verdict.Outcome) {
	t.Helper()
	sc, err := scenario.Load(eventsScenario)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if err := testbed.Run(sc, testbed.Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	o, err := verdict.Reanalyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, o
}

// table is a Parquet file as Apache Arrow's reader (an implementation independent of the writer) reads it:
// each column as a list of Go values, nil for null.
type table map[string][]any

func readTable(t *testing.T, path string) (table, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tbl, err := pqarrow.ReadTable(context.Background(), f, nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("arrow reading %s: %v", path, err)
	}
	defer tbl.Release()
	out := table{}
	for i, fld := range tbl.Schema().Fields() {
		var vals []any
		for _, ch := range tbl.Column(i).Data().Chunks() {
			for j := 0; j < ch.Len(); j++ {
				vals = append(vals, value(t, ch, j))
			}
		}
		out[fld.Name] = vals
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	kv := map[string]string{}
	for _, e := range pf.MetaData().KeyValueMetadata() {
		if e.Value != nil {
			kv[e.Key] = *e.Value
		}
	}
	return out, kv
}

func value(t *testing.T, a arrow.Array, j int) any {
	if a.IsNull(j) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int32:
		return int64(a.Value(j))
	case *array.Int64:
		return a.Value(j)
	case *array.Float64:
		return a.Value(j)
	case *array.Boolean:
		return a.Value(j)
	case *array.String:
		return a.Value(j)
	case *array.List:
		off0, off1 := a.ValueOffsets(j)
		var l []any
		for k := off0; k < off1; k++ {
			l = append(l, value(t, a.ListValues(), int(k)))
		}
		return l
	}
	t.Fatalf("column type %s not handled", a.DataType())
	return nil
}

func (tb table) rows() int {
	for _, c := range tb {
		return len(c)
	}
	return 0
}

// countBy counts rows by the string form of the key columns, for rows where keep holds.
func (tb table) countBy(keep func(i int) bool, cols ...string) map[string]int {
	m := map[string]int{}
	for i := 0; i < tb.rows(); i++ {
		if keep != nil && !keep(i) {
			continue
		}
		var k []string
		for _, c := range cols {
			k = append(k, fmt.Sprint(tb[c][i]))
		}
		m[strings.Join(k, " ")]++
	}
	return m
}

func equalCounts(t *testing.T, what string, got, want map[string]int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) { // fmt prints maps sorted by key
		t.Errorf("%s: parquet says %v; the analyzer says %v", what, got, want)
	}
}

// The export of a results directory, read back by Arrow, answers the questions the analyzers answer with the
// same numbers: retransmissions per connection and their recovery, packets per flow, ECN marks, ICRC failures,
// events, CNPs; and every file carries the schema version.
func TestExportResultsDirMatchesAnalyzers(t *testing.T) {
	dir, o := runEvents(t)
	out := filepath.Join(t.TempDir(), "pq")
	res, err := Export(dir, out, Options{RowGroupRows: 100}) // several row groups
	if err != nil {
		t.Fatal(err)
	}
	if res.Metadata != "comment" {
		t.Errorf("metadata %q; want comment (the results trace's annotations)", res.Metadata)
	}
	an := o.Doc.Analysis
	sum, err := summary.Analyze([]string{filepath.Join(dir, resultsdir.FileTrace)}, summary.Options{})
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range Files {
		_, kv := readTable(t, filepath.Join(out, name))
		if kv[MetaSchemaVersion] != "1" || kv[MetaTable]+".parquet" != name || kv[MetaMetadata] != "comment" {
			t.Errorf("%s: key-value metadata %v; want schema version 1, its table name and metadata comment", name, kv)
		}
	}

	pk, _ := readTable(t, filepath.Join(out, FilePackets))
	if pk.rows() != an.Packets || int64(pk.rows()) != sum.Packets || res.Packets != int64(an.Packets) {
		t.Fatalf("packet rows %d (result %d); the analyzer saw %d packets, the summary %d", pk.rows(), res.Packets, an.Packets, sum.Packets)
	}
	for i := 0; i < pk.rows(); i++ {
		if pk["index"][i] != int64(i) {
			t.Fatalf("row %d has index %v", i, pk["index"][i])
		}
	}

	// Retransmissions per connection, from both tables, against analysis.json.
	want := map[string]int{}
	for _, r := range an.Retransmissions {
		want[fmt.Sprint(r.QP)]++
	}
	if len(want) == 0 {
		t.Fatal("the scenario made no retransmission: the comparison below would prove nothing")
	}
	rt, _ := readTable(t, filepath.Join(out, FileRetransmissions))
	equalCounts(t, "retransmissions per connection", rt.countBy(nil, "conn"), want)
	for i, r := range an.Retransmissions {
		if rt["psn"][i] != r.PSN || rt["iter"][i] != int64(r.Iter) || rt["event"][i] != r.Event ||
			fmt.Sprint(rt["trigger"][i]) != fmt.Sprint(deref(r.Trigger)) || fmt.Sprint(rt["latency_us"][i]) != fmt.Sprint(deref(r.LatencyUs)) {
			t.Errorf("retransmission %d: parquet psn %v iter %v event %v trigger %v latency %v; analysis %+v", i,
				rt["psn"][i], rt["iter"][i], rt["event"][i], rt["trigger"][i], rt["latency_us"][i], r)
		}
		// The lost transmission is a packet row with the same PSN, the retransmission's connection and event.
		p := r.Packet
		if pk["conn"][p] != int64(r.QP) || pk["psn"][p] != int64(r.PSNAbs) || pk["event"][p] != r.Event {
			t.Errorf("retransmission %d's packet %d: conn %v psn %v event %v; want %d %d %s", i, p, pk["conn"][p], pk["psn"][p], pk["event"][p], r.QP, r.PSNAbs, r.Event)
		}
	}

	// Packets per flow against the capture summary's flows.
	wantFlows := map[string]int{}
	for _, f := range sum.Flows {
		wantFlows[fmt.Sprintf("%s %s %d", f.Src, f.Dst, f.DestQP)] = int(f.Packets)
	}
	equalCounts(t, "packets per flow", pk.countBy(func(i int) bool { return pk["roce"][i] == true }, "src_ip", "dst_ip", "dest_qp"), wantFlows)

	// Packets per connection: the connections table's count is the packet table's, and every RoCE packet has one.
	cn, _ := readTable(t, filepath.Join(out, FileConnections))
	if cn.rows() != len(an.Connections) {
		t.Fatalf("%d connection rows; analysis has %d", cn.rows(), len(an.Connections))
	}
	perConn := pk.countBy(nil, "conn")
	total := 0
	for i := 0; i < cn.rows(); i++ {
		c := fmt.Sprint(cn["conn"][i])
		if int64(perConn[c]) != cn["packets"][i] || perConn[c] == 0 {
			t.Errorf("connection %s: table says %v packets, packet rows %d", c, cn["packets"][i], perConn[c])
		}
		total += perConn[c]
	}
	if int64(total) != sum.RoCEPackets {
		t.Errorf("packets with a connection: %d; RoCE packets %d", total, sum.RoCEPackets)
	}

	// ECN marks, ICRC failures, CNPs and events against the summary and the analysis.
	ce := pk.countBy(func(i int) bool { return pk["ecn"][i] == int64(3) }, "roce")["true"]
	if int64(ce) != sum.ECN.CE || ce == 0 {
		t.Errorf("CE-marked packets: parquet %d, summary %d (want > 0)", ce, sum.ECN.CE)
	}
	bad := pk.countBy(func(i int) bool { return pk["icrc"][i] == "bad" }, "roce")["true"]
	if int64(bad) != sum.ICRC.Bad { // the switch mirrors a packet before it corrupts it: see the plain capture's test
		t.Errorf("ICRC failures: parquet %d, summary %d", bad, sum.ICRC.Bad)
	}
	cnps := pk.countBy(func(i int) bool { return pk["opcode"][i] == int64(roce.CNP) }, "roce")["true"]
	if cnps != an.CNP.CNPs || int64(cnps) != sum.CNPs || cnps == 0 {
		t.Errorf("CNPs: parquet %d, analysis %d, summary %d (want > 0)", cnps, an.CNP.CNPs, sum.CNPs)
	}
	wantEv := map[string]int{}
	for e, n := range sum.Mirror.Events {
		wantEv[e] = int(n)
	}
	gotEv := pk.countBy(nil, "event")
	equalCounts(t, "events", gotEv, wantEv)
	for _, e := range []string{"drop", "ecn", "corrupt"} {
		if gotEv[e] == 0 {
			t.Errorf("no %s event in the packet table", e)
		}
	}
	// The ITER column: the second drop of connection 2's PSN 5 is in round 2.
	iters := pk.countBy(func(i int) bool { return pk["event"][i] == "drop" }, "conn", "iter")
	if iters["2 1"] != 1 || iters["2 2"] != 1 {
		t.Errorf("drops by conn and iter: %v; want one in round 1 and one in round 2 of connection 2", iters)
	}
	// The mirror sequence numbers are consecutive and the switch timestamps present on every packet.
	for i := 0; i < pk.rows(); i++ {
		if i > 0 && pk["mirror_seq"][i] != pk["mirror_seq"][i-1].(int64)+1 {
			t.Fatalf("row %d: mirror_seq %v after %v", i, pk["mirror_seq"][i], pk["mirror_seq"][i-1])
		}
		if pk["switch_ts_ns"][i] == nil {
			t.Fatalf("row %d: no switch timestamp", i)
		}
	}

	// Counters: the analyzer's checks, joined with counters.json's snapshots.
	ct, _ := readTable(t, filepath.Join(out, FileCounters))
	checked := 0
	for i := 0; i < ct.rows(); i++ {
		if ct["expected"][i] == nil {
			continue
		}
		checked++
		found := false
		for _, c := range an.Counters {
			if c.Host == ct["host"][i] && c.Name == ct["name"][i] {
				found = c.Expected == ct["expected"][i] && c.OK == ct["ok"][i] &&
					(c.Actual == nil || ct["delta"][i] == *c.Actual)
			}
		}
		if !found {
			t.Errorf("counter row %v %v (expected %v delta %v ok %v) differs from the analysis", ct["host"][i], ct["name"][i], ct["expected"][i], ct["delta"][i], ct["ok"][i])
		}
	}
	if checked != len(an.Counters) || checked == 0 {
		t.Errorf("%d counter rows with an expectation; the analysis checked %d", checked, len(an.Counters))
	}

	// Traffic: completion times per connection.
	tr, _ := readTable(t, filepath.Join(out, FileTraffic))
	if tr.rows() != len(an.Traffic) {
		t.Fatalf("%d traffic rows; analysis has %d", tr.rows(), len(an.Traffic))
	}
	for i, q := range an.Traffic {
		if tr["conn"][i] != int64(q.QP) || len(tr["mct_us"][i].([]any)) != len(q.MCTUs) || tr["mct_us"][i].([]any)[0] != q.MCTUs[0] {
			t.Errorf("traffic row %d: conn %v mct %v; analysis %d %v", i, tr["conn"][i], tr["mct_us"][i], q.QP, q.MCTUs)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// A capture with no Lumina metadata (real TTLs, no comments) still exports its packets, with the event columns
// null, connections learned from the trace, and the retransmissions the analyzer infers.
func TestExportPlainCapture(t *testing.T) {
	dir, _ := runEvents(t)
	plain := filepath.Join(t.TempDir(), "plain.pcap")
	corrupted := writePlain(t, filepath.Join(dir, resultsdir.FileTrace), plain)
	out := filepath.Join(t.TempDir(), "pq")
	res, err := Export(plain, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metadata != "none" {
		t.Errorf("metadata %q; want none", res.Metadata)
	}
	pk, kv := readTable(t, filepath.Join(out, FilePackets))
	if kv[MetaMetadata] != "none" {
		t.Errorf("metadata key %q", kv[MetaMetadata])
	}
	sum, err := summary.Analyze([]string{plain}, summary.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if int64(pk.rows()) != sum.Packets {
		t.Fatalf("%d rows; %d packets", pk.rows(), sum.Packets)
	}
	for _, col := range []string{"event", "mirror_seq", "switch_ts_ns"} {
		if n := pk.countBy(func(i int) bool { return pk[col][i] != nil }, "roce"); len(n) != 0 {
			t.Errorf("column %s has values %v in a plain capture", col, n)
		}
	}
	// ITER, counted as the switch counts it (roce.NextIter per connection), is the results trace's: the
	// switch's own count in its comments, packet for packet (the plain copy holds the same packets).
	ref := filepath.Join(t.TempDir(), "ref")
	if _, err := Export(dir, ref, Options{}); err != nil {
		t.Fatal(err)
	}
	rk, _ := readTable(t, filepath.Join(ref, FilePackets))
	withIter := 0
	for i := 0; i < pk.rows(); i++ {
		if pk["iter"][i] != rk["iter"][i] {
			t.Fatalf("row %d (%v): iter %v; the switch's comment says %v", i, pk["opcode_name"][i], pk["iter"][i], rk["iter"][i])
		}
		if pk["iter"][i] != nil {
			withIter++
		}
	}
	if it := pk.countBy(func(i int) bool { return pk["iter"][i] != nil }, "iter"); withIter == 0 || it["2"] == 0 {
		t.Errorf("iter values %v; want rounds 1 and 2 (the retransmitted drop)", it)
	}
	withConn := pk.countBy(func(i int) bool { return pk["conn"][i] != nil }, "roce")["true"]
	if int64(withConn) != sum.RoCEPackets {
		t.Errorf("%d packets with a learned connection; %d RoCE packets", withConn, sum.RoCEPackets)
	}
	bad := pk.countBy(func(i int) bool { return pk["icrc"][i] == "bad" }, "index")
	if len(bad) != 1 || int64(len(bad)) != sum.ICRC.Bad || bad[fmt.Sprint(corrupted)] != 1 {
		t.Errorf("ICRC failures at rows %v; the summary counts %d; want row %d, the corrupted packet", bad, sum.ICRC.Bad, corrupted)
	}
	cn, _ := readTable(t, filepath.Join(out, FileConnections))
	if cn.rows() != 2 {
		t.Errorf("%d connections learned; want 2", cn.rows())
	}
}

// writePlain copies a trace into a pcap without comments, with a real TTL (64) in place of the event and
// ordinary MAC addresses: what tcpdump on a host would capture. The first packet captured whole (the simulator's
// dumps cut data packets after their headers) gets a damaged ICRC; its index is returned.
func writePlain(t *testing.T, src, dst string) (corrupted int) {
	t.Helper()
	corrupted = -1
	tracetest.Rewrite(t, src, dst, tracetest.Pcap, func(_ int, p *trace.Packet) bool {
		if pkt, ok := tracetest.Plain(p.Data, p.OrigLen); ok && !pkt.Truncated && corrupted < 0 {
			p.Data[len(p.Data)-1] ^= 0xff // the ICRC's last byte
			corrupted = p.Index
		}
		return true
	})
	return corrupted
}

// Bad input is refused with ErrInput, names the place, and leaves no output (nor a temporary directory).
func TestExportBadInputLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	garbage := filepath.Join(tmp, "garbage.pcap")
	if err := os.WriteFile(garbage, []byte("this is not a capture at all, just text"), 0o644); err != nil {
		t.Fatal(err)
	}
	outs := filepath.Join(tmp, "outs")
	if err := os.Mkdir(outs, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(outs, "pq")
	_, err := Export(garbage, out, Options{})
	if !errors.Is(err, resultsdir.ErrInput) || !strings.Contains(err.Error(), "garbage.pcap") {
		t.Fatalf("error %v; want a bad-input error naming the file", err)
	}
	if ents, _ := os.ReadDir(outs); len(ents) != 0 {
		t.Errorf("a failed export left %v", ents)
	}

	// A directory that is not a results directory, and an output that is someone else's directory.
	if _, err := Export(outs, out, Options{}); !errors.Is(err, resultsdir.ErrInput) {
		t.Errorf("exporting a plain directory: %v; want bad input", err)
	}
	other := filepath.Join(tmp, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	dir, _ := runEvents(t)
	if _, err := Export(dir, other, Options{}); !errors.Is(err, resultsdir.ErrInput) || !strings.Contains(err.Error(), "neither empty nor an earlier export (it holds notes.txt") {
		t.Errorf("exporting over a foreign directory: %v; want it refused", err)
	}
	if b, err := os.ReadFile(filepath.Join(other, "notes.txt")); err != nil || string(b) != "mine" {
		t.Error("the foreign directory was touched")
	}

	// A results directory a run left incomplete.
	if err := os.WriteFile(filepath.Join(dir, resultsdir.FileIncomplete), []byte("interrupted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(dir, filepath.Join(tmp, "inc"), Options{}); !errors.Is(err, resultsdir.ErrIncomplete) {
		t.Errorf("exporting an incomplete directory: %v; want ErrIncomplete", err)
	}
}

// Exporting again into the same directory replaces the earlier export whole; a directory that holds anything
// else beside export's files, or a packets.parquet that is not export's, is refused and left untouched.
func TestExportReplacesEarlierExport(t *testing.T) {
	dir, _ := runEvents(t)
	out := filepath.Join(t.TempDir(), "pq")
	if _, err := Export(dir, out, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(out, FileTraffic)); err != nil { // an earlier export with a file missing
		t.Fatal(err)
	}
	if _, err := Export(dir, out, Options{}); err != nil {
		t.Fatal(err)
	}
	pk, _ := readTable(t, filepath.Join(out, FilePackets))
	ents, _ := os.ReadDir(filepath.Dir(out))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if _, err := os.Stat(filepath.Join(out, FileTraffic)); pk.rows() == 0 || strings.Join(names, ",") != "pq" || err != nil {
		t.Errorf("after re-export: %d rows, traffic %v, beside it %v", pk.rows(), err, names)
	}

	// The user's own file in an earlier export, and a packets.parquet that is not export's.
	notes := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(dir, out, Options{}); !errors.Is(err, resultsdir.ErrInput) || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("re-export over a user's file: %v; want it refused", err)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "mine" {
		t.Error("the user's file was touched")
	}
	other := filepath.Join(t.TempDir(), "data")
	os.Mkdir(other, 0o755)
	if err := os.WriteFile(filepath.Join(other, FilePackets), []byte("someone's parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(dir, other, Options{}); !errors.Is(err, resultsdir.ErrInput) || !strings.Contains(err.Error(), "not lumina export's packet table") {
		t.Errorf("export over another packets.parquet: %v; want it refused", err)
	}
	if b, _ := os.ReadFile(filepath.Join(other, FilePackets)); string(b) != "someone's parquet" {
		t.Error("the other packets.parquet was touched")
	}
}

// A run judged invalid has an analysis.json without analysis: its packets still export with their events and
// connections (from the trace's annotations and connections.json).
func TestExportInvalidRun(t *testing.T) {
	dir, o := runEvents(t)
	want := o.Doc.Analysis
	doc := *o.Doc
	doc.Analysis = &analyze.Analysis{}
	doc.Verdict = verdict.Invalid
	if err := resultsdir.WriteJSON(dir, resultsdir.FileAnalysis, &doc); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pq")
	res, err := Export(dir, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Retransmissions != 0 || res.Connections != len(want.Connections) || res.Metadata != "comment" {
		t.Errorf("invalid run: %+v; want no retransmissions, %d connections, metadata comment", res, len(want.Connections))
	}
	pk, _ := readTable(t, filepath.Join(out, FilePackets))
	ev := pk.countBy(nil, "event")
	if ev["drop"] != 2 || ev["<nil>"] != 0 {
		t.Errorf("events %v; want both drops and no null", ev)
	}
	dirs := pk.countBy(func(i int) bool { return pk["direction"][i] == nil }, "roce")
	if len(dirs) != 0 {
		t.Errorf("packets without a direction: %v", dirs)
	}
}

// Lumina dumps (mirror metadata in TTL and MAC addresses, no comments) export merged in mirror-sequence order,
// as lumina analyze merges them, with their events, sequence numbers and switch timestamps decoded from the
// frames. One dump of the pair fails the integrity check, as lumina analyze judges it, and is not exported.
func TestExportDump(t *testing.T) {
	dir, _ := runEvents(t)
	dumps, _ := filepath.Glob(filepath.Join(dir, resultsdir.DirDump, "*.pcap"))
	if len(dumps) != 2 {
		t.Fatalf("dumps %v; want 2", dumps)
	}
	one := filepath.Join(t.TempDir(), "pq")
	if _, err := Export(dumps[0], one, Options{}); !errors.Is(err, ErrInvalidTrace) || !strings.Contains(err.Error(), "INVALID TRACE") {
		t.Errorf("one dump of two: %v; want the integrity failure", err)
	}
	if _, err := os.Stat(one); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dump that fails the integrity check left %s", one)
	}
	out := filepath.Join(t.TempDir(), "pq")
	res, err := ExportAll(dumps, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metadata != "mirror" {
		t.Errorf("metadata %q; want mirror", res.Metadata)
	}
	sum, err := summary.Analyze(dumps, summary.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := readTable(t, filepath.Join(out, FilePackets))
	if int64(pk.rows()) != sum.Packets || res.Packets != sum.Packets {
		t.Fatalf("%d rows; the merged dumps hold %d packets", pk.rows(), sum.Packets)
	}
	want := map[string]int{}
	for e, n := range sum.Mirror.Events {
		want[e] = int(n)
	}
	equalCounts(t, "events", pk.countBy(nil, "event"), want)
	if want["drop"] != 2 || want["ecn"] != 1 || want["corrupt"] != 1 {
		t.Errorf("events over the dumps: %v; want 2 drops, 1 ecn, 1 corrupt", want)
	}
	for i := 0; i < pk.rows(); i++ { // merged in mirror-sequence order: seq 1, 2, 3, ...
		if pk["mirror_seq"][i] != int64(i+1) || pk["switch_ts_ns"][i] == nil || pk["index"][i] != int64(i) {
			t.Fatalf("row %d: index %v seq %v ts %v; want the merged stream's packet %d, seq %d", i, pk["index"][i], pk["mirror_seq"][i], pk["switch_ts_ns"][i], i, i+1)
		}
	}
	// ITER, counted from the frames, is the switch's (the results trace's comments), by mirror sequence number;
	// a CNP declares no RDMA payload.
	ref := filepath.Join(t.TempDir(), "ref")
	if _, err := Export(dir, ref, Options{}); err != nil {
		t.Fatal(err)
	}
	rk, _ := readTable(t, filepath.Join(ref, FilePackets))
	iterOf := map[any]any{}
	for i := 0; i < rk.rows(); i++ {
		iterOf[rk["mirror_seq"][i]] = rk["iter"][i]
	}
	cnps := 0
	for i := 0; i < pk.rows(); i++ {
		if pk["iter"][i] != iterOf[pk["mirror_seq"][i]] {
			t.Fatalf("row %d (seq %v): iter %v; the switch's comment says %v", i, pk["mirror_seq"][i], pk["iter"][i], iterOf[pk["mirror_seq"][i]])
		}
		if pk["opcode_name"][i] == "CNP" {
			cnps++
			if pk["payload_len"][i] != int64(0) {
				t.Errorf("CNP row %d: payload_len %v; want 0", i, pk["payload_len"][i])
			}
		}
	}
	if cnps == 0 {
		t.Error("no CNP in the dumps: payload_len of CNPs untested")
	}
	// The retransmissions are the ones lumina analyze finds on the same dumps, numbered as it numbers them.
	an, err := analyze.Analyze(mustMerge(t, dumps), analyze.Options{IndexBase: 1})
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := readTable(t, filepath.Join(out, FileRetransmissions))
	if rt.rows() != len(an.Retransmissions) || rt.rows() == 0 {
		t.Errorf("%d retransmission rows; lumina analyze finds %d", rt.rows(), len(an.Retransmissions))
	}
}

func mustMerge(t *testing.T, paths []string) trace.Reader {
	t.Helper()
	src, err := summary.Open(paths, summary.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}
