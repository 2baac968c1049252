package analyze

import (
	"io"
	"net/netip"
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// frame is one synthetic captured packet.
type frame struct {
	data    []byte
	ts      int64
	comment string
}

// sliceReader is a trace.Reader over synthetic frames.
type sliceReader struct {
	frames []frame
	i      int
	p      trace.Packet
}

func (r *sliceReader) Next() (*trace.Packet, error) {
	if r.i >= len(r.frames) {
		return nil, io.EOF
	}
	f := r.frames[r.i]
	r.p = trace.Packet{Data: f.data, CapLen: len(f.data), OrigLen: len(f.data), Timestamp: f.ts,
		LinkType: trace.LinkTypeEthernet, Comment: f.comment, Index: r.i}
	r.i++
	return &r.p, nil
}

// tconn is a synthetic connection.
type tconn struct {
	reqIP, respIP   netip.Addr
	reqQPN, respQPN uint32
	ipsn            roce.PSN
}

func (c tconn) conn(i int, verb string, ppm, msgs, mtu int) Conn {
	return Conn{Index: i, Verb: verb, ReqIP: c.reqIP, RespIP: c.respIP, ReqQPN: c.reqQPN, RespQPN: c.respQPN,
		ReqIPSN: c.ipsn, PacketsPerMsg: ppm, NumMsgs: msgs, MTU: mtu}
}

func mkConn(req, resp string, reqQPN, respQPN uint32, ipsn roce.PSN) tconn {
	return tconn{netip.MustParseAddr(req), netip.MustParseAddr(resp), reqQPN, respQPN, ipsn}
}

// builder writes frames the way the Lumina switch mirrors them (TTL = event, MACs = sequence and time) or,
// with plain set, as an ordinary capture (TTL 64, the pcap timestamp as the clock).
type builder struct {
	t      testing.TB
	frames []frame
	plain  bool
	// ipv6 sends over IPv6 (give connections IPv6 addresses): the switch writes the event into the hop limit.
	ipv6 bool
}

// us converts microseconds to nanoseconds.
func tus(v float64) int64 { return int64(v * 1000) }

func (b *builder) emit(p *roce.Packet, ev roce.EventType, tUs float64) int {
	b.t.Helper()
	p.Version = roce.RoCEv2
	p.IPv6 = b.ipv6
	if p.TTL == 0 {
		p.TTL = 64
	}
	if p.TOS == 0 {
		p.TOS = 2 // ECT(0)
	}
	if ev == roce.EventECN {
		p.TOS |= 3
	}
	data, err := p.AppendTo(nil)
	if err != nil {
		b.t.Fatalf("encoding frame %d: %v", len(b.frames), err)
	}
	if !b.plain {
		m := roce.Mirror{Event: ev, Seq: uint64(len(b.frames) + 1), TimestampNs: uint64(tus(tUs))}
		if b.ipv6 {
			err = roce.EncodeMirrorNoChecksum(data, roce.EthernetLen, m)
		} else {
			err = roce.EncodeMirror(data, m)
		}
		if err != nil {
			b.t.Fatalf("mirror metadata: %v", err)
		}
	}
	b.frames = append(b.frames, frame{data: data, ts: tus(tUs)})
	return len(b.frames) - 1
}

// data sends request packet rel (from the initial PSN) of a write/send connection.
func (b *builder) data(c tconn, rel int, op roce.Opcode, ev roce.EventType, tUs float64) int {
	p := roce.Packet{SrcIP: c.reqIP, DstIP: c.respIP, PayloadLen: 1024}
	p.BTH = roce.BTH{Opcode: op, DestQP: c.respQPN, PSN: c.ipsn.Add(rel), AckReq: op.IsLast()}
	return b.emit(&p, ev, tUs)
}

// msgOps returns the opcodes of an n-packet WRITE.
func writeOp(i, n int) roce.Opcode {
	switch {
	case n == 1:
		return roce.RCWriteOnly
	case i == 0:
		return roce.RCWriteFirst
	case i == n-1:
		return roce.RCWriteLast
	}
	return roce.RCWriteMiddle
}

func (b *builder) ackLike(c tconn, rel int, syn uint8, ev roce.EventType, tUs float64, payload []byte) int {
	p := roce.Packet{SrcIP: c.respIP, DstIP: c.reqIP, Payload: payload}
	p.BTH = roce.BTH{Opcode: roce.RCAcknowledge, DestQP: c.reqQPN, PSN: c.ipsn.Add(rel)}
	p.AETH = roce.AETH{Syndrome: syn}
	return b.emit(&p, ev, tUs)
}

func (b *builder) ack(c tconn, rel int, tUs float64) int {
	return b.ackLike(c, rel, roce.SyndromeACKUnlimited, 0, tUs, nil)
}

func (b *builder) nak(c tconn, rel int, tUs float64) int {
	return b.ackLike(c, rel, roce.SyndromePSNSeqErr, 0, tUs, nil)
}

// sack sends an IRN NAK: cumulative PSN cum, selectively acknowledging sack.
func (b *builder) sack(c tconn, cum, sack int, tUs float64) int {
	s := c.ipsn.Add(sack)
	return b.ackLike(c, cum, roce.SyndromePSNSeqErr, 0, tUs, []byte{0, byte(s >> 16), byte(s >> 8), byte(s)})
}

// cnpTo sends a CNP from the data receiver to the data sender's QP (toReq: the requester is the data sender).
func (b *builder) cnpTo(c tconn, toReq bool, tUs float64) int {
	p := roce.Packet{SrcIP: c.respIP, DstIP: c.reqIP, TOS: 48<<2 | 2}
	p.BTH = roce.BTH{Opcode: roce.CNP, DestQP: c.reqQPN, BECN: true}
	if !toReq {
		p.SrcIP, p.DstIP, p.BTH.DestQP = c.reqIP, c.respIP, c.respQPN
	}
	return b.emit(&p, 0, tUs)
}

func (b *builder) readReq(c tconn, rel, length int, ev roce.EventType, tUs float64) int {
	p := roce.Packet{SrcIP: c.reqIP, DstIP: c.respIP}
	p.BTH = roce.BTH{Opcode: roce.RCReadRequest, DestQP: c.respQPN, PSN: c.ipsn.Add(rel), AckReq: true}
	p.RETH = roce.RETH{DMALen: uint32(length)}
	return b.emit(&p, ev, tUs)
}

func (b *builder) readResp(c tconn, rel int, op roce.Opcode, ev roce.EventType, tUs float64) int {
	p := roce.Packet{SrcIP: c.respIP, DstIP: c.reqIP, PayloadLen: 1024}
	p.BTH = roce.BTH{Opcode: op, DestQP: c.reqQPN, PSN: c.ipsn.Add(rel)}
	p.AETH = roce.AETH{Syndrome: roce.SyndromeACKUnlimited}
	return b.emit(&p, ev, tUs)
}

func readOp(i, n int) roce.Opcode {
	switch {
	case n == 1:
		return roce.RCReadResponseOnly
	case i == 0:
		return roce.RCReadResponseFirst
	case i == n-1:
		return roce.RCReadResponseLast
	}
	return roce.RCReadResponseMiddle
}

func (b *builder) run(opts Options) *Analysis {
	b.t.Helper()
	res, err := Analyze(&sliceReader{frames: b.frames}, opts)
	if err != nil {
		b.t.Fatalf("Analyze: %v", err)
	}
	return res
}

// check returns the one check of an analyzer on a QP.
func check(t *testing.T, res *Analysis, analyzer string, qp int) Check {
	t.Helper()
	var found []Check
	for _, c := range res.Checks {
		if c.Analyzer == analyzer && c.QP == qp {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s check for qp %d, got %d in %+v", analyzer, qp, len(found), res.Checks)
	}
	return found[0]
}

func wantOK(t *testing.T, c Check) {
	t.Helper()
	if !c.OK || c.ViolationCount != 0 || len(c.Violations) != 0 {
		t.Fatalf("%s qp %d: want ok, got %+v", c.Analyzer, c.QP, c.Violations)
	}
}

// wantViolations asserts the exact violations (packet index and message) of a check.
func wantViolations(t *testing.T, c Check, want ...Violation) {
	t.Helper()
	if c.OK {
		t.Errorf("%s qp %d: ok, want failure", c.Analyzer, c.QP)
	}
	if len(c.Violations) != len(want) || c.ViolationCount != len(want) {
		t.Fatalf("%s qp %d: got %d violations %+v, want %+v", c.Analyzer, c.QP, len(c.Violations), c.Violations, want)
	}
	for i := range want {
		if c.Violations[i] != want[i] {
			t.Errorf("%s qp %d violation %d:\n got  %+v\n want %+v", c.Analyzer, c.QP, i, c.Violations[i], want[i])
		}
	}
}

// fv reads an optional float, -1 for null.
func fv(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

func sv(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}
