package rnic

import (
	"fmt"
	"strings"
	"testing"

	ds "github.com/lumina-go/lumina/internal/script"
	"github.com/lumina-go/lumina/roce"
)

// TestScripts runs testdata/qp/*.txt: one QP driven by hand, in the manner of etcd-io/raft's interaction
// scripts (go test ./rnic -run TestScripts -rewrite regenerates the expected outputs). Commands:
//
//	new [profile=cx5] [mtu=1024] [timeout=14] [retry=7] [adaptive]   a QP with QPN 0x11, peer 0x22,
//	                                       send PSN 100, receive PSN 1000
//	post verb=write|send|read len=N [id=N]  a work request
//	send                                   every packet the QP has to transmit now
//	recv op=OP psn=N [len=N] [ackreq] [syndrome=ack|nak-seq|rnr] [msn=N] [sack=N] [ce]   a packet arrives
//	timer kind=retransmit|rnr|ack-coalesce|dcqcn   a timer the QP armed fires
//	tick t=NS                              the clock moves (absolute ns)
//	state                                  the QP's state, PSNs and statistics
//
// OP is write-first|write-middle|write-last|write-only|send-only|read-req|read-resp-first|read-resp-middle|
// read-resp-last|read-resp-only|ack. Each command prints what the QP asked of its driver: timers, completions,
// flags; send prints the packets.
func TestScripts(t *testing.T) {
	ds.RunGlob(t, "testdata/qp/*.txt", func() func(*testing.T, *ds.Case) string { return (&qpDriver{}).step })
}

type qpDriver struct {
	q   *QP
	ctr *Counters
	out Output
	now Time
}

var scriptOps = map[string]roce.Opcode{
	"write-first": roce.RCWriteFirst, "write-middle": roce.RCWriteMiddle, "write-last": roce.RCWriteLast,
	"write-only": roce.RCWriteOnly, "send-only": roce.RCSendOnly, "read-req": roce.RCReadRequest,
	"read-resp-first": roce.RCReadResponseFirst, "read-resp-middle": roce.RCReadResponseMiddle,
	"read-resp-last": roce.RCReadResponseLast, "read-resp-only": roce.RCReadResponseOnly, "ack": roce.RCAcknowledge,
}

var scriptSyndromes = map[string]uint8{"ack": roce.SyndromeACKUnlimited, "nak-seq": roce.SyndromePSNSeqErr,
	"rnr": 0x20 | 14}

var timerNames = [...]string{TimerRetransmit: "retransmit", TimerRNR: "rnr", TimerAckCoalesce: "ack-coalesce",
	TimerDCQCN: "dcqcn"}

func opName(op roce.Opcode) string {
	for n, o := range scriptOps {
		if o == op {
			return n
		}
	}
	return op.String()
}

func (d *qpDriver) step(t *testing.T, c *ds.Case) string {
	defer func() { checkInvariants(t, c.Pos, d.q) }()
	if c.Cmd != "new" && d.q == nil {
		t.Fatalf("%s: %s before new", c.Pos, c.Cmd)
	}
	d.out.Reset()
	switch c.Cmd {
	case "new":
		p := mustProfile(t, c.Get("profile", "cx5"))
		d.ctr = NewCounters(p)
		q, err := NewQP(QPConfig{Profile: p, Counters: d.ctr, LocalQPN: 0x11, RemoteQPN: 0x22, SendPSN: 100,
			RecvPSN: 1000, MTU: int(c.Int(t, "mtu", 1024)), Timeout: uint8(c.Int(t, "timeout", 14)),
			RetryCnt: uint8(c.Int(t, "retry", 7)), RNRRetry: 7, MinRNRTimer: 14, MigReq: p.MigReq,
			AdaptiveRetrans: c.Has("adaptive")})
		if err != nil {
			return "error: " + err.Error()
		}
		d.q, d.now = q, 0
		return ""
	case "post":
		verbs := map[string]Verb{"write": VerbWrite, "send": VerbSend, "read": VerbRead}
		v, ok := verbs[c.Get("verb", "write")]
		if !ok {
			t.Fatalf("%s: verb=%s", c.Pos, c.Get("verb", ""))
		}
		if err := d.q.PostSend(d.now, WorkRequest{ID: uint64(c.Int(t, "id", 1)), Verb: v, Length: int(c.Int(t, "len", 1024)),
			RemoteAddr: 0x1000, RKey: 7}, &d.out); err != nil {
			return "error: " + err.Error()
		}
	case "send":
		var b strings.Builder
		var p Pkt
		for d.q.NextPacket(d.now, &p) {
			fmt.Fprintf(&b, "%s psn=%d len=%d", opName(p.Opcode), p.PSN, p.PayloadLen)
			if p.AckReq {
				b.WriteString(" ackreq")
			}
			if p.Opcode.HasAETH() {
				fmt.Fprintf(&b, " syndrome=%#x msn=%d", p.AETH.Syndrome, p.AETH.MSN)
			}
			if p.HasSACK {
				fmt.Fprintf(&b, " sack=%d", p.SACK)
			}
			if p.Retransmission {
				b.WriteString(" retransmission")
			}
			if p.Msg >= 0 {
				fmt.Fprintf(&b, " msg=%d", p.Msg)
			}
			b.WriteString("\n")
		}
		return b.String()
	case "recv":
		op, ok := scriptOps[c.Get("op", "")]
		if !ok {
			t.Fatalf("%s: op=%q", c.Pos, c.Get("op", ""))
		}
		p := Pkt{Opcode: op, DestQP: 0x11, PSN: roce.PSN(c.Int(t, "psn", 0)), AckReq: c.Has("ackreq"),
			PayloadLen: int(c.Int(t, "len", 0)), CE: c.Has("ce")}
		if op.HasAETH() {
			syn, ok := scriptSyndromes[c.Get("syndrome", "ack")]
			if !ok {
				t.Fatalf("%s: syndrome=%q", c.Pos, c.Get("syndrome", ""))
			}
			p.AETH = roce.AETH{Syndrome: syn, MSN: uint32(c.Int(t, "msn", 0))}
		}
		if c.Has("sack") {
			p.SACK, p.HasSACK = roce.PSN(c.Int(t, "sack", 0)), true
		}
		if op.HasRETH() {
			p.RETH = roce.RETH{VA: 0x1000, RKey: 7, DMALen: uint32(c.Int(t, "dmalen", int64(p.PayloadLen)))}
		}
		d.q.Receive(d.now, &p, &d.out)
	case "timer":
		k := -1
		for i, n := range timerNames {
			if n == c.Get("kind", "") {
				k = i
			}
		}
		if k < 0 {
			t.Fatalf("%s: kind=%q", c.Pos, c.Get("kind", ""))
		}
		d.q.OnTimer(d.now, TimerKind(k), &d.out)
	case "tick":
		d.now = c.Int(t, "t", d.now)
		return ""
	case "state":
		s := d.q.Stats()
		return fmt.Sprintf("state=%s epsn=%d oldest-unacked=%d\ntx=%d retx=%d rx=%d naks-sent=%d naks-rcvd=%d timeouts=%d read-reissues=%d dups=%d ooo=%d completed=%d failed=%d delivered=%d",
			d.q.State(), d.q.ExpectedPSN(), d.q.OldestUnacked(), s.TxPackets, s.TxRetransmits, s.RxPackets, s.NAKsSent,
			s.NAKsReceived, s.Timeouts, s.ReadReissues, s.Duplicates, s.OutOfSequence, s.Completed, s.Failed, s.Delivered)
	default:
		t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	return d.output()
}

// output prints what the last step asked of the driver.
func (d *qpDriver) output() string {
	var parts []string
	for _, tm := range d.out.Timers {
		if tm.Cancel {
			parts = append(parts, fmt.Sprintf("cancel %s", timerNames[tm.Kind]))
		} else {
			parts = append(parts, fmt.Sprintf("arm %s at=%d", timerNames[tm.Kind], tm.At))
		}
	}
	for _, c := range d.out.Completions {
		parts = append(parts, fmt.Sprintf("complete wr=%d status=%s bytes=%d msg=%d recv=%v", c.WRID, c.Status.ConnStatus(),
			c.Bytes, c.Msg, c.Recv))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{d.out.Wake, "wake"}, {d.out.NAKSent, "nak-sent"}, {d.out.NAKTail, "nak-tail"},
		{d.out.ReadReissue, "read-reissue"}, {d.out.Timeout, "timeout"}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, "\n")
}
