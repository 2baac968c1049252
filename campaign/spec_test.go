package campaign

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/search"
)

func TestParseExpandsTheMatrix(t *testing.T) {
	p, err := Load("testdata/suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "chaos" || p.Attempts != 50 || p.Timeout != 2*time.Minute || len(p.Items) != 18 {
		t.Fatalf("plan %s attempts %d timeout %s items %d", p.Name, p.Attempts, p.Timeout, len(p.Items))
	}
	// Scenario-major, then profile, then seed.
	if p.Items[0].ID != "listing2/cx5/seed-1" || p.Items[7].ID != "listing2/cx6dx/seed-2" || p.Items[17].ID != "listing2/e810/seed-6" {
		t.Errorf("order: %s, %s, %s", p.Items[0].ID, p.Items[7].ID, p.Items[17].ID)
	}
	keys := map[string]bool{}
	for _, it := range p.Items {
		if keys[it.Key] {
			t.Errorf("key %s twice", it.Key)
		}
		keys[it.Key] = true
		if it.Cap() != "sim" || !it.HasSeed {
			t.Errorf("%s: cap %s hasSeed %v", it.ID, it.Cap(), it.HasSeed)
		}
	}
}

func TestParseNamesThePlace(t *testing.T) {
	dir := t.TempDir()
	sc, _ := filepath.Abs("../examples/listing2.yaml")
	for _, c := range []struct{ yaml, want string }{
		{"scenarios: [" + sc + "]\nprofile: [cx5]\n", `unknown field "profile"`},
		{"scenarios: [" + sc + "]\nprofiles: [cx99]\n", `profiles[0]: unknown NIC profile "cx99"`},
		{"scenarios: [" + sc + "]\nprofiles: [cx5, cx5]\n", `profiles[1]: "cx5" is listed twice`},
		{"scenarios: [" + sc + "]\ntimeout: soon\n", `timeout: "soon": expected a positive duration`},
		{"scenarios: [" + sc + "]\nattempts: -1\n", "attempts: -1: expected 1 to 100"},
		{"scenarios: [" + sc + "]\nseeds: [3, 3]\n", "seeds[1]: 3 is listed twice"},
		{"scenarios: [" + sc + "]\ntestbeds: [lab.1]\n", `testbeds[0]: testbed name "lab.1"`},
		{"scenarios: [" + sc + "]\ntestbeds: [sim]\n", `testbeds[0]: "sim" is the simulator`},
		{"scenarios: [nowhere.yaml]\n", "scenarios[0]: nowhere.yaml: cannot read it"},
		{"profiles: [cx5]\n", "scenarios: expected at least one scenario file"},
		{"seeds: [x]\nscenarios: [" + sc + "]\n", "seeds"},
		{"", "empty campaign file"},
	} {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(f)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), f) {
			t.Errorf("%q: got %v; want an error naming %s and containing %q", c.yaml, err, f, c.want)
		}
	}
}

// The same campaign with one and with three local workers gives the same summary, byte for byte.
func TestSummaryIndependentOfWorkers(t *testing.T) {
	p, err := Load("testdata/suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p.Items = p.Items[:6]
	var docs [][]byte
	for _, n := range []int{1, 3} {
		dir := filepath.Join(t.TempDir(), "c")
		sum, err := Run(context.Background(), p, RunOptions{Dir: dir, Queue: Queue{Workers: n, AckWait: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Items) != 6 || sum.Items[3].Verdict != "pass" || sum.Items[3].Metrics["packets"] == 0 {
			t.Fatalf("%d workers: %+v", n, sum.Items)
		}
		if _, err := os.Stat(filepath.Join(dir, sum.Items[3].Results, "analysis.json")); err != nil {
			t.Errorf("results directory of item 3: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(dir, FileSummaryJSON))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	if string(docs[0]) != string(docs[1]) {
		t.Fatalf("summaries differ:\n%s\n%s", docs[0], docs[1])
	}
	if !strings.HasPrefix(string(docs[0]), "{\n  \"schema_version\": 1,") {
		t.Errorf("summary.json does not start with its schema version: %.40s", docs[0])
	}
}

// A search through the queue with two local workers writes the same anomalies.json and search.jsonl as the
// search in process.
func TestSearchThroughQueueSameAsInProcess(t *testing.T) {
	cfg := search.DefaultConfig()
	cfg.Budget = 300
	run := func(dir string, queued bool) (string, string) {
		ev, err := search.EvaluatorFor(search.SyntheticProfile)
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		if queued {
			qe, err := OpenSearchQueue(context.Background(), dir, search.SyntheticProfile, Queue{Workers: 2, AckWait: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer qe.Close()
			ev, c.Workers = qe, 8
		}
		res, err := search.RunDir(context.Background(), ev, c, search.DirOptions{Dir: dir, Profile: search.SyntheticProfile})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Anomalies) == 0 {
			t.Fatalf("no anomaly in %d evaluations", res.Evaluations)
		}
		a, _ := os.ReadFile(filepath.Join(dir, "anomalies.json"))
		l, _ := os.ReadFile(filepath.Join(dir, "search.jsonl"))
		return strings.ReplaceAll(string(a), dir, "DIR"), string(l)
	}
	a1, l1 := run(filepath.Join(t.TempDir(), "s"), false)
	a2, l2 := run(filepath.Join(t.TempDir(), "s"), true)
	if a1 != a2 || l1 != l2 {
		t.Fatalf("the queued search differs from the one in process")
	}
}

func TestForEachRunGivesLocalResultsDirs(t *testing.T) {
	dir := t.TempDir()
	sum := &Summary{Campaign: "x", Items: []ItemSummary{{Index: 0, Verdict: "pass", Results: "items/0000-a"},
		{Index: 1, Verdict: "pass", Results: "host:/far/away"}, {Index: 2, Verdict: "lost"}}}
	if err := WriteSummary(dir, sum); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := ForEachRun(dir, func(it ItemSummary, d string) error { got = append(got, d); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != filepath.Join(dir, "items/0000-a") {
		t.Fatalf("got %v", got)
	}
	txt, _ := os.ReadFile(filepath.Join(dir, FileSummaryText))
	if !strings.Contains(string(txt), "campaign x: 3 items: 2 pass, 1 lost; exit status 0") {
		t.Errorf("summary.txt:\n%s", txt)
	}
}

// The example campaign of the README loads, and its items are the matrix it states.
func TestExampleCampaignLoads(t *testing.T) {
	p, err := Load("../examples/campaigns/smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 4 || p.Items[3].ID != "listing2/cx6dx/seed-2" || p.Attempts != 3 || p.Timeout != 5*time.Minute {
		t.Fatalf("%d items, last %s", len(p.Items), p.Items[len(p.Items)-1].ID)
	}
}

// A worker on another machine than the coordinator keeps the results directory under its own root and names
// it host:path; one on the same machine writes into the campaign directory.
func TestRunHandlerWhereResultsGo(t *testing.T) {
	sc, _ := filepath.Abs("../examples/listing2.yaml")
	data, err := os.ReadFile(sc)
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := json.Marshal(runPayload{Scenario: sc, YAML: data, Profile: "cx6dx", Seed: 3, HasSeed: true, Rel: "items/0000-x"})
	root, campDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(campDir, FileID), []byte("camp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := Handlers(WorkerOptions{ResultsRoot: root})[KindRun]
	for _, c := range []struct{ host, wantDir, wantResults string }{
		{"another-machine", filepath.Join(root, "camp", "items/0000-x"), hostname + ":" + filepath.Join(root, "camp", "items/0000-x")},
		{hostname, filepath.Join(campDir, "items/0000-x"), "items/0000-x"},
	} {
		out, err := h(context.Background(), &queue.Item{Campaign: "camp", Key: "k", Kind: KindRun, Cap: queue.CapSim, Payload: pl, Host: c.host, Dir: campDir})
		if err != nil {
			t.Fatal(err)
		}
		var r RunResult
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if r.Verdict != "pass" || r.Exit != 0 || r.Results != c.wantResults {
			t.Errorf("host %s: %+v; want pass with results %s", c.host, r, c.wantResults)
		}
		a, err := os.ReadFile(filepath.Join(c.wantDir, "analysis.json"))
		if err != nil {
			t.Fatal(err)
		}
		// The profile and the seed of the item were applied.
		if !strings.Contains(string(a), `"seed": 3`) {
			t.Errorf("host %s: analysis.json does not hold seed 3", c.host)
		}
		eff, err := os.ReadFile(filepath.Join(c.wantDir, "scenario.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(eff), "type: cx6dx") != 2 || strings.Contains(string(eff), "type: cx5") {
			t.Errorf("host %s: the effective scenario does not run cx6dx on both hosts:\n%s", c.host, eff)
		}
	}
}

// Items that did not run keep their reason in the summary, and the campaign's exit status is the worst.
func TestMergeKeepsReasons(t *testing.T) {
	p := &Plan{Name: "m", Items: []Item{{Index: 0, ID: "a"}, {Index: 1, ID: "b"}, {Index: 2, ID: "c"}, {Index: 3, ID: "d"}}}
	done, _ := json.Marshal(RunResult{Verdict: "invalid", Exit: 3, Results: "items/0"})
	sum := Merge(p, []*queue.Result{
		{Status: queue.StatusDone, Payload: done},
		{Status: queue.StatusTimeout, Reason: "ran past its deadline of 1s"},
		{Status: queue.StatusLost, Reason: "given up after 3 deliveries"},
		nil,
	})
	want := []struct {
		verdict string
		exit    int
		reason  string
	}{{"invalid", 3, ""}, {"timeout", 2, "ran past its deadline of 1s"}, {"lost", 2, "given up after 3 deliveries"}, {"lost", 2, "no result"}}
	for i, w := range want {
		it := sum.Items[i]
		if it.Verdict != w.verdict || it.Exit != w.exit || it.Reason != w.reason {
			t.Errorf("item %d: %s %d %q; want %s %d %q", i, it.Verdict, it.Exit, it.Reason, w.verdict, w.exit, w.reason)
		}
	}
	if sum.Exit != 2 || sum.Totals["lost"] != 2 || sum.Totals["invalid"] != 1 {
		t.Errorf("exit %d totals %v", sum.Exit, sum.Totals)
	}
	if worse(1, 3) != 3 || worse(3, 2) != 2 || worse(0, 1) != 1 || worse(2, 0) != 2 {
		t.Error("exit statuses are not ordered 2 > 3 > 1 > 0")
	}
}
