package live

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
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
	ok := []inject.Intent{{Action: roce.EventDrop}, {Action: roce.EventECN}, {Action: roce.EventCorrupt}}
	if err := CheckBPFIntents(ok); err != nil {
		t.Fatalf("drop, ecn and corrupt refused: %v", err)
	}
	for _, a := range []roce.EventType{roce.EventDelay, roce.EventReorder, roce.EventDuplicate, roce.EventRewrite} {
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
	if op.HasRETH() {
		p.RETH = roce.RETH{VA: 0x1000, RKey: 7, DMALen: 64}
	}
	if op.CarriesPayload() {
		p.PayloadLen = 64
	}
	if op.HasAETH() {
		p.AETH = roce.AETH{Syndrome: syndrome, MSN: 1}
	}
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("encoding test frame: %v", err)
	}
	return b
}

// bpfRig is a testbed with the BPF data plane attached, a transmit socket and a receive ring at each host and
// a receive ring at each dumper.
type bpfRig struct {
	dumpNs  []string
	rewrite uint16 // RSS rewrite port of mirrored copies (0: none)
	sw      *BPFSwitch
	tx      [2]*Tx
	rx      [2]*Ring
	dump    []*Ring
}

func newBPFRig(t *testing.T, hook string, dumpers int, weights []int, rewrite uint16) *bpfRig {
	t.Helper()
	needNetns(t)
	tb, err := NewTestbed(TestbedConfig{Tag: int(time.Now().UnixNano()%1000) + 1000, Dumpers: dumpers})
	if err != nil {
		t.Fatal(err)
	}
	r := &bpfRig{dumpNs: tb.Dump, rewrite: rewrite}
	t.Cleanup(func() {
		for _, c := range []io.Closer{r.tx[0], r.tx[1], r.rx[0], r.rx[1]} {
			if c != nil && !isNilCloser(c) {
				c.Close()
			}
		}
		for _, d := range r.dump {
			d.Close()
		}
		if r.sw != nil {
			if err := r.sw.Close(); err != nil {
				t.Errorf("detaching the bpf switch: %v", err)
			}
		}
		if err := tb.Close(); err != nil {
			t.Errorf("testbed cleanup: %v", err)
		}
	})
	if hook == HookXDP {
		// A veth takes redirected XDP frames only when its peer runs NAPI: GRO on (docs/switch-bpf.md).
		for _, ns := range append([]string{tb.Req, tb.Resp}, tb.Dump...) {
			if err := sh("ip", "netns", "exec", ns, "ethtool", "-K", HostIf, "gro", "on"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := InNetns(tb.Sw, func() (e error) {
		r.sw, e = NewBPFSwitch(BPFSwitchConfig{Ports: [2]string{SwReqIf, SwRespIf}, Dumpers: tb.SwDump, DumperWeights: weights, RewritePort: rewrite, Hook: hook})
		return e
	}); err != nil {
		t.Fatal(err)
	}
	for p, ns := range []string{tb.Req, tb.Resp} {
		if err := InNetns(ns, func() (e error) {
			if r.tx[p], e = OpenTx(HostIf, 1); e != nil {
				return e
			}
			r.rx[p], e = OpenRing(HostIf, RingConfig{IgnoreOutgoing: true})
			return e
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range tb.Dump {
		if err := InNetns(ns, func() error {
			d, e := OpenRing(HostIf, RingConfig{})
			if e == nil {
				r.dump = append(r.dump, d)
			}
			return e
		}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func collectFrames(r *Ring, want int, d time.Duration) [][]byte {
	var got [][]byte
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && (want == 0 || len(got) < want) {
		if r.Poll(0, func(f []byte, _ int64, _ int) { got = append(got, append([]byte(nil), f...)) }) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return got
}

// compare sends the steps one at a time through the BPF data plane and through ref, and compares what each
// forwards (bytes, or nothing) and mirrors (bytes but the timestamp, and to which dumper).
func (r *bpfRig) compare(t *testing.T, ref *inject.Switch, steps []bpfStep) {
	t.Helper()
	var v inject.Verdict
	for i, st := range steps {
		frame := append([]byte(nil), st.f...)
		ref.Process(int64(i), st.in, frame, &v)
		r.tx[st.in].Send(st.f)
		r.tx[st.in].Flush()
		wantFwd := len(v.Forward)
		wait := 2 * time.Second
		if wantFwd == 0 {
			wait = 100 * time.Millisecond
		}
		fwd := collectFrames(r.rx[1-st.in], wantFwd, wait)
		if len(fwd) != wantFwd {
			t.Errorf("%s: the bpf switch forwarded %d frames; inject forwards %d (event %s)", st.name, len(fwd), wantFwd, v.Event)
		} else if wantFwd == 1 && !bytes.Equal(fwd[0], v.Forward[0]) {
			t.Errorf("%s: forwarded frame differs from inject's (event %s)\n bpf    %x\n inject %x", st.name, v.Event, fwd[0], v.Forward[0])
		}
		for d, ring := range r.dump {
			want := 0
			if len(v.Mirror) > 0 && v.Dumper == d {
				want = 1
			}
			wait := 2 * time.Second
			if want == 0 {
				wait = 50 * time.Millisecond
			}
			mir := collectFrames(ring, want, wait)
			if len(mir) != want {
				t.Errorf("%s: dumper %d got %d mirror copies; inject sends it %d", st.name, d, len(mir), want)
				continue
			}
			if want == 1 {
				got, wantCopy := mir[0], append([]byte(nil), v.Mirror...)
				if r.rewrite != 0 {
					// The random source port differs; undone, the copies must be equal.
					if !roce.UndoRSS(got, r.rewrite) || !roce.UndoRSS(wantCopy, r.rewrite) {
						t.Errorf("%s: mirror copy not RSS-rewritten to port %d: %x", st.name, r.rewrite, got)
					}
				}
				gm, _ := roce.DecodeMirror(got)
				wm, _ := roce.DecodeMirror(wantCopy)
				if gm.Seq != wm.Seq || gm.Event != wm.Event {
					t.Errorf("%s: mirror metadata seq %d event %s; inject writes seq %d event %s", st.name, gm.Seq, gm.Event, wm.Seq, wm.Event)
				}
				if len(got) != len(wantCopy) || !bytes.Equal(got[6:], wantCopy[6:]) {
					t.Errorf("%s: mirror copy differs from inject's beyond the timestamp\n bpf    %x\n inject %x", st.name, got, wantCopy)
				}
			}
		}
	}
	st, err := r.sw.Status(context.Background())
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
	if st.Ports[0].RxFrames != uint64(countIn(steps, 0)) || st.Ports[1].RxFrames != uint64(countIn(steps, 1)) || st.Mirrored != rc.Mirrored {
		t.Errorf("ports received %d and %d frames (sent %d and %d); %d mirrored (inject mirrored %d)",
			st.Ports[0].RxFrames, st.Ports[1].RxFrames, countIn(steps, 0), countIn(steps, 1), st.Mirrored, rc.Mirrored)
	}
}

// TestNetnsBPFSwitchMatchesInjector sends crafted RoCE frames one at a time through the BPF data plane and
// through inject.Switch, and compares what each forwards and mirrors: the same frames forwarded or dropped,
// marked and corrupted alike, mirror copies equal but for the timestamp, and the same counters and hits. The
// connection's PSNs wrap 2^24 mid-message; a drop of iter 1 spares the retransmission (iter 2); a
// message-relative event fires on the message's second round.
func TestNetnsBPFSwitchMatchesInjector(t *testing.T) {
	for _, hook := range []string{HookTC, HookXDP} {
		t.Run(hook, func(t *testing.T) { testNetnsBPFSwitchMatchesInjector(t, hook) })
	}
}

func testNetnsBPFSwitchMatchesInjector(t *testing.T, hook string) {
	const reqQPN, respQPN = 0x11, 0x22
	ipsn := roce.PSN(0xfffffd)
	meta := []inject.ConnMeta{{Index: 0, Verb: "write", ReqIP: reqIP, RespIP: respIP, ReqQPN: reqQPN, RespQPN: respQPN,
		ReqIPSN: ipsn, PacketsPerMsg: 2, NumMsgs: 4}}
	intents := []inject.Intent{
		{Kind: inject.KindData, PSN: 3, Iter: 1, Action: roce.EventDrop, Source: "drop psn 3 iter 1"},
		{Kind: inject.KindData, PSN: 1, Action: roce.EventECN, Source: "ecn psn 1"},
		{Kind: inject.KindData, PSN: 5, Iter: 1, Action: roce.EventCorrupt, Source: "corrupt psn 5 iter 1"},
		{Kind: inject.KindAck, Nth: 1, Action: roce.EventDrop, Source: "drop ack 1"},
		{Kind: inject.KindNAK, Nth: 0, Action: roce.EventECN, Source: "ecn nak 0"},
		{Kind: inject.KindCNP, Nth: 0, Action: roce.EventCorrupt, Source: "corrupt cnp 0"},
		{Kind: inject.KindData, PSN: 6, Iter: 2, MsgIter: true, Action: roce.EventDrop, Source: "drop msg 3 round 2"},
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
	r := newBPFRig(t, hook, 1, nil, 0)
	if err := r.sw.Install(context.Background(), logic); err != nil {
		t.Fatal(err)
	}
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
	r.compare(t, ref, steps)
	if rc := ref.Counters(); rc.Dropped != 3 || rc.Events["ecn"] != 2 || rc.Events["corrupt"] != 2 {
		t.Errorf("the traffic did not exercise the events as designed: inject counted %+v", rc)
	}
}

// TestNetnsBPFSwitchReadAndWeightedDumpers covers a READ connection (READ request rounds against the last PSN
// of either direction, READ responses as data, CNPs from the requester) and mirroring over two dumpers with
// weights 2:1 and the RSS rewrite of mirrored copies, against inject.Switch.
func TestNetnsBPFSwitchReadAndWeightedDumpers(t *testing.T) {
	for _, hook := range []string{HookTC, HookXDP} {
		t.Run(hook, func(t *testing.T) { testNetnsBPFSwitchReadAndWeightedDumpers(t, hook) })
	}
}

func testNetnsBPFSwitchReadAndWeightedDumpers(t *testing.T, hook string) {
	const reqQPN, respQPN = 0x31, 0x42
	ipsn := roce.PSN(100)
	meta := []inject.ConnMeta{{Index: 0, Verb: "read", ReqIP: reqIP, RespIP: respIP, ReqQPN: reqQPN, RespQPN: respQPN,
		ReqIPSN: ipsn, PacketsPerMsg: 3, NumMsgs: 2}}
	intents := []inject.Intent{
		{Kind: inject.KindReadReq, PSN: 3, Iter: 2, Action: roce.EventDrop, Source: "drop re-issued read req"},
		{Kind: inject.KindData, PSN: 1, Iter: 1, Action: roce.EventDrop, Source: "drop read resp 1"},
		{Kind: inject.KindData, PSN: 4, Action: roce.EventECN, Source: "ecn read resp 4"},
		{Kind: inject.KindCNP, Nth: 0, Action: roce.EventDrop, Source: "drop cnp 0"},
	}
	weights := []int{2, 1}
	cfg := inject.Config{Conns: meta, Intents: intents, DumperWeights: weights, RewritePort: 9741}
	ref, err := inject.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logic, err := inject.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := newBPFRig(t, hook, 2, weights, 9741)
	if err := r.sw.Install(context.Background(), logic); err != nil {
		t.Fatal(err)
	}
	req := func(off int) bpfStep {
		return bpfStep{fmt.Sprintf("read req %d", off), 0, bpfFrame(t, 0, roce.RCReadRequest, respQPN, ipsn.Add(off), 0)}
	}
	resp := func(off int, op roce.Opcode) bpfStep {
		return bpfStep{fmt.Sprintf("read resp %d", off), 1, bpfFrame(t, 1, op, reqQPN, ipsn.Add(off), 0)}
	}
	steps := []bpfStep{
		req(0), resp(0, roce.RCReadResponseFirst), resp(1, roce.RCReadResponseMiddle), resp(2, roce.RCReadResponseLast),
		req(3), resp(3, roce.RCReadResponseFirst),
		{"cnp 0 from the requester", 0, bpfFrame(t, 0, roce.CNP, respQPN, 0, 0)},
		{"cnp from the responder (not the data receiver)", 1, bpfFrame(t, 1, roce.CNP, reqQPN, 0, 0)},
		req(1), resp(1, roce.RCReadResponseFirst), resp(2, roce.RCReadResponseMiddle), // round 2 of message 0
		req(3), resp(3, roce.RCReadResponseFirst), resp(4, roce.RCReadResponseMiddle), resp(5, roce.RCReadResponseLast),
	}
	r.compare(t, ref, steps)
	rc := ref.Counters()
	if rc.Dropped != 3 || rc.Events["ecn"] != 1 || rc.MirroredPerDumper[0] != 2*rc.MirroredPerDumper[1] {
		t.Errorf("the traffic did not exercise the events and weights as designed: inject counted %+v", rc)
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

// TestNetnsBPFControlPlaneStatusAndIntegrity runs the BPF data plane as `lumina switch --dataplane tc|xdp
// --control --status` does: the generator's metadata installs the events through ServeControl (the start
// barrier), metadata the BPF path cannot run is refused in the reply, the status file has the ring path's
// shape, and the dumper's capture passes the integrity check against it.
func TestNetnsBPFControlPlaneStatusAndIntegrity(t *testing.T) {
	for _, hook := range []string{HookTC, HookXDP} {
		t.Run(hook, func(t *testing.T) { testNetnsBPFControlPlaneStatusAndIntegrity(t, hook) })
	}
}

func testNetnsBPFControlPlaneStatusAndIntegrity(t *testing.T, hook string) {
	r := newBPFRig(t, hook, 1, nil, 0)
	statusFile := filepath.Join(t.TempDir(), "switch.json")
	r.sw.cfg.StatusFile = statusFile
	r.sw.cfg.StatusEvery = 50 * time.Millisecond
	var dump *Dumper
	if err := InNetns(r.dumpNs[0], func() (e error) { dump, e = NewDumper(DumpConfig{Iface: HostIf, Workers: 2}); return e }); err != nil {
		t.Fatal(err)
	}
	defer dump.Close()
	dctx, dstop := context.WithCancel(context.Background())
	dumpDone := make(chan error, 1)
	go func() { dumpDone <- dump.Run(dctx) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan SwitchStatus, 1)
	go func() {
		st, err := r.sw.Run(ctx)
		if err != nil {
			t.Errorf("bpf switch: %v", err)
		}
		runDone <- st
	}()

	const ipsn, qpn = 5000, 0x42
	meta := []inject.ConnMeta{{Index: 0, Verb: "write", ReqIP: reqIP, RespIP: respIP, ReqQPN: 0x41, RespQPN: qpn, ReqIPSN: ipsn}}
	intents := []inject.Intent{{Conn: 0, Kind: inject.KindData, PSN: 3, Iter: 2, Action: roce.EventDrop, Source: "test"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ServeControl(ctx, ln, func(cs []inject.ConnMeta) (inject.Logic, error) {
		sw, err := inject.New(inject.Config{Conns: cs, Intents: intents})
		if err == nil {
			err = CheckBPF(sw)
		}
		return sw, err
	}, r.sw.Install)
	v6 := []inject.ConnMeta{{Index: 0, Verb: "write", ReqIP: netip.MustParseAddr("fd00::1"), RespIP: netip.MustParseAddr("fd00::2"), ReqQPN: 1, RespQPN: 2}}
	if rep, err := SendMetadata(ctx, ln.Addr().String(), v6); err == nil && rep.Error == "" || !strings.Contains(rep.Error+fmt.Sprint(err), "IPv4 RoCEv2 only") {
		t.Fatalf("IPv6 connection: reply %+v, %v; want a refusal naming the IPv4-only limit", rep, err)
	}
	for _, c := range []inject.Config{{DumperWeights: []int{1}, RewritePort: 9741}, {DumperWeights: []int{1, 1}}} {
		other, err := inject.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.sw.Install(ctx, other); err == nil {
			t.Errorf("installed an injector built with %+v into a bpf data plane loaded with one dumper and no rewrite", c)
		}
	}
	if err := r.sw.Install(ctx, &Learner{}); err == nil || !strings.Contains(err.Error(), "*live.Learner") {
		t.Errorf("installing a learner: %v; want a refusal naming it", err)
	}
	rep, err := SendMetadata(ctx, ln.Addr().String(), meta)
	if err != nil || !rep.Ready || rep.Entries != 1 {
		t.Fatalf("barrier: %+v, %v; want ready with 1 entry", rep, err)
	}
	for _, off := range []int{0, 1, 2, 3, 4, 5, 2, 3, 4, 5} {
		r.tx[0].Send(rocev2(t, qpn, roce.PSN(ipsn+off), 64))
	}
	r.tx[0].Flush()
	var got []int
	for _, f := range collectFrames(r.rx[1], 9, 3*time.Second) {
		var p roce.Packet
		if p.Decode(f, len(f)) {
			got = append(got, int(p.BTH.PSN))
		}
	}
	want := []int{ipsn, ipsn + 1, ipsn + 2, ipsn + 3, ipsn + 4, ipsn + 5, ipsn + 2, ipsn + 4, ipsn + 5}
	if !equalInts(got, want) {
		t.Fatalf("responder PSNs %v; want %v", got, want)
	}
	time.Sleep(150 * time.Millisecond) // a status write or two
	cancel()
	final := <-runDone
	time.Sleep(20 * time.Millisecond)
	dstop()
	if err := <-dumpDone; err != nil {
		t.Fatalf("dumper: %v", err)
	}
	path := filepath.Join(t.TempDir(), "dumper-0.pcap")
	if _, err := dump.Write(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(statusFile)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		SwitchStatus
		Entries []struct {
			Hits uint64 `json:"hits"`
		} `json:"entries"` // shadows SwitchStatus.Entries, whose kinds and actions do not unmarshal
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("status file: %v", err)
	}
	if st.Dataplane != hook || st.Injector == nil || st.Injector.Dropped != 1 || st.NotForwarded != 1 ||
		len(st.Entries) != 1 || st.Entries[0].Hits != 1 || st.Mirrored != 10 || st.Ports[0].RxRoCE != 10 ||
		st.Ports[1].TxRoCE != 9 || st.Installed != 1 || final.Mirrored != st.Mirrored {
		t.Fatalf("status file %s; want the hook, one drop by the one entry, 10 mirrored, 10 RoCE in, 9 out, 1 install", raw)
	}
	ic := trace.NewIntegrityChecker(trace.IntegrityOptions{})
	var events []roce.EventType
	for i, p := range readPcap(t, path) {
		m, _ := roce.DecodeMirror(p)
		ic.Add(i, m)
		events = append(events, m.Event)
	}
	if in := ic.Finish(st.Mirrored, st.Ports[0].RxRoCE+st.Ports[1].RxRoCE); !in.OK {
		t.Fatalf("integrity check of the BPF switch's trace: %+v", in)
	}
	if len(events) != 10 || events[7] != roce.EventDrop {
		t.Fatalf("mirrored events %v; want 10 copies, the 8th a drop", events)
	}
}
