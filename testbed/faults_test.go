package testbed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
)

// Each checker must catch a real fault: the simulator runs a deliberately broken NIC model (a profile under
// testdata/faults naming one of rnic's injected faults), and the run must fail with the analyzer's exact
// violation at the offending packet of trace.pcapng, while the same scenario on the healthy profile passes.

// tracePkt is one RC packet of a run's trace, as the fault tests need it.
type tracePkt struct {
	idx    int
	op     roce.Opcode
	psn    uint32
	toResp bool // sent by the requester (10.0.0.2) to the responder
	nak    bool // a sequence-error NAK
}

// readTrace decodes the RC packets of dir's trace.pcapng.
func readTrace(t *testing.T, dir string) []tracePkt {
	t.Helper()
	f, err := trace.Open(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []tracePkt
	var p roce.Packet
	for {
		tp, err := f.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !p.Decode(tp.Data, tp.OrigLen) || p.Version == roce.NotRoCE || p.BTH.Opcode == roce.CNP {
			continue
		}
		out = append(out, tracePkt{idx: tp.Index, op: p.BTH.Opcode, psn: uint32(p.BTH.PSN),
			toResp: p.DstIP.String() == "10.0.0.3",
			nak:    p.IsNAK() && p.AETH.NAKCode() == roce.NAKPSNSequenceError})
	}
}

// nth returns the n-th (0-based) packet matching f, failing the test if there is none.
func nth(t *testing.T, pkts []tracePkt, n int, what string, f func(p tracePkt) bool) tracePkt {
	t.Helper()
	for _, p := range pkts {
		if f(p) {
			if n == 0 {
				return p
			}
			n--
		}
	}
	t.Fatalf("trace has no %s", what)
	return tracePkt{}
}

func isData(p tracePkt) bool { return p.toResp && (p.op.IsSend() || p.op.IsWrite()) }

// faultScenario is one connection, two messages of ten 1 KB packets, the 4th packet (relative PSN 3) dropped
// once. For READ the responses are the data and the requester must re-issue; the timeout is short so a fault
// that stalls recovery ends quickly.
func faultScenario(nicType, verb string) string {
	return fmt.Sprintf(`
seed: 11
requester:
  nic: {type: %[1]s, ip-list: [10.0.0.2/24]}
  roce-parameters: {dcqcn-rp-enable: false, dcqcn-np-enable: false}
responder:
  nic: {type: %[1]s, ip-list: [10.0.0.3/24]}
  roce-parameters: {dcqcn-rp-enable: false, dcqcn-np-enable: false}
traffic:
  num-connections: 1
  rdma-verb: %[2]s
  num-msgs-per-qp: 2
  mtu: 1024
  message-size: 10240
  min-retransmit-timeout: 8
  max-retransmit-retry: 7
  data-pkt-events:
    - {qpn: 1, psn: 4, type: drop, iter: 1}
`, nicType, verb)
}

const dropRel = 3 // relative PSN of the dropped packet (psn: 4 with index base 1)

type faultCase struct {
	fault    string
	healthy  string // the profile the fault profile was copied from
	verb     string
	analyzer string
	// want computes the expected violation from the trace and the dropped packet's wire PSN.
	want func(t *testing.T, pkts []tracePkt, drop uint32) analyze.Violation
}

var faultCases = []faultCase{
	{rnic.FaultDoubleNAK, "cx5", "write", "gbn", func(t *testing.T, pkts []tracePkt, drop uint32) analyze.Violation {
		first := nth(t, pkts, 0, "NAK", func(p tracePkt) bool { return p.nak })
		second := nth(t, pkts, 1, "second NAK", func(p tracePkt) bool { return p.nak })
		if first.psn != drop || second.psn != drop {
			t.Errorf("NAKs carry PSN %d and %d, want the dropped PSN %d", first.psn, second.psn, drop)
		}
		return analyze.Violation{Packet: second.idx, Message: fmt.Sprintf(
			"second NAK for the same sequence error (expected PSN %d, first NAK at packet %d)", drop, first.idx)}
	}},
	{rnic.FaultNAKWrongPSN, "cx5", "write", "gbn", func(t *testing.T, pkts []tracePkt, drop uint32) analyze.Violation {
		nak := nth(t, pkts, 0, "NAK", func(p tracePkt) bool { return p.nak })
		return analyze.Violation{Packet: nak.idx, Message: fmt.Sprintf("NAK for PSN %d but expected PSN is %d", drop+1, drop)}
	}},
	{rnic.FaultRetxWrongPSN, "cx5", "write", "gbn", func(t *testing.T, pkts []tracePkt, drop uint32) analyze.Violation {
		nak := nth(t, pkts, 0, "NAK", func(p tracePkt) bool { return p.nak })
		// The first retransmission: the second data packet carrying PSN drop+1.
		retx := nth(t, pkts, 1, "retransmission", func(p tracePkt) bool { return isData(p) && p.psn == drop+1 })
		if retx.idx < nak.idx {
			t.Errorf("retransmission at packet %d precedes the NAK at packet %d", retx.idx, nak.idx)
		}
		return analyze.Violation{Packet: retx.idx, Message: fmt.Sprintf(
			"retransmission from PSN %d but the NAK (packet %d) asked for PSN %d", drop+1, nak.idx, drop)}
	}},
	{rnic.FaultNoNAK, "cx5", "write", "gbn", func(t *testing.T, pkts []tracePkt, drop uint32) analyze.Violation {
		if nak := nth(t, append(pkts, tracePkt{idx: -1, nak: true}), 0, "NAK", func(p tracePkt) bool { return p.nak }); nak.idx >= 0 {
			t.Errorf("a responder with no-nak sent a NAK at packet %d", nak.idx)
		}
		// The first out-of-order arrival: the packet after the dropped one.
		oos := nth(t, pkts, 0, "packet after the drop", func(p tracePkt) bool { return isData(p) && p.psn == drop+1 })
		return analyze.Violation{Packet: oos.idx, Message: fmt.Sprintf(
			"missing NAK: PSN %d arrived while PSN %d was expected; the responder must send one NAK carrying PSN %d",
			drop+1, drop, drop)}
	}},
	{rnic.FaultIRNRetxSacked, "irn", "write", "irn", func(t *testing.T, pkts []tracePkt, drop uint32) analyze.Violation {
		// The dropped packet is retransmitted, then PSN drop+1, which the first NAK selectively acknowledged.
		retx := nth(t, pkts, 1, "retransmission of a SACKed packet", func(p tracePkt) bool { return isData(p) && p.psn == drop+1 })
		lost := nth(t, pkts, 1, "retransmission of the lost packet", func(p tracePkt) bool { return isData(p) && p.psn == drop })
		if lost.idx > retx.idx {
			t.Errorf("the lost PSN %d was retransmitted at packet %d, after the SACKed one at %d", drop, lost.idx, retx.idx)
		}
		return analyze.Violation{Packet: retx.idx, Message: fmt.Sprintf(
			"retransmitted PSN %d, which the receiver had selectively acknowledged", drop+1)}
	}},
	{rnic.FaultReadReissueWrongPSN, "cx5", "read", "gbn-read", func(t *testing.T, pkts []tracePkt, drop uint32) analyze.Violation {
		// The re-issue: the first READ request inside the first message's PSN range other than at its start.
		first := drop - dropRel
		re := nth(t, pkts, 0, "re-issued READ request", func(p tracePkt) bool {
			return p.toResp && p.op.IsReadRequest() && p.psn > first && p.psn < first+10
		})
		if re.psn != drop+1 {
			t.Errorf("re-issued READ from PSN %d, want the faulty %d", re.psn, drop+1)
		}
		return analyze.Violation{Packet: re.idx, Message: fmt.Sprintf(
			"re-issued READ from PSN %d but the first missing response PSN is %d", drop+1, drop)}
	}},
}

func TestFaultyNICsAreCaught(t *testing.T) {
	if len(faultCases) != len(rnic.FaultNames()) {
		t.Errorf("%d fault cases for %d known faults: every fault needs one", len(faultCases), len(rnic.FaultNames()))
	}
	for _, fc := range faultCases {
		t.Run(fc.fault, func(t *testing.T) {
			prof := filepath.Join("testdata", "faults", fc.fault+".yaml")
			p, err := rnic.LoadProfile(prof)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Faults) != 1 || !p.HasFault(fc.fault) {
				t.Fatalf("%s carries faults %v, want exactly [%s]", prof, p.Faults, fc.fault)
			}

			dir := t.TempDir()
			o := run(t, load(t, faultScenario(prof, fc.verb)), dir)
			var conns []resultsdir.ConnRecord
			if err := resultsdir.ReadList(dir, resultsdir.FileConnections, &conns); err != nil || len(conns) != 1 {
				t.Fatalf("connections.json: %v (%d connections)", err, len(conns))
			}
			drop := uint32(roce.PSN(conns[0].RequesterIPSN).Add(dropRel))
			want := fc.want(t, readTrace(t, dir), drop)

			if !o.Doc.Integrity.OK {
				t.Fatalf("integrity failed: %+v", o.Doc.Integrity)
			}
			if o.Doc.Verdict != verdict.Fail || o.ExitCode() != 1 {
				t.Errorf("verdict %s exit %d, want fail and 1", o.Doc.Verdict, o.ExitCode())
			}
			c := findCheck(o.Doc.Checks, fc.analyzer, 1)
			if c == nil {
				t.Fatalf("no %s check for qp 1 in %+v", fc.analyzer, o.Doc.Checks)
			}
			if c.OK || len(c.Violations) == 0 {
				t.Fatalf("%s check passed the faulty NIC", fc.analyzer)
			}
			t.Logf("%s violations: %+v", fc.analyzer, c.Violations)
			// The fault is the first thing the checker reports; later violations are its consequences.
			if c.Violations[0] != want {
				t.Errorf("first %s violation:\n  %+v\nwant\n  %+v\nall: %+v", fc.analyzer, c.Violations[0], want, c.Violations)
			}

			// The same scenario on the profile the fault file was copied from passes.
			h := run(t, load(t, faultScenario(fc.healthy, fc.verb)), t.TempDir())
			if h.Doc.Verdict != verdict.Pass {
				t.Errorf("healthy %s: verdict %s: %+v", fc.healthy, h.Doc.Verdict, h.Doc.Checks)
			}
			if hc := findCheck(h.Doc.Checks, fc.analyzer, 1); hc == nil || !hc.OK {
				t.Errorf("healthy %s: %s check %+v, want ok", fc.healthy, fc.analyzer, hc)
			}
		})
	}
}

func findCheck(cs []analyze.Check, analyzer string, qp int) *analyze.Check {
	for i := range cs {
		if cs[i].Analyzer == analyzer && cs[i].QP == qp {
			return &cs[i]
		}
	}
	return nil
}

// Each fault file differs from the profile it was copied from only by its name and the faults list, so the
// checkers are judged on the fault alone.
func TestFaultProfilesAreCopies(t *testing.T) {
	for _, fc := range faultCases {
		got, err := rnic.LoadProfile(filepath.Join("testdata", "faults", fc.fault+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		base, err := rnic.LoadProfile(fc.healthy)
		if err != nil {
			t.Fatal(err)
		}
		g := *got
		g.Name, g.Faults = base.Name, nil
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", *base) {
			t.Errorf("%s differs from %s beyond name and faults", fc.fault, fc.healthy)
		}
	}
}

// An unknown fault name is a profile error at its line, listing the known faults.
func TestUnknownFaultRejected(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "faults", "no-nak.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(data), "faults: [no-nak]", "faults:\n  - no-nak\n  - nak-twice", 1)
	line := 1 + strings.Count(src[:strings.Index(src, "nak-twice")], "\n")
	_, err = rnic.ParseProfile("bad.yaml", []byte(src))
	want := fmt.Sprintf("bad.yaml:%d: faults[1]: \"nak-twice\": want one of %s", line, strings.Join(rnic.FaultNames(), ", "))
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v\nwant prefix %s", err, want)
	}
}
