package htmlreport

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// Packet kinds of the time-sequence diagram, the values of the kind column.
const (
	KindData = iota // a request or READ response carrying a PSN beyond every earlier one of its direction
	KindRetx        // the same, at or below a PSN already sent (or covered by a READ request): a retransmission
	KindACK
	KindNAK
	KindCNP
	numKinds
)

// Columns is a packet table stored column-wise: each column a little-endian typed array, base64-encoded, so that
// a million packets take some 24 MB of page instead of a hundred as JSON objects, and the page's script reads
// them into typed arrays without parsing a number per value. Rows are in time order.
type Columns struct {
	N int `json:"n"`
	// T is the time in µs since the trace's first packet (float64).
	T string `json:"t"`
	// Y is the plotted value (int32): the PSN offset from the connection's initial PSN (the signed 24-bit
	// difference), or the QP number.
	Y string `json:"y"`
	// Kind is the series (uint8): a Kind* value, or for the CNP timeline 0 CE mark, 1 CNP.
	Kind string `json:"kind"`
	// Ev is the switch's event on the packet (uint8, roce.EventType; 0 none).
	Ev string `json:"ev"`
	// Op is the BTH opcode (uint8).
	Op string `json:"op"`
	// PSN is the PSN on the wire (uint32).
	PSN string `json:"psn"`
	// Pkt is the packet's index in the trace (uint32), as the analyzers' violations name it.
	Pkt string `json:"pkt"`
}

// colBuilder accumulates one Columns.
type colBuilder struct {
	t        []float64
	y        []int32
	psn      []uint32
	kind, ev []uint8
	op       []uint8
	pkt      []uint32
}

func (b *colBuilder) add(t float64, y int32, kind, ev, op uint8, psn uint32, pkt int) {
	b.t = append(b.t, t)
	b.y = append(b.y, y)
	b.kind = append(b.kind, kind)
	b.ev = append(b.ev, ev)
	b.op = append(b.op, op)
	b.psn = append(b.psn, psn)
	b.pkt = append(b.pkt, uint32(pkt))
}

// columns sorts the rows by time (stably: a trace's order is kept among equal times) and encodes them.
func (b *colBuilder) columns() Columns {
	n := len(b.t)
	if !sort.Float64sAreSorted(b.t) {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(i, j int) bool { return b.t[idx[i]] < b.t[idx[j]] })
		nb := colBuilder{t: make([]float64, 0, n), y: make([]int32, 0, n), psn: make([]uint32, 0, n), kind: make([]uint8, 0, n),
			ev: make([]uint8, 0, n), op: make([]uint8, 0, n), pkt: make([]uint32, 0, n)}
		for _, i := range idx {
			nb.add(b.t[i], b.y[i], b.kind[i], b.ev[i], b.op[i], b.psn[i], int(b.pkt[i]))
		}
		*b = nb
	}
	f := make([]byte, 8*n)
	for i, v := range b.t {
		binary.LittleEndian.PutUint64(f[8*i:], math.Float64bits(v))
	}
	return Columns{N: n, T: b64(f), Y: i32s(b.y), Kind: b64(b.kind), Ev: b64(b.ev), Op: b64(b.op), PSN: u32s(b.psn), Pkt: u32s(b.pkt)}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func i32s(v []int32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b64(b)
}

func u32s(v []uint32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b64(b)
}

// ConnTrace is one connection's time-sequence diagram: its packets and how many fall in each series.
type ConnTrace struct {
	QP    int    `json:"qp"` // with the index base
	Verb  string `json:"verb"`
	Label string `json:"label"`
	// Counts is the number of packets per series: data, retransmitted, ACK, NAK, CNP, injected.
	Counts  []int   `json:"counts"`
	Packets Columns `json:"packets"`
}

// TraceView is what the page plots from the trace itself.
type TraceView struct {
	Packets  int    `json:"packets"`
	Metadata string `json:"metadata"` // mirror | comment | none
	// StartNs is the time of the trace's first packet, the origin of every time axis.
	StartNs int64       `json:"start_ns"`
	Conns   []ConnTrace `json:"conns"`
	// EndUs is the time of the trace's last RoCE packet (µs from StartNs), where the CNP timeline's time axis
	// ends (as does the diagram of the connection that lasts to the end).
	EndUs float64 `json:"end_us"`
	// CNP is the CNP timeline: CE-marked data packets (kind 0: the switch's ECN event, or the IP header's ECN
	// field at CE in a plain capture) and CNPs (kind 1), y the connection's QP; and CNPs of no known connection
	// (kind 2), y their destination QPN.
	CNP       Columns `json:"cnp"`
	CNPCounts []int   `json:"cnp_counts"` // CE marks, CNPs, CNPs of no known connection
	// Unmatched counts RoCE packets of no listed connection (not plotted, but for CNPs on the CNP timeline).
	Unmatched int `json:"unmatched"`
	// Opcodes names the opcodes in the trace (decimal code -> name), Events the switch's events by number.
	Opcodes map[int]string `json:"opcodes"`
	Events  []string       `json:"events"`
}

type connKey struct {
	ip  netip.Addr
	qpn uint32
}

type connPlot struct {
	b       colBuilder
	ipsn    roce.PSN
	qp      int
	high    [2]roce.PSN // highest data PSN seen per direction (0 requests, 1 READ responses)
	seen    [2]bool
	lastY   int32
	counts  []int
	mtu     int // the connection's MTU (0 unknown)
	maxResp int // the largest READ response payload seen
}

// readTrace reads a capture into per-connection time-sequence columns, with the connections the analyzers
// used (given, or learned from the trace), and the CNP timeline. meta is analyze's metadata mode for the trace
// (MetaAuto decides from the first RoCE packet as the analyzers do).
func readTrace(r trace.Reader, conns []analyze.Conn, indexBase int, meta analyze.Metadata) (*TraceView, error) {
	tv := &TraceView{Opcodes: map[int]string{}, Conns: make([]ConnTrace, 0, len(conns))}
	for e := 0; e < roce.NumEvents; e++ {
		tv.Events = append(tv.Events, roce.EventType(e).String())
	}
	plots := make([]*connPlot, len(conns))
	reqs := map[connKey]*connPlot{}  // packets to the responder's QP: requests
	resps := map[connKey]*connPlot{} // packets to the requester's QP: ACKs, NAKs, READ responses, CNPs
	for i, c := range conns {
		cp := &connPlot{ipsn: c.ReqIPSN, qp: c.Index + indexBase, counts: make([]int, numKinds+1), mtu: c.MTU}
		plots[i] = cp
		reqs[connKey{c.RespIP, c.RespQPN}] = cp
		resps[connKey{c.ReqIP, c.ReqQPN}] = cp
	}
	var cnp colBuilder
	cnpCounts := []int{0, 0, 0}
	var lastT float64
	var pkt roce.Packet
	var clock trace.Unwrap48
	decided := meta != analyze.MetaAuto
	first := true
	for {
		tp, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		tv.Packets++
		if tp.LinkType != trace.LinkTypeEthernet || !pkt.Decode(tp.Data, tp.OrigLen) || pkt.Reason == roce.ReasonShortBTH {
			continue
		}
		if !decided {
			decided = true
			switch {
			case strings.Contains(tp.Comment, "event="):
				meta = analyze.MetaComment
			case !pkt.IPv6 && pkt.Version == roce.RoCEv2 && pkt.TTL < 8:
				meta = analyze.MetaMirror
			default:
				meta = analyze.MetaNone
			}
		}
		ev, ns := roce.EventNone, tp.Timestamp
		switch meta {
		case analyze.MetaMirror:
			if m, ok := roce.DecodeMirror(tp.Data); ok {
				ev, ns = m.Event, clock.Extend(m.TimestampNs)
			}
		case analyze.MetaComment:
			ev = commentEvent(tp.Comment)
		}
		if first {
			first = false
			tv.StartNs = ns
		}
		t := float64(ns-tv.StartNs) / 1e3
		lastT = max(lastT, t)
		op := pkt.BTH.Opcode
		// A packet belongs to the connection the analyzers give it: a request to the one whose responder is
		// its destination, a response (ACK, NAK, READ or atomic response) or a CNP to the one whose requester
		// is. Two connections on one QP pair (each side a requester) then keep their own packets.
		key := connKey{pkt.DstIP, pkt.BTH.DestQP}
		toResp := op.IsRequest()
		var cp *connPlot
		if toResp {
			cp = reqs[key]
		} else {
			cp = resps[key]
		}
		if cp == nil {
			tv.Unmatched++
			if op == roce.CNP { // a CNP of no known connection is still on the CNP timeline, at its QPN
				cnp.add(t, int32(pkt.BTH.DestQP), 2, uint8(ev), uint8(op), uint32(pkt.BTH.PSN), tp.Index)
				cnpCounts[2]++
			}
			continue
		}
		psn := pkt.BTH.PSN
		y := int32(psn.Diff(cp.ipsn)) // signed: a response to a PSN before the initial one stays near 0
		var kind int
		switch {
		case op == roce.CNP:
			kind, y = KindCNP, cp.lastY // a CNP has no PSN of its connection: plotted at the latest data PSN
		case op.IsAck() && pkt.Ext&roce.ExtAETH != 0 && pkt.AETH.Type() != roce.AckTypeACK:
			kind = KindNAK
		case op.IsAck():
			kind = KindACK
		default:
			dir := 0
			if !toResp {
				dir = 1
			}
			if dir == 1 && pkt.PayloadLen > cp.maxResp {
				cp.maxResp = pkt.PayloadLen
			}
			// The highest PSN a request covers: a READ request covers its response packets (DMA length over the
			// MTU), so a re-issue from within them is a retransmission, not new data.
			last := psn
			if op.IsReadRequest() && pkt.Ext&roce.ExtRETH != 0 {
				mtu := cp.mtu
				if mtu <= 0 {
					mtu = cp.maxResp // unknown MTU: the largest READ response payload so far, as the analyzers do
				}
				if n := int(pkt.RETH.DMALen); mtu > 0 && n > mtu {
					last = psn.Add((n+mtu-1)/mtu - 1)
				}
			}
			kind = KindData
			if cp.seen[dir] && !cp.high[dir].Less(psn) {
				kind = KindRetx
			}
			if !cp.seen[dir] || cp.high[dir].Less(last) {
				cp.high[dir], cp.seen[dir] = last, true
			}
			cp.lastY = y
		}
		cp.counts[kind]++
		if ev != roce.EventNone {
			cp.counts[numKinds]++
		}
		if _, ok := tv.Opcodes[int(op)]; !ok {
			tv.Opcodes[int(op)] = op.String()
		}
		cp.b.add(t, y, uint8(kind), uint8(ev), uint8(op), uint32(psn), tp.Index)
		switch {
		case (ev == roce.EventECN || pkt.ECN() == 3) && (kind == KindData || kind == KindRetx): // CE: the switch's mark, or a plain capture's
			cnp.add(t, int32(cp.qp), 0, uint8(ev), uint8(op), uint32(psn), tp.Index)
			cnpCounts[0]++
		case kind == KindCNP:
			cnp.add(t, int32(cp.qp), 1, uint8(ev), uint8(op), uint32(psn), tp.Index)
			cnpCounts[1]++
		}
	}
	switch meta {
	case analyze.MetaMirror:
		tv.Metadata = "mirror"
	case analyze.MetaComment:
		tv.Metadata = "comment"
	default:
		tv.Metadata = "none"
	}
	for i, cp := range plots {
		c := conns[i]
		cols := cp.b.columns()
		cp.b = colBuilder{} // the rows are in cols now: let them go before the next connection's are encoded
		tv.Conns = append(tv.Conns, ConnTrace{QP: cp.qp, Verb: c.Verb, Counts: cp.counts, Packets: cols,
			Label: "QP " + strconv.Itoa(cp.qp) + " (" + orUnknown(c.Verb) + "): " + c.ReqIP.String() + " qpn 0x" +
				strconv.FormatUint(uint64(c.ReqQPN), 16) + " → " + c.RespIP.String() + " qpn 0x" + strconv.FormatUint(uint64(c.RespQPN), 16) +
				", initial PSN " + strconv.FormatUint(uint64(c.ReqIPSN), 10)})
	}
	tv.CNP, tv.CNPCounts, tv.EndUs = cnp.columns(), cnpCounts, lastT
	return tv, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "verb unknown"
	}
	return s
}

// commentEvent finds "event=NAME" (or a number) in a pcapng comment, as the analyzers read it.
func commentEvent(c string) roce.EventType {
	i := strings.Index(c, "event=")
	if i < 0 {
		return roce.EventNone
	}
	v := c[i+len("event="):]
	if j := strings.IndexAny(v, " ,;\n\t"); j >= 0 {
		v = v[:j]
	}
	if ev, ok := roce.ParseEventType(v); ok {
		return ev
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 && n < 256 {
		return roce.EventType(n)
	}
	return roce.EventNone
}
