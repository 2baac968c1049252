package testbed

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/verdict"
)

// Every scenario under examples/ is a test: it runs on its testbed and every expectation holds.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.y*ml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), func(t *testing.T) {
			sc, err := scenario.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			switch sc.Testbed {
			case "", "sim":
			case "netns":
				if err := live.RequireRoot(); err != nil {
					t.Skipf("netns testbed unavailable: %v", err)
				}
			case "remote":
				dryRunExample(t, sc)
				return
			default:
				t.Skipf("testbed %s is exercised by its own CI job", sc.Testbed)
			}
			if len(sc.Expect) == 0 {
				t.Fatal("an example must say what it expects (expect:)")
			}
			o, err := runJudged(sc, Options{OutDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range o.Doc.Expectations {
				if !e.OK {
					t.Errorf("%s: %s", e.Expect, e.Detail)
				}
			}
			if o.Doc.Verdict != verdict.Pass {
				for _, c := range o.Doc.Checks {
					if !c.OK {
						t.Errorf("check %s qp %d failed: %+v", c.Analyzer, c.QP, c.Violations)
					}
				}
				for _, c := range o.Doc.Counters {
					if !c.OK {
						t.Errorf("counter %s %s: %+v", c.Host, c.Name, c)
					}
				}
				t.Errorf("verdict %s", o.Doc.Verdict)
			}
		})
	}
}

// dryRunExample runs a remote example as a user first would: lumina run --dry-run, with this machine's key and
// known_hosts files in place of the lab's. Every host must appear with its operations, and nothing is written.
func dryRunExample(t *testing.T, sc *scenario.Scenario) {
	dir := t.TempDir()
	key, kh := filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	for _, f := range []string{key, kh} {
		if err := os.WriteFile(f, []byte("placeholder\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := sc.Remote
	hosts := []*scenario.RemoteHost{&r.Requester, &r.Responder, &r.Switch}
	for i := range r.Dumpers {
		hosts = append(hosts, &r.Dumpers[i])
	}
	for _, h := range hosts {
		h.KeyFile, h.KnownHosts = key, kh
	}
	out := filepath.Join(dir, "results")
	var b bytes.Buffer
	if err := DryRun(sc, Options{OutDir: out, Remote: RemoteOptions{AgentBinary: os.Args[0], VerbsBinary: os.Args[0]}}, &b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, h := range hosts {
		if !strings.Contains(text, "host "+h.Role+": ssh "+h.Role+" ("+h.Username+"@"+h.ControlIP+":") {
			t.Errorf("dry run does not show host %s (%s)", h.Role, h.ControlIP)
		}
	}
	want := []string{"op switch-start", "op dump-start"}
	if r.Requester.IBDevice != "" {
		want = append(want, "op nic-setup", "op counters", "op verbs-client-run", "op nic-undo")
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("dry run lacks %q", w)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("dry run wrote %s (%v)", out, err)
	}
}
