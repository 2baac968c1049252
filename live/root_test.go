package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// needNetns fails the test when it cannot build namespaces for a reason the machine can fix (not root, no ip
// or ethtool), and skips it only when the kernel has no network namespaces at all.
func needNetns(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/proc/self/ns/net"); errors.Is(err, os.ErrNotExist) {
		t.Skip("this kernel has no network namespaces (CONFIG_NET_NS); the netns tests cannot run here")
	}
	if err := RequireRoot(); err != nil {
		t.Fatalf("netns test: %v", err)
	}
	if _, err := os.Stat("/usr/sbin/ethtool"); err != nil {
		t.Fatalf("netns test: ethtool is missing (apt-get install -y ethtool): %v", err)
	}
}

var (
	reqIP  = netip.MustParseAddr("10.0.0.1")
	respIP = netip.MustParseAddr("10.0.0.2")
	reqMAC = [6]byte{2, 0, 0, 0, 0, 2}
	rspMAC = [6]byte{2, 0, 0, 0, 0, 3}
)

// rocev2 builds an RC WRITE ONLY frame requester -> responder.
func rocev2(t testing.TB, qpn uint32, psn roce.PSN, payload int) []byte {
	t.Helper()
	p := roce.Packet{EthDst: rspMAC, EthSrc: reqMAC, Version: roce.RoCEv2, TOS: 2, TTL: 64, IPFlags: 2,
		SrcIP: reqIP, DstIP: respIP, UDPSrc: 0xc001, BTH: roce.BTH{Opcode: roce.RCWriteOnly, PKey: 0xffff,
			DestQP: qpn, PSN: psn, AckReq: true}, RETH: roce.RETH{VA: 0x1000, RKey: 7, DMALen: uint32(payload)},
		PayloadLen: payload}
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("encoding test frame: %v", err)
	}
	return b
}

// rig is a testbed with the switch running, one dumper capturing, a transmit socket in the requester's
// namespace and a receive ring in the responder's.
type rig struct {
	tb       *Testbed
	sw       *Switch
	dump     *Dumper
	tx       *Tx
	rx       *Ring
	swStop   context.CancelFunc
	swDone   chan SwitchStatus
	dumpStop context.CancelFunc
	dumpDone chan error
}

func newRig(t testing.TB, logic inject.Logic) *rig {
	t.Helper()
	needNetns(t)
	tb, err := NewTestbed(TestbedConfig{Tag: int(time.Now().UnixNano() % 1000)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{tb: tb}
	t.Cleanup(func() {
		if r.swStop != nil {
			r.swStop()
			<-r.swDone
		}
		if r.dumpStop != nil {
			r.dumpStop()
			<-r.dumpDone
		}
		for _, c := range []io.Closer{r.sw, r.dump, r.tx, r.rx} {
			if c != nil && !isNilCloser(c) {
				c.Close()
			}
		}
		if err := tb.Close(); err != nil {
			t.Errorf("testbed cleanup: %v", err)
		}
		if _, err := os.Stat(filepath.Join(NetnsDir, tb.Sw)); err == nil {
			t.Errorf("namespace %s survived the cleanup", tb.Sw)
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(InNetns(tb.Sw, func() (e error) {
		r.sw, e = NewSwitch(SwitchConfig{Ports: [2]string{SwReqIf, SwRespIf}, Dumpers: tb.SwDump, Logic: logic})
		return e
	}))
	must(InNetns(tb.Dump[0], func() (e error) {
		r.dump, e = NewDumper(DumpConfig{Iface: HostIf, Workers: 2})
		return e
	}))
	must(InNetns(tb.Req, func() (e error) { r.tx, e = OpenTx(HostIf, 0); return e }))
	must(InNetns(tb.Resp, func() (e error) { r.rx, e = OpenRing(HostIf, RingConfig{}); return e }))
	ctx, stop := context.WithCancel(context.Background())
	r.swStop, r.swDone = stop, make(chan SwitchStatus, 1)
	go func() {
		st, err := r.sw.Run(ctx)
		if err != nil {
			t.Errorf("switch: %v", err)
		}
		r.swDone <- st
	}()
	dctx, dstop := context.WithCancel(context.Background())
	r.dumpStop, r.dumpDone = dstop, make(chan error, 1)
	go func() { r.dumpDone <- r.dump.Run(dctx) }()
	return r
}

func isNilCloser(c io.Closer) bool {
	switch v := c.(type) {
	case *Switch:
		return v == nil
	case *Dumper:
		return v == nil
	case *Tx:
		return v == nil
	case *Ring:
		return v == nil
	}
	return false
}

// receive collects frames at the responder until want have arrived or the deadline passes.
func (r *rig) receive(want int, d time.Duration) [][]byte {
	var got [][]byte
	deadline := time.Now().Add(d)
	for len(got) < want && time.Now().Before(deadline) {
		if r.rx.Poll(0, func(f []byte, _ int64, _ int) {
			var p roce.Packet
			if p.Decode(f, len(f)) {
				got = append(got, append([]byte(nil), f...))
			}
		}) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return got
}

// stopAll stops the switch and the dumper and writes the dump.
func (r *rig) stopAll(t *testing.T) (SwitchStatus, DumpStats, string) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	r.swStop()
	st := <-r.swDone
	r.swStop = nil
	time.Sleep(10 * time.Millisecond)
	r.dumpStop()
	if err := <-r.dumpDone; err != nil {
		t.Fatalf("dumper: %v", err)
	}
	r.dumpStop = nil
	path := filepath.Join(t.TempDir(), "dumper-0.pcap")
	ds, err := r.dump.Write(path)
	if err != nil {
		t.Fatal(err)
	}
	return st, ds, path
}

func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	for {
		p, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), p.Data...))
	}
	return out
}

func TestNetnsForwardMirrorDump(t *testing.T) {
	r := newRig(t, nil)
	const n = 200
	sent := make([][]byte, n)
	for i := range sent {
		sent[i] = rocev2(t, 0x11, roce.PSN(1000+i), 256)
		r.tx.Send(sent[i])
	}
	r.tx.Flush()
	got := r.receive(n, 3*time.Second)
	if len(got) != n {
		t.Fatalf("responder received %d of %d RoCE frames", len(got), n)
	}
	for i := range got {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("frame %d arrived changed:\n got %x\nwant %x", i, got[i], sent[i])
		}
	}
	st, ds, path := r.stopAll(t)
	if st.Ports[0].RxRoCE != n || st.Ports[1].TxRoCE != n || st.Mirrored != n {
		t.Errorf("switch counters: port0 rx_roce %d, port1 tx_roce %d, mirrored %d; want %d each", st.Ports[0].RxRoCE, st.Ports[1].TxRoCE, st.Mirrored, n)
	}
	if !ds.Complete || ds.Captured != n || ds.KernelDrops != 0 || ds.BufferFull != 0 {
		t.Errorf("dumper stats %+v; want %d captured, complete, no drops", ds, n)
	}
	b, err := os.ReadFile(StatsPath(path))
	if err != nil || !bytes.Contains(b, []byte(`"complete": true`)) {
		t.Errorf("stats file beside the pcap: %v %s", err, b)
	}
	pkts := readPcap(t, path)
	if len(pkts) != n {
		t.Fatalf("pcap holds %d packets; want %d", len(pkts), n)
	}
	for i, p := range pkts {
		m, ok := roce.DecodeMirror(p)
		if !ok || m.Seq != uint64(i+1) || m.Event != roce.EventNone {
			t.Fatalf("pcap packet %d: mirror %+v ok=%v; want seq %d, no event", i, m, ok, i+1)
		}
		if len(p) != 128 {
			t.Fatalf("pcap packet %d keeps %d bytes; want the 128-byte snap length", i, len(p))
		}
		var dec roce.Packet
		if !dec.Decode(p, len(sent[i])) || dec.BTH.PSN != roce.PSN(1000+i) {
			t.Fatalf("pcap packet %d: PSN %d; want %d", i, dec.BTH.PSN, 1000+i)
		}
	}
}

// psnsOf returns the PSNs of frames.
func psnsOf(t *testing.T, fs [][]byte) []int {
	var out []int
	for _, f := range fs {
		var p roce.Packet
		if !p.Decode(f, len(f)) {
			t.Fatalf("frame does not decode")
		}
		out = append(out, int(p.BTH.PSN))
	}
	return out
}

func TestNetnsControlPlaneDropByIter(t *testing.T) {
	r := newRig(t, nil)
	const ipsn, qpn = 5000, 0x42
	meta := []inject.ConnMeta{{Index: 0, Verb: "write", ReqIP: reqIP, RespIP: respIP, ReqQPN: 0x41, RespQPN: qpn, ReqIPSN: ipsn}}
	intents := []inject.Intent{{Conn: 0, Kind: inject.KindData, PSN: 3, Iter: 2, Action: roce.EventDrop, Source: "test"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ServeControl(ctx, ln, func(cs []inject.ConnMeta) (inject.Logic, error) {
		return inject.New(inject.Config{Conns: cs, Intents: intents})
	}, r.sw.Install)
	rep, err := SendMetadata(ctx, ln.Addr().String(), meta)
	if err != nil || !rep.Ready || rep.Entries != 1 {
		t.Fatalf("barrier: %+v, %v; want ready with 1 entry", rep, err)
	}
	// Round 1: PSN offsets 0..5; round 2 (go-back-N from 2): 2..5. Only offset 3 of round 2 is dropped.
	for _, off := range []int{0, 1, 2, 3, 4, 5, 2, 3, 4, 5} {
		r.tx.Send(rocev2(t, qpn, roce.PSN(ipsn+off), 64))
	}
	r.tx.Flush()
	got := psnsOf(t, r.receive(9, 3*time.Second))
	want := []int{ipsn, ipsn + 1, ipsn + 2, ipsn + 3, ipsn + 4, ipsn + 5, ipsn + 2, ipsn + 4, ipsn + 5}
	if !equalInts(got, want) {
		t.Fatalf("responder PSNs %v; want %v", got, want)
	}
	st, _, path := r.stopAll(t)
	if st.Injector == nil || st.Injector.Dropped != 1 || st.NotForwarded != 1 || len(st.Entries) != 1 || st.Entries[0].Hits != 1 {
		t.Fatalf("switch status %+v; want one drop by the one entry", st)
	}
	// The dropped packet is still mirrored, with event 1 (drop).
	var events []roce.EventType
	for _, p := range readPcap(t, path) {
		m, _ := roce.DecodeMirror(p)
		events = append(events, m.Event)
	}
	if len(events) != 10 || events[7] != roce.EventDrop {
		t.Fatalf("mirrored events %v; want 10 copies, the 8th a drop", events)
	}
}

func TestNetnsLearningAppliesRelativePSN(t *testing.T) {
	l, err := NewLearner(LearnConfig{Intents: []inject.Intent{{Conn: 0, Kind: inject.KindData, PSN: 2, Iter: 1, Action: roce.EventDrop}}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, l)
	const ipsn = 0xfffffe // wraps: offset 2 is PSN 0
	for off := range 5 {
		r.tx.Send(rocev2(t, 0x77, roce.PSN(ipsn).Add(off), 64))
	}
	r.tx.Flush()
	got := psnsOf(t, r.receive(4, 3*time.Second))
	if want := []int{0xfffffe, 0xffffff, 1, 2}; !equalInts(got, want) {
		t.Fatalf("responder PSNs %v; want %v (PSN 0, offset 2 from the learned initial PSN, dropped)", got, want)
	}
	st, _, _ := r.stopAll(t)
	if len(st.Learned) != 1 || st.Learned[0].ReqIPSN != ipsn || st.Learned[0].RespQPN != 0x77 {
		t.Fatalf("learned %+v; want one connection with initial PSN %#x to QP 0x77", st.Learned, ipsn)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNetnsSoftwareRNICWriteGoBackN(t *testing.T) {
	needNetns(t)
	prof, err := rnic.LoadProfile("cx5")
	if err != nil {
		t.Fatal(err)
	}
	const dropOff = 5
	cfg := NetnsConfig{OutDir: t.TempDir(), Sim: lab.Config{
		Seed:      7,
		Requester: lab.HostConfig{Profile: prof, IPs: []netip.Addr{reqIP}},
		Responder: lab.HostConfig{Profile: prof, IPs: []netip.Addr{respIP}},
		Traffic: lab.TrafficConfig{Verb: "write", NumConns: 1, MsgsPerConn: 4, MsgSize: 4096, MTU: 1024,
			TxDepth: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		Dumpers:    1,
		RunLimitNs: 10e9,
		NewSwitch: func(cs []inject.ConnMeta) (inject.Logic, error) {
			return inject.New(inject.Config{Conns: cs, Intents: []inject.Intent{
				{Conn: 0, Kind: inject.KindData, PSN: dropOff, Iter: 1, Action: roce.EventDrop}}})
		},
	}}
	res, err := RunNetns(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc := res.PerConn[0]
	if pc.Status != rnic.ConnOK || pc.Completed != 4 || len(pc.MCTNs) != 4 {
		t.Fatalf("connection result %+v; want 4 messages completed", pc)
	}
	if res.Status.Injector == nil || res.Status.Injector.Dropped != 1 {
		t.Fatalf("switch status %+v; want exactly one drop", res.Status)
	}
	if len(res.Dumps) != 1 || !res.Dumps[0].Stats.Complete {
		t.Fatalf("dumps %+v; want one complete dump", res.Dumps)
	}
	ipsn := res.Conns[0].ReqIPSN
	var seen []int // data PSN offsets in mirror order
	nak := -1
	for i, f := range readPcap(t, res.Dumps[0].Path) {
		m, _ := roce.DecodeMirror(f)
		if m.Seq != uint64(i+1) {
			t.Fatalf("pcap packet %d has mirror seq %d; want %d (consecutive)", i, m.Seq, i+1)
		}
		var p roce.Packet
		if !p.DecodePort(f, len(f), roce.UDPPort) {
			t.Fatalf("pcap packet %d does not decode", i)
		}
		switch {
		case p.BTH.Opcode.IsWrite():
			seen = append(seen, p.BTH.PSN.Diff(ipsn))
		case p.IsNAK() && nak < 0:
			nak = len(seen)
			if got := p.BTH.PSN.Diff(ipsn); got != dropOff {
				t.Errorf("NAK for PSN offset %d; want %d (the dropped packet)", got, dropOff)
			}
		}
	}
	if nak < 0 {
		t.Fatalf("no NAK in the dump; data PSN offsets %v", seen)
	}
	// Go-back-N: after the NAK the requester resends from the dropped PSN, so offset 5 appears twice and
	// the second copy follows the NAK.
	count := 0
	retx := -1
	for i, o := range seen {
		if o == dropOff {
			count++
			if count == 2 {
				retx = i
			}
		}
	}
	if count != 2 || retx < nak {
		t.Fatalf("data PSN offsets %v with NAK after %d; want offset %d twice, the retransmission after the NAK", seen, nak, dropOff)
	}
	if pc.Retransmissions == 0 {
		t.Errorf("connection result counts no retransmissions: %+v", pc)
	}
}

func TestCleanupStaleRemovesOnlyDeadRuns(t *testing.T) {
	needNetns(t)
	dead := TestbedPrefix + "999999999-0-req" // no such pid
	live := fmt.Sprintf("%s%d-77-req", TestbedPrefix, os.Getpid())
	for _, ns := range []string{dead, live} {
		if err := sh("ip", "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
	}
	defer CleanupPrefix(fmt.Sprintf("%s%d-77-", TestbedPrefix, os.Getpid()))
	defer CleanupPrefix(TestbedPrefix + "999999999-")
	if err := CleanupStale(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(NetnsDir, dead)); err == nil {
		t.Errorf("namespace %s of a dead process survived", dead)
	}
	if _, err := os.Stat(filepath.Join(NetnsDir, live)); err != nil {
		t.Errorf("namespace %s of this running process was removed: %v", live, err)
	}
}
