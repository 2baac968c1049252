package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/campaign"
	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/rundiff"
)

func TestCampaignCommand(t *testing.T) {
	dir := t.TempDir()
	sc, err := filepath.Abs("../../examples/listing2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.yaml")
	// Listing 2 passes on cx5 and fails on e810: the campaign's exit status is the worst item's, 1.
	if err := os.WriteFile(file, []byte("name: cli\nscenarios: ["+sc+"]\nprofiles: [cx5, e810]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	hist := filepath.Join(dir, "h.db")
	code := run([]string{"campaign", file, "--out", filepath.Join(dir, "out"), "--workers", "2", "-q", "--history", hist}, &out, &errb)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1; stderr: %s", code, errb.String())
	}
	squeezed := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"0 listing2/cx5/seed-7 pass 0", "1 listing2/e810/seed-7 fail 1", "campaign cli: 2 items: 1 pass, 1 fail; exit status 1"} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{"summary.json", "summary.txt", "items/0000-listing2-cx5-s7/analysis.json"} {
		if _, err := os.Stat(filepath.Join(dir, "out", f)); err != nil {
			t.Error(err)
		}
	}

	// The suite's runs are in the run history like any lumina run, once: re-running the finished campaign
	// reads its results back and records nothing again.
	if code := run([]string{"campaign", file, "--out", filepath.Join(dir, "out"), "--workers", "1", "-q", "--history", hist}, &out, &errb); code != exitFailed {
		t.Fatalf("re-run: exit %d, want 1; stderr: %s", code, errb.String())
	}
	var hout bytes.Buffer
	if code := run([]string{"history", "--history", hist, "--json"}, &hout, &errb); code != 0 {
		t.Fatalf("history: exit %d: %s", code, errb.String())
	}
	var h struct {
		Runs []struct {
			Run struct {
				NIC     string             `json:"nic"`
				Verdict string             `json:"verdict"`
				Metrics map[string]float64 `json:"metrics"`
			} `json:"run"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(hout.Bytes(), &h); err != nil {
		t.Fatalf("history --json: %v\n%s", err, hout.String())
	}
	got := map[string]string{}
	for _, r := range h.Runs {
		got[r.Run.NIC] = r.Run.Verdict
		if r.Run.Metrics["packets"] == 0 {
			t.Errorf("history: run on %s has no packets metric: %v", r.Run.NIC, r.Run.Metrics)
		}
	}
	if len(h.Runs) != 2 || got["cx5"] != "pass" || got["e810"] != "fail" {
		t.Errorf("history after the campaign and its re-run: %d runs %v; want 2: cx5 pass, e810 fail", len(h.Runs), got)
	}
	// --fresh runs every item again: two new runs in the history (same results, recorded as the runs they are).
	if code := run([]string{"campaign", file, "--out", filepath.Join(dir, "out"), "--workers", "1", "-q", "--history", hist, "--fresh"}, &out, &errb); code != exitFailed {
		t.Fatalf("--fresh: exit %d, want 1; stderr: %s", code, errb.String())
	}
	hout.Reset()
	if code := run([]string{"history", "--history", hist, "--json"}, &hout, &errb); code != 0 {
		t.Fatalf("history: exit %d: %s", code, errb.String())
	}
	if err := json.Unmarshal(hout.Bytes(), &h); err != nil || len(h.Runs) != 4 {
		t.Errorf("history after --fresh: %d runs (%v), want 4", len(h.Runs), err)
	}
}

func TestCampaignAndWorkerBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("scenarios: []\nretries: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"campaign", bad}, `unknown field "retries"`},
		{[]string{"campaign", filepath.Join(dir, "none.yaml")}, "reading campaign"},
		{[]string{"campaign", bad, "--nats-creds", "x.creds"}, "configure the connection to --nats URL"},
		{[]string{"campaign", bad, "--workers", "-1"}, "--workers -1"},
		{[]string{"worker"}, "--nats URL is required"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--no-sim"}, "could run nothing"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--testbed", "a.b"}, `--testbed "a.b"`},
		{[]string{"search", "--profile", "synthetic", "--workers", "2", "--ack-wait", "10ms"}, "--ack-wait 10ms"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != exitBadArgs || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// --deadline bounds a campaign no worker can serve (exit 2, naming the capability); with --nats a
// coordinator starts no local workers unless told; --fresh and --retry exclude each other.
func TestCampaignDeadlineAndNATSWorkers(t *testing.T) {
	dir := t.TempDir()
	sc, _ := filepath.Abs("../../examples/listing2.yaml")
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("name: dl\nscenarios: ["+sc+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emb, err := queue.StartEmbedded(filepath.Join(dir, "srv"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--workers", "0"}, []string{"0 local workers", "campaign deadline passed: 2s passed with 0 of 1 results", "(sim)"}},
		{[]string{"--nats", emb.URL()}, []string{"; 0 local workers", "campaign deadline passed"}},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"campaign", file, "--out", filepath.Join(t.TempDir(), "o"), "--deadline", "2s", "--no-history"}, c.args...)
		code := run(args, &out, &errb)
		for _, w := range c.want {
			if code != exitBadArgs || !strings.Contains(errb.String(), w) {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), w)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"campaign", file, "--fresh", "--retry", "--no-history"}, &out, &errb); code != exitBadArgs || !strings.Contains(errb.String(), "give one") {
		t.Errorf("--fresh --retry: exit %d, %q", code, errb.String())
	}
}

// A campaign's run is recorded in the history as lumina run records the same run (one builder,
// finishRecord): the same scenario, hash, NICs, testbed, seed, verdict, exit status and metrics.
func TestCampaignRecordsAsRunDoes(t *testing.T) {
	dir := t.TempDir()
	sc, err := filepath.Abs("../../examples/listing2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("name: rec\nscenarios: ["+sc+"]\nprofiles: [cx5]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hist := filepath.Join(dir, "h.db")
	var out, errb bytes.Buffer
	// Listing 2 is written for cx5: the campaign's cx5 item is the same test as the plain run.
	if code := run([]string{"campaign", file, "--out", filepath.Join(dir, "c"), "-q", "--history", hist}, &out, &errb); code != 0 {
		t.Fatalf("campaign: exit %d, want 0; stderr: %s", code, errb.String())
	}
	if code := run([]string{"run", sc, "--out", filepath.Join(dir, "r"), "-q", "--history", hist}, &out, &errb); code != 0 {
		t.Fatalf("run: exit %d, want 0; stderr: %s", code, errb.String())
	}
	var hout bytes.Buffer
	if code := run([]string{"history", "--history", hist, "--json"}, &hout, &errb); code != 0 {
		t.Fatalf("history: exit %d: %s", code, errb.String())
	}
	var h struct {
		Runs []struct {
			ScenarioPath string          `json:"scenario_path"`
			ExitStatus   *int            `json:"exit_status"`
			Run          json.RawMessage `json:"run"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(hout.Bytes(), &h); err != nil || len(h.Runs) != 2 {
		t.Fatalf("history --json: %d runs (%v), want 2\n%s", len(h.Runs), err, hout.String())
	}
	// The run's own fields but its label and directory, which name where each ran.
	strip := func(raw json.RawMessage) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "label")
		delete(m, "dir")
		return m
	}
	r, c := h.Runs[0], h.Runs[1] // newest first: the run, then the campaign's
	rm, cm := strip(r.Run), strip(c.Run)
	if fmt.Sprint(rm) != fmt.Sprint(cm) || r.ExitStatus == nil || c.ExitStatus == nil || *r.ExitStatus != *c.ExitStatus || r.ScenarioPath != c.ScenarioPath {
		t.Errorf("the campaign's record differs from lumina run's:\nrun      %v exit %v %s\ncampaign %v exit %v %s", rm, r.ExitStatus, r.ScenarioPath, cm, c.ExitStatus, c.ScenarioPath)
	}
	if m, _ := rm["metrics"].(map[string]any); len(m) < 10 || rm["verdict"] != "pass" || rm["nic"] != "cx5" {
		t.Errorf("lumina run's record: %v; want a passed cx5 run with its metrics", rm)
	}
}

// A campaign item judges its run as lumina run does (the trace judged while it is written): its analysis.json
// is lumina run's, byte for byte.
func TestCampaignItemAnalysisIsLuminaRuns(t *testing.T) {
	dir := t.TempDir()
	sc, err := filepath.Abs("../../examples/irn-selective-repeat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("name: same\nscenarios: ["+sc+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"campaign", file, "--out", filepath.Join(dir, "camp"), "--workers", "1", "-q", "--no-history"}, &out, &errb); code > exitFailed {
		t.Fatalf("campaign: exit %d; stderr: %s", code, errb.String())
	}
	items, err := filepath.Glob(filepath.Join(dir, "camp", "items", "*", "analysis.json"))
	if err != nil || len(items) != 1 {
		t.Fatalf("campaign items' analysis.json: %v %v; want one", items, err)
	}
	if code := run([]string{"run", sc, "--out", filepath.Join(dir, "run"), "-q", "--no-history"}, &out, &errb); code > exitFailed {
		t.Fatalf("run: exit %d; stderr: %s", code, errb.String())
	}
	a, err := os.ReadFile(items[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "run", "analysis.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) < 1000 || !bytes.Equal(a, b) {
		t.Errorf("the campaign item's analysis.json (%d bytes) differs from lumina run's (%d bytes)", len(a), len(b))
	}
}

// An item's fingerprint hashes its analysis.json whenever the file exists, as the fingerprints history.recorded
// already holds were made: also in a directory rundiff.ReadDoc refuses (INCOMPLETE, or not a results directory),
// where it reads none.
func TestItemFingerprintHashesAnalysisWhenItExists(t *testing.T) {
	earlier := func(dir string, it campaign.ItemSummary) string { // the fingerprint before ReadDoc was used
		h := sha256.New()
		if st, err := os.Stat(dir); err == nil {
			fmt.Fprintf(h, "%d\x00", st.ModTime().UnixNano())
		}
		if b, err := os.ReadFile(filepath.Join(dir, "analysis.json")); err == nil {
			h.Write(b)
		} else {
			fmt.Fprintf(h, "%s\x00%d\x00%s", it.Verdict, it.Exit, it.Reason)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	it := campaign.ItemSummary{Verdict: "error", Exit: 2, Reason: "the run could not finish"}
	for _, c := range []struct {
		name  string
		files map[string]string
	}{
		{"incomplete", map[string]string{"scenario.yaml": "seed: 1\n", "INCOMPLETE": "interrupted\n", "analysis.json": `{"verdict":"invalid"}`}},
		{"not a results directory", map[string]string{"analysis.json": `{"verdict":"invalid"}`}},
		{"no analysis", map[string]string{"scenario.yaml": "seed: 1\n", "INCOMPLETE": "interrupted\n"}},
	} {
		dir := t.TempDir()
		for n, body := range c.files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, raw, err := rundiff.ReadDoc(dir)
		if err == nil {
			t.Fatalf("%s: ReadDoc accepted the directory: the test checks nothing", c.name)
		}
		if got, want := itemFingerprint(it, dir, raw), earlier(dir, it); got != want {
			t.Errorf("%s: fingerprint %s; the earlier version's %s", c.name, got, want)
		}
		// Another analysis.json is another result.
		if _, ok := c.files["analysis.json"]; ok {
			before := itemFingerprint(it, dir, raw)
			if err := os.WriteFile(filepath.Join(dir, "analysis.json"), []byte(`{"verdict":"pass"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			if itemFingerprint(it, dir, nil) == before {
				t.Errorf("%s: the fingerprint did not change with analysis.json", c.name)
			}
		}
	}
}
