package roce

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

const realDir = "../testdata/real-captures"

// readPcap is a minimal classic-pcap reader for this package's tests (the trace package has the real one; roce
// must not depend on it). It returns each frame and its original length.
func readPcap(t *testing.T, name string) (linkType uint32, frames [][]byte, orig []int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 {
		t.Fatalf("%s: not a little-endian microsecond pcap", name)
	}
	linkType = binary.LittleEndian.Uint32(b[20:])
	for off := 24; off+16 <= len(b); {
		incl := int(binary.LittleEndian.Uint32(b[off+8:]))
		ol := int(binary.LittleEndian.Uint32(b[off+12:]))
		frames = append(frames, b[off+16:off+16+incl])
		orig = append(orig, ol)
		off += 16 + incl
	}
	return
}

type tally struct {
	frames, v1, v2, good, bad, unchecked, ect1 int
	ops                                        map[Opcode]int
	reasons                                    map[Reason]int
}

func decodeAll(t *testing.T, name string) tally {
	lt, frames, orig := readPcap(t, name)
	if lt != 1 {
		t.Fatalf("%s: link type %d, want Ethernet", name, lt)
	}
	tl := tally{ops: map[Opcode]int{}, reasons: map[Reason]int{}}
	var p Packet
	for i, f := range frames {
		tl.frames++
		if !p.Decode(f, orig[i]) {
			tl.reasons[p.Reason]++
			continue
		}
		switch p.Version {
		case RoCEv1:
			tl.v1++
		case RoCEv2:
			tl.v2++
		}
		if p.ECN() == 1 {
			tl.ect1++
		}
		tl.ops[p.BTH.Opcode]++
		switch p.CheckICRC() {
		case ICRCGood:
			tl.good++
		case ICRCBad:
			tl.bad++
		default:
			tl.unchecked++
		}
	}
	return tl
}

// The facts below are those of testdata/real-captures/PROVENANCE.md.
func TestRealCapturesICRC(t *testing.T) {
	cases := []struct {
		file            string
		frames, v1, v2  int // -1: not asserted
		allBad, allGood bool
		unchecked       int // packets whose IP length exceeds the captured bytes

	}{
		{file: "oferby-proxy_roce.pcap", frames: 123, v1: 0, v2: 105, allGood: true},
		{file: "montybeatnik_roce_capture_read-write-ecn.pcap", frames: -1, v1: 0, v2: 12, allGood: true},
		{file: "magnate3_cx_rocev2_send_multiqp.pcap", frames: -1, v1: 0, v2: 708, allGood: true},
		{file: "magnate3_cx_rocev1_plus_v2_mixed.pcap", frames: -1, v1: 323, v2: 301, allGood: true},
		{file: "magnate3_cx_nvmeof_rdma_discover.pcap", frames: -1, v1: 0, v2: 61, allGood: true},
		{file: "magnate3_ibdump_rc_write_read.pcap", frames: -1, v1: 0, v2: 13, allGood: true},
		{file: "magnate3_mlx_dc_transport_badicrc.pcap", frames: -1, v1: -1, v2: -1, allBad: true},
		{file: "magnate3_mlx_uc_send_badicrc.pcap", frames: -1, v1: -1, v2: -1, allBad: true},
		// Its record headers claim whole frames, but 489 frames stop after 243 bytes while their IP length says
		// ~4 KB: their ICRC cannot be checked; the 20 complete ones are bad.
		{file: "magnate3_uccl_uc_write_imm.pcap", frames: -1, v1: 0, v2: 509, allBad: true, unchecked: 489},
		{file: "hexvec_cx4lx_cnp_from_scapy_test.pcap", frames: 1, v1: 0, v2: 1, allGood: true},
		{file: "hexvec_rxe_rc_read_request_from_pcpp_pr1603.pcap", frames: 1, v1: 0, v2: 1, allGood: true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			tl := decodeAll(t, c.file)
			if c.frames >= 0 && tl.frames != c.frames {
				t.Errorf("frames = %d, want %d", tl.frames, c.frames)
			}
			if c.v1 >= 0 && tl.v1 != c.v1 {
				t.Errorf("RoCEv1 = %d, want %d", tl.v1, c.v1)
			}
			if c.v2 >= 0 && tl.v2 != c.v2 {
				t.Errorf("RoCEv2 = %d, want %d", tl.v2, c.v2)
			}
			roce := tl.v1 + tl.v2
			if roce == 0 {
				t.Fatal("no RoCE packets decoded")
			}
			if tl.unchecked != c.unchecked {
				t.Errorf("%d packets not checkable, want %d", tl.unchecked, c.unchecked)
			}
			if c.allGood && tl.good != roce {
				t.Errorf("ICRC good %d of %d, bad %d", tl.good, roce, tl.bad)
			}
			if c.allBad && tl.bad != roce-tl.unchecked {
				t.Errorf("ICRC bad %d of %d, want all bad", tl.bad, roce)
			}
		})
	}
}

func TestRealNvmeofECT1(t *testing.T) {
	tl := decodeAll(t, "magnate3_cx_nvmeof_rdma_discover.pcap")
	if tl.ect1 != 56 {
		t.Fatalf("ECT(1) packets = %d, want 56", tl.ect1)
	}
}

func TestRealCNPFields(t *testing.T) {
	_, frames, orig := readPcap(t, "hexvec_cx4lx_cnp_from_scapy_test.pcap")
	var p Packet
	if !p.Decode(frames[0], orig[0]) {
		t.Fatalf("not decoded: %v", p.Reason)
	}
	if !p.IsCNP() || p.BTH.Opcode != 0x81 || p.BTH.Opcode.String() != "CNP" {
		t.Errorf("opcode %#x %q, want CNP 0x81", uint8(p.BTH.Opcode), p.BTH.Opcode)
	}
	if p.TOS != 0xc2 || p.DSCP() != 48 || p.ECN() != 2 {
		t.Errorf("TOS %#x DSCP %d ECN %d, want 0xc2/48/2", p.TOS, p.DSCP(), p.ECN())
	}
	if p.UDPSrc != 0 || p.UDPDst != 4791 {
		t.Errorf("UDP %d->%d, want 0->4791", p.UDPSrc, p.UDPDst)
	}
	if !p.BTH.BECN || p.BTH.FECN || p.BTH.DestQP != 0x118 || p.BTH.PSN != 0 || p.BTH.PKey != 0xffff {
		t.Errorf("BTH %+v", p.BTH)
	}
	if p.PayloadLen != 16 || len(p.Payload) != 16 {
		t.Errorf("payload %d bytes, want 16", p.PayloadLen)
	}
	for _, b := range p.Payload {
		if b != 0 {
			t.Errorf("CNP reserved bytes not zero: %x", p.Payload)
			break
		}
	}
	wire := frames[0][len(frames[0])-4:]
	if wire[0] != 0x82 || wire[1] != 0xfd || wire[2] != 0x00 || wire[3] != 0x2a {
		t.Errorf("ICRC wire bytes %x", wire)
	}
	if p.CheckICRC() != ICRCGood {
		t.Error("ICRC not good")
	}
}

func TestRealReadRequest(t *testing.T) {
	_, frames, orig := readPcap(t, "hexvec_rxe_rc_read_request_from_pcpp_pr1603.pcap")
	var p Packet
	if !p.Decode(frames[0], orig[0]) || p.BTH.Opcode != RCReadRequest || !p.Has(ExtRETH) {
		t.Fatalf("not an RC READ request with RETH: %v %v", p.BTH.Opcode, p.Reason)
	}
	if p.RETH.DMALen == 0 || p.PayloadLen != 0 {
		t.Errorf("RETH %+v payload %d", p.RETH, p.PayloadLen)
	}
	if p.CheckICRC() != ICRCGood {
		t.Error("ICRC not good")
	}
}

func TestTruncatedIsNotCheckable(t *testing.T) {
	_, frames, orig := readPcap(t, "magnate3_cx_rocev2_send_multiqp.pcap")
	var p Packet
	n := 0
	for i, f := range frames {
		if len(f) <= 128 {
			continue
		}
		cut := f[:128] // Lumina's dumper keeps 128 bytes
		if !p.Decode(cut, orig[i]) {
			continue
		}
		n++
		if !p.Truncated || p.CheckICRC() != ICRCNotCheckable {
			t.Fatalf("frame %d cut to 128 bytes: truncated=%v icrc=%v", i, p.Truncated, p.CheckICRC())
		}
		if p.PayloadLen <= len(p.Payload) {
			t.Fatalf("frame %d: declared payload %d should exceed captured %d", i, p.PayloadLen, len(p.Payload))
		}
	}
	if n == 0 {
		t.Fatal("no frame longer than 128 bytes")
	}
}

func TestNativeIBIsNotEthernet(t *testing.T) {
	lt, frames, _ := readPcap(t, "wiresharkwiki-infiniband_erf_via-srinivaskoritala.pcap")
	if lt != 197 {
		t.Fatalf("link type %d, want 197 (ERF)", lt)
	}
	if len(frames) == 0 {
		t.Fatal("no frames")
	}
}
