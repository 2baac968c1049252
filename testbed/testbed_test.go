package testbed

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
)

func load(t *testing.T, yaml string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

const listing2 = `
seed: 7
requester:
  nic: {type: cx5, ip-list: [10.0.0.2/24, 10.0.0.12/24]}
  roce-parameters: {dcqcn-rp-enable: false, dcqcn-np-enable: true, min-time-between-cnps: 0, slow-restart: true}
responder:
  nic: {type: cx5, ip-list: [10.0.0.3/24]}
traffic:
  num-connections: 2
  rdma-verb: write
  num-msgs-per-qp: 10
  mtu: 1024
  message-size: 10240
  multi-gid: true
  barrier-sync: true
  data-pkt-events:
    - {qpn: 1, psn: 4, type: ecn, iter: 1}
    - {qpn: 2, psn: 5, type: drop, iter: 1}
    - {qpn: 2, psn: 5, type: drop, iter: 2}
`

// runJudged runs sc and judges its results directory, as `lumina run` does: in the staging directory before
// it is moved into place, and a run that could not finish in the staging directory it leaves.
func runJudged(sc *scenario.Scenario, opts Options) (*verdict.Outcome, error) {
	var o *verdict.Outcome
	opts.Finish = func(dir string) (err error) {
		o, err = verdict.Judge(dir, sc)
		return err
	}
	if err := Run(sc, opts); err != nil {
		var inv *InvalidRunError
		if errors.As(err, &inv) {
			return verdict.RecordInvalid(inv.Dir, sc, inv.Reason)
		}
		return nil, err
	}
	o.Dir = opts.OutDir
	return o, nil
}

func run(t *testing.T, sc *scenario.Scenario, dir string) *verdict.Outcome {
	t.Helper()
	o, err := runJudged(sc, Options{OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The same scenario and seed give a byte-identical trace and dumps; another seed gives another trace.
func TestDeterministicTrace(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	run(t, load(t, listing2), a)
	run(t, load(t, listing2), b)
	sc := load(t, listing2)
	sc.WithSeed(8)
	run(t, sc, c)
	for _, f := range []string{resultsdir.FileTrace, "dump/dumper-0.pcap", "dump/dumper-1.pcap", resultsdir.FileAnalysis, resultsdir.FileCounters} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs of the same scenario and seed", f)
		}
	}
	x, _ := os.ReadFile(filepath.Join(a, resultsdir.FileTrace))
	z, _ := os.ReadFile(filepath.Join(c, resultsdir.FileTrace))
	if bytes.Equal(x, z) {
		t.Error("seeds 7 and 8 gave the same trace: QPNs and initial PSNs must derive from the seed")
	}
}

// Listing 2: the events hit exactly their packets and the results directory holds what the contract lists.
func TestListing2Results(t *testing.T) {
	dir := t.TempDir()
	o := run(t, load(t, listing2), dir)
	for _, f := range []string{resultsdir.FileScenario, resultsdir.FileTrace, resultsdir.FileCounters, resultsdir.FileTraffic, resultsdir.FileAnalysis, "dump/dumper-0.pcap", "dump/dumper-1.pcap"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("results directory lacks %s", f)
		}
	}
	d := o.Doc
	if !d.Integrity.OK || len(d.Integrity.Checks) != 4 {
		t.Fatalf("integrity %+v", d.Integrity)
	}
	if d.Verdict != verdict.Pass || o.ExitCode() != 0 {
		t.Errorf("verdict %s", d.Verdict)
	}
	if len(d.Retransmissions) != 2 {
		t.Fatalf("retransmissions %+v, want the two drops of qp 2 psn 5", d.Retransmissions)
	}
	for i, r := range d.Retransmissions {
		if r.QP != 2 || r.PSN != 5 || r.Iter != i+1 || r.Msg != 1 {
			t.Errorf("retransmission %d: qp %d psn %d iter %d msg %d", i, r.QP, r.PSN, r.Iter, r.Msg)
		}
	}
	if tr := d.Retransmissions[0].Trigger; tr == nil || *tr != "nack" {
		t.Errorf("first loss recovered by %v, want nack", tr)
	}
	if tr := d.Retransmissions[1].Trigger; tr == nil || *tr != "timeout" {
		t.Errorf("second loss recovered by %v, want timeout", tr)
	}
	if d.CNP.ECNMarked != 1 || d.CNP.CNPs < 1 {
		t.Errorf("cnp %+v, want the one mark answered", d.CNP)
	}
	// The effective scenario loads back and carries the seed and base.
	sc, err := scenario.Load(filepath.Join(dir, resultsdir.FileScenario))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Seed != 7 || sc.IndexBase != 1 || len(sc.Events) != 3 {
		t.Errorf("effective scenario: seed %d base %d events %d", sc.Seed, sc.IndexBase, len(sc.Events))
	}
	// Re-analysis of the directory gives the same document.
	r, err := verdict.Reanalyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Doc.Verdict != d.Verdict || len(r.Doc.Retransmissions) != len(d.Retransmissions) || !r.Doc.Integrity.OK {
		t.Errorf("re-analysis differs: %s %d", r.Doc.Verdict, len(r.Doc.Retransmissions))
	}
}

// A trace that lost a mirrored packet is an invalid test (exit 3) and is not analyzed.
func TestInvalidTrace(t *testing.T) {
	dir := t.TempDir()
	run(t, load(t, listing2), dir)
	path := filepath.Join(dir, resultsdir.FileTrace)
	f, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, _ := trace.NewPcapngWriter(&buf, trace.PcapngWriterOptions{Interfaces: []trace.InterfaceSpec{{LinkType: 1, SnapLen: 65535}}})
	n := 0
	for {
		p, err := f.Next()
		if err != nil {
			break
		}
		if n != 10 { // lose the 11th packet
			w.WritePacket(0, p.Timestamp, p.Data, p.OrigLen, p.Comment)
		}
		n++
	}
	f.Close()
	w.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := verdict.Reanalyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.Doc.Integrity.OK || o.Doc.Verdict != verdict.Invalid || o.ExitCode() != 3 {
		t.Fatalf("integrity %v verdict %s exit %d", o.Doc.Integrity.OK, o.Doc.Verdict, o.ExitCode())
	}
	var failed []string
	for _, c := range o.Doc.Integrity.Checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	want := "consecutive-mirror-seq,count-equals-mirrored,count-equals-rx"
	if strings.Join(failed, ",") != want {
		t.Errorf("failed checks %v, want %s", failed, want)
	}
	if len(o.Doc.Retransmissions) != 0 || len(o.Doc.Checks) != 0 {
		t.Error("an invalid test must not be analyzed")
	}
}

func TestBadInput(t *testing.T) {
	if _, err := scenario.Parse([]byte(strings.Replace(listing2, "type: cx5, ip-list: [10.0.0.3/24]", "type: cx9, ip-list: [10.0.0.3/24]", 1)), "x.yaml"); err == nil || !strings.Contains(err.Error(), "x.yaml:7:") {
		t.Errorf("unknown profile: %v, want a positioned scenario error", err)
	}
	cases := map[string][2]string{
		"profile file":         {strings.Replace(listing2, "type: cx5, ip-list: [10.0.0.3/24]", "type: nothere.yaml, ip-list: [10.0.0.3/24]", 1), "nothere.yaml"},
		"remote without hosts": {"testbed: remote\n" + listing2, "requester.control-ip is missing"},
		"remote switch clock":  {"testbed: remote\nnetwork: {switch-clock-start-ns: 5}\n" + listing2, "switch-clock-start-ns 5: the remote testbed's switch runs on the switch host's clock"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := runJudged(load(t, c[0]), Options{OutDir: t.TempDir()})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c[1]) {
				t.Fatalf("error %v, want a bad-input error naming %q", err, c[1])
			}
		})
	}
}
