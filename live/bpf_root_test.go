package live

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// TestBPFObjectsFresh fails when bpf/switch.c changed after the committed objects were generated: `go
// generate ./live` rebuilds them and records the source's hash.
func TestBPFObjectsFresh(t *testing.T) {
	src, err := os.ReadFile("bpf/switch.c")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile("bpf/switch.c.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if got, want := hex.EncodeToString(sum[:]), strings.TrimSpace(string(rec)); got != want {
		t.Fatalf("bpf/switch.c has hash %s but the committed objects were built from %s; run `go generate ./live` (needs clang and libbpf-dev)", got, want)
	}
}

func TestCheckBPFIntentsRefusesUnsupported(t *testing.T) {
	ok := []inject.Intent{{Action: inject.ActDrop}, {Action: inject.ActECN}, {Action: inject.ActCorrupt}}
	if err := CheckBPFIntents(ok); err != nil {
		t.Fatalf("drop, ecn and corrupt refused: %v", err)
	}
	for _, a := range []inject.ActionKind{inject.ActDelay, inject.ActReorder, inject.ActDuplicate, inject.ActRewrite} {
		err := CheckBPFIntents(append(ok, inject.Intent{Action: a, Source: "traffic.data-pkt-events[3]"}))
		if err == nil || !strings.Contains(err.Error(), "traffic.data-pkt-events[3]") || !strings.Contains(err.Error(), a.String()) {
			t.Errorf("%s: got %v; expected a refusal naming the event and the action", a, err)
		}
	}
}

// bpfStep is one frame sent through both switches.
type bpfStep struct {
	name string
	in   int // ingress port
	f    []byte
}

func bpfFrame(t *testing.T, in int, op roce.Opcode, qpn uint32, psn roce.PSN, syndrome uint8) []byte {
	t.Helper()
	p := roce.Packet{EthDst: rspMAC, EthSrc: reqMAC, Version: roce.RoCEv2, TOS: 2, TTL: 64, IPFlags: 2, IPID: 0x1234,
		SrcIP: reqIP, DstIP: respIP, UDPSrc: 0xc001, BTH: roce.BTH{Opcode: op, PKey: 0xffff, DestQP: qpn, PSN: psn}}
	if in == 1 {
		p.EthDst, p.EthSrc, p.SrcIP, p.DstIP = reqMAC, rspMAC, respIP, reqIP
	}
	switch {
	case op == roce.RCWriteOnly:
		p.RETH = roce.RETH{VA: 0x1000, RKey: 7, DMALen: 64}
		p.PayloadLen = 64
	case op.IsAck():
		p.AETH = roce.AETH{Syndrome: syndrome, MSN: 1}
	}
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("encoding test frame: %v", err)
	}
	return b
}

// TestNetnsBPFSwitchMatchesInjector sends crafted RoCE frames one at a time through the BPF data plane and
// through inject.Switch, and compares what each forwards and mirrors: the same frames forwarded or dropped,
// marked and corrupted alike, mirror copies equal but for the timestamp, and the same counters and hits. The
// connection's PSNs wrap 2^24 mid-message; a drop of iter 1 spares the retransmission (iter 2); a
// message-relative event fires on the message's second round.
func TestNetnsBPFSwitchMatchesInjector(t *testing.T) {
	needNetns(t)
	tb, err := NewTestbed(TestbedConfig{Tag: int(time.Now().UnixNano()%1000) + 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("testbed cleanup: %v", err)
		}
	})
	const reqQPN, respQPN = 0x11, 0x22
	ipsn := roce.PSN(0xfffffd)
	meta := []inject.ConnMeta{{Index: 0, Verb: "write", ReqIP: reqIP, RespIP: respIP, ReqQPN: reqQPN, RespQPN: respQPN,
		ReqIPSN: ipsn, PacketsPerMsg: 2, NumMsgs: 4}}
	intents := []inject.Intent{
		{Kind: inject.KindData, PSN: 3, Iter: 1, Action: inject.ActDrop, Source: "drop psn 3 iter 1"},
		{Kind: inject.KindData, PSN: 1, Action: inject.ActECN, Source: "ecn psn 1"},
		{Kind: inject.KindData, PSN: 5, Iter: 1, Action: inject.ActCorrupt, Source: "corrupt psn 5 iter 1"},
		{Kind: inject.KindAck, Nth: 1, Action: inject.ActDrop, Source: "drop ack 1"},
		{Kind: inject.KindNAK, Nth: 0, Action: inject.ActECN, Source: "ecn nak 0"},
		{Kind: inject.KindCNP, Nth: 0, Action: inject.ActCorrupt, Source: "corrupt cnp 0"},
		{Kind: inject.KindData, PSN: 6, Iter: 2, MsgIter: true, Action: inject.ActDrop, Source: "drop msg 3 round 2"},
	}
	cfg := inject.Config{Conns: meta, Intents: intents, DumperWeights: []int{1}}
	ref, err := inject.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logic, err := inject.New(cfg)
	if err != nil {
		t.Fatal(err)
	}

	var sw *BPFSwitch
	if err := InNetns(tb.Sw, func() (e error) {
		sw, e = NewBPFSwitch(BPFSwitchConfig{Ports: [2]string{SwReqIf, SwRespIf}, Dumpers: tb.SwDump})
		return e
	}); err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	if err := sw.Install(context.Background(), logic); err != nil {
		t.Fatal(err)
	}
	var tx [2]*Tx
	var rx [2]*Ring
	var dump *Ring
	for p, ns := range []string{tb.Req, tb.Resp} {
		if err := InNetns(ns, func() (e error) {
			if tx[p], e = OpenTx(HostIf, 1); e != nil {
				return e
			}
			rx[p], e = OpenRing(HostIf, RingConfig{IgnoreOutgoing: true})
			return e
		}); err != nil {
			t.Fatal(err)
		}
		defer tx[p].Close()
		defer rx[p].Close()
	}
	if err := InNetns(tb.Dump[0], func() (e error) { dump, e = OpenRing(HostIf, RingConfig{}); return e }); err != nil {
		t.Fatal(err)
	}
	defer dump.Close()

	var steps []bpfStep
	data := func(off int) {
		steps = append(steps, bpfStep{fmt.Sprintf("data psn offset %d", off), 0, bpfFrame(t, 0, roce.RCWriteOnly, respQPN, ipsn.Add(off), 0)})
	}
	for off := range 8 {
		data(off)
	}
	steps = append(steps,
		bpfStep{"ack 0", 1, bpfFrame(t, 1, roce.RCAcknowledge, reqQPN, ipsn.Add(2), 0x1f)},
		bpfStep{"ack 1", 1, bpfFrame(t, 1, roce.RCAcknowledge, reqQPN, ipsn.Add(2), 0x1f)},
		bpfStep{"nak 0", 1, bpfFrame(t, 1, roce.RCAcknowledge, reqQPN, ipsn.Add(2), 0x60)},
		bpfStep{"rnr nak", 1, bpfFrame(t, 1, roce.RCAcknowledge, reqQPN, ipsn.Add(2), 0x20)},
		bpfStep{"cnp 0", 1, bpfFrame(t, 1, roce.CNP, reqQPN, 0, 0)},
	)
	for off := 3; off < 8; off++ {
		data(off) // go-back-N retransmission: round 2
	}
	other := bpfFrame(t, 0, roce.RCWriteOnly, respQPN, 0, 0)
	other[12], other[13] = 0x88, 0xb5 // local experimental EtherType: not RoCE
	cut := bpfFrame(t, 0, roce.RCWriteOnly, respQPN, ipsn, 0)[:14+20+8+4]
	steps = append(steps,
		bpfStep{"unknown qpn", 0, bpfFrame(t, 0, roce.RCWriteOnly, 0x99, 5, 0)},
		bpfStep{"non-RoCE", 0, other},
		bpfStep{"BTH cut", 0, cut},
	)

	collect := func(r *Ring, want int, d time.Duration) [][]byte {
		var got [][]byte
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) && (want == 0 || len(got) < want) {
			if r.Poll(0, func(f []byte, _ int64, _ int) { got = append(got, append([]byte(nil), f...)) }) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		return got
	}
	var v inject.Verdict
	for i, st := range steps {
		frame := append([]byte(nil), st.f...)
		ref.Process(int64(i), st.in, frame, &v)
		tx[st.in].Send(st.f)
		tx[st.in].Flush()
		wantFwd := len(v.Forward)
		wantMir := 0
		if len(v.Mirror) > 0 {
			wantMir = 1
		}
		wait := 2 * time.Second
		if wantFwd == 0 {
			wait = 100 * time.Millisecond
		}
		fwd := collect(rx[1-st.in], wantFwd, wait)
		if wantMir == 0 {
			wait = 100 * time.Millisecond
		}
		mir := collect(dump, wantMir, wait)
		if len(fwd) != wantFwd {
			t.Errorf("%s: the bpf switch forwarded %d frames; inject forwards %d (event %s)", st.name, len(fwd), wantFwd, v.Event)
		} else if wantFwd == 1 && !bytes.Equal(fwd[0], v.Forward[0]) {
			t.Errorf("%s: forwarded frame differs from inject's (event %s)\n bpf    %x\n inject %x", st.name, v.Event, fwd[0], v.Forward[0])
		}
		if len(mir) != wantMir {
			t.Errorf("%s: %d mirror copies; inject makes %d", st.name, len(mir), wantMir)
			continue
		}
		if wantMir == 1 {
			got, want := mir[0], v.Mirror
			gm, _ := trace.DecodeMirror(got)
			wm, _ := trace.DecodeMirror(want)
			if gm.Seq != wm.Seq || gm.Event != wm.Event {
				t.Errorf("%s: mirror metadata seq %d event %s; inject writes seq %d event %s", st.name, gm.Seq, gm.Event, wm.Seq, wm.Event)
			}
			if len(got) != len(want) || !bytes.Equal(got[6:], want[6:]) {
				t.Errorf("%s: mirror copy differs from inject's beyond the timestamp\n bpf    %x\n inject %x", st.name, got, want)
			}
		}
	}
	st, err := sw.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rc := ref.Counters()
	ic := st.Injector
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"rx_roce", ic.RxRoCE, rc.RxRoCE}, {"tx_roce", ic.TxRoCE, rc.TxRoCE}, {"rx_non_roce", ic.RxNonRoCE, rc.RxNonRoCE},
		{"mirrored", ic.Mirrored, rc.Mirrored}, {"mirrored_per_dumper", ic.MirroredPerDumper, rc.MirroredPerDumper},
		{"dropped", ic.Dropped, rc.Dropped}, {"events", ic.Events, rc.Events}, {"hits", hitsOf(st.Entries), ref.Hits()},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("counter %s: bpf %v, inject %v", c.name, c.got, c.want)
		}
	}
	if rc.Dropped != 3 || rc.Events["ecn"] != 2 || rc.Events["corrupt"] != 2 {
		t.Errorf("the traffic did not exercise the events as designed: inject counted %+v", rc)
	}
	if st.Ports[0].RxFrames != uint64(countIn(steps, 0)) || st.Mirrored != rc.Mirrored || st.Dumpers[0].Tx.Frames != rc.Mirrored {
		t.Errorf("port 0 received %d frames (sent %d); %d mirrored, dumper sent %d (inject mirrored %d)",
			st.Ports[0].RxFrames, countIn(steps, 0), st.Mirrored, st.Dumpers[0].Tx.Frames, rc.Mirrored)
	}
}

func hitsOf(es []inject.Entry) []uint64 {
	var h []uint64
	for _, e := range es {
		h = append(h, e.Hits)
	}
	return h
}

func countIn(steps []bpfStep, port int) int {
	n := 0
	for _, s := range steps {
		if s.in == port {
			n++
		}
	}
	return n
}

var _ = netip.Addr{}
