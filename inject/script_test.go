package inject

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	ds "github.com/lumina-go/lumina/internal/script"
	"github.com/lumina-go/lumina/roce"
)

// TestScripts runs testdata/switch/*.txt: scripts of frames entering the switch and what it does with each
// (go test ./inject -run TestScripts -rewrite regenerates the expected outputs). Commands:
//
//	new verb=write|read [ipsn=N] [ppm=N msgs=N] [dumpers=(w,...)] [rewrite=PORT]   then one intent a line:
//	    [kind=data|ack|nak|cnp|read-req] [psn=N] [nth=N] [iter=N] [msgiter] action=A [delay=NS] [behind=N]
//	    [copies=N] [field=F value=V] [src=NAME]       (psn and nth are 0-based offsets, as in Intent)
//	send pkt=write|rresp|rreq|ack|nak|rnr|cnp-req|cnp-resp psn=N [port=P] [t=NS]
//	flush [t=NS]
//	counters
//
// Frames belong to the Figure 2 connection (requester 10.0.0.1 QPN 0xfe, responder 10.0.0.2 QPN 0xea); send
// prints the round, the event and the matching intent, the PSNs forwarded (released reordered frames
// included), the extra delay, and the mirrored copy's metadata as the trace will read it.
func TestScripts(t *testing.T) {
	ds.RunGlob(t, "testdata/switch/*.txt", func() func(*testing.T, *ds.Case) string { return (&switchDriver{}).step })
}

type switchDriver struct {
	s   *Switch
	now int64
	v   Verdict
}

func (d *switchDriver) step(t *testing.T, c *ds.Case) string {
	if c.Cmd != "new" && d.s == nil {
		t.Fatalf("%s: %s before new", c.Pos, c.Cmd)
	}
	d.now = c.Int(t, "t", d.now+1000)
	switch c.Cmd {
	case "new":
		return d.new(t, c)
	case "send":
		return d.send(t, c)
	case "flush":
		var b strings.Builder
		for _, h := range d.s.Flush(d.now) {
			fmt.Fprintf(&b, "released psn=%d port=%d held=%dns\n", decode(t, h.Frame).BTH.PSN, h.OutPort, h.HeldNs)
		}
		return b.String()
	case "counters":
		c := d.s.Counters()
		var ev []string
		for a := roce.EventDrop; int(a) < roce.NumEvents; a++ {
			if n := c.Events[a.String()]; n > 0 {
				ev = append(ev, fmt.Sprintf("%s:%d", a, n))
			}
		}
		return fmt.Sprintf("rx=%v tx=%v mirrored=%d per-dumper=%v dropped=%d held=%d events=(%s)\nhits=%v",
			c.RxRoCE, c.TxRoCE, c.Mirrored, c.MirroredPerDumper, c.Dropped, c.Held, strings.Join(ev, ","), d.s.Hits())
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func (d *switchDriver) new(t *testing.T, c *ds.Case) string {
	conn := fig2(c.Get("verb", "write"))
	conn.ReqIPSN = roce.PSN(c.Int(t, "ipsn", int64(conn.ReqIPSN)))
	conn.PacketsPerMsg, conn.NumMsgs = int(c.Int(t, "ppm", 0)), int(c.Int(t, "msgs", 0))
	cfg := Config{Conns: []ConnMeta{conn}, RewritePort: uint16(c.Int(t, "rewrite", 0)), Seed: 1}
	for _, w := range c.Args["dumpers"] {
		n, err := strconv.Atoi(w)
		if err != nil {
			t.Fatalf("%s: dumpers=%v", c.Pos, c.Args["dumpers"])
		}
		cfg.DumperWeights = append(cfg.DumperWeights, n)
	}
	for i, line := range c.Input {
		in := ds.Case{Pos: fmt.Sprintf("%s+%d", c.Pos, i+1), Args: map[string][]string{}}
		for _, a := range strings.Fields(line) {
			k, v, _ := strings.Cut(a, "=")
			in.Args[k] = []string{v}
		}
		intent := Intent{PSN: int(in.Int(t, "psn", 0)), Nth: int(in.Int(t, "nth", 0)), Iter: int(in.Int(t, "iter", 0)),
			MsgIter: in.Has("msgiter"), DelayNs: in.Int(t, "delay", 0), Behind: int(in.Int(t, "behind", 0)),
			Copies: int(in.Int(t, "copies", 0)), Field: in.Get("field", ""), Value: int(in.Int(t, "value", 0)),
			Source: in.Get("src", fmt.Sprintf("intent %d", i+1))}
		var ok bool
		if intent.Action, ok = roce.ParseEventType(in.Get("action", "")); !ok {
			t.Fatalf("%s: action %q", in.Pos, in.Get("action", ""))
		}
		kinds := map[string]PacketKind{"data": KindData, "ack": KindAck, "nak": KindNAK, "cnp": KindCNP, "read-req": KindReadReq}
		if intent.Kind, ok = kinds[in.Get("kind", "data")]; !ok {
			t.Fatalf("%s: kind %q", in.Pos, in.Get("kind", ""))
		}
		cfg.Intents = append(cfg.Intents, intent)
	}
	s, err := New(cfg)
	if err != nil {
		d.s = nil
		return "error: " + err.Error()
	}
	d.s = s
	var b strings.Builder
	for _, e := range s.Entries() {
		fmt.Fprintf(&b, "entry %s %s->%s qpn=%#x psn=%d nth=%d iter=%d msg-iter=%v %s (%s)\n",
			e.Kind, e.SrcIP, e.DstIP, e.DstQPN, e.PSN, e.Nth, e.Iter, e.MsgIter, e.Action, e.Source)
	}
	return b.String()
}

func (d *switchDriver) send(t *testing.T, c *ds.Case) string {
	psn := roce.PSN(c.Int(t, "psn", 0))
	var p pkt
	port := 0
	switch c.Get("pkt", "") {
	case "write":
		p = wr(psn)
	case "rreq":
		p = rreq(psn)
	case "rresp":
		p, port = rresp(psn), 1
	case "ack":
		p, port = ack(psn), 1
	case "nak":
		p, port = nak(psn), 1
	case "rnr":
		p, port = nak(psn), 1
		p.syndrome = 0x20 // RNR NAK, timer 0
	case "cnp-resp": // a CNP from the responder (the data receiver of a write connection)
		p, port = cnpFrom(ipResp, ipReq, 0xfe), 1
	case "cnp-req": // a CNP from the requester (the data receiver of a read connection)
		p = cnpFrom(ipReq, ipResp, 0xea)
	default:
		t.Fatalf("%s: pkt=%q", c.Pos, c.Get("pkt", ""))
	}
	port = int(c.Int(t, "port", int64(port)))
	d.s.Process(d.now, port, build(t, p), &d.v)
	v := &d.v
	var b strings.Builder
	fmt.Fprintf(&b, "iter=%d event=%s", v.Iter, v.Event)
	if v.Matched != "" {
		fmt.Fprintf(&b, " (%s)", v.Matched)
	}
	fwd := make([]string, len(v.Forward))
	for i, f := range v.Forward {
		fwd[i] = strconv.Itoa(int(decode(t, f).BTH.PSN))
	}
	fmt.Fprintf(&b, " forward=(%s) out=%d", strings.Join(fwd, ","), v.OutPort)
	if v.DelayNs != 0 {
		fmt.Fprintf(&b, " delay=%dns", v.DelayNs)
	}
	if len(v.Mirror) > 0 {
		m, ok := roce.DecodeMirror(v.Mirror)
		if !ok {
			t.Fatalf("%s: the mirrored copy has no metadata", c.Pos)
		}
		fmt.Fprintf(&b, " mirror=(seq=%d event=%s ts=%d dumper=%d)", m.Seq, m.Event, m.TimestampNs, v.Dumper)
	}
	return b.String()
}
