package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// batch is how many rows the packet writer hands to parquet at once.
const batch = 1024

// stopEvery is how many packets the export reads between looks at its context.
const stopEvery = 64

type flowKey struct {
	ip netip.Addr
	qp uint32
}

type flowInfo struct {
	conn int32
	dir  *string
	st   *iterState
}

// iterState is one connection's ITER as the switch counts it (inject: roce.NextIter from the initial PSN, in
// round 1): the round of its data packets, and of its read requests.
type iterState struct {
	read              bool
	dataLast, reqLast roce.PSN
	dataIter, reqIter int
}

// iter returns the round of a packet sent in direction toResp (requester -> responder), and whether it has one:
// data packets (SEND, WRITE; READ responses) and read requests do, ACKs, NAKs and CNPs do not.
func (st *iterState) iter(toResp bool, op roce.Opcode, psn roce.PSN) (int, bool) {
	switch {
	case st.read && toResp && op.IsReadRequest():
		last := st.reqLast
		if last.Less(st.dataLast) {
			last = st.dataLast
		}
		st.reqIter = roce.NextIter(st.reqIter, last, psn)
		st.reqLast = psn
		return st.reqIter, true
	case st.read && !toResp && op.IsReadResponse(), !st.read && toResp && (op.IsSend() || op.IsWrite()):
		st.dataIter = roce.NextIter(st.dataIter, st.dataLast, psn)
		st.dataLast = psn
		return st.dataIter, true
	}
	return 0, false
}

// vals holds one row's values that the row's optional columns point at: rows of a batch point into a reused
// array, so the packet table allocates nothing per packet.
type vals struct {
	conn, udpSrc, opcode, syndrome, ecn, dscp, payload, iter, cqp int32
	destQP, psn, msn, seq, ts                                     int64
	becn                                                          bool
	comment                                                       string
}

// packetWriter turns the trace into packet rows.
type packetWriter struct {
	flows    map[flowKey]flowInfo
	meta     string
	pkt      roce.Packet
	rows     []PacketRow
	vals     []vals
	ips      map[netip.Addr]*string
	opNames  [256]*string
	events   [256]*string
	icrc     [3]*string
	ackTypes [4]*string
	dirs     [2]*string
}

func strp(s string) *string { return &s }

func newPacketWriter(an *analyze.Analysis, base int, meta string) *packetWriter {
	pw := &packetWriter{flows: make(map[flowKey]flowInfo), meta: meta, ips: make(map[netip.Addr]*string),
		rows: make([]PacketRow, 0, batch), vals: make([]vals, batch)}
	pw.dirs = [2]*string{strp(DirToResponder), strp(DirToRequester)}
	for _, c := range an.Connections {
		qp := int32(c.Index + base)
		st := &iterState{read: c.Verb == analyze.VerbRead, dataIter: 1, reqIter: 1,
			dataLast: c.ReqIPSN.Add(-1), reqLast: c.ReqIPSN.Add(-1)}
		pw.flows[flowKey{c.RespIP, c.RespQPN}] = flowInfo{qp, pw.dirs[0], st}
		pw.flows[flowKey{c.ReqIP, c.ReqQPN}] = flowInfo{qp, pw.dirs[1], st}
	}
	for i := range pw.events {
		pw.events[i] = strp(roce.EventType(i).String())
	}
	for i, s := range []string{"not-checkable", "good", "bad"} {
		pw.icrc[i] = strp(s)
	}
	for i := range pw.ackTypes {
		pw.ackTypes[i] = strp(roce.AckType(i).String())
	}
	return pw
}

func (pw *packetWriter) ip(a netip.Addr) *string {
	if s, ok := pw.ips[a]; ok {
		return s
	}
	s := strp(a.String())
	if len(pw.ips) < 1<<16 {
		pw.ips[a] = s
	}
	return s
}

func (pw *packetWriter) opName(op roce.Opcode) *string {
	if s := pw.opNames[op]; s != nil {
		return s
	}
	s := strp(op.String())
	pw.opNames[op] = s
	return s
}

// run reads the traces, merged as the analysis merged them, and writes their rows, counting the rows of each
// connection into perConn. It returns the files a capture tool left cut short in the middle of a packet.
func (pw *packetWriter) run(ctx context.Context, paths []string, order summary.Order, w *parquet.GenericWriter[PacketRow], perConn map[int32]int64) (int64, []*trace.File, error) {
	files := make([]*trace.File, 0, len(paths))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	readers := make([]trace.Reader, 0, len(paths))
	for _, path := range paths {
		f, err := trace.Open(path)
		if err != nil {
			return 0, nil, traceError(path, 0, err)
		}
		files = append(files, f)
		readers = append(readers, f)
	}
	in := readers[0]
	if len(readers) > 1 {
		in = trace.NewMerger(trace.MergeOptions{ByMirrorSeq: order == summary.OrderMirror}, readers...)
	}
	name := strings.Join(paths, " ")
	var n int64
	for ; ; n++ {
		p, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, nil, traceError(name, n, err)
		}
		pw.add(p, perConn)
		if len(pw.rows) == batch {
			if err := pw.flush(w); err != nil {
				return 0, nil, err
			}
		}
		if n%stopEvery == stopEvery-1 {
			if err := ctx.Err(); err != nil {
				return 0, nil, fmt.Errorf("export stopped: %w", err)
			}
		}
	}
	var cut []*trace.File
	for _, f := range files {
		if f.Truncated() != nil {
			cut = append(cut, f)
		}
	}
	return n, cut, pw.flush(w)
}

func (pw *packetWriter) flush(w *parquet.GenericWriter[PacketRow]) error {
	if len(pw.rows) == 0 {
		return nil
	}
	if _, err := w.Write(pw.rows); err != nil {
		return fmt.Errorf("writing %s: %w", FilePackets, err)
	}
	pw.rows = pw.rows[:0]
	return nil
}

// add appends the row of one packet.
func (pw *packetWriter) add(p *trace.Packet, perConn map[int32]int64) {
	v := &pw.vals[len(pw.rows)]
	pw.rows = append(pw.rows, PacketRow{Index: int64(p.Index), TimeNs: p.Timestamp,
		FrameLen: int32(p.OrigLen), CapturedLen: int32(p.CapLen)})
	r := &pw.rows[len(pw.rows)-1]
	if r.FrameLen < r.CapturedLen {
		r.FrameLen = r.CapturedLen
	}
	if p.LinkType != trace.LinkTypeEthernet {
		return
	}
	pkt := &pw.pkt
	if pkt.Decode(p.Data, p.OrigLen) {
		pw.roceColumns(r, v)
		fi, ok := pw.flows[flowKey{pkt.DstIP, pkt.BTH.DestQP}]
		if ok {
			v.conn = fi.conn
			r.Conn, r.Direction = &v.conn, fi.dir
			if r.PSN != nil {
				if it, ok := fi.st.iter(fi.dir == pw.dirs[0], pkt.BTH.Opcode, pkt.BTH.PSN); ok {
					v.iter = int32(it)
					r.Iter = &v.iter
				}
			}
		}
	}
	pw.metadata(p, r, v)
	if r.Conn != nil {
		perConn[*r.Conn]++
	}
}

func (pw *packetWriter) roceColumns(r *PacketRow, v *vals) {
	pkt := &pw.pkt
	r.RoCE = true
	if pkt.SrcIP.IsValid() {
		r.SrcIP, r.DstIP = pw.ip(pkt.SrcIP), pw.ip(pkt.DstIP)
	}
	if pkt.Version == roce.RoCEv2 {
		v.udpSrc = int32(pkt.UDPSrc)
		r.UDPSrcPort = &v.udpSrc
	}
	v.ecn, v.dscp = int32(pkt.ECN()), int32(pkt.DSCP())
	r.ECN, r.DSCP = &v.ecn, &v.dscp
	if pkt.Reason == roce.ReasonShortBTH && pkt.BTHOffset+roce.BTHLen > len(pkt.Data()) {
		return // the capture cut the BTH: no transport columns
	}
	v.destQP, v.psn, v.opcode = int64(pkt.BTH.DestQP), int64(pkt.BTH.PSN), int32(pkt.BTH.Opcode)
	v.becn = pkt.BTH.BECN
	r.DestQP, r.PSN, r.Opcode, r.OpcodeName, r.BECN = &v.destQP, &v.psn, &v.opcode, pw.opName(pkt.BTH.Opcode), &v.becn
	if pkt.Has(roce.ExtAETH) {
		v.syndrome, v.msn = int32(pkt.AETH.Syndrome), int64(pkt.AETH.MSN)
		r.AckSyndrome, r.MSN, r.AckType = &v.syndrome, &v.msn, pw.ackTypes[pkt.AETH.Type()]
	}
	if pkt.Reason != roce.ReasonShortBTH {
		v.payload = int32(pkt.PayloadLen)
		if pkt.BTH.Opcode == roce.CNP {
			v.payload = 0 // its 16 reserved bytes are no RDMA payload
		}
		r.PayloadLen = &v.payload
	}
	r.ICRC = pw.icrc[pkt.CheckICRC()]
}

// metadata fills the event columns: from the pcapng comment a results directory's trace carries, or from the
// mirror encoding of a Lumina dump (TTL, MAC addresses); a plain capture leaves them null.
func (pw *packetWriter) metadata(p *trace.Packet, r *PacketRow, v *vals) {
	switch pw.meta {
	case "comment":
		// conn is the analyzer's (add): the comment's qp= numbers connections as its writer did, which
		// need not be the connections table's numbering, so it stays in the comment column.
		c := trace.ParseComment(p.Comment)
		if c.HasEvent {
			r.Event = pw.events[c.Event]
		}
		if c.HasSeq {
			v.seq = int64(c.Seq)
			r.MirrorSeq = &v.seq
		}
		if c.HasIter && c.Iter > 0 { // the switch's own count (the same rule, on every copy it mirrored)
			v.iter = int32(c.Iter)
			r.Iter = &v.iter
		}
		if c.HasQP {
			v.cqp = int32(c.QP)
			r.CommentQP = &v.cqp
		}
		if c.Other {
			v.comment = p.Comment
			r.Comment = &v.comment
		}
		// The frame carries the mirror encoding too: its timestamp is the switch's when its sequence number
		// is the comment's.
		if m, ok := roce.DecodeMirror(p.Data); ok && c.HasSeq && m.Seq == c.Seq && m.Event == c.Event {
			v.ts = int64(m.TimestampNs)
			r.SwitchTsNs = &v.ts
		}
	case "mirror":
		if !r.RoCE {
			return
		}
		if m, ok := roce.DecodeMirror(p.Data); ok {
			v.seq, v.ts = int64(m.Seq), int64(m.TimestampNs)
			r.Event, r.MirrorSeq, r.SwitchTsNs = pw.events[m.Event], &v.seq, &v.ts
		}
	default:
		if p.Comment != "" {
			v.comment = p.Comment
			r.Comment = &v.comment
		}
	}
}
