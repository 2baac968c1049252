// Package export writes a results directory or a capture as Parquet tables (packets, retransmissions,
// connections, counters, traffic) for the tools data engineers already use. It streams: the packet table is
// written a bounded row group at a time while the trace is read, so memory does not grow with the trace. The
// schema is documented in docs/export.md and versioned (SchemaVersion, in every file's key-value metadata).
package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
	"github.com/lumina-go/lumina/version"
)

// DefaultRowGroupRows bounds the rows of a row group: what the packet writer holds in memory before it writes
// them (about 12 MB of peak RSS at 8192 rows, bench/export.sh).
const DefaultRowGroupRows = 8 << 10

// Options configure Export.
type Options struct {
	// RowGroupRows is the most rows a row group holds; 0 means DefaultRowGroupRows.
	RowGroupRows int64
	// Context stops the export when done (lumina export cancels it on SIGINT and SIGTERM): the analysis and
	// the packet table check it between batches of packets, the temporary directory is removed, and the error
	// wraps its Err. nil: never stopped.
	Context context.Context
}

// Result says what Export wrote.
type Result struct {
	Dir             string // the output directory
	Metadata        string // mirror | comment | none
	Packets         int64
	Retransmissions int
	Connections     int
	Counters        int
	Traffic         int
	// Warnings are lumina analyze's warnings on the captures (a plain capture cut short in the middle of a
	// packet, packets out of order within their file), also in every file's lumina.warnings metadata.
	Warnings []string
}

// ErrInvalidTrace is wrapped by the error of an input that lumina analyze would judge an invalid trace (exit
// 3): captures that fail the integrity check of Lumina dumps, a results directory whose trace is cut short or
// does not hold the packets its analysis.json counted.
var ErrInvalidTrace = errors.New("invalid trace")

// source is what the export reads: the trace, and what the analyzers made of it.
type source struct {
	traces    []string // one results trace, or the captures merged as lumina analyze merges them
	order     summary.Order
	an        *analyze.Analysis
	indexBase int
	counters  *resultsdir.CountersFile // nil for a capture
	// packets is the number of packets analysis.json counted (a results directory); -1: not known.
	packets  int64
	warnings []string
}

// Export writes the tables of src (a results directory of lumina run, or a pcap/pcapng capture) into the
// directory out, one Parquet file per table (Files). The files are written into a temporary directory beside
// out and moved into place when all are complete: an interrupted or failed export leaves no out that looks
// complete. An existing out is replaced only when it is empty or an earlier export (checkOut). Errors that are
// the input's fault wrap resultsdir.ErrInput; a results directory a run left incomplete,
// resultsdir.ErrIncomplete; a trace lumina analyze would judge invalid, ErrInvalidTrace; a stop, the
// context's error.
func Export(src, out string, opts Options) (*Result, error) {
	return ExportAll([]string{src}, out, opts)
}

// ExportAll is Export of one results directory, or of several captures merged into one trace as lumina analyze
// merges them (in mirror-sequence order when they are Lumina dumps, else in time order) after the same
// integrity check: captures that fail it are not exported (ErrInvalidTrace).
func ExportAll(srcs []string, out string, opts Options) (*Result, error) {
	if opts.RowGroupRows <= 0 {
		opts.RowGroupRows = DefaultRowGroupRows
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if len(srcs) == 0 {
		return nil, resultsdir.BadInputf("export: no input given; want a results directory of lumina run or pcap/pcapng captures")
	}
	if err := checkOut(out); err != nil {
		return nil, err
	}
	s, err := open(opts.Context, srcs)
	if err != nil {
		return nil, err
	}
	src := strings.Join(srcs, " ")
	parent := filepath.Dir(filepath.Clean(out))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(out))+".export-")
	if err != nil {
		return nil, resultsdir.BadInputf("--parquet %s: cannot create the output beside it: %v", out, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's 0700 is for the temporary name only
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("--parquet %s: %w", out, err)
	}
	res, err := s.write(opts.Context, src, tmp, opts)
	if err == nil && opts.Context.Err() != nil {
		err = fmt.Errorf("export stopped: %w", opts.Context.Err())
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := replace(tmp, out); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	res.Dir = out
	return res, nil
}

// checkOut refuses an output that exists and is neither an empty directory nor an earlier export: a directory
// holding only export's files (Files), whose packets.parquet carries the packet table's lumina metadata. Anything
// else is someone's data, which a re-export must not delete.
func checkOut(out string) error {
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return resultsdir.BadInputf("--parquet %s: %v", out, err)
	}
	if !st.IsDir() {
		return resultsdir.BadInputf("--parquet %s is a file; want a directory to write %s and the other tables into", out, FilePackets)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return resultsdir.BadInputf("--parquet %s: %v", out, err)
	}
	if len(ents) == 0 {
		return nil
	}
	ours := map[string]bool{}
	for _, f := range Files {
		ours[f] = true
	}
	for _, e := range ents {
		if !ours[e.Name()] || !e.Type().IsRegular() {
			return resultsdir.BadInputf("--parquet %s exists and is neither empty nor an earlier export (it holds %s, which lumina export does not write); give a new directory", out, e.Name())
		}
	}
	if !isPacketTable(filepath.Join(out, FilePackets)) {
		return resultsdir.BadInputf("--parquet %s exists and is neither empty nor an earlier export (its %s is not lumina export's packet table); give a new directory", out, FilePackets)
	}
	return nil
}

// isPacketTable reports whether path is a Parquet file whose metadata says it is lumina export's packet table.
func isPacketTable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return false
	}
	table, _ := pf.Lookup(MetaTable)
	_, versioned := pf.Lookup(MetaSchemaVersion)
	return table == "packets" && versioned
}

// replace moves the complete export tmp to out, replacing an earlier export or an empty directory.
func replace(tmp, out string) error {
	if _, err := os.Stat(out); err == nil {
		old := tmp + ".old"
		if err := os.Rename(out, old); err != nil {
			return fmt.Errorf("replacing %s: %w", out, err)
		}
		if err := os.Rename(tmp, out); err != nil {
			os.Rename(old, out)
			return fmt.Errorf("moving the export into %s: %w", out, err)
		}
		return os.RemoveAll(old)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("moving the export into %s: %w", out, err)
	}
	return nil
}

// open reads what the export needs from a results directory (its analysis.json, counters.json) or analyzes
// captures.
func open(ctx context.Context, srcs []string) (*source, error) {
	for _, src := range srcs {
		st, err := os.Stat(src)
		if err != nil {
			return nil, resultsdir.BadInputf("%s: %v; want a results directory of lumina run or a pcap/pcapng capture", src, err)
		}
		if st.IsDir() {
			if len(srcs) > 1 {
				return nil, resultsdir.BadInputf("%s is a directory: give one results directory, or capture files only", src)
			}
			return openDir(src)
		}
	}
	return openCaptures(ctx, srcs)
}

// openCaptures analyzes captures as lumina analyze does (analyzeCaptures in cmd/lumina): merged by
// summary.Open, the integrity check for Lumina dumps with the switch's counters when a results directory holds
// them, and the scenario-free checkers numbering connections from 1.
func openCaptures(ctx context.Context, paths []string) (*source, error) {
	// Files of a results directory that a run left incomplete are refused as the directory is.
	for _, p := range paths {
		dir := filepath.Dir(p)
		if filepath.Base(dir) == resultsdir.DirDump {
			dir = filepath.Dir(dir)
		}
		if err := resultsdir.CheckComplete(dir); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	opts := summary.Options{SkipICRC: true} // the packet table checks every ICRC itself
	if c, ok := verdict.FindSwitchCounts(paths); ok {
		opts.Counters = &c
	}
	src, err := summary.Open(paths, opts)
	if err != nil {
		return nil, resultsdir.BadInput(err)
	}
	defer src.Close()
	in := &stoppable{Source: src, ctx: ctx}
	an, err := analyze.Analyze(in, analyze.Options{IndexBase: 1})
	for err == nil { // drain what the checkers left
		_, err = in.Next()
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("export stopped: %w", cerr)
	}
	rep, rerr := src.Report()
	if rerr != nil {
		return nil, resultsdir.BadInput(rerr)
	}
	if !errors.Is(err, io.EOF) {
		return nil, resultsdir.BadInput(err)
	}
	if in := rep.Integrity; in != nil && !in.OK {
		return nil, invalidTrace(strings.Join(paths, " "), in)
	}
	return &source{traces: paths, order: src.Order(), an: an, indexBase: 1, packets: rep.Packets, warnings: rep.Warnings}, nil
}

// stoppable is the captures' stream, ended by ctx (checked every batch packets). It keeps the source's
// decoding and tagging for the analyzers (analyze.Predecoded, analyze.MirrorTagger).
type stoppable struct {
	*summary.Source
	ctx context.Context
	n   int
}

func (s *stoppable) Next() (*trace.Packet, error) {
	if s.n++; s.n%stopEvery == 0 {
		if err := s.ctx.Err(); err != nil {
			return nil, err
		}
	}
	return s.Source.Next()
}

// invalidTrace says why captures fail the integrity check, in lumina analyze's words.
func invalidTrace(what string, in *summary.Integrity) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: integrity INVALID TRACE (%s): not exported, as lumina analyze does not judge it", what, in.Counted())
	for _, c := range in.Checks {
		if !c.OK && !c.Skipped {
			fmt.Fprintf(&b, "\n  [FAIL] %s: %s", c.Name, c.Detail)
		}
	}
	if in.Hint != "" {
		fmt.Fprintf(&b, "\n  hint: %s", in.Hint)
	}
	return fmt.Errorf("%w: %s", ErrInvalidTrace, b.String())
}

func openDir(dir string) (*source, error) {
	if !resultsdir.IsDir(dir) {
		return nil, resultsdir.BadInputf("%s is a directory but not a results directory of lumina run (no %s)", dir, resultsdir.FileScenario)
	}
	if err := resultsdir.CheckComplete(dir); err != nil {
		return nil, err
	}
	var doc verdict.Document
	if err := resultsdir.ReadJSON(dir, resultsdir.FileAnalysis, &doc); err != nil {
		return nil, resultsdir.BadInputf("%s: %v (run lumina analyze %s to write it)", dir, err, dir)
	}
	if doc.Workload != nil {
		return nil, resultsdir.BadInputf("%s is a workload: run on the micro-architecture model: it has no trace to export", dir)
	}
	if doc.Analysis == nil {
		doc.Analysis = &analyze.Analysis{}
	}
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(dir, resultsdir.FileCounters, &cf); err != nil {
		return nil, resultsdir.BadInputf("%s: %v", dir, err)
	}
	tr := filepath.Join(dir, resultsdir.FileTrace)
	if _, err := os.Stat(tr); err != nil {
		return nil, resultsdir.BadInputf("%s: %v", dir, err)
	}
	// A run judged invalid was not analyzed: its analysis has no connections and no metadata mode. The packet
	// table still gets both, from connections.json and from the trace's annotations.
	if len(doc.Analysis.Connections) == 0 {
		var recs []resultsdir.ConnRecord
		if err := resultsdir.ReadList(dir, resultsdir.FileConnections, &recs); err != nil {
			return nil, resultsdir.BadInputf("%s: %v", dir, err)
		}
		for i, r := range recs {
			doc.Analysis.Connections = append(doc.Analysis.Connections, analyze.Conn{Index: i, Verb: r.Verb,
				ReqIP: r.RequesterIP, RespIP: r.ResponderIP, ReqQPN: r.RequesterQPN, RespQPN: r.ResponderQPN,
				ReqIPSN: roce.PSN(r.RequesterIPSN), PacketsPerMsg: r.PacketsPerMsg, NumMsgs: r.NumMsgs, MTU: r.MTU})
		}
	}
	if doc.Analysis.Metadata == "" {
		doc.Analysis.Metadata = "comment" // testbed.reconstruct annotates every packet of trace.pcapng
	}
	packets := int64(-1)
	if doc.Analysis.Packets > 0 { // a run judged invalid has no count; its trace is still checked whole
		packets = int64(doc.Analysis.Packets)
	}
	return &source{traces: []string{tr}, order: summary.OrderTime, an: doc.Analysis, indexBase: doc.IndexBase, counters: &cf, packets: packets}, nil
}

// write writes every table into dir.
func (s *source) write(ctx context.Context, src, dir string, opts Options) (*Result, error) {
	meta := s.an.Metadata
	if meta == "" {
		meta = "none"
	}
	res := &Result{Metadata: meta}
	kv := func(table string) []parquet.WriterOption {
		v := version.Get()
		return []parquet.WriterOption{
			parquet.MaxRowsPerRowGroup(opts.RowGroupRows),
			parquet.Compression(&snappy.Codec{}),
			parquet.CreatedBy("lumina", v.Version, v.Commit),
			parquet.KeyValueMetadata(MetaSchemaVersion, strconv.Itoa(SchemaVersion)),
			parquet.KeyValueMetadata(MetaTable, table),
			parquet.KeyValueMetadata(MetaLumina, v.Version+" "+v.Commit),
			parquet.KeyValueMetadata(MetaSource, src),
			parquet.KeyValueMetadata(MetaMetadata, meta),
			parquet.KeyValueMetadata(MetaIndexBase, strconv.Itoa(s.indexBase)),
		}
	}
	if len(s.warnings) > 0 {
		res.Warnings = s.warnings
		base := kv
		kv = func(table string) []parquet.WriterOption {
			return append(base(table), parquet.KeyValueMetadata(MetaWarnings, strings.Join(s.warnings, "\n")))
		}
	}
	pw := newPacketWriter(s.an, s.indexBase, meta)
	perConn := make(map[int32]int64)
	var cut []*trace.File
	n, err := writeTable(filepath.Join(dir, FilePackets), kv("packets"), func(w *parquet.GenericWriter[PacketRow]) (int64, error) {
		n, c, err := pw.run(ctx, s.traces, s.order, w, perConn)
		cut = c
		return n, err
	})
	if err != nil {
		return nil, err
	}
	if s.counters != nil && len(cut) > 0 { // a results trace (captures were judged by their integrity check)
		c := cut[0].Truncated()
		return nil, fmt.Errorf("%w: %s: integrity INVALID TRACE: [FAIL] %s: %s is cut short in the middle of a packet at byte offset %d after %d whole packets",
			ErrInvalidTrace, cut[0].Name(), summary.CheckDumpsWhole, cut[0].Name(), c.Offset, c.Packets)
	}
	res.Packets = n
	if s.packets >= 0 && n != s.packets {
		return nil, fmt.Errorf("%w: %s holds %d packets; its analysis counted %d: the trace changed since it was analyzed (run lumina analyze on it again)",
			ErrInvalidTrace, strings.Join(s.traces, " "), n, s.packets)
	}

	retx := make([]RetransmissionRow, 0, len(s.an.Retransmissions))
	for _, r := range s.an.Retransmissions {
		row := RetransmissionRow{Conn: int32(r.QP), PSN: r.PSN, PSNAbs: int64(r.PSNAbs), Msg: int32(r.Msg),
			Position: int32(r.Position), Iter: int32(r.Iter), Event: r.Event, Packet: int64(r.Packet),
			Trigger: r.Trigger, NACKGenerationUs: r.NACKGenerationUs, NACKReactionUs: r.NACKReactionUs,
			LatencyUs: r.LatencyUs, NextDeliveredUs: r.NextDeliveredUs}
		if r.RetxPacket != nil {
			v := int64(*r.RetxPacket)
			row.RetxPacket = &v
		}
		retx = append(retx, row)
	}
	if res.Retransmissions, err = writeRows(filepath.Join(dir, FileRetransmissions), kv("retransmissions"), retx); err != nil {
		return nil, err
	}

	conns := make([]ConnectionRow, 0, len(s.an.Connections))
	for _, c := range s.an.Connections {
		qp := int32(c.Index + s.indexBase)
		conns = append(conns, ConnectionRow{Conn: qp, Verb: c.Verb, RequesterIP: c.ReqIP.String(),
			ResponderIP: c.RespIP.String(), RequesterQPN: int64(c.ReqQPN), ResponderQPN: int64(c.RespQPN),
			RequesterIPSN: int64(c.ReqIPSN), PacketsPerMsg: int32(c.PacketsPerMsg), NumMsgs: int32(c.NumMsgs),
			MTU: int32(c.MTU), Packets: perConn[qp]})
	}
	if res.Connections, err = writeRows(filepath.Join(dir, FileConnections), kv("connections"), conns); err != nil {
		return nil, err
	}

	if res.Counters, err = writeRows(filepath.Join(dir, FileCounters), kv("counters"), counterRows(s.counters, s.an.Counters)); err != nil {
		return nil, err
	}

	traffic := make([]TrafficRow, 0, len(s.an.Traffic))
	for _, t := range s.an.Traffic {
		row := TrafficRow{Conn: int32(t.QP), Source: t.Source, GoodputGbps: t.GoodputGbps, Messages: int32(len(t.MCTUs)),
			MCTUs: t.MCTUs, DataPackets: t.DataPackets, Retransmissions: t.Retransmissions}
		if row.MCTUs == nil {
			row.MCTUs = []float64{}
		}
		if t.Status != "" {
			st := t.Status
			row.Status = &st
		}
		traffic = append(traffic, row)
	}
	if res.Traffic, err = writeRows(filepath.Join(dir, FileTraffic), kv("traffic"), traffic); err != nil {
		return nil, err
	}
	return res, nil
}

// counterRows joins the counter snapshots of counters.json with the analyzers' counter checks: one row per host
// and counter name, in host then name order.
func counterRows(cf *resultsdir.CountersFile, checks []analyze.CounterCheck) []CounterRow {
	type key struct{ host, name string }
	rows := map[key]*CounterRow{}
	get := func(host, name string) *CounterRow {
		k := key{host, name}
		if r := rows[k]; r != nil {
			return r
		}
		r := &CounterRow{Host: host, Name: name}
		rows[k] = r
		return r
	}
	if cf != nil {
		for _, h := range []struct {
			name string
			hc   resultsdir.HostCounters
		}{{"requester", cf.Requester}, {"responder", cf.Responder}} {
			for name, v := range h.hc.Start {
				s := int64(v)
				get(h.name, name).Start = &s
			}
			for name, v := range h.hc.Finish {
				f := int64(v)
				get(h.name, name).Finish = &f
			}
		}
	}
	for _, c := range checks {
		r := get(c.Host, c.Name)
		exp, ok := c.Expected, c.OK
		r.Expected, r.OK = &exp, &ok
		if c.Note != "" {
			note := c.Note
			r.Note = &note
		}
	}
	out := make([]CounterRow, 0, len(rows))
	for _, r := range rows {
		if r.Start != nil && r.Finish != nil {
			d := *r.Finish - *r.Start
			r.Delta = &d
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// writeTable writes one Parquet file through fill, then flushes and syncs it. It returns the rows written.
func writeTable[T any](path string, opts []parquet.WriterOption, fill func(*parquet.GenericWriter[T]) (int64, error)) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	defer f.Close()
	w := parquet.NewGenericWriter[T](f, opts...)
	n, err := fill(w)
	if err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return n, f.Close()
}

func writeRows[T any](path string, opts []parquet.WriterOption, rows []T) (int, error) {
	_, err := writeTable(path, opts, func(w *parquet.GenericWriter[T]) (int64, error) {
		if _, err := w.Write(rows); err != nil {
			return 0, fmt.Errorf("writing %s: %w", path, err)
		}
		return int64(len(rows)), nil
	})
	return len(rows), err
}

// traceError classifies an error reading the trace: a malformed capture is the input's fault.
func traceError(path string, n int64, err error) error {
	var fe *trace.FormatError
	if errors.As(err, &fe) || errors.Is(err, io.ErrUnexpectedEOF) {
		return resultsdir.BadInputf("%s: packet %d: %v", path, n, err)
	}
	return fmt.Errorf("%s: packet %d: %w", path, n, err)
}
