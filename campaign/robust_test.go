package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/search"
)

func writeCampaign(t *testing.T, dir, name, body string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// Campaign files refused: a name that leaves campaigns/, a scenario listed twice under two
// spellings, a profile name and a profile file of the same name, a real-testbed scenario under profiles:.
func TestParseRejectsUnsafeCampaigns(t *testing.T) {
	dir := t.TempDir()
	sc, _ := filepath.Abs("../examples/listing2.yaml")
	rxe, _ := filepath.Abs("../examples/rxe-vm-write-drop.yaml")
	prof, _ := filepath.Abs("../rnic/profiles/cx5.yaml")
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), mustRead(t, sc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"name: ../../esc\nscenarios: [" + sc + "]\n", `name: "../../esc": expected a plain name`},
		{"scenarios: [a.yaml, a.yaml]\n", "scenarios[1]: a.yaml is scenarios[0] again"},
		{"scenarios: [a.yaml, ./a.yaml]\n", "scenarios[1]: ./a.yaml is scenarios[0] again"},
		{"scenarios: [" + sc + "]\nprofiles: [cx5, " + prof + "]\n", "are both listing2/cx5/seed-"},
		{"scenarios: [" + rxe + "]\nprofiles: [cx5]\n", `scenario ` + rxe + ` runs on testbed "rxe-vm", and profiles: runs every scenario on the simulator`},
	} {
		f := writeCampaign(t, dir, "c.yaml", c.yaml)
		_, err := Load(f)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), f) {
			t.Errorf("%q: got %v; want an error naming %s and containing %q", c.yaml, err, f, c.want)
		}
	}
}

func mustRead(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An item's key follows the contents it runs, not paths: the same scenario under another path is the same
// key; a changed profile file is a new key.
func TestItemKeyFollowsContents(t *testing.T) {
	dir := t.TempDir()
	sc := mustRead(t, "../examples/listing2.yaml")
	prof := mustRead(t, "../rnic/profiles/cx5.yaml")
	for _, d := range []string{"x", "y"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "s.yaml"), sc, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "p.yaml"), prof, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key := func(d string) string {
		p, err := Load(writeCampaign(t, filepath.Join(dir, d), "c.yaml", "scenarios: [s.yaml]\nprofiles: [p.yaml]\n"))
		if err != nil {
			t.Fatal(err)
		}
		return p.Items[0].Key
	}
	kx, ky := key("x"), key("y")
	if kx != ky {
		t.Errorf("same contents under two paths: keys %s, %s", kx, ky)
	}
	changed := strings.Replace(string(prof), "name:", "# edited\nname:", 1)
	if err := os.WriteFile(filepath.Join(dir, "y", "p.yaml"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if k := key("y"); k == kx {
		t.Errorf("the profile file changed and the key stayed %s: a stale result would be reused", k)
	}
}

func smallPlan(t *testing.T, n int) *Plan {
	t.Helper()
	p, err := Load("testdata/suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p.Items = p.Items[:n]
	return p
}

// A directory removed and made again is a new campaign: its ID differs, so a cluster's old results are not
// reused. The same directory keeps its ID (a stopped campaign resumes).
func TestCampaignIDPerDirectoryLife(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	a, err := ID("n", dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ID("n", dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	c, _ := ID("n", dir)
	if a != b || a == c || !strings.HasPrefix(a, "n-") {
		t.Fatalf("ids %s %s %s: want the same while the directory lives, another after it was removed", a, b, c)
	}
}

// A second coordinator on the same directory is refused, naming the first; a deadline with no worker stops
// the campaign with ErrDeadline.
func TestLockAndDeadline(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), smallPlan(t, 1), RunOptions{Dir: dir, Queue: Queue{AckWait: 2 * time.Second}})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second coordinator: %v; want ErrLocked naming the first", err)
	}
	lock.Close()
	start := time.Now()
	_, err = Run(context.Background(), smallPlan(t, 1), RunOptions{Dir: dir, Queue: Queue{AckWait: 2 * time.Second}, Deadline: 1500 * time.Millisecond})
	if !errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), "0 of 1 results") || time.Since(start) > 20*time.Second {
		t.Fatalf("no worker, deadline 1.5s: %v after %s; want ErrDeadline", err, time.Since(start))
	}
}

// summary.json holds campaign-relative paths only (locations.json says where things ran), and --fresh runs
// every item again.
func TestSummaryHasNoLocationsAndFreshReruns(t *testing.T) {
	p := smallPlan(t, 2)
	dir := t.TempDir()
	if _, err := Run(context.Background(), p, RunOptions{Dir: dir, Queue: Queue{Workers: 1, AckWait: 2 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	sum := string(mustRead(t, filepath.Join(dir, FileSummaryJSON)))
	if strings.Contains(sum, dir) || strings.Contains(sum, hostname) || !strings.Contains(sum, `"file": "suite.yaml"`) ||
		!strings.Contains(sum, `"results": "items/0000-listing2-cx5-s1"`) {
		t.Fatalf("summary.json names where things ran:\n%s", sum)
	}
	var l Locations
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, FileLocations)), &l); err != nil || len(l.Items) != 2 || l.Items[1].Results != "items/0001-listing2-cx5-s2" {
		t.Fatalf("locations.json: %+v, %v", l, err)
	}
	// --fresh: the results in the stream are removed, the items run again and rewrite their directories.
	a := filepath.Join(dir, l.Items[0].Results, "analysis.json")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(a, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), p, RunOptions{Dir: dir, Queue: Queue{Workers: 1, AckWait: 2 * time.Second}, Fresh: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(a); err != nil || st.ModTime().Before(time.Now().Add(-time.Minute)) {
		t.Fatalf("--fresh did not run item 0 again: %v", err)
	}
}

// The run handler writes only under items/ of a campaign directory that is the item's, or under its own
// results root; it removes a killed run's staging directories; an item given up writes nothing.
func TestRunHandlerConfinedAndGivenUp(t *testing.T) {
	sc, _ := filepath.Abs("../examples/listing2.yaml")
	data := mustRead(t, sc)
	root, campDir := t.TempDir(), t.TempDir()
	h := Handlers(WorkerOptions{ResultsRoot: root})[KindRun]
	item := func(rel string) *queue.Item {
		pl, _ := json.Marshal(runPayload{Scenario: sc, YAML: data, Seed: 3, HasSeed: true, Rel: rel})
		return &queue.Item{Campaign: "camp", Key: "k", Kind: KindRun, Cap: queue.CapSim, Payload: pl, Host: hostname, Dir: campDir}
	}
	for _, rel := range []string{"../../esc", "/etc/x", "items/../../esc", "other/x"} {
		if _, err := h(context.Background(), item(rel)); err == nil || !strings.Contains(err.Error(), "expected a relative path under items/") {
			t.Errorf("Rel %q: %v; want refused", rel, err)
		}
	}
	// The campaign directory does not say it is campaign "camp": the worker keeps the results under its root.
	if err := os.WriteFile(filepath.Join(campDir, FileID), []byte("someone-else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A staging directory of a killed run (its process is gone) and one of a run still going (this process).
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(root, "camp", "items", "0000-x.partial-123")
	live := filepath.Join(root, "camp", "items", "0000-x.partial-456")
	for d, pid := range map[string]int{stale: gone.Process.Pid, live: os.Getpid()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		marker := fmt.Sprintf("lumina: this results directory is incomplete: lumina run started at now (pid %d) and has not finished;\n", pid)
		if err := os.WriteFile(filepath.Join(d, resultsdir.FileIncomplete), []byte(marker), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := h(context.Background(), item("items/0000-x"))
	if err != nil {
		t.Fatal(err)
	}
	var r RunResult
	_ = json.Unmarshal(out, &r)
	if r.Verdict != "pass" || r.Results != hostname+":"+filepath.Join(root, "camp", "items", "0000-x") {
		t.Fatalf("%+v: want pass under the worker's root", r)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale staging directory is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the staging directory of a run still going was removed: %v", err)
	}
	if ents, _ := os.ReadDir(campDir); len(ents) != 1 {
		t.Errorf("the worker wrote into a directory of another campaign: %d entries", len(ents))
	}
	// Given up (its context done) before it finished: no results directory, no staging directory.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h(ctx, item("items/0001-y")); !errors.Is(err, context.Canceled) {
		t.Fatalf("given-up item: %v; want the context's error", err)
	}
	if ents, _ := filepath.Glob(filepath.Join(root, "camp", "items", "0001-y*")); len(ents) != 0 {
		t.Fatalf("a given-up item wrote %v", ents)
	}
}

// A search through the queue has no evaluation deadline by default (as in process), and a failed evaluation
// left in the stream (a lost one, say) is asked again, not answered from the stream.
func TestSearchQueueNoTimeoutNoCachedFailures(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	qe, err := OpenSearchQueue(ctx, dir, search.SyntheticProfile, Queue{Workers: 1, AckWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer qe.Close()
	if qe.Timeout != 0 {
		t.Errorf("evaluation timeout %s; want none by default", qe.Timeout)
	}
	sp := search.DefaultSpace()
	w := sp.Sample(rand.New(rand.NewPCG(1, 2)))
	pl, _ := json.Marshal(evalPayload{Profile: search.SyntheticProfile, Workload: w, Seed: 1})
	h := fnv.New64a()
	h.Write(pl)
	id, _ := ID("search", dir)
	if err := queue.PublishResult(ctx, qe.s.JS, &queue.Result{Campaign: id, Key: fmt.Sprintf("e%016x", h.Sum64()), Status: queue.StatusLost, Reason: "given up"}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := qe.Evaluate(cctx, w, 1); err != nil {
		t.Fatalf("evaluation with a lost result in the stream: %v; want it evaluated again", err)
	}
}

// With Exec, a run item runs in a child process that is killed when the item is given up: the handler
// returns at the deadline, and nothing is written afterwards (in process, the simulation would run on and
// commit its directory). The same item with time enough passes through the child.
func TestRunItemChildKilledAtDeadline(t *testing.T) {
	sc, _ := filepath.Abs("../examples/listing2.yaml")
	// Listing 2 with 8 connections of 20000 messages: over a second of simulation.
	data := strings.Replace(strings.Replace(string(mustRead(t, sc)), "num-connections: 2", "num-connections: 8", 1), "num-msgs-per-qp: 10", "num-msgs-per-qp: 20000", 1)
	if !strings.Contains(data, "num-msgs-per-qp: 20000") {
		t.Fatal("listing2.yaml changed: the slow scenario is not slow")
	}
	root := t.TempDir()
	h := Handlers(WorkerOptions{ResultsRoot: root, Exec: []string{os.Args[0], childArg}})[KindRun]
	item := func(rel string) *queue.Item {
		pl, _ := json.Marshal(runPayload{Scenario: sc, YAML: []byte(data), Seed: 1, HasSeed: true, Rel: rel})
		return &queue.Item{Campaign: "camp", Key: "k", Kind: KindRun, Cap: queue.CapSim, Payload: pl}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := h(ctx, item("items/0000-slow")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v; want the deadline's error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the handler returned %s after a 300ms deadline", d)
	}
	time.Sleep(3 * time.Second) // the run alone takes over a second: a surviving child would have committed
	if ents, _ := filepath.Glob(filepath.Join(root, "camp", "items", "0000-slow*")); len(ents) != 0 {
		t.Fatalf("the given-up item wrote %v after its deadline", ents)
	}
	out, err := h(context.Background(), item("items/0001-slow"))
	if err != nil {
		t.Fatal(err)
	}
	var r RunResult
	if err := json.Unmarshal(out, &r); err != nil || r.Verdict != "pass" || r.Metrics["packets"] == 0 {
		t.Fatalf("through the child: %s, %v; want pass with metrics", out, err)
	}
	if _, err := os.Stat(filepath.Join(root, "camp", "items", "0001-slow", "analysis.json")); err != nil {
		t.Fatal(err)
	}
}

// A result from a worker on another machine (host:/path) enters the summary as the item's campaign-relative
// directory, and locations.json keeps where it is.
func TestRemoteResultsOnlyInLocations(t *testing.T) {
	p := &Plan{Name: "m", File: "/some/where/m.yaml", Items: []Item{{Index: 0, ID: "a", Rel: "items/0000-a"}}}
	done, _ := json.Marshal(RunResult{Verdict: "pass", Results: "far-host:/data/lumina-worker-results/x/items/0000-a"})
	res := []*queue.Result{{Status: queue.StatusDone, Payload: done, Worker: "far-host/12"}}
	sum := Merge(p, res)
	if sum.Items[0].Results != "items/0000-a" || sum.File != "m.yaml" {
		t.Fatalf("summary item results %q, file %q; want items/0000-a and m.yaml", sum.Items[0].Results, sum.File)
	}
	dir := t.TempDir()
	if err := WriteLocations(dir, p, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteSummary(dir, sum); err != nil {
		t.Fatal(err)
	}
	if l := string(mustRead(t, filepath.Join(dir, FileLocations))); !strings.Contains(l, `"results": "far-host:/data/lumina-worker-results/x/items/0000-a"`) {
		t.Fatalf("locations.json:\n%s", l)
	}
	// The history seam skips it: its directory is not on this machine.
	n := 0
	if err := ForEachRun(dir, func(ItemSummary, string) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("ForEachRun gave %d items (%v); want none", n, err)
	}
}
