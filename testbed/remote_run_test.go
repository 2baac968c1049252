package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/live"
)

// retransFacts are the go-back-N facts of an analysis that do not depend on timing.
func retransFacts(o *Outcome) []string {
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
	o, err := Run(sc, Options{OutDir: t.TempDir(), Remote: RemoteOptions{AgentBinary: h.agent}})
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
	if !IsResultsDir(o.Dir) {
		t.Error("the results directory lacks the effective scenario")
	}
	// The results directory re-analyzes to the same verdict (the effective scenario keeps the hosts).
	re, err := Reanalyze(o.Dir)
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
