package refdir

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/verdict"
	"github.com/lumina-go/lumina/version"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// cases are reference-format configurations under testdata/cases: each is run on the simulator, turned into a
// reference results directory by FromResults, and analyzed from there.
var cases = []string{"plain", "drops", "tswrap", "psnwrap", "read", "sendread"}

// generate runs a case and writes its reference results directory; it returns our results and the reference
// directory.
func generate(t *testing.T, name string) (*verdict.Outcome, string) {
	t.Helper()
	cfg := filepath.Join("testdata", "cases", name+".yml")
	sc, err := scenario.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := testbed.Run(sc, testbed.Options{OutDir: filepath.Join(dir, "results")}); err != nil {
		t.Fatal(err)
	}
	o, err := verdict.Judge(filepath.Join(dir, "results"), sc)
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(dir, "reference")
	if err := FromResults(o.Dir, cfg, ref); err != nil {
		t.Fatal(err)
	}
	return o, ref
}

// stable is the document as the golden files hold it: no build information, paths relative to the directory.
func stable(t *testing.T, doc *Document) []byte {
	t.Helper()
	d := *doc
	d.Version = version.Info{}
	d.Config = strings.TrimPrefix(d.Config, d.Dir+string(filepath.Separator))
	d.Iterations = append([]Iteration(nil), doc.Iterations...)
	for i := range d.Iterations {
		it := &d.Iterations[i]
		it.Pcaps = append([]string(nil), it.Pcaps...)
		for j, p := range it.Pcaps {
			it.Pcaps[j] = strings.TrimPrefix(p, d.Dir+string(filepath.Separator))
		}
	}
	d.Dir = "REFERENCE_DIR"
	b, err := version.MarshalDocument(&d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Golden comparisons: each generated reference directory analyzes to the checked-in document, and to the
// same verdict, checks, counter checks and retransmissions (latency breakdown included) as the run itself.
func TestGolden(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			o, ref := generate(t, name)
			doc, err := Analyze(ref, filepath.Join(ref, FileConfig))
			if err != nil {
				t.Fatal(err)
			}
			got := stable(t, doc)
			golden := filepath.Join("testdata", "golden", name+".json")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run the test with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("analysis of the reference directory differs from %s (-update rewrites it after review):\n%s", golden, firstDiff(got, want))
			}

			if len(doc.Iterations) != 1 {
				t.Fatalf("%d repetitions, want 1", len(doc.Iterations))
			}
			it := doc.Iterations[0]
			if it.Verdict != o.Doc.Verdict || !it.Integrity.OK {
				t.Errorf("verdict %s (integrity %v), the run's %s", it.Verdict, it.Integrity.OK, o.Doc.Verdict)
			}
			same(t, "retransmissions", it.Retransmissions, o.Doc.Retransmissions)
			same(t, "timeouts", it.Timeouts, o.Doc.Timeouts)
			same(t, "counter checks", it.Counters, o.Doc.Counters)
			same(t, "checks", judged(it.Checks), judged(o.Doc.Checks))
			for _, r := range it.Retransmissions {
				for _, v := range []*float64{r.LatencyUs, r.NACKGenerationUs, r.NACKReactionUs, r.NextDeliveredUs} {
					if v != nil && *v < 0 {
						t.Errorf("negative latency in %+v", r)
					}
				}
			}
		})
	}
}

// judged keeps the checks the reference's tests make (go-back-N, READ go-back-N, CNP).
func judged(cs []analyze.Check) []analyze.Check {
	var out []analyze.Check
	for _, c := range cs {
		if c.Analyzer == "gbn" || c.Analyzer == "gbn-read" || c.Analyzer == "read" || c.Analyzer == "cnp" {
			out = append(out, c)
		}
	}
	return out
}

func same(t *testing.T, what string, a, b any) {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	if !bytes.Equal(x, y) {
		t.Errorf("%s differ between the reference directory and the run:\nreference %s\nrun       %s", what, x, y)
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + itoa(i+1) + ":\n got  " + x + "\n want " + y
		}
	}
	return ""
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// The reference dumper stamps its pcaps with the switch's 48-bit clock: analyzed as captures, the dumps of the
// wrapping run have the same duration and flows' time spans as those of the same run without the wrap.
func TestCaptureSummaryAcrossClockWrap(t *testing.T) {
	var durations []float64
	for _, name := range []string{"drops", "tswrap"} {
		_, ref := generate(t, name)
		paths := []string{filepath.Join(ref, "0", DirPcap, "requester.pcap"), filepath.Join(ref, "0", DirPcap, "responder.pcap")}
		r, err := summary.Analyze(paths, summary.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.DurationS <= 0 || r.DurationS > 10 || r.LastNs < r.FirstNs {
			t.Fatalf("%s: duration %v s, first %d, last %d", name, r.DurationS, r.FirstNs, r.LastNs)
		}
		for _, f := range r.Flows {
			if f.LastNs < f.FirstNs {
				t.Errorf("%s: flow %+v ends before it starts", name, f)
			}
		}
		durations = append(durations, r.DurationS)
	}
	if durations[0] != durations[1] {
		t.Fatalf("durations %v: the clock wrap changed the summary", durations)
	}
}

// Several repetitions: each analyzed and reported; one whose switch counters disagree with its captures is
// invalid, and so is the directory (the worst verdict), while the other stays judged.
func TestRepetitions(t *testing.T) {
	_, ref := generate(t, "drops")
	if err := os.CopyFS(filepath.Join(ref, "1"), os.DirFS(filepath.Join(ref, "0"))); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(ref, "1", DirSwitch, FileSwitchState)
	b, _ := os.ReadFile(st)
	os.WriteFile(st, []byte(strings.Replace(string(b), "    148: ", "    148: 1", 1)), 0o644) // requester-mirror egress: 1 prefixed
	doc, err := Analyze(ref, filepath.Join(ref, FileConfig))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Iterations) != 2 || doc.Iterations[0].Verdict != VerdictPass || doc.Iterations[1].Verdict != VerdictInvalid ||
		doc.Verdict != VerdictInvalid || doc.ExitCode() != 3 || len(doc.Iterations[1].Retransmissions) != 0 {
		t.Fatalf("verdicts %s / %s, overall %s", doc.Iterations[0].Verdict, doc.Iterations[1].Verdict, doc.Verdict)
	}
	var failed []string
	for _, c := range doc.Iterations[1].Integrity.Checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	if strings.Join(failed, ",") != "count-equals-mirrored" {
		t.Errorf("failed conditions %v, want count-equals-mirrored", failed)
	}
}

// Without the dumpers' captures, the orchestrator's merge.pcap (microsecond timestamps, the mirror metadata
// intact) gives the same analysis.
func TestMergeOnly(t *testing.T) {
	_, ref := generate(t, "drops")
	both, err := Analyze(ref, filepath.Join(ref, FileConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"requester.pcap", "responder.pcap"} {
		os.Remove(filepath.Join(ref, "0", DirPcap, f))
	}
	merged, err := Analyze(ref, filepath.Join(ref, FileConfig))
	if err != nil {
		t.Fatal(err)
	}
	if p := merged.Iterations[0].Pcaps; len(p) != 1 || filepath.Base(p[0]) != "merge.pcap" {
		t.Fatalf("captures %v, want merge.pcap", p)
	}
	a, b := both.Iterations[0], merged.Iterations[0]
	if a.Verdict != b.Verdict || !b.Integrity.OK {
		t.Fatalf("verdict %s from the dumps, %s from the merge (integrity %v)", a.Verdict, b.Verdict, b.Integrity.OK)
	}
	same(t, "retransmissions", b.Retransmissions, a.Retransmissions)
	same(t, "checks", b.Checks, a.Checks)
}
