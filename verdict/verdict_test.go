package verdict

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
)

func load(t *testing.T, yaml string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func doc() *Document {
	return &Document{Integrity: trace.Integrity{OK: true}, Analysis: &analyze.Analysis{
		Checks:   []analyze.Check{{Analyzer: "gbn", QP: 1, OK: true}},
		Counters: []analyze.CounterCheck{{Host: "responder", Name: "cnpSent", OK: false}},
	}}
}

// A failed check makes the test fail unless the scenario expects exactly that failure.
func TestExpectedFailureVerdict(t *testing.T) {
	for _, c := range []struct {
		expect string
		want   string
	}{
		{`  - {path: "checks[qp=1].ok", equals: true}`, Fail},
		{`  - {path: "counters[name=cnpSent].ok", equals: false}`, Pass},
		{`  - {path: "counters[name=other].ok", equals: false}`, Fail},
		{`  - {path: "checks[qp=1].ok", equals: false}`, Fail}, // the expectation itself fails
	} {
		sc := load(t, "expect:\n"+c.expect+"\n")
		d := doc()
		if err := judge(sc, d); err != nil {
			t.Fatal(err)
		}
		if d.Verdict != c.want {
			t.Errorf("%s: verdict %s, want %s (%+v)", c.expect, d.Verdict, c.want, d.Expectations)
		}
		if d.Counters[0].OK || !d.Checks[0].OK {
			t.Errorf("%s: judging changed the entries: %+v %+v", c.expect, d.Checks, d.Counters)
		}
	}
}

// Expectations select from the typed document as analysis.json spells its fields.
func TestExpectationsSeeTheDocument(t *testing.T) {
	sc := load(t, `expect:
  - {path: "checks[analyzer=gbn].qp", equals: 1}
  - {path: "integrity.ok", equals: true}
  - {path: "counters[host=responder].ok", equals: true}
`)
	d := doc()
	d.Counters[0].OK = true
	if err := judge(sc, d); err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Pass || len(d.Expectations) != 3 {
		t.Fatalf("verdict %s, expectations %+v", d.Verdict, d.Expectations)
	}
	for _, e := range d.Expectations {
		if !e.OK {
			t.Errorf("%s: %s", e.Expect, e.Detail)
		}
	}
}

func TestExitCode(t *testing.T) {
	for v, want := range map[string]int{Pass: 0, Fail: 1, Invalid: 3} {
		if got := (&Outcome{Doc: &Document{Verdict: v}}).ExitCode(); got != want {
			t.Errorf("%s: exit %d, want %d", v, got, want)
		}
	}
}

// A directory that is not a results directory is the input's fault (exit 2), named in the error.
func TestReanalyzeNotAResultsDirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := Reanalyze(dir)
	if !errors.Is(err, resultsdir.ErrInput) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Reanalyze(empty dir) = %v; want a bad-input error naming %s", err, dir)
	}
}

// A results directory whose counters.json is not JSON is bad input, named by file.
func TestJudgeBadCounters(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, resultsdir.FileCounters), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Judge(dir, load(t, "seed: 1\n"))
	if !errors.Is(err, resultsdir.ErrInput) || !strings.Contains(err.Error(), resultsdir.FileCounters) {
		t.Errorf("Judge = %v; want a bad-input error naming %s", err, resultsdir.FileCounters)
	}
}
