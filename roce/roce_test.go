package roce

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

func TestOpcodeTable(t *testing.T) {
	cases := []struct {
		op    Opcode
		name  string
		valid bool
	}{
		{0x00, "RC SEND First", true},
		{0x06, "RC RDMA WRITE First", true},
		{0x0c, "RC RDMA READ Request", true},
		{0x10, "RC RDMA READ Response Only", true},
		{0x11, "RC Acknowledge", true},
		{0x15, "Unknown (0x15)", false}, // RESYNC is RD-only
		{0x17, "RC SEND Only with Invalidate", true},
		{0x24, "UC SEND Only", true},
		{0x2c, "Unknown (0x2c)", false}, // UC has no READ
		{0x29, "UC RDMA WRITE Last with Immediate", true},
		{0x46, "RD RDMA WRITE First", true},
		{0x55, "RD RESYNC", true},
		{0x64, "UD SEND Only", true},
		{0x65, "UD SEND Only with Immediate", true},
		{0x66, "Unknown (0x66)", false},
		{0x81, "CNP", true},
		{0x80, "Unknown (0x80)", false},
		{0xa0, "XRC SEND First", true},
		{0xb1, "XRC Acknowledge", true},
		{0xff, "Unknown (0xff)", false},
	}
	for _, c := range cases {
		if got := c.op.String(); got != c.name || c.op.Valid() != c.valid {
			t.Errorf("%#x: %q valid=%v, want %q valid=%v", uint8(c.op), got, c.op.Valid(), c.name, c.valid)
		}
	}
	// Header presence, per IBTA vol. 1 §9.2-9.4.
	if !RCWriteFirst.HasRETH() || RCWriteMiddle.HasRETH() || !RCReadRequest.HasRETH() || !RCWriteOnlyImm.HasImm() {
		t.Error("RETH/ImmDt presence wrong")
	}
	if !RCReadResponseFirst.HasAETH() || RCReadResponseMiddle.HasAETH() || !RCAcknowledge.HasAETH() {
		t.Error("AETH presence wrong")
	}
	if !Opcode(0x64).HasDETH() || !Opcode(0x46).HasDETH() || Opcode(0x51).HasDETH() || !Opcode(0x51).HasRDETH() {
		t.Error("DETH/RDETH presence wrong")
	}
	if !Opcode(0xa6).HasXRCETH() || Opcode(0xb1).HasXRCETH() {
		t.Error("XRCETH presence wrong")
	}
	if !RCCompareSwap.HasAtomicETH() || !RCAtomicAcknowledge.HasAtomicAckETH() {
		t.Error("atomic header presence wrong")
	}
}

func TestAETH(t *testing.T) {
	cases := []struct {
		syn  uint8
		typ  AckType
		code NAKCode
		name string
	}{
		{0x1f, AckTypeACK, 0, ""},
		{0x60, AckTypeNAK, NAKPSNSequenceError, "psn-sequence-error"},
		{0x61, AckTypeNAK, NAKInvalidRequest, "invalid-request"},
		{0x62, AckTypeNAK, NAKRemoteAccessError, "remote-access-error"},
		{0x63, AckTypeNAK, NAKRemoteOperationalErr, "remote-operational-error"},
		{0x64, AckTypeNAK, NAKInvalidRDRequest, "invalid-rd-request"},
		{0x2e, AckTypeRNRNAK, 0, ""},
	}
	for _, c := range cases {
		a := AETH{Syndrome: c.syn}
		if a.Type() != c.typ {
			t.Errorf("%#x type %v want %v", c.syn, a.Type(), c.typ)
		}
		if c.typ == AckTypeNAK && (a.NAKCode() != c.code || a.NAKCode().String() != c.name) {
			t.Errorf("%#x code %v", c.syn, a.NAKCode())
		}
	}
	if got := RNRTimerNs(AETH{Syndrome: 0x2e}.RNRTimer()); got != 1280000 {
		t.Errorf("RNR timer code 14 = %d ns, want 1.28 ms", got)
	}
	if TimeoutNs(14) != 67108864 || TimeoutNs(0) != 0 {
		t.Errorf("timeout 14 = %d ns", TimeoutNs(14))
	}
}

func TestPSNWrap(t *testing.T) {
	a := PSN(0xfffffe)
	if a.Add(3) != 1 || PSN(1).Add(-3) != 0xfffffe {
		t.Fatal("Add does not wrap")
	}
	if PSN(1).Diff(0xfffffe) != 3 || PSN(0xfffffe).Diff(1) != -3 {
		t.Fatal("Diff across the wrap")
	}
	if !PSN(0xffffff).Less(0) || PSN(0).Less(0xffffff) || !PSN(5).LessEq(5) {
		t.Fatal("Less across the wrap")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		p := PSN(r.Uint32() & PSNMask)
		n := r.IntN(1<<23) - 1<<22
		if p.Add(n).Diff(p) != n {
			t.Fatalf("%d + %d: diff %d", p, n, p.Add(n).Diff(p))
		}
	}
}

func randomPacket(r *rand.Rand) Packet {
	var p Packet
	for {
		p.BTH.Opcode = Opcode(r.IntN(256))
		if p.BTH.Opcode.Valid() {
			break
		}
	}
	p.EthDst = [6]byte{2, byte(r.Uint32()), 3, 4, 5, 6}
	p.EthSrc = [6]byte{2, 9, 8, 7, 6, byte(r.Uint32())}
	p.NumVLANs = r.IntN(3)
	for i := 0; i < p.NumVLANs; i++ {
		tp := []uint16{EtherTypeVLAN, EtherTypeQinQ, EtherTypeQinQ2}[r.IntN(3)]
		p.VLANs[i] = VLAN{TPID: tp, TCI: uint16(r.Uint32())}
	}
	switch r.IntN(3) {
	case 0:
		p.Version = RoCEv2
		p.SrcIP = netip.AddrFrom4([4]byte{10, 0, byte(r.Uint32()), 2})
		p.DstIP = netip.AddrFrom4([4]byte{10, 0, 0, byte(r.Uint32())})
		p.IPID = uint16(r.Uint32())
		p.IPFlags = 2
	case 1:
		p.Version = RoCEv2
		p.IPv6 = true
		p.SrcIP = netip.AddrFrom16([16]byte{0xfd, 1: byte(r.Uint32()), 15: 1})
		p.DstIP = netip.AddrFrom16([16]byte{0xfd, 15: 2})
		p.FlowLabel = r.Uint32() & 0xfffff
	default:
		p.Version = RoCEv1
		p.SrcIP = netip.AddrFrom16([16]byte{0xfe, 0x80, 15: 1})
		p.DstIP = netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(r.Uint32())})
		p.FlowLabel = r.Uint32() & 0xfffff
	}
	p.TOS = uint8(r.Uint32())
	p.TTL = uint8(r.Uint32())
	p.UDPSrc = uint16(r.Uint32())
	p.BTH.SE = r.IntN(2) == 0
	p.BTH.MigReq = r.IntN(2) == 0
	p.BTH.TVer = 0
	p.BTH.PKey = uint16(r.Uint32())
	p.BTH.FECN = r.IntN(2) == 0
	p.BTH.BECN = r.IntN(2) == 0
	p.BTH.DestQP = r.Uint32() & 0xffffff
	p.BTH.AckReq = r.IntN(2) == 0
	p.BTH.PSN = PSN(r.Uint32() & PSNMask)
	p.RETH = RETH{VA: r.Uint64(), RKey: r.Uint32(), DMALen: r.Uint32()}
	p.AETH = AETH{Syndrome: uint8(r.Uint32()) & 0x7f, MSN: r.Uint32() & 0xffffff}
	p.AtomicETH = AtomicETH{VA: r.Uint64(), RKey: r.Uint32(), SwapAdd: r.Uint64(), Compare: r.Uint64()}
	p.AtomicAckETH = r.Uint64()
	p.Imm = r.Uint32()
	p.IETH = r.Uint32()
	p.DETH = DETH{QKey: r.Uint32(), SrcQP: r.Uint32() & 0xffffff}
	p.RDETH = r.Uint32() & 0xffffff
	p.XRCETH = r.Uint32() & 0xffffff
	if r.IntN(2) == 0 {
		p.Payload = make([]byte, r.IntN(300))
		for i := range p.Payload {
			p.Payload[i] = byte(r.Uint32())
		}
	} else {
		p.PayloadLen = r.IntN(4097)
	}
	return p
}

// Every field that AppendTo writes is read back identically by Decode, and the ICRC verifies.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var q Packet
	for i := 0; i < 20000; i++ {
		p := randomPacket(r)
		want := p
		frame, err := p.AppendTo(nil)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !q.Decode(frame, len(frame)) {
			t.Fatalf("case %d (%v): not decoded: %v", i, p.BTH.Opcode, q.Reason)
		}
		if q.CheckICRC() != ICRCGood {
			t.Fatalf("case %d: ICRC %v", i, q.CheckICRC())
		}
		op := want.BTH.Opcode
		if q.Version != want.Version || q.IPv6 != want.IPv6 || q.SrcIP != want.SrcIP || q.DstIP != want.DstIP ||
			q.TOS != want.TOS || q.TTL != want.TTL || q.EthDst != want.EthDst || q.EthSrc != want.EthSrc ||
			q.NumVLANs != want.NumVLANs || !slices.Equal(q.VLANs[:q.NumVLANs], want.VLANs[:want.NumVLANs]) {
			t.Fatalf("case %d: network headers differ: got %v %v %v, want %v %v %v", i, q.SrcIP, q.DstIP, q.VLANs,
				want.SrcIP, want.DstIP, want.VLANs)
		}
		if want.Version == RoCEv2 && (q.UDPSrc != want.UDPSrc || q.UDPDst != UDPPort) {
			t.Fatalf("case %d: UDP ports %d %d", i, q.UDPSrc, q.UDPDst)
		}
		if want.Version != RoCEv2 || want.IPv6 {
			if q.FlowLabel != want.FlowLabel {
				t.Fatalf("case %d: flow label", i)
			}
		} else if q.IPID != want.IPID || q.IPFlags != want.IPFlags || q.IPChecksum != IPv4Checksum(frame[q.L3Offset:q.L3Offset+IPv4Len]) {
			t.Fatalf("case %d: IPv4 id/flags/checksum", i)
		}
		wb := want.BTH
		wb.PadCount = q.BTH.PadCount
		if q.BTH != wb {
			t.Fatalf("case %d: BTH\n got %+v\nwant %+v", i, q.BTH, wb)
		}
		if op.HasRETH() && q.RETH != want.RETH || op.HasAETH() && q.AETH != want.AETH ||
			op.HasAtomicETH() && q.AtomicETH != want.AtomicETH || op.HasImm() && q.Imm != want.Imm ||
			op.HasIETH() && q.IETH != want.IETH || op.HasDETH() && q.DETH != want.DETH ||
			op.HasRDETH() && q.RDETH != want.RDETH || op.HasXRCETH() && q.XRCETH != want.XRCETH ||
			op.HasAtomicAckETH() && q.AtomicAckETH != want.AtomicAckETH {
			t.Fatalf("case %d (%v): extended header differs", i, op)
		}
		wantLen := want.PayloadLen
		if want.Payload != nil {
			wantLen = len(want.Payload)
		}
		if op == CNP {
			wantLen = CNPPadLen
		}
		if q.PayloadLen != wantLen || (want.Payload != nil && op != CNP && !bytes.Equal(q.Payload, want.Payload)) {
			t.Fatalf("case %d: payload %d bytes, want %d", i, q.PayloadLen, wantLen)
		}
		if int(q.BTH.PadCount) != (4-wantLen%4)%4 {
			t.Fatalf("case %d: pad count %d for %d bytes", i, q.BTH.PadCount, wantLen)
		}
	}
}

// Flipping any byte covered by the ICRC makes it bad; flipping a masked (variant) field keeps it good.
func TestICRCDetectsCorruption(t *testing.T) {
	p := Packet{Version: RoCEv2, SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3"),
		TOS: 2, TTL: 64, PayloadLen: 64}
	p.BTH = BTH{Opcode: RCWriteOnly, DestQP: 0x11, PSN: 100, PKey: 0xffff}
	frame, err := p.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	var q Packet
	for i := 0; i < len(frame); i++ {
		f := bytes.Clone(frame)
		f[i] ^= 0x01
		if !q.Decode(f, len(f)) {
			continue // broke a structural field
		}
		masked := i < 14 || i == 15 || i == 22 || i == 24 || i == 25 || i == 40 || i == 41 || i == 42+4
		got := q.CheckICRC()
		if masked && got != ICRCGood || !masked && got != ICRCBad {
			t.Errorf("flip byte %d: ICRC %v (masked=%v)", i, got, masked)
		}
	}
}

func TestCNPEncoding(t *testing.T) {
	p := Packet{Version: RoCEv2, SrcIP: netip.MustParseAddr("10.0.0.3"), DstIP: netip.MustParseAddr("10.0.0.2"),
		TOS: 48<<2 | 2, TTL: 64}
	p.BTH = BTH{Opcode: CNP, BECN: true, DestQP: 0x118, PKey: 0xffff}
	frame, err := p.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + 16 reserved + ICRC 4 = 74 bytes, as the ConnectX-4 Lx CNP.
	if len(frame) != 74 || frame[14+20+8+4] != 0x40 || frame[14+20+8] != 0x81 {
		t.Fatalf("CNP frame % x", frame)
	}
}

func TestDecodeNeverPanicsOnPrefixes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var q Packet
	for i := 0; i < 300; i++ {
		p := randomPacket(r)
		frame, _ := p.AppendTo(nil)
		for n := 0; n <= len(frame); n++ {
			ok := q.Decode(frame[:n], len(frame))
			if ok && n < len(frame) && q.CheckICRC() != ICRCNotCheckable {
				t.Fatalf("prefix %d/%d: ICRC %v, want not checkable", n, len(frame), q.CheckICRC())
			}
		}
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	_, frames, orig := readPcap(t, "magnate3_cx_rocev1_plus_v2_mixed.pcap")
	var p Packet
	allocs := testing.AllocsPerRun(5, func() {
		for i, f := range frames {
			if p.Decode(f, orig[i]) {
				p.CheckICRC()
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("decode + ICRC allocated %.1f times per pass", allocs)
	}
	buf := make([]byte, 0, 8192)
	q := Packet{Version: RoCEv2, SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3")}
	q.BTH.Opcode = RCWriteMiddle
	allocs = testing.AllocsPerRun(100, func() {
		q.Payload, q.PayloadLen = nil, 1024
		buf, _ = q.AppendTo(buf[:0])
	})
	if allocs != 0 {
		t.Fatalf("encode allocated %.1f times", allocs)
	}
}

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 20; i++ {
		p := randomPacket(r)
		frame, _ := p.AppendTo(nil)
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Packet
		if p.Decode(data, len(data)) {
			st := p.CheckICRC()
			if p.Truncated && st != ICRCNotCheckable {
				t.Fatal("truncated packet checked")
			}
			if p.PayloadLen < 0 || len(p.Payload) > p.PayloadLen {
				t.Fatalf("payload %d captured of %d", len(p.Payload), p.PayloadLen)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	p := Packet{Version: RoCEv2, SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3"),
		PayloadLen: 1024}
	p.BTH.Opcode = RCWriteMiddle
	frame, _ := p.AppendTo(nil)
	var q Packet
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		q.Decode(frame[:128], len(frame))
	}
}

func BenchmarkDecodeICRC(b *testing.B) {
	p := Packet{Version: RoCEv2, SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3"),
		PayloadLen: 1024}
	p.BTH.Opcode = RCWriteMiddle
	frame, _ := p.AppendTo(nil)
	var q Packet
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		q.Decode(frame, len(frame))
		q.CheckICRC()
	}
}

func BenchmarkEncode(b *testing.B) {
	p := Packet{Version: RoCEv2, SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3")}
	p.BTH.Opcode = RCWriteMiddle
	buf := make([]byte, 0, 2048)
	for b.Loop() {
		p.Payload, p.PayloadLen = nil, 1024
		buf, _ = p.AppendTo(buf[:0])
	}
}

func TestValidMTU(t *testing.T) {
	for m := 0; m <= 8192; m++ {
		want := m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096
		if ValidMTU(m) != want {
			t.Errorf("ValidMTU(%d) = %v, want %v", m, !want, want)
		}
	}
	got := MTUs()
	got[0] = 1 // the caller owns the slice
	if MTUs()[0] != 256 || len(got) != 5 {
		t.Errorf("MTUs() = %v", MTUs())
	}
}

func TestPacketsPerMessage(t *testing.T) {
	for _, c := range []struct{ size, mtu, want int }{
		{0, 1024, 1}, {1, 1024, 1}, {1024, 1024, 1}, {1025, 1024, 2}, {10240, 1024, 10}, {65536, 4096, 16},
		{100, 0, 1}, {-5, 256, 1},
	} {
		if got := PacketsPerMessage(c.size, c.mtu); got != c.want {
			t.Errorf("PacketsPerMessage(%d, %d) = %d, want %d", c.size, c.mtu, got, c.want)
		}
	}
}

func TestNextIter(t *testing.T) {
	// PSNs seen by the switch on a connection with initial PSN 2^24-2: a go-back-N retransmission from 0 after
	// the wrap, then a tail retransmission of the same PSN.
	psns := []PSN{PSNMask - 1, PSNMask, 0, 1, 0, 1, 2, 2}
	want := []int{1, 1, 1, 1, 2, 2, 2, 3}
	iter, last := 1, PSN(PSNMask-2) // round 1, last = initial PSN - 1
	for i, p := range psns {
		iter = NextIter(iter, last, p)
		last = p
		if iter != want[i] {
			t.Fatalf("packet %d (PSN %d): round %d, want %d", i, p, iter, want[i])
		}
	}
}
