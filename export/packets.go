package export

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// batch is how many rows the packet writer hands to parquet at once.
const batch = 1024

type flowKey struct {
	ip netip.Addr
	qp uint32
}

type flowInfo struct {
	conn int32
	dir  *string
}

// vals holds one row's values that the row's optional columns point at: rows of a batch point into a reused
// array, so the packet table allocates nothing per packet.
type vals struct {
	conn, udpSrc, opcode, syndrome, ecn, dscp, payload, iter int32
	destQP, psn, msn, seq, ts                                int64
	becn                                                     bool
	comment                                                  string
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
		pw.flows[flowKey{c.RespIP, c.RespQPN}] = flowInfo{qp, pw.dirs[0]}
		pw.flows[flowKey{c.ReqIP, c.ReqQPN}] = flowInfo{qp, pw.dirs[1]}
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

// run reads the trace and writes its rows, counting the rows of each connection into perConn.
func (pw *packetWriter) run(path string, w *parquet.GenericWriter[PacketRow], perConn map[int32]int64) (int64, error) {
	f, err := trace.Open(path)
	if err != nil {
		return 0, traceError(path, 0, err)
	}
	defer f.Close()
	var n int64
	for ; ; n++ {
		p, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, traceError(path, n, err)
		}
		pw.add(p, perConn)
		if len(pw.rows) == batch {
			if err := pw.flush(w); err != nil {
				return 0, err
			}
		}
	}
	return n, pw.flush(w)
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
		r.PayloadLen = &v.payload
	}
	r.ICRC = pw.icrc[pkt.CheckICRC()]
}

// metadata fills the event columns: from the pcapng comment a results directory's trace carries, or from the
// mirror encoding of a Lumina dump (TTL, MAC addresses); a plain capture leaves them null.
func (pw *packetWriter) metadata(p *trace.Packet, r *PacketRow, v *vals) {
	switch pw.meta {
	case "comment":
		c := parseComment(p.Comment)
		if c.hasEvent {
			r.Event = pw.events[c.event]
		}
		if c.hasSeq {
			v.seq = int64(c.seq)
			r.MirrorSeq = &v.seq
		}
		if c.iter > 0 {
			v.iter = int32(c.iter)
			r.Iter = &v.iter
		}
		if c.hasQP {
			v.conn = int32(c.qp)
			r.Conn = &v.conn
		}
		if c.other {
			v.comment = p.Comment
			r.Comment = &v.comment
		}
		// The frame carries the mirror encoding too: its timestamp is the switch's when its sequence number
		// is the comment's.
		if m, ok := roce.DecodeMirror(p.Data); ok && c.hasSeq && m.Seq == c.seq && m.Event == c.event {
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

type comment struct {
	event                   roce.EventType
	seq                     uint64
	iter, qp                int
	hasEvent, hasSeq, hasQP bool
	other                   bool // words beyond event=, seq=, iter=, qp=
}

// parseComment reads "event=drop seq=17 iter=2 qp=1" (testbed.reconstruct's annotation) without allocating.
func parseComment(s string) comment {
	var c comment
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		w := s
		if i >= 0 {
			w, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if w == "" {
			continue
		}
		k, val, ok := strings.Cut(w, "=")
		if !ok {
			c.other = true
			continue
		}
		switch k {
		case "event":
			if e, ok := roce.ParseEventType(val); ok {
				c.event, c.hasEvent = e, true
				continue
			}
		case "seq":
			if n, ok := atoi(val); ok {
				c.seq, c.hasSeq = uint64(n), true
				continue
			}
		case "iter":
			if n, ok := atoi(val); ok {
				c.iter = n
				continue
			}
		case "qp":
			if n, ok := atoi(val); ok {
				c.qp, c.hasQP = n, true
				continue
			}
		}
		c.other = true
	}
	return c
}

func atoi(s string) (int, bool) {
	if s == "" || len(s) > 15 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
