package summary

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/trace"
)

// The package sits two levels below the repository root, which holds testdata/real-captures.
const realDir = "../../testdata/real-captures"

func analyzeReal(t *testing.T, name string) *Report {
	t.Helper()
	r, err := Analyze([]string{filepath.Join(realDir, name)}, Options{})
	if err != nil {
		t.Fatalf("Analyze(%s): %v", name, err)
	}
	return r
}

func opcodeCount(r *Report, op uint8) int64 {
	for _, o := range r.Opcodes {
		if o.Opcode == op {
			return o.Count
		}
	}
	return 0
}

// The facts asserted here are those of testdata/real-captures/PROVENANCE.md.
func TestRealCapturesICRC(t *testing.T) {
	cases := []struct {
		file                     string
		packets                  int64 // -1: not asserted
		v1, v2                   int64
		good, bad, notCheckable  int64
		flowsByQP                int // distinct destination QPs, -1: not asserted
		wantProblemICRC          bool
		wantNoRetransmissions    bool
		wantNonRoCEExplanation   bool
		wantUDCountedNotTracked  bool
		wantReadResponseOpcodes  bool
		wantGapsFromSampledTrace bool
	}{
		{file: "oferby-proxy_roce.pcap", packets: 123, v2: 105, good: 105, flowsByQP: 2, wantNoRetransmissions: true,
			wantNonRoCEExplanation: true},
		{file: "montybeatnik_roce_capture_read-write-ecn.pcap", packets: -1, v2: 12, good: 12, flowsByQP: -1,
			wantNoRetransmissions: true, wantReadResponseOpcodes: true, wantUDCountedNotTracked: true},
		{file: "magnate3_cx_rocev2_send_multiqp.pcap", packets: -1, v2: 708, good: 708, flowsByQP: 32,
			wantNoRetransmissions: true, wantGapsFromSampledTrace: true},
		{file: "magnate3_cx_rocev1_plus_v2_mixed.pcap", packets: -1, v1: 323, v2: 301, good: 624, flowsByQP: -1,
			wantNoRetransmissions: true},
		{file: "magnate3_cx_nvmeof_rdma_discover.pcap", packets: -1, v2: 61, good: 61, flowsByQP: -1,
			wantNoRetransmissions: true},
		{file: "magnate3_ibdump_rc_write_read.pcap", packets: -1, v2: 13, good: 13, flowsByQP: -1,
			wantNoRetransmissions: true},
		{file: "magnate3_mlx_dc_transport_badicrc.pcap", packets: -1, v2: 29, bad: 29, flowsByQP: -1,
			wantProblemICRC: true},
		{file: "magnate3_mlx_uc_send_badicrc.pcap", packets: -1, v2: 17, bad: 17, flowsByQP: -1,
			wantProblemICRC: true},
		// Its record headers say the frames are whole, but 489 frames stop after 243 bytes while their IP length
		// says ~4 KB: not checkable; the 20 complete ones are bad.
		{file: "magnate3_uccl_uc_write_imm.pcap", packets: -1, v2: 509, bad: 20, notCheckable: 489, flowsByQP: 24,
			wantProblemICRC: true},
		{file: "hexvec_cx4lx_cnp_from_scapy_test.pcap", packets: 1, v2: 1, good: 1, flowsByQP: 1},
		{file: "hexvec_rxe_rc_read_request_from_pcpp_pr1603.pcap", packets: 1, v2: 1, good: 1, flowsByQP: 1},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r := analyzeReal(t, c.file)
			if c.packets >= 0 && r.Packets != c.packets {
				t.Errorf("packets = %d, want %d", r.Packets, c.packets)
			}
			if r.RoCEv1 != c.v1 || r.RoCEv2 != c.v2 || r.RoCEPackets != c.v1+c.v2 {
				t.Errorf("RoCE v1/v2/all = %d/%d/%d, want %d/%d/%d", r.RoCEv1, r.RoCEv2, r.RoCEPackets, c.v1, c.v2, c.v1+c.v2)
			}
			if r.ICRC.Good != c.good || r.ICRC.Bad != c.bad || r.ICRC.NotCheckable != c.notCheckable {
				t.Errorf("ICRC good/bad/not checkable = %d/%d/%d, want %d/%d/%d", r.ICRC.Good, r.ICRC.Bad,
					r.ICRC.NotCheckable, c.good, c.bad, c.notCheckable)
			}
			if c.flowsByQP >= 0 {
				qps := map[uint32]bool{}
				for _, f := range r.Flows {
					qps[f.DestQP] = true
				}
				if len(qps) != c.flowsByQP {
					t.Errorf("%d distinct destination QPs, want %d", len(qps), c.flowsByQP)
				}
			}
			icrcHealth := healthOf(r, "icrc")
			if icrcHealth == nil {
				t.Fatal("no icrc health line")
			}
			if c.wantProblemICRC != (icrcHealth.Verdict == VerdictProblem) {
				t.Errorf("icrc verdict %s, want problem=%v", icrcHealth.Verdict, c.wantProblemICRC)
			}
			if c.wantProblemICRC && !strings.Contains(r.ICRCLine(), "BAD") {
				t.Errorf("ICRC line %q does not shout BAD", r.ICRCLine())
			}
			if c.wantNoRetransmissions && r.Retransmitted != 0 {
				t.Errorf("%d retransmissions in a capture without any", r.Retransmitted)
			}
			if c.wantNonRoCEExplanation {
				var n int64
				for _, v := range r.NotRoCE {
					n += v
				}
				if n != r.Packets-r.RoCEPackets || n == 0 {
					t.Errorf("not-RoCE reasons add up to %d, want %d", n, r.Packets-r.RoCEPackets)
				}
			}
			if c.wantReadResponseOpcodes {
				for _, op := range []uint8{0x0c, 0x0d, 0x0e, 0x0f} {
					if opcodeCount(r, op) == 0 {
						t.Errorf("opcode %#x missing", op)
					}
				}
			}
			if c.wantUDCountedNotTracked {
				for _, f := range r.Flows {
					if f.Transport == "UD" && f.Retransmitted+f.Gaps != 0 {
						t.Errorf("UD flow %+v was PSN-tracked", f)
					}
				}
			}
			if c.wantGapsFromSampledTrace && r.Gaps == 0 {
				t.Error("the sampled multi-QP capture skips PSNs on every QP, but no gap was reported")
			}
		})
	}
}

func healthOf(r *Report, name string) *Health {
	for i := range r.Health {
		if r.Health[i].Name == name {
			return &r.Health[i]
		}
	}
	return nil
}

func TestRealOferbyACKs(t *testing.T) {
	r := analyzeReal(t, "oferby-proxy_roce.pcap")
	if n := opcodeCount(r, 0x11); n != 37 || r.ACKs != 37 {
		t.Errorf("ACK opcode count %d, acks %d, want 37", n, r.ACKs)
	}
	if opcodeCount(r, 0x00) == 0 || opcodeCount(r, 0x03) == 0 || opcodeCount(r, 0x05) == 0 {
		t.Errorf("SEND FIRST / SEND LAST w/ IMM / SEND ONLY IMM missing: %+v", r.Opcodes)
	}
	if sumMap(r.NAKs) != 0 || r.RNRNAKs != 0 {
		t.Errorf("NAKs %v RNR %d in a capture without any", r.NAKs, r.RNRNAKs)
	}
}

func TestRealMontybeatnikNotECT(t *testing.T) {
	r := analyzeReal(t, "montybeatnik_roce_capture_read-write-ecn.pcap")
	if r.ECN != (ECNCounts{NotECT: 12}) {
		t.Errorf("ECN %+v, want all 12 not-ECT", r.ECN)
	}
}

func TestRealMultiQPTOS(t *testing.T) {
	r := analyzeReal(t, "magnate3_cx_rocev2_send_multiqp.pcap")
	// TOS 0x6a one way (DSCP 26, ECT(0)) and 0x02 the other (DSCP 0, ECT(0)).
	if len(r.DSCP) != 2 || r.DSCP.Get(26) == 0 || r.DSCP.Get(0) == 0 || r.DSCP.Get(26)+r.DSCP.Get(0) != 708 {
		t.Errorf("DSCP %+v, want 26 and 0 covering 708 packets", r.DSCP)
	}
	if r.ECN.ECT0 != 708 {
		t.Errorf("ECN %+v, want 708 ECT(0)", r.ECN)
	}
	// One direction per DSCP: every flow from one host has DSCP 26, so the hosts split the two values.
	hosts := map[string]bool{}
	for _, f := range r.Flows {
		hosts[f.Src] = true
	}
	if len(hosts) != 2 {
		t.Errorf("sources %v, want two hosts", hosts)
	}
	if opcodeCount(r, 0x11) != 175 {
		t.Errorf("%d ACKs, want 175", opcodeCount(r, 0x11))
	}
}

func TestRealNvmeofECT1(t *testing.T) {
	r := analyzeReal(t, "magnate3_cx_nvmeof_rdma_discover.pcap")
	if r.ECN.ECT1 != 56 {
		t.Errorf("ECT(1) = %d, want 56", r.ECN.ECT1)
	}
}

func TestRealCNP(t *testing.T) {
	r := analyzeReal(t, "hexvec_cx4lx_cnp_from_scapy_test.pcap")
	if r.CNPs != 1 || r.DSCP.Get(48) != 1 || r.ECN.ECT0 != 1 {
		t.Errorf("cnps %d dscp %+v ecn %+v, want one CNP with DSCP 48, ECT(0)", r.CNPs, r.DSCP, r.ECN)
	}
	if len(r.Opcodes) != 1 || r.Opcodes[0].Opcode != 0x81 || r.Opcodes[0].Name != "CNP" {
		t.Errorf("opcodes %+v, want CNP 0x81", r.Opcodes)
	}
	if len(r.Flows) != 1 || r.Flows[0].DestQP != 0x118 || r.Flows[0].CNPs != 1 || r.Flows[0].Transport != "CNP" {
		t.Errorf("flows %+v, want one CNP flow to QP 0x118", r.Flows)
	}
	if healthOf(r, "cnp-rate") != nil {
		t.Error("CNP rate graded without any data packet")
	}
	if !containsWarning(r, "no data packets") {
		t.Errorf("warnings %q do not say the CNP rate cannot be graded", r.Warnings)
	}
	// The BECN bit itself is the codec's business (roce.TestRealCNPFields); here: tshark cannot decode CNPs,
	// we must name them.
	var sb strings.Builder
	if err := r.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "0x81    CNP") {
		t.Errorf("text does not list the CNP opcode:\n%s", sb.String())
	}
}

func TestRealReadRequest(t *testing.T) {
	r := analyzeReal(t, "hexvec_rxe_rc_read_request_from_pcpp_pr1603.pcap")
	if opcodeCount(r, 0x0c) != 1 || r.DataPackets != 0 {
		t.Errorf("opcodes %+v data %d, want one RC READ request and no data packet", r.Opcodes, r.DataPackets)
	}
}

func TestRealERFIsNotEthernet(t *testing.T) {
	r := analyzeReal(t, "wiresharkwiki-infiniband_erf_via-srinivaskoritala.pcap")
	if r.Packets == 0 || r.NotDecoded != r.Packets || r.RoCEPackets != 0 {
		t.Fatalf("packets %d, not decoded %d, RoCE %d: want every packet counted and none decoded", r.Packets,
			r.NotDecoded, r.RoCEPackets)
	}
	if len(r.LinkTypes) != 1 || r.LinkTypes[0].LinkType != trace.LinkTypeERF || r.LinkTypes[0].Decoded ||
		r.LinkTypes[0].Name != "ERF (197)" {
		t.Errorf("link types %+v, want ERF (197) not decoded", r.LinkTypes)
	}
	want := "ERF (197): 43 packets, not decoded"
	if !containsWarning(r, want) || !containsWarning(r, "no Ethernet packets") {
		t.Errorf("warnings %q, want one saying %q and that there is no Ethernet", r.Warnings, want)
	}
	if len(r.Health) != 0 {
		t.Errorf("health graded on a capture without Ethernet: %+v", r.Health)
	}
}

func containsWarning(r *Report, s string) bool {
	for _, w := range r.Warnings {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

func TestBadFilesAreFormatErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Analyze([]string{filepath.Join(realDir, "PROVENANCE.md")}, Options{})
	var fe *trace.FormatError
	if !errors.As(err, &fe) || fe.Offset != 0 || !strings.Contains(fe.File, "PROVENANCE.md") {
		t.Errorf("wrong magic: err %v, want a FormatError at offset 0 naming the file", err)
	}
	_, err = Analyze([]string{filepath.Join(dir, "missing.pcap")}, Options{})
	if err == nil || !strings.Contains(err.Error(), "missing.pcap") {
		t.Errorf("missing file: err %v, want one naming the file", err)
	}
	if _, err := Analyze(nil, Options{}); err == nil {
		t.Error("no file: no error")
	}
}
