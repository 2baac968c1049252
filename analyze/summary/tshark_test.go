package summary

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// tsharkCase is one generated packet: the packet as encoded by roce (its fields are the expectation).
type tsharkCase struct {
	name string
	p    roce.Packet
}

// tsharkPackets builds one packet of every opcode kind and extended header, over IPv4, IPv6, a VLAN tag and
// RoCEv1, with field values chosen so that swapped or shifted bytes show.
func tsharkPackets(t *testing.T) []tsharkCase {
	a4, b4 := netip.MustParseAddr("192.168.250.114"), netip.MustParseAddr("192.168.250.117")
	a6, b6 := netip.MustParseAddr("fd00::1:2"), netip.MustParseAddr("fd00::3:4")
	base := func(op roce.Opcode, psn uint32) roce.Packet {
		p := roce.Packet{Version: roce.RoCEv2, SrcIP: a4, DstIP: b4, TOS: 0x6a, TTL: 63, IPID: 0x1234, IPFlags: 2,
			UDPSrc: 53025}
		p.EthSrc = [6]byte{0x00, 0x50, 0x56, 0xaf, 0x0d, 0xec}
		p.EthDst = [6]byte{0x00, 0x50, 0x56, 0xaf, 0x39, 0xdc}
		p.BTH = roce.BTH{Opcode: op, PKey: 0xfffe, DestQP: 0x000d1e, PSN: roce.PSN(psn), TVer: 0}
		return p
	}
	var cs []tsharkCase
	add := func(name string, p roce.Packet) { cs = append(cs, tsharkCase{name, p}) }

	p := base(roce.RCSendFirst, 4615966)
	p.BTH.SE, p.BTH.MigReq = true, true
	p.PayloadLen = 1024
	add("RC SEND First (SE, MigReq)", p)
	p = base(roce.RCSendMiddle, 0xffffff)
	p.PayloadLen = 1021 // pad count 3
	add("RC SEND Middle (pad 3, PSN 2^24-1)", p)
	p = base(roce.RCSendLastImm, 7)
	p.Imm, p.PayloadLen, p.BTH.AckReq = 0xdeadbeef, 10, true
	add("RC SEND Last with Immediate (AckReq)", p)
	p = base(roce.MakeOpcode(roce.RC, roce.OpSendOnlyInvalidate), 8)
	p.IETH, p.PayloadLen = 0x0badf00d, 4
	add("RC SEND Only with Invalidate (IETH)", p)
	p = base(roce.RCWriteFirst, 12906524)
	p.RETH = roce.RETH{VA: 0x0000710e45036000, RKey: 0x000c0400, DMALen: 65536}
	p.PayloadLen = 4096
	add("RC RDMA WRITE First (RETH)", p)
	p = base(roce.RCWriteMiddle, 12906525)
	p.PayloadLen, p.TOS = 1024, 0x03
	add("RC RDMA WRITE Middle (CE)", p)
	p = base(roce.RCWriteOnlyImm, 99)
	p.RETH = roce.RETH{VA: 0x1122334455667788, RKey: 0x99aabbcc, DMALen: 8}
	p.Imm, p.PayloadLen = 0x01020304, 8
	add("RC RDMA WRITE Only with Immediate (RETH, ImmDt)", p)
	p = base(roce.RCReadRequest, 100)
	p.RETH = roce.RETH{VA: 0xffffffff00001000, RKey: 0x1, DMALen: 3 * 1024}
	add("RC RDMA READ Request", p)
	p = base(roce.RCReadResponseFirst, 100)
	p.AETH, p.PayloadLen = roce.AETH{Syndrome: 0x1f, MSN: 0x123456}, 1024
	add("RC RDMA READ Response First (AETH)", p)
	p = base(roce.RCAcknowledge, 4615966)
	p.AETH = roce.AETH{Syndrome: 0x00, MSN: 945922}
	add("RC Acknowledge (ACK)", p)
	p = base(roce.RCAcknowledge, 34)
	p.AETH = roce.AETH{Syndrome: roce.SyndromePSNSeqErr, MSN: 17}
	add("RC Acknowledge (NAK PSN sequence error)", p)
	p = base(roce.RCAcknowledge, 35)
	p.AETH = roce.AETH{Syndrome: 0x2e, MSN: 18}
	add("RC Acknowledge (RNR NAK, timer 14)", p)
	p = base(roce.RCCompareSwap, 200)
	p.AtomicETH = roce.AtomicETH{VA: 0xabcdef0012345678, RKey: 0x55667788, SwapAdd: 0x0102030405060708,
		Compare: 0x1112131415161718}
	add("RC CmpSwap (AtomicETH)", p)
	p = base(roce.RCAtomicAcknowledge, 200)
	p.AETH, p.AtomicAckETH = roce.AETH{Syndrome: 0x1f, MSN: 5}, 0x2122232425262728
	add("RC ATOMIC Acknowledge (AtomicAckETH)", p)
	p = base(roce.MakeOpcode(roce.UD, roce.OpSendOnlyImm), 3)
	p.DETH, p.Imm, p.PayloadLen = roce.DETH{QKey: 0x80010000, SrcQP: 0x4d0e}, 0x77, 256
	add("UD SEND Only with Immediate (DETH)", p)
	p = base(roce.MakeOpcode(roce.UC, roce.OpWriteFirst), 300)
	p.RETH, p.PayloadLen = roce.RETH{VA: 0x1000, RKey: 0x2000, DMALen: 0x3000}, 64
	p.NumVLANs, p.VLANs[0] = 1, roce.VLAN{TPID: roce.EtherTypeVLAN, TCI: 3<<13 | 100}
	add("UC RDMA WRITE First over VLAN 100, PCP 3", p)
	p = base(roce.RCWriteOnly, 400)
	p.SrcIP, p.DstIP, p.IPv6, p.FlowLabel, p.TOS = a6, b6, true, 0xabcde, 0x02
	p.RETH, p.PayloadLen = roce.RETH{VA: 0x4000, RKey: 0x5000, DMALen: 32}, 32
	add("RC RDMA WRITE Only over IPv6", p)
	p = base(roce.CNP, 0)
	p.TOS, p.UDPSrc, p.BTH.BECN, p.BTH.PKey = 0xc2, 0, true, 0xffff
	add("CNP (BECN, DSCP 48)", p)
	p = base(roce.RCSendOnly, 500)
	p.Version, p.SrcIP, p.DstIP, p.FlowLabel, p.TOS = roce.RoCEv1, a6, b6, 0x12345, 0x20
	p.PayloadLen = 16
	add("RC SEND Only over RoCEv1 (GRH)", p)
	return cs
}

// tsharkField is one field tshark prints and what our packet says it must be ("" = absent).
type tsharkField struct {
	name string
	want func(p *roce.Packet) string
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }
func hex(v uint64, digits int) string {
	return fmt.Sprintf("0x%0*x", digits, v)
}
func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
func ifExt(f roce.ExtFlags, s func(p *roce.Packet) string) func(p *roce.Packet) string {
	return func(p *roce.Packet) string {
		if p.Ext&f == 0 {
			return ""
		}
		return s(p)
	}
}

var tsharkFields = []tsharkField{
	{"infiniband.bth.opcode", func(p *roce.Packet) string { return u(uint64(p.BTH.Opcode)) }},
	{"infiniband.bth.se", func(p *roce.Packet) string { return boolStr(p.BTH.SE) }},
	{"infiniband.bth.m", func(p *roce.Packet) string { return boolStr(p.BTH.MigReq) }},
	{"infiniband.bth.padcnt", func(p *roce.Packet) string { return u(uint64(p.BTH.PadCount)) }},
	{"infiniband.bth.tver", func(p *roce.Packet) string { return u(uint64(p.BTH.TVer)) }},
	{"infiniband.bth.p_key", func(p *roce.Packet) string { return u(uint64(p.BTH.PKey)) }},
	{"infiniband.bth.destqp", func(p *roce.Packet) string { return hex(uint64(p.BTH.DestQP), 6) }},
	{"infiniband.bth.a", func(p *roce.Packet) string { return boolStr(p.BTH.AckReq) }},
	{"infiniband.bth.psn", func(p *roce.Packet) string { return u(uint64(p.BTH.PSN)) }},
	// tshark shows the AtomicETH's VA and R_Key under the RETH's field names.
	{"infiniband.reth.va", func(p *roce.Packet) string {
		switch {
		case p.Ext&roce.ExtRETH != 0:
			return hex(p.RETH.VA, 16)
		case p.Ext&roce.ExtAtomicETH != 0:
			return hex(p.AtomicETH.VA, 16)
		}
		return ""
	}},
	{"infiniband.reth.r_key", func(p *roce.Packet) string {
		switch {
		case p.Ext&roce.ExtRETH != 0:
			return hex(uint64(p.RETH.RKey), 8)
		case p.Ext&roce.ExtAtomicETH != 0:
			return hex(uint64(p.AtomicETH.RKey), 8)
		}
		return ""
	}},
	{"infiniband.reth.dmalen", ifExt(roce.ExtRETH, func(p *roce.Packet) string { return u(uint64(p.RETH.DMALen)) })},
	{"infiniband.aeth.syndrome", ifExt(roce.ExtAETH, func(p *roce.Packet) string { return u(uint64(p.AETH.Syndrome)) })},
	{"infiniband.aeth.syndrome.opcode", ifExt(roce.ExtAETH, func(p *roce.Packet) string { return u(uint64(p.AETH.Type())) })},
	{"infiniband.aeth.msn", ifExt(roce.ExtAETH, func(p *roce.Packet) string { return u(uint64(p.AETH.MSN)) })},
	{"infiniband.immdt", ifExt(roce.ExtImm, func(p *roce.Packet) string { return fmt.Sprintf("%08x", p.Imm) })},
	{"infiniband.ieth", ifExt(roce.ExtIETH, func(p *roce.Packet) string { return fmt.Sprintf("%08x", p.IETH) })},
	{"infiniband.deth.q_key", ifExt(roce.ExtDETH, func(p *roce.Packet) string { return hex(uint64(p.DETH.QKey), 16) })},
	{"infiniband.deth.srcqp", ifExt(roce.ExtDETH, func(p *roce.Packet) string { return hex(uint64(p.DETH.SrcQP), 8) })},
	{"infiniband.atomiceth.swapdt", ifExt(roce.ExtAtomicETH, func(p *roce.Packet) string { return u(p.AtomicETH.SwapAdd) })},
	{"infiniband.atomiceth.cmpdt", ifExt(roce.ExtAtomicETH, func(p *roce.Packet) string { return u(p.AtomicETH.Compare) })},
	{"infiniband.atomicacketh.origremdt", ifExt(roce.ExtAtomicAckETH, func(p *roce.Packet) string { return u(p.AtomicAckETH) })},
	// tshark reads the four ICRC wire bytes big-endian; the wire carries the CRC little-endian.
	// It does not decode CNPs: their ICRC lands in infiniband.vendor (checked below), the BECN in
	// infiniband.reserved.
	{"infiniband.invariant.crc", func(p *roce.Packet) string {
		if p.BTH.Opcode == roce.CNP {
			return ""
		}
		return hex(uint64(bswap32(p.ICRC)), 8)
	}},
	{"infiniband.reserved", func(p *roce.Packet) string {
		if p.BTH.Opcode != roce.CNP {
			return "00"
		}
		return fmt.Sprintf("%02x", b2i(p.BTH.FECN)<<7|b2i(p.BTH.BECN)<<6)
	}},
	{"infiniband.vendor", func(p *roce.Packet) string {
		if p.BTH.Opcode != roce.CNP {
			return ""
		}
		return strings.Repeat("00", roce.CNPPadLen) + fmt.Sprintf("%08x", bswap32(p.ICRC))
	}},
	{"udp.srcport", func(p *roce.Packet) string { return v2(p, u(uint64(p.UDPSrc))) }},
	{"udp.dstport", func(p *roce.Packet) string { return v2(p, u(uint64(p.UDPDst))) }},
	{"udp.length", func(p *roce.Packet) string { return v2(p, u(uint64(p.UDPLen))) }},
	{"ip.dsfield", func(p *roce.Packet) string { return v4(p, hex(uint64(p.TOS), 2)) }},
	{"ip.ttl", func(p *roce.Packet) string { return v4(p, u(uint64(p.TTL))) }},
	{"ip.id", func(p *roce.Packet) string { return v4(p, hex(uint64(p.IPID), 4)) }},
	{"ip.len", func(p *roce.Packet) string { return v4(p, u(uint64(p.IPTotLen))) }},
	{"ip.checksum", func(p *roce.Packet) string { return v4(p, hex(uint64(p.IPChecksum), 4)) }},
	{"ip.src", func(p *roce.Packet) string { return v4(p, p.SrcIP.String()) }},
	{"ip.dst", func(p *roce.Packet) string { return v4(p, p.DstIP.String()) }},
	{"ipv6.tclass", func(p *roce.Packet) string { return v6(p, hex(uint64(p.TOS), 8)) }},
	{"ipv6.flow", func(p *roce.Packet) string { return v6(p, hex(uint64(p.FlowLabel), 6)) }},
	{"ipv6.hlim", func(p *roce.Packet) string { return v6(p, u(uint64(p.TTL))) }},
	{"ipv6.src", func(p *roce.Packet) string { return v6(p, p.SrcIP.String()) }},
	{"infiniband.grh.tclass", func(p *roce.Packet) string { return v1(p, u(uint64(p.TOS))) }},
	{"infiniband.grh.flowlabel", func(p *roce.Packet) string { return v1(p, u(uint64(p.FlowLabel))) }},
	{"infiniband.grh.hoplmt", func(p *roce.Packet) string { return v1(p, u(uint64(p.TTL))) }},
	{"infiniband.grh.nxthdr", func(p *roce.Packet) string { return v1(p, u(uint64(p.NextHdr))) }},
	{"infiniband.grh.sgid", func(p *roce.Packet) string { return v1(p, p.SrcIP.String()) }},
	{"infiniband.grh.dgid", func(p *roce.Packet) string { return v1(p, p.DstIP.String()) }},
	{"vlan.id", func(p *roce.Packet) string {
		if p.NumVLANs == 0 {
			return ""
		}
		return u(uint64(p.VLANs[0].ID()))
	}},
	{"vlan.priority", func(p *roce.Packet) string {
		if p.NumVLANs == 0 {
			return ""
		}
		return u(uint64(p.VLANs[0].PCP()))
	}},
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func bswap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }

func v2(p *roce.Packet, s string) string {
	if p.Version != roce.RoCEv2 {
		return ""
	}
	return s
}
func v4(p *roce.Packet, s string) string {
	if p.Version != roce.RoCEv2 || p.IPv6 {
		return ""
	}
	return s
}
func v6(p *roce.Packet, s string) string {
	if p.Version != roce.RoCEv2 || !p.IPv6 {
		return ""
	}
	return s
}
func v1(p *roce.Packet, s string) string {
	if p.Version != roce.RoCEv1 {
		return ""
	}
	return s
}

// TestTsharkAgreesOnEveryHeaderField encodes one packet of each kind with roce, writes them to a pcap, and
// compares every header field tshark decodes with the value we encoded; it also checks that our decoder reads
// the same values back and that the summary counts them. It needs tshark (CI installs it).
func TestTsharkAgreesOnEveryHeaderField(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (apt-get install -y tshark); the CI script installs it")
	}
	cases := tsharkPackets(t)
	frames := make([][]byte, len(cases))
	ts := make([]int64, len(cases))
	for i := range cases {
		b, err := cases[i].p.AppendTo(nil)
		if err != nil {
			t.Fatalf("%s: encoding: %v", cases[i].name, err)
		}
		frames[i], ts[i] = b, int64(i+1)*1e6+1e9
		// Our decoder must read back what was encoded (AppendTo left p describing the frame).
		var d roce.Packet
		if !d.Decode(b, len(b)) || d.BTH != cases[i].p.BTH || d.Ext != cases[i].p.Ext || d.CheckICRC() != roce.ICRCGood {
			t.Errorf("%s: decoder disagrees with encoder: %+v", cases[i].name, d.BTH)
		}
	}
	path := writePcap(t, t.TempDir(), "all-kinds.pcap", frames, ts)
	if dbg := os.Getenv("TSHARK_KEEP"); dbg != "" {
		writePcap(t, filepath.Dir(dbg), filepath.Base(dbg), frames, ts)
	}

	// RPC-over-RDMA's heuristic claims SEND payloads and throws before the ICRC is shown: keep it out.
	args := []string{"-r", path, "--disable-protocol", "rpcordma", "-T", "fields", "-E", "separator=|", "-E",
		"occurrence=l"}
	for _, f := range tsharkFields {
		args = append(args, "-e", f.name)
	}
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("tshark printed %d lines for %d packets:\n%s", len(lines), len(cases), out)
	}
	compared := 0
	for i, line := range lines {
		got := strings.Split(line, "|")
		if len(got) != len(tsharkFields) {
			t.Fatalf("packet %d: %d fields, want %d: %q", i, len(got), len(tsharkFields), line)
		}
		p := &cases[i].p
		for j, f := range tsharkFields {
			want := f.want(p)
			if !strings.EqualFold(got[j], want) {
				t.Errorf("packet %d (%s): %s = %q, tshark says %q", i, cases[i].name, f.name, want, got[j])
			}
			if want != "" {
				compared++
			}
		}
	}
	t.Logf("compared %d field values over %d packets", compared, len(cases))

	// The summary over the same file: every packet RoCE, every ICRC good, the NAK and the RNR NAK counted.
	r, err := Analyze([]string{path}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.RoCEPackets != int64(len(cases)) || r.ICRC.Good != int64(len(cases)) || r.RoCEv1 != 1 || r.RoCEv2IPv6 != 1 ||
		r.CNPs != 1 ||
		r.NAKs["psn-sequence-error"] != 1 || r.RNRNAKs != 1 || r.VLANs.Get(100) != 1 {
		t.Errorf("summary of the generated file: %+v", r)
	}
}
