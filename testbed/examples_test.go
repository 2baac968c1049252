package testbed

import (
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
