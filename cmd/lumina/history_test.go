package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lumina-go/lumina/history"
	"github.com/lumina-go/lumina/rundiff"
)

// The test binary never writes the user's history (TestMain).
func TestHistoryIsATempFileInTests(t *testing.T) {
	p, err := history.DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	if !strings.HasPrefix(p, os.TempDir()) || (home != "" && strings.HasPrefix(p, home)) {
		t.Fatalf("the tests' history is %s; want a temporary file", p)
	}
}

// scenarioDrops is a scenario that drops the given PSNs of connection 1 once each.
func scenarioDrops(psns ...int) string {
	s := `
seed: 3
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic:
  num-connections: 1
  num-msgs-per-qp: 4
  data-pkt-events:
`
	for _, p := range psns {
		s += fmt.Sprintf("    - {qpn: 1, psn: %d, type: drop, iter: 1}\n", p)
	}
	return s + "expect:\n  - integrity: ok\n"
}

type diffDoc struct {
	Metrics []struct {
		Metric string   `json:"metric"`
		Old    *float64 `json:"old"`
		New    *float64 `json:"new"`
		Change *float64 `json:"change"`
		Moved  bool     `json:"moved"`
		Status string   `json:"status"`
	} `json:"rows"`
	Regressed    []string `json:"regressed"`
	Improved     []string `json:"improved"`
	SameScenario bool     `json:"same_scenario"`
}

func diffJSON(t *testing.T, args ...string) (int, diffDoc, string) {
	t.Helper()
	code, stdout, stderr := lumina(t, append([]string{"diff", "--json"}, args...)...)
	var d diffDoc
	if code < 2 {
		if err := json.Unmarshal([]byte(stdout), &d); err != nil {
			t.Fatalf("diff --json: %v\n%s", err, stdout)
		}
	}
	return code, d, stderr
}

// Two runs of the same scenario and seed: nothing moved, exit 0. One drop against three: retransmissions
// regressed by exactly 2 (exit 1), and the other way round it improved (exit 0). The history records every
// run, and diff takes its ids as it takes directories.
func TestDiffAndHistory(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.db")
	one := writeFile(t, "one.yaml", scenarioDrops(3))
	three := writeFile(t, "three.yaml", scenarioDrops(3, 5, 7))
	base := t.TempDir()
	dirs := map[string]string{}
	for _, r := range []struct{ name, sc string }{{"a", one}, {"b", one}, {"c", three}} {
		dirs[r.name] = filepath.Join(base, r.name)
		if code, _, e := lumina(t, "run", r.sc, "--out", dirs[r.name], "-q", "--history", hist); code != 0 {
			t.Fatalf("run %s: exit %d %s", r.name, code, e)
		}
	}
	if code, _, e := lumina(t, "run", one, "--out", filepath.Join(base, "d"), "-q", "--history", hist, "--no-history"); code != 0 {
		t.Fatalf("run --no-history: exit %d %s", code, e)
	}

	code, d, stderr := diffJSON(t, dirs["a"], dirs["b"])
	if code != 0 || len(d.Regressed) != 0 || len(d.Improved) != 0 || !d.SameScenario {
		t.Fatalf("identical runs: exit %d, regressed %v, improved %v, same scenario %v; %s", code, d.Regressed, d.Improved, d.SameScenario, stderr)
	}
	if len(d.Metrics) < 10 {
		t.Fatalf("identical runs: only %d metrics compared", len(d.Metrics))
	}
	for _, m := range d.Metrics {
		if m.Status != rundiff.StatusSame || m.Moved || m.Change == nil || *m.Change != 0 {
			t.Errorf("identical runs: %s %s (change %v)", m.Metric, m.Status, m.Change)
		}
	}

	code, d, _ = diffJSON(t, dirs["a"], dirs["c"])
	if code != 1 || d.SameScenario {
		t.Fatalf("1 drop -> 3 drops: exit %d (want 1), same scenario %v", code, d.SameScenario)
	}
	row := func(d diffDoc, name string) (old, new, change float64, status string) {
		for _, m := range d.Metrics {
			if m.Metric == name {
				return *m.Old, *m.New, *m.Change, m.Status
			}
		}
		t.Fatalf("no metric %s", name)
		return
	}
	if o, n, c, st := row(d, "retransmissions"); o != 1 || n != 3 || c != 2 || st != rundiff.StatusRegressed {
		t.Errorf("retransmissions: %v -> %v (%v) %s; want 1 -> 3 (+2) regressed", o, n, c, st)
	}
	if o, n, _, st := row(d, "timeouts"); o != 0 || n != 0 || st != rundiff.StatusSame {
		t.Errorf("timeouts: %v -> %v %s; want 0 -> 0 same (every drop recovered by a NAK)", o, n, st)
	}
	if !contains(d.Regressed, "retransmissions") || contains(d.Regressed, "integrity_ok") {
		t.Errorf("regressed %v", d.Regressed)
	}
	code, d, _ = diffJSON(t, dirs["c"], dirs["a"])
	if code != 0 || !contains(d.Improved, "retransmissions") || contains(d.Regressed, "retransmissions") {
		t.Errorf("3 drops -> 1 drop: exit %d, improved %v, regressed %v; want exit 0, retransmissions improved", code, d.Improved, d.Regressed)
	}
	// A tolerance of 2 retransmissions and 10% packets accepts the move; the text says which regressed.
	code, _, _ = diffJSON(t, dirs["a"], dirs["c"], "--tolerance", "retransmissions=2", "--tolerance", "packets=10%",
		"--tolerance", "mct_us_mean=1000%", "--tolerance", "mct_us_p99=1000%", "--tolerance", "mct_us_max=1000%",
		"--tolerance", "goodput_gbps=100%", "--tolerance", "nack_generation_us_mean=100%", "--tolerance", "nack_generation_us_max=100%",
		"--tolerance", "nack_reaction_us_mean=100%", "--tolerance", "nack_reaction_us_max=100%",
		"--tolerance", "retx_latency_us_mean=1000%", "--tolerance", "retx_latency_us_max=1000%", "--tolerance", "timeouts=10",
		"--tolerance", "timeout_interval_us_mean=100%")
	if code != 0 {
		_, out, _ := lumina(t, "diff", dirs["a"], dirs["c"])
		t.Errorf("with wide tolerances: exit %d, want 0\n%s", code, out)
	}
	code, out, _ := lumina(t, "diff", dirs["a"], dirs["c"])
	if code != 1 || !strings.Contains(out, "REGRESSED") || !strings.Contains(out, "REGRESSION:") {
		t.Errorf("text diff: exit %d\n%s", code, out)
	}

	// The history: three runs (not the --no-history one), newest first, complete, with their metrics.
	code, out, stderr = lumina(t, "history", "--history", hist, "--json")
	if code != 0 {
		t.Fatalf("history: exit %d %s", code, stderr)
	}
	var h struct {
		Runs []history.Entry `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 3 || h.Runs[0].Run.Scenario != "three" || h.Runs[2].Run.Scenario != "one" {
		t.Fatalf("history lists %d runs: %+v; want three (c, b, a)", len(h.Runs), h.Runs)
	}
	for _, e := range h.Runs {
		if e.State != history.StateComplete || e.Run.Verdict != "pass" || *e.ExitStatus != 0 || e.Run.NIC != "cx5" || e.Run.Seed != 3 ||
			e.Run.Version == "" || len(e.Run.ScenarioHash) != 64 || e.Run.Metrics["retransmissions"] == 0 {
			t.Errorf("history entry %+v", e)
		}
	}
	if h.Runs[0].Run.Metrics["retransmissions"] != 3 || h.Runs[1].Run.ScenarioHash != h.Runs[2].Run.ScenarioHash ||
		h.Runs[0].Run.ScenarioHash == h.Runs[1].Run.ScenarioHash {
		t.Errorf("history: retransmissions %v, hashes %s %s %s", h.Runs[0].Run.Metrics["retransmissions"],
			h.Runs[0].Run.ScenarioHash, h.Runs[1].Run.ScenarioHash, h.Runs[2].Run.ScenarioHash)
	}
	code, out, _ = lumina(t, "history", "--history", hist, "--scenario", "one")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "RETX") || strings.Contains(out, "three") {
		t.Errorf("history --scenario one: exit %d\n%s", code, out)
	}
	// Ids compare as the directories do.
	code, d, _ = diffJSON(t, "--history", hist, fmt.Sprint(h.Runs[2].ID), fmt.Sprintf("#%d", h.Runs[0].ID))
	if code != 1 || !contains(d.Regressed, "retransmissions") {
		t.Errorf("diff of ids: exit %d, regressed %v", code, d.Regressed)
	}

	// Bad input: exit 2, naming what is wrong.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", "--history", hist, "99", dirs["a"]}, "run 99"},
		{[]string{"diff", "--history", hist, "nonsense", dirs["a"]}, "neither a results directory nor a run id"},
		{[]string{"diff", base, dirs["a"]}, "not a results directory"},
		{[]string{"diff", dirs["a"], dirs["b"], "--tolerance", "bogus=1"}, "no metric \"bogus\""},
		{[]string{"diff", dirs["a"], dirs["b"], "--tolerance", "packets=-1"}, "non-negative"},
		{[]string{"diff", dirs["a"], dirs["b"], "--tolerance", "mct_us_mean=10%,5%"}, "two percentages"},
		{[]string{"diff", dirs["a"]}, "accepts 2 arg"},
		{[]string{"history", "--history", filepath.Join(base, "none.db")}, "none.db"},
		{[]string{"history", "--history", hist, "--limit", "-1"}, "--limit"},
	} {
		code, _, stderr := lumina(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 mentioning %q", c.args, code, stderr, c.want)
		}
	}
	os.Remove(filepath.Join(dirs["b"], "analysis.json"))
	if code, _, stderr := lumina(t, "diff", dirs["a"], dirs["b"]); code != 2 || !strings.Contains(stderr, "analysis.json") {
		t.Errorf("a directory without analysis.json: exit %d, %q", code, stderr)
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// A lumina run killed (SIGKILL) anywhere, in the middle of recording its run included (the test hook pauses
// before each statement of that transaction and the test kills it at a random one), never leaves a run
// recorded as complete without its outcome: the database opens, its integrity check says ok, every complete
// run has its verdict and all its metrics, and the killed run is listed as started.
func TestHistorySurvivesKill(t *testing.T) {
	sc := writeFile(t, "ok.yaml", scenarioOK)
	hist := filepath.Join(t.TempDir(), "h.db")
	base := t.TempDir()
	if code, _, e := lumina(t, "run", sc, "--out", filepath.Join(base, "ref"), "-q", "--history", hist); code != 0 {
		t.Fatalf("reference run: exit %d %s", code, e)
	}
	db, err := history.Open(hist)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := db.List(history.Filter{})
	db.Close()
	if err != nil || len(ref) != 1 {
		t.Fatalf("reference run: %d runs recorded, %v", len(ref), err)
	}
	wantMetrics := len(ref[0].Run.Metrics)
	steps := wantMetrics + 3 // begin, a metric each, state, commit
	killedInTx, recorded := 0, 1
	t.Setenv(envHistoryStepPause, "50ms") // the children's
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 16))
		out := filepath.Join(base, fmt.Sprint(seed))
		var stderr syncBuffer
		p := luminaProcess(t, &stderr, "run", sc, "--out", out, "-q", "--history", hist)
		target := rng.IntN(steps + 1) // 0: kill at a random moment of the run, before the transaction
		if target == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
		} else {
			deadline := time.Now().Add(30 * time.Second)
			for strings.Count(stderr.String(), "lumina: history step ") < target && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			killedInTx++
		}
		p.Process.Signal(syscall.SIGKILL)
		p.Wait()

		db, err := history.Open(hist)
		if err != nil {
			t.Fatalf("seed %d: the history does not open after the kill: %v", seed, err)
		}
		if s, err := db.IntegrityCheck(); err != nil || s != "ok" {
			t.Errorf("seed %d: integrity_check %q, %v", seed, s, err)
		}
		runs, err := db.List(history.Filter{})
		db.Close()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		switch {
		case len(runs) != recorded && len(runs) != recorded+1, target > 0 && len(runs) != recorded+1:
			t.Errorf("seed %d: %d runs recorded after %d; the run is recorded as started before it runs", seed, len(runs), recorded)
		case target > 0 && runs[0].State != history.StateStarted:
			t.Errorf("seed %d: killed before its transaction committed, the run is listed %s", seed, runs[0].State)
		}
		recorded = len(runs)
		for _, e := range runs {
			switch e.State {
			case history.StateComplete:
				if e.Run.Verdict != "pass" || e.ExitStatus == nil || len(e.Run.Metrics) != wantMetrics {
					t.Errorf("seed %d: run %d listed complete with verdict %q, %d of %d metrics", seed, e.ID, e.Run.Verdict, len(e.Run.Metrics), wantMetrics)
				}
			case history.StateStarted:
				if e.Run.Verdict != "" || len(e.Run.Metrics) != 0 || e.ExitStatus != nil {
					t.Errorf("seed %d: started run %d shows an outcome: %+v", seed, e.ID, e)
				}
			default:
				t.Errorf("seed %d: run %d in state %q", seed, e.ID, e.State)
			}
		}
		t.Logf("seed %d: killed at step %d of %d; %d runs recorded", seed, target, steps, len(runs))
	}
	if killedInTx == 0 {
		t.Error("no run was killed inside the recording transaction: the test checked little")
	}
	// lumina history shows the killed runs as started, without a verdict.
	code, out, _ := lumina(t, "history", "--history", hist, "--limit", "0")
	if code != 0 || !strings.Contains(out, "(started)") {
		t.Errorf("history after the kills: exit %d\n%s", code, out)
	}
}

// syncBuffer is a strings.Builder a child process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A run whose expectation fails is recorded with verdict fail and exit status 1; against a passing run of the
// same traffic, diff names the verdict first among the regressions.
func TestHistoryRecordsFailure(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.db")
	good := writeFile(t, "ok.yaml", scenarioOK)
	failing := writeFile(t, "fail.yaml", scenarioOK+"  - {path: \"retransmissions[qp=1].trigger\", equals: timeout}\n")
	base := t.TempDir()
	if code, _, e := lumina(t, "run", good, "--out", filepath.Join(base, "ok"), "-q", "--history", hist); code != 0 {
		t.Fatalf("exit %d %s", code, e)
	}
	if code, _, e := lumina(t, "run", failing, "--out", filepath.Join(base, "fail"), "-q", "--history", hist); code != 1 {
		t.Fatalf("exit %d %s", code, e)
	}
	db, err := history.Open(hist)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := db.List(history.Filter{Scenario: "fail"})
	db.Close()
	if err != nil || len(runs) != 1 || runs[0].Run.Verdict != "fail" || *runs[0].ExitStatus != 1 || runs[0].Run.Metrics["expectations_failed"] != 1 {
		t.Fatalf("the failing run's record: %+v %v", runs, err)
	}
	code, d, _ := diffJSON(t, "--history", hist, "1", "2")
	if code != 1 || len(d.Regressed) == 0 || d.Regressed[0] != "verdict" || !contains(d.Regressed, "expectations_failed") {
		t.Errorf("pass -> fail: exit %d, regressed %v", code, d.Regressed)
	}
}

// A history that cannot be written costs a warning, never the run.
func TestHistoryUnwritable(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	notDir := writeFile(t, "file", "x")
	code, stdout, stderr := lumina(t, "run", good, "--out", t.TempDir(), "-q", "--history", filepath.Join(notDir, "h.db"))
	if code != 0 || !strings.Contains(stdout, "PASS") || !strings.Contains(stderr, "warning: this run is not recorded in the history") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// lumina history and lumina diff read a history they may not write: as nobody (runuser, when the tests run as
// root) on a database and directory of mode 0444/0555 owned by root, they list and compare, and the file is
// unchanged (no migration, no journal replay).
func TestHistoryReadOnly(t *testing.T) {
	base, err := os.MkdirTemp("", "lumina-history-ro-") // t.TempDir's parent is closed to nobody
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "h")
	t.Cleanup(func() { os.Chmod(dir, 0o755); os.RemoveAll(base) })
	hist := filepath.Join(dir, "history.db")
	sc := writeFile(t, "ok.yaml", scenarioOK)
	for i := range 2 {
		if code, _, e := lumina(t, "run", sc, "--out", filepath.Join(base, fmt.Sprint(i)), "-q", "--history", hist); code != 0 {
			t.Fatalf("run: exit %d %s", code, e)
		}
	}
	os.Chmod(hist, 0o444)
	os.Chmod(dir, 0o555)
	before, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	// The test binary, where nobody can run it.
	bin := filepath.Join(base, "lumina.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := func(args ...string) (int, string, string) {
		var cmd *exec.Cmd
		if os.Geteuid() == 0 {
			cmd = exec.Command("runuser", "-u", "nobody", "--", bin, "-test.run=^$")
		} else {
			cmd = exec.Command(bin, "-test.run=^$")
		}
		cmd.Dir = base
		cmd.Env = append(os.Environ(), envMain+"="+strings.Join(args, "\x1f"), "HOME="+base)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if x, ok := err.(*exec.ExitError); ok {
			code = x.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", cmd.Args, err)
		}
		return code, o.String(), e.String()
	}
	// nobody runs the binary, and really cannot write there.
	if code, _, e := asNobody("run", sc, "--out", filepath.Join(dir, "out"), "-q", "--no-history"); code != 2 || !strings.Contains(e, "permission denied") {
		t.Fatalf("a run as nobody into the read-only directory: exit %d %s; want 2, permission denied (else the test proves nothing)", code, e)
	}
	if code, out, e := asNobody("history", "--history", hist); code != 0 || strings.Count(out, "pass") != 2 {
		t.Errorf("history as nobody on a read-only database: exit %d\n%s%s", code, out, e)
	}
	if code, out, e := asNobody("diff", "--history", hist, "1", "2"); code != 0 || !strings.Contains(out, "no regression") {
		t.Errorf("diff as nobody on a read-only database: exit %d\n%s%s", code, out, e)
	}
	after, err := os.ReadFile(hist)
	if err != nil || string(after) != string(before) {
		t.Errorf("reading changed the history file (%v)", err)
	}
}

// A run that reaches no verdict is recorded as an error with no results directory (the --out directory holds
// a previous run's results, if anything), and the scenario's path is recorded absolute.
func TestHistoryRecordsError(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.db")
	dir := t.TempDir()
	writeFileAt(t, filepath.Join(dir, "ok.yaml"), scenarioOK)
	notDir := writeFile(t, "file", "x")
	t.Chdir(dir)
	if code, _, e := lumina(t, "run", "ok.yaml", "--out", filepath.Join(notDir, "out"), "-q", "--history", hist); code != 2 {
		t.Fatalf("a run whose --out cannot be made: exit %d %s; want 2", code, e)
	}
	db, err := history.OpenReader(hist)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.List(history.Filter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	e := runs[0]
	if e.State != history.StateComplete || e.Run.Verdict != rundiff.VerdictError || *e.ExitStatus != 2 || e.Run.Dir != "" ||
		e.ScenarioPath != filepath.Join(dir, "ok.yaml") {
		t.Errorf("the error run's record: state %s verdict %q exit %d results %q scenario %q; want complete, error, 2, no results, %s",
			e.State, e.Run.Verdict, *e.ExitStatus, e.Run.Dir, e.ScenarioPath, filepath.Join(dir, "ok.yaml"))
	}
}

func writeFileAt(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
