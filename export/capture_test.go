package export

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/internal/tracetest"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// copyTrace copies the first n packets of a pcapng (all when n < 0) into dst with each comment passed through
// edit.
func copyTrace(t *testing.T, src, dst string, n int, edit func(string) string) {
	t.Helper()
	tracetest.Rewrite(t, src, dst, tracetest.Pcapng, func(i int, p *trace.Packet) bool {
		p.Comment = edit(p.Comment)
		return n < 0 || i < n
	})
}

// joinable checks that every conn of the packet and retransmission tables has a row in the connections table,
// whose packets column counts the packet rows with that conn.
func joinable(t *testing.T, out string) (conns map[string]int) {
	t.Helper()
	pk, _ := readTable(t, filepath.Join(out, FilePackets))
	cn, _ := readTable(t, filepath.Join(out, FileConnections))
	rt, _ := readTable(t, filepath.Join(out, FileRetransmissions))
	conns = map[string]int{}
	for i := 0; i < cn.rows(); i++ {
		conns[fmt.Sprint(cn["conn"][i])] = int(cn["packets"][i].(int64))
	}
	perConn := pk.countBy(func(i int) bool { return pk["conn"][i] != nil }, "conn")
	for c, n := range perConn {
		if conns[c] != n {
			t.Errorf("packets: %d rows of conn %s; connections table: %v (rows %v)", n, c, conns[c], conns)
		}
	}
	for c := range rt.countBy(nil, "conn") {
		if _, ok := conns[c]; !ok {
			t.Errorf("retransmissions of conn %s, which the connections table (%v) lacks", c, conns)
		}
	}
	if len(perConn) == 0 {
		t.Error("no packet has a connection")
	}
	return conns
}

// A results trace exported as a capture numbers its connections in every table as lumina analyze numbers them
// (from 1): the packet table's conn is the analyzer's, never the comment's qp=, which keeps its own column. Its
// comments are read with the analyzer's parser: commas and semicolons separate, numeric events count.
func TestExportResultsTraceAsCapture(t *testing.T) {
	dir, o := runEvents(t)
	out := filepath.Join(t.TempDir(), "pq")
	if _, err := Export(filepath.Join(dir, resultsdir.FileTrace), out, Options{}); err != nil {
		t.Fatal(err)
	}
	if c := joinable(t, out); len(c) != 2 || c["1"] == 0 || c["2"] == 0 {
		t.Errorf("connections %v; want 1 and 2, as lumina analyze numbers them", c)
	}
	pk, kv := readTable(t, filepath.Join(out, FilePackets))
	if kv[MetaIndexBase] != "1" {
		t.Errorf("index base %q; want 1", kv[MetaIndexBase])
	}
	for i := 0; i < pk.rows(); i++ {
		if pk["comment_qp"][i] != nil && pk["comment_qp"][i] != pk["conn"][i] {
			t.Fatalf("row %d: conn %v, comment qp %v: the results trace numbers from 1 as the analyzer does", i, pk["conn"][i], pk["comment_qp"][i])
		}
	}

	// Another writer's comments: qp=7 for every packet, comma and semicolon separators, numeric events.
	odd := filepath.Join(t.TempDir(), "odd.pcapng")
	copyTrace(t, filepath.Join(dir, resultsdir.FileTrace), odd, -1, func(c string) string {
		var w []string
		for _, f := range strings.Fields(c) {
			switch {
			case strings.HasPrefix(f, "qp="):
				f = "qp=7"
			case f == "event=drop":
				f = "event=1"
			}
			w = append(w, f)
		}
		return strings.Join(w[:1], ";") + ";" + strings.Join(w[1:], ",")
	})
	out2 := filepath.Join(t.TempDir(), "pq")
	res, err := Export(odd, out2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metadata != "comment" {
		t.Fatalf("metadata %q; want comment", res.Metadata)
	}
	if c := joinable(t, out2); len(c) != 2 || c["7"] != 0 {
		t.Errorf("connections %v; want 1 and 2 (qp=7 is the comment's)", c)
	}
	pk2, _ := readTable(t, filepath.Join(out2, FilePackets))
	if q := pk2.countBy(nil, "comment_qp"); q["7"] == 0 {
		t.Errorf("comment_qp %v; want the comments' 7", q)
	}
	want := 0
	for _, r := range o.Doc.Analysis.Retransmissions {
		if r.Event == "drop" {
			want++
		}
	}
	ev := pk2.countBy(nil, "event")
	if ev["drop"] != want || ev["ecn"] != 1 || ev["<nil>"] != 0 {
		t.Errorf("events %v; want %d drops (event=1), 1 ecn, none null", ev, want)
	}
	if cm := pk2.countBy(func(i int) bool { return pk2["comment"][i] != nil }, "roce"); len(cm) != 0 {
		t.Errorf("comments kept as saying more than the columns: %v", cm)
	}
}

// A capture cut short in the middle of a packet is judged as lumina analyze judges it: a Lumina trace fails its
// integrity check (ErrInvalidTrace, nothing written); a plain capture is written with analyze's warning, in the
// result and in every file's metadata. A results directory whose trace is cut, or holds fewer packets than its
// analysis.json counted, is not exported.
func TestExportCutShort(t *testing.T) {
	dir, _ := runEvents(t)
	tmp := t.TempDir()
	tr := filepath.Join(dir, resultsdir.FileTrace)
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(tmp, "cut.pcapng")
	if err := os.WriteFile(cut, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(cut, filepath.Join(tmp, "a"), Options{}); !errors.Is(err, ErrInvalidTrace) || !strings.Contains(err.Error(), "INVALID TRACE") ||
		!strings.Contains(err.Error(), "dumps-whole: "+cut+" is cut short") {
		t.Errorf("cut Lumina trace: %v; want the integrity failure naming the cut", err)
	}

	plain := filepath.Join(tmp, "plain.pcap")
	writePlain(t, tr, plain)
	pb, _ := os.ReadFile(plain)
	cutPlain := filepath.Join(tmp, "cutplain.pcap")
	if err := os.WriteFile(cutPlain, pb[:len(pb)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Export(cutPlain, filepath.Join(tmp, "b"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), "cut short in the middle of a packet") {
		t.Errorf("warnings %q; want the cut", res.Warnings)
	}
	for _, f := range Files {
		if _, kv := readTable(t, filepath.Join(tmp, "b", f)); !strings.Contains(kv[MetaWarnings], "cut short") {
			t.Errorf("%s: %s %q; want the cut", f, MetaWarnings, kv[MetaWarnings])
		}
	}

	// The results directory: trace.pcapng cut, then whole but shorter than analysis.json counted.
	save := filepath.Join(tmp, "trace.save")
	if err := os.Rename(tr, save); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tr, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(dir, filepath.Join(tmp, "c"), Options{}); !errors.Is(err, ErrInvalidTrace) || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("results directory with a cut trace: %v; want ErrInvalidTrace", err)
	}
	copyTrace(t, save, tr, 20, func(c string) string { return c })
	if _, err := Export(dir, filepath.Join(tmp, "d"), Options{}); !errors.Is(err, ErrInvalidTrace) || !strings.Contains(err.Error(), "holds 20 packets") {
		t.Errorf("results directory with a short trace: %v; want ErrInvalidTrace", err)
	}
	for _, o := range []string{"a", "c", "d"} {
		if _, err := os.Stat(filepath.Join(tmp, o)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused export left %s", o)
		}
	}
}

// An IPv6 mirror dump (the switch writes the event into the hop limit) exports its events, sequence numbers and
// switch timestamps, as an IPv4 one does.
func TestExportIPv6Dump(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		p := roce.Packet{Version: roce.RoCEv2, IPv6: true, TTL: 64, PayloadLen: 64,
			SrcIP: netip.MustParseAddr("fd00::2"), DstIP: netip.MustParseAddr("fd00::3")}
		p.BTH.Opcode, p.BTH.DestQP, p.BTH.PSN = roce.RCWriteOnly, 0x11, roce.PSN(i)
		b, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := roce.EventNone
		if i == 4 {
			ev = roce.EventDrop
		}
		if err := roce.EncodeMirrorNoChecksum(b, roce.EthernetLen, roce.Mirror{Event: ev, Seq: uint64(i + 1), TimestampNs: uint64(1000 * (i + 1))}); err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(int64(i)*1000, b, len(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := filepath.Join(t.TempDir(), "pq")
	res, err := Export(path, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := readTable(t, filepath.Join(out, FilePackets))
	if ev := pk.countBy(nil, "event"); res.Metadata != "mirror" || ev["drop"] != 1 || ev["none"] != 9 {
		t.Fatalf("metadata %s, events %v; want mirror, 1 drop and 9 none", res.Metadata, ev)
	}
	for i := 0; i < pk.rows(); i++ {
		if pk["mirror_seq"][i] != int64(i+1) || pk["switch_ts_ns"][i] != int64(1000*(i+1)) {
			t.Errorf("row %d: seq %v ts %v", i, pk["mirror_seq"][i], pk["switch_ts_ns"][i])
		}
	}
}

// Ordinary RoCE traffic sent with TTL 1 from one MAC is no Lumina dump (summary.IsMirrorTagged): it exports
// without events, where the TTL alone would have made every packet a drop.
func TestExportTTL1NotMirrored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ttl1.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		p := roce.Packet{Version: roce.RoCEv2, TTL: 1, PayloadLen: 64,
			SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3")}
		p.BTH.Opcode, p.BTH.DestQP, p.BTH.PSN = roce.RCWriteOnly, 0x11, roce.PSN(i)
		b, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(int64(i)*1000, b, len(b)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	f.Close()
	out := filepath.Join(t.TempDir(), "pq")
	res, err := Export(path, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := readTable(t, filepath.Join(out, FilePackets))
	if ev := pk.countBy(nil, "event"); res.Metadata != "none" || res.Retransmissions != 0 || ev["<nil>"] != 4 {
		t.Errorf("metadata %s, %d retransmissions, events %v; want none, 0, all null", res.Metadata, res.Retransmissions, ev)
	}
}

// countdown is a context whose Err is nil for its first n calls and context.Canceled after: a signal that
// arrives at each point the export looks.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// An export stopped (SIGINT, SIGTERM: lumina export cancels its context) at any point removes its temporary
// directory and leaves no output.
func TestExportStoppedLeavesNothing(t *testing.T) {
	dir, _ := runEvents(t)
	dumps, _ := filepath.Glob(filepath.Join(dir, resultsdir.DirDump, "*.pcap"))
	for _, srcs := range [][]string{{dir}, dumps} {
		stopped, done := 0, false
		for n := 0; n < 100 && !done; n++ {
			parent := t.TempDir()
			out := filepath.Join(parent, "pq")
			_, err := ExportAll(srcs, out, Options{Context: &countdown{Context: context.Background(), n: n}})
			ents, _ := os.ReadDir(parent)
			switch {
			case err == nil:
				done = true
				if len(ents) != 1 {
					t.Errorf("%v: a complete export left %d entries beside it", srcs, len(ents))
				}
			case errors.Is(err, context.Canceled):
				stopped++
				if len(ents) != 0 {
					t.Errorf("%v stopped at look %d: left %s", srcs, n, ents[0].Name())
				}
			default:
				t.Fatal(err)
			}
		}
		if !done || stopped < 3 {
			t.Errorf("%v: %d stops before it completed (%v); want several, then completion", srcs, stopped, done)
		}
	}
}
