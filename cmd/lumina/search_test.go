package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/version"
)

// restrictNine narrows the space to Collie's #9 trigger (seeds/003 A.1) but for the three request sizes, drawn
// from 128 B to 128 KB so that a mix of <= 1 KB and >= 64 KB ones (table 2's pattern for #9) comes up often.
const restrictNine = `qp_type: [rc]
opcode: [write]
direction: [bi]
memory: [local]
mtu: [4096]
num_qps: [8, 8]
wqe_batch: [8, 8]
sge: [3, 3]
wq_depth: [128, 128]
num_mrs: [1, 1]
mr_size: [4194304, 4194304]
msg_count: [3, 3]
msg_sizes: [128, 131072]
`

// TestSearchProfileFile: --profile takes a profile file; cx6vpi-200g with relaxed ordering off (Collie's #9,
// before F was forced to relaxed ordering) has a pause anomaly in #9's space, the embedded profile none, and
// the reproducing scenario names the file by an absolute path that lumina run can load.
func TestSearchProfileFile(t *testing.T) {
	base, err := os.ReadFile("../../rnic/profiles/cx6vpi-200g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noRO := strings.Replace(string(base), "relaxed-ordering: true", "relaxed-ordering: false", 1)
	if noRO == string(base) {
		t.Fatal("relaxed-ordering: true not found in cx6vpi-200g.yaml")
	}
	dir := t.TempDir()
	prof := filepath.Join(dir, "cx6-noro.yaml")
	if err := os.WriteFile(prof, []byte(noRO), 0o644); err != nil {
		t.Fatal(err)
	}
	space := writeFile(t, "nine.yaml", restrictNine)
	t.Chdir(dir)

	code, _, stderr := lumina(t, "search", "--profile", "cx6vpi-200g", "--restrict", space, "--budget", "24", "--out", "ro")
	if code != 0 {
		t.Fatalf("embedded profile (relaxed ordering on): exit %d, want 0 (no anomaly); stderr: %s", code, stderr)
	}
	code, _, stderr = lumina(t, "search", "--profile", "cx6-noro.yaml", "--restrict", space, "--budget", "24", "--out", "noro")
	if code != 1 {
		t.Fatalf("relaxed ordering off: exit %d, want 1 (anomaly); stderr: %s", code, stderr)
	}
	found := readAnomalies(t, "noro")
	if len(found) == 0 || found[0].Symptom != "pause" {
		t.Fatalf("anomalies %+v, want a pause anomaly", found)
	}
	// A profile file is the user's NIC, not one of Collie's subsystems: nothing published to name.
	if found[0].Published != nil {
		t.Errorf("profile file: published %v, want the field absent", *found[0].Published)
	}
	sc, err := os.ReadFile(found[0].Scenario)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sc), "type: "+prof) {
		t.Fatalf("scenario does not name the profile file %s:\n%s", prof, sc)
	}
	t.Chdir(t.TempDir()) // the scenario must not depend on the directory the search ran in
	if code, symptom, pause := runWorkload(t, filepath.Join(dir, found[0].Scenario)); (code != 0 && code != 1) ||
		symptom != "pause" || pause <= 0.001 {
		t.Fatalf("lumina run on the reproducing scenario: exit %d, symptom %q, pause ratio %v: want the pause symptom", code, symptom, pause)
	}
}

// foundAnomaly is what the tests read of one entry of anomalies.json.
type foundAnomaly struct {
	Symptom   string             `json:"symptom"`
	Published *[]int             `json:"published"`
	MFS       map[string][]any   `json:"mfs"`
	Scenario  string             `json:"scenario"`
	Counters  map[string]float64 `json:"counters"`
}

func readAnomalies(t *testing.T, dir string) []foundAnomaly {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "anomalies.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, "anomalies.json", data)
	var found []foundAnomaly
	if err := version.UnmarshalList(data, search.AnomaliesKey, &found); err != nil {
		t.Fatalf("anomalies.json %s: %v", data, err)
	}
	return found
}

// runWorkload runs lumina run on a workload scenario into ./res and returns the exit code and the workload
// analysis: the symptom and the pause duration ratio.
func runWorkload(t *testing.T, scenario string) (int, string, float64) {
	t.Helper()
	code, _, stderr := lumina(t, "run", scenario, "--out", "res")
	analysis, err := os.ReadFile("res/analysis.json")
	if err != nil {
		t.Fatalf("lumina run %s: exit %d, %v; stderr: %s", scenario, code, err, stderr)
	}
	var an struct {
		Workload struct {
			Symptom    string  `json:"symptom"`
			PauseRatio float64 `json:"pause_duration_ratio"`
		} `json:"workload"`
	}
	if err := json.Unmarshal(analysis, &an); err != nil {
		t.Fatalf("analysis.json: %v", err)
	}
	return code, an.Workload.Symptom, an.Workload.PauseRatio
}

// restrictFourteen is the neighbourhood of Collie's #14 trigger (seeds/003 A.2): bidirectional RC WRITE of
// 64-128 KB messages, 256 to 1536 QPs each way, MTU 2K or 4K, 1 to 4 SGEs.
const restrictFourteen = `qp_type: [rc]
opcode: [write]
direction: [bi]
memory: [local]
mtu: [2048, 4096]
num_qps: [256, 1536]
wqe_batch: [1, 1]
sge: [1, 4]
wq_depth: [128, 128]
num_mrs: [1, 1]
mr_size: [262144, 262144]
msg_count: [1, 1]
msg_sizes: [65536, 131072]
`

// TestSearchFindsStagingAnomaly: a restricted search on p2100g finds #14's low throughput and reduces it to
// Collie's conditions (MTU 4K, bidirectional, 4 SGEs, ~1000 QPs each way and more), with the staging counter
// among the counters that moved, and its scenario reproduces it under lumina run.
func TestSearchFindsStagingAnomaly(t *testing.T) {
	space := writeFile(t, "fourteen.yaml", restrictFourteen)
	t.Chdir(t.TempDir())
	code, stdout, stderr := lumina(t, "search", "--profile", "p2100g", "--restrict", space, "--budget", "120", "--seed", "2", "--out", "s")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (anomaly); stderr: %s", code, stderr)
	}
	// The output says what its score is.
	if !strings.Contains(stderr, "search: energy: lower is more anomalous") || !strings.Contains(stdout, "best energy ") ||
		!strings.Contains(stdout, "(lower is more anomalous. Random search and ga:") {
		t.Errorf("the energy is not explained:\nstdout %s\nstderr %s", stdout, stderr)
	}
	found := readAnomalies(t, "s")
	if len(found) != 1 {
		t.Fatalf("anomalies %+v, want one", found)
	}
	a := found[0]
	num := func(v any) float64 { f, _ := v.(float64); return f }
	if a.Symptom != "low-throughput" || len(a.MFS["mtu"]) != 1 || num(a.MFS["mtu"][0]) != 4096 ||
		len(a.MFS["direction"]) != 1 || a.MFS["direction"][0] != "bi" || len(a.MFS["sge"]) != 2 ||
		num(a.MFS["sge"][0]) < 3 || len(a.MFS["num_qps"]) != 2 || num(a.MFS["num_qps"][0]) < 512 {
		t.Fatalf("anomaly %s %v: want low-throughput with mtu [4096], direction [bi], sge >= 3, num_qps >= 512", a.Symptom, a.MFS)
	}
	if a.Counters["tx_staging_refetch_bytes"] <= 0 {
		t.Errorf("counters that moved %v: want tx_staging_refetch_bytes", a.Counters)
	}
	if code, symptom, _ := runWorkload(t, a.Scenario); code != 1 || symptom != "low-throughput" {
		t.Fatalf("lumina run on the reproducing scenario: exit %d, symptom %q: want 1 (the workload check fails) and low-throughput", code, symptom)
	}
}

// restrictThirteen is Collie's #13 trigger (seeds/003 A.1) with messages of 128 KB (the space's largest; its trigger
// has 256 KB): RC WRITE from B to A and from A to itself.
const restrictThirteen = `qp_type: [rc]
opcode: [write]
direction: [loopback]
memory: [local]
mtu: [4096, 4096]
num_qps: [8, 8]
wqe_batch: [16, 16]
sge: [1, 1]
wq_depth: [128, 128]
num_mrs: [32, 32]
mr_size: [4194304, 4194304]
msg_count: [1, 1]
msg_sizes: [131072, 131072]
`

// TestSearchNamesPublishedAnomalies: on one of Collie's subsystems a finding names the published anomalies whose
// conditions hold at its point (anomalies.json "published", --json, the table's PUBLISHED column and its legend),
// and [] / "none" where none holds.
func TestSearchNamesPublishedAnomalies(t *testing.T) {
	space := writeFile(t, "thirteen.yaml", restrictThirteen)
	t.Chdir(t.TempDir())
	code, stdout, stderr := lumina(t, "search", "--profile", "collie-f", "--restrict", space, "--budget", "12", "--out", "s", "-q")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (anomaly); stderr: %s", code, stderr)
	}
	found := readAnomalies(t, "s")
	if len(found) == 0 || found[0].Published == nil || !slices.Equal(*found[0].Published, []int{13}) {
		t.Fatalf("anomalies %+v: want the first to name published #13 (loopback)", found)
	}
	if !strings.Contains(stdout, "PUBLISHED") || !strings.Contains(stdout, "  #13 (pause; known before Collie): Co-existence of receiving traffic and loopback traffic causes PFC pause frames") {
		t.Errorf("the table does not name #13:\n%s", stdout)
	}
	var res struct {
		Anomalies []foundAnomaly `json:"anomalies"`
	}
	code, out, stderr := lumina(t, "search", "--profile", "collie-f", "--restrict", space, "--budget", "12", "--out", "j", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil || len(res.Anomalies) == 0 ||
		res.Anomalies[0].Published == nil || !slices.Equal(*res.Anomalies[0].Published, []int{13}) {
		t.Fatalf("--json: exit %d, %v, %s; stderr %s: want published [13]", code, err, out, stderr)
	}

	// None holds: the field is [] and the column says none. A finding by hand: the catalog's match at a workload
	// Collie reports nothing for (one direction of small RC WRITEs from local memory) is empty, and the
	// summary prints it so.
	pub, err := publishedFor("collie-f")
	if err != nil || pub == nil {
		t.Fatalf("publishedFor(collie-f) = %v, %v", pub, err)
	}
	w := search.Workload{Workload: scenario.DefaultWorkload()}
	w.Direction, w.Memory, w.QPType, w.Opcode, w.MsgSizes = "uni", "local", "rc", "write", []int{4096}
	ids := pub.match(w)
	if len(ids) != 0 {
		t.Fatalf("published at %s: %v, want none", w, ids)
	}
	var sb strings.Builder
	printSearchSummary(&sb, "d", &search.Result{Anomalies: []*search.Anomaly{{ID: 1, Symptom: search.Pause, Workload: w, Published: &ids}}}, pub)
	if !strings.Contains(sb.String(), "  none  ") || strings.Contains(sb.String(), "  #") {
		t.Errorf("summary of a finding nothing published holds at:\n%s", sb.String())
	}
	if p, err := publishedFor("synthetic"); p != nil || err != nil {
		t.Errorf("publishedFor(synthetic) = %v, %v: want nil (nothing published)", p, err)
	}
}
