package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/verdict"

	"github.com/lumina-go/lumina/live"
)

// retransFacts are the go-back-N facts of an analysis that do not depend on timing.
func retransFacts(o *verdict.Outcome) []string {
	var out []string
	for _, r := range o.Doc.Retransmissions {
		trig := "<nil>"
		if r.Trigger != nil {
			trig = *r.Trigger
		}
		out = append(out, fmt.Sprintf("qp %d psn %d iter %d %s", r.QP, r.PSN, r.Iter, trig))
	}
	return out
}

// The remote testbed against real sshd on namespace hosts with software RNICs gives the netns testbed's
// analysis of the same scenario: the same verdict, the same go-back-N facts, the same events hit.
func TestRemoteListing2MatchesNetns(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 0)
	netns := run(t, load(t, "testbed: netns\n"+listing2), t.TempDir())
	sc := load(t, h.scenario(listing2, ""))
	if sc.Remote == nil || sc.Remote.Switch.ControlIP != h.ips["switch"] || len(sc.Remote.Dumpers) != 2 {
		t.Fatalf("remote section %+v", sc.Remote)
	}
	o, err := runJudged(sc, Options{OutDir: t.TempDir(), Remote: RemoteOptions{AgentBinary: h.agent}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Doc.Verdict != netns.Doc.Verdict || !o.Doc.Integrity.OK {
		t.Fatalf("remote verdict %s integrity %+v; netns verdict %s", o.Doc.Verdict, o.Doc.Integrity, netns.Doc.Verdict)
	}
	if got, want := retransFacts(o), retransFacts(netns); !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Errorf("retransmissions remote %q netns %q; want the same two", got, want)
	}
	for _, c := range o.Doc.Checks {
		if c.Analyzer == "gbn" && !c.OK {
			t.Errorf("gbn qp %d: %+v", c.QP, c.Violations)
		}
	}
	ri, ni := o.Counters.Switch.Injector, netns.Counters.Switch.Injector
	if ri == nil || ni == nil || !reflect.DeepEqual(ri.Events, ni.Events) || ri.Dropped != ni.Dropped {
		t.Errorf("injector events remote %+v netns %+v", ri, ni)
	}
	if len(o.Entries) != len(netns.Entries) || len(o.Entries) == 0 {
		t.Errorf("%d table entries remote, %d netns", len(o.Entries), len(netns.Entries))
	}
	for _, tr := range o.Traffic {
		if tr.Status != "ok" || tr.Completed != 10 {
			t.Errorf("qp %d: %s, %d of 10 messages", tr.QP, tr.Status, tr.Completed)
		}
	}
	if !resultsdir.IsDir(o.Dir) {
		t.Error("the results directory lacks the effective scenario")
	}
	// The results directory re-analyzes to the same verdict (the effective scenario keeps the hosts).
	re, err := verdict.Reanalyze(o.Dir)
	if err != nil || re.Doc.Verdict != o.Doc.Verdict || re.Scenario.Remote == nil {
		t.Errorf("reanalyze: %v, verdict %v", err, re)
	}
	st, err := os.ReadFile(filepath.Join(o.Dir, RemoteRawDir, "switch-status.json"))
	if err != nil || !strings.Contains(string(st), `"installed": 1`) {
		t.Errorf("remote/switch-status.json: %v\n%.300s", err, st)
	}
	lg, err := os.ReadFile(filepath.Join(o.Dir, RemoteRawDir, "requester.log"))
	if err != nil || !strings.Contains(string(lg), "lumina agent: traffic-run") {
		t.Errorf("remote/requester.log: %v\n%s", err, lg)
	}
	h.assertClean(t)
}

// readDrop is a READ scenario: a dropped read response is recovered by the requester re-issuing the READ.
const readDrop = `
seed: 11
requester:
  nic: {type: cx5, ip-list: [10.0.0.2/24, 10.0.0.12/24]}
responder:
  nic: {type: cx5, ip-list: [10.0.0.3/24]}
traffic:
  num-connections: 2
  rdma-verb: read
  num-msgs-per-qp: 4
  mtu: 1024
  message-size: 4096
  data-pkt-events:
    - {qpn: 1, psn: 6, type: drop, iter: 1}
    - {qpn: 2, psn: 2, type: ecn, iter: 1}
`

// READ traffic gives the same analysis on the remote testbed as on the netns testbed.
func TestRemoteReadMatchesNetns(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 6)
	netns := run(t, load(t, "testbed: netns\n"+readDrop), t.TempDir())
	o, err := runJudged(load(t, h.scenario(readDrop, "")), Options{OutDir: t.TempDir(), Remote: RemoteOptions{AgentBinary: h.agent}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Doc.Verdict != netns.Doc.Verdict || o.Doc.Integrity.OK != netns.Doc.Integrity.OK || !o.Doc.Integrity.OK {
		t.Fatalf("remote verdict %s integrity %v; netns %s %v", o.Doc.Verdict, o.Doc.Integrity.OK, netns.Doc.Verdict, netns.Doc.Integrity.OK)
	}
	if got, want := retransFacts(o), retransFacts(netns); !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Errorf("retransmissions remote %q netns %q", got, want)
	}
	var rc, nc []string
	for _, c := range o.Doc.Checks {
		rc = append(rc, fmt.Sprintf("%s qp %d ok %v", c.Analyzer, c.QP, c.OK))
	}
	for _, c := range netns.Doc.Checks {
		nc = append(nc, fmt.Sprintf("%s qp %d ok %v", c.Analyzer, c.QP, c.OK))
	}
	if !reflect.DeepEqual(rc, nc) {
		t.Errorf("checks remote %q netns %q", rc, nc)
	}
	ri, ni := o.Counters.Switch.Injector, netns.Counters.Switch.Injector
	if ri == nil || ni == nil || !reflect.DeepEqual(ri.Events, ni.Events) || ri.Events["drop"] != 1 || ri.Events["ecn"] != 1 {
		t.Errorf("injector events remote %+v netns %+v", ri, ni)
	}
	h.assertClean(t)
}

// mixedEvents exercises every intent field the switch agent receives as JSON: a corrupted data packet, the
// NAK it causes dropped (recovery by timeout), a duplicate, and an ECN mark.
const mixedEvents = `
seed: 5
requester:
  nic: {type: cx5, ip-list: [10.0.0.2/24, 10.0.0.12/24]}
responder:
  nic: {type: cx5, ip-list: [10.0.0.3/24]}
traffic:
  num-connections: 2
  rdma-verb: write
  num-msgs-per-qp: 3
  mtu: 1024
  message-size: 4096
events:
  - {qpn: 1, psn: 3, type: corrupt}
  - {qpn: 1, nth: 1, packet: nak, type: drop}
  - {qpn: 2, psn: 5, type: duplicate, copies: 1}
  - {qpn: 2, psn: 8, type: ecn}
`

// Events on ACK/NAK packets and the corrupt and duplicate actions give the same analysis remotely as on netns.
func TestRemoteMixedEventsMatchNetns(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 10)
	netns := run(t, load(t, "testbed: netns\n"+mixedEvents), t.TempDir())
	o, err := runJudged(load(t, h.scenario(mixedEvents, "")), Options{OutDir: t.TempDir(), Remote: RemoteOptions{AgentBinary: h.agent}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Doc.Verdict != netns.Doc.Verdict || !o.Doc.Integrity.OK || !netns.Doc.Integrity.OK {
		t.Fatalf("remote verdict %s integrity %v; netns %s %v", o.Doc.Verdict, o.Doc.Integrity.OK, netns.Doc.Verdict, netns.Doc.Integrity.OK)
	}
	got, want := retransFacts(o), retransFacts(netns)
	if !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Errorf("retransmissions remote %q netns %q", got, want)
	}
	t.Logf("retransmissions %q", got)
	ri, ni := o.Counters.Switch.Injector, netns.Counters.Switch.Injector
	if ri == nil || ni == nil || !reflect.DeepEqual(ri.Events, ni.Events) || ri.Events["corrupt"] != 1 || ri.Events["drop"] != 1 ||
		ri.Events["duplicate"] != 1 || ri.Events["ecn"] != 1 {
		t.Errorf("injector events remote %+v netns %+v", ri, ni)
	}
	h.assertClean(t)
}
