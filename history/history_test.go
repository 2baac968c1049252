package history

import (
	"bufio"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lumina-go/lumina/rundiff"
)

func openTemp(t *testing.T) *DB {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "sub", "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestRecordListGet(t *testing.T) {
	d := openTemp(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, err := d.Begin(Start{Scenario: "listing2", ScenarioPath: "examples/listing2.yaml", Testbed: "sim", NIC: "cx5", Seed: 1 << 63, ResultsDir: "r/a", Version: "v1", Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Begin(Start{Scenario: "other", Testbed: "sim", NIC: "cx5/e810", Seed: 2, ResultsDir: "r/b", Version: "v1", Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Complete(a, Finish{ScenarioHash: "abc", ResultsDir: "r/a", Verdict: "fail", ExitStatus: 1,
		Metrics: rundiff.Metrics{"retransmissions": 3, "mct_us_mean": 12.5}, Time: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Complete(a, Finish{Verdict: "pass"}); err == nil {
		t.Error("completing a complete run again succeeded; want an error")
	}
	all, err := d.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != b || all[1].ID != a {
		t.Fatalf("List = %+v; want runs %d then %d (newest first)", all, b, a)
	}
	started, done := all[0], all[1]
	if started.State != StateStarted || started.Run.Verdict != "" || started.ExitStatus != nil || len(started.Run.Metrics) != 0 {
		t.Errorf("a started run shows %+v; want no verdict, exit status or metrics", started)
	}
	if done.State != StateComplete || done.Run.Verdict != "fail" || *done.ExitStatus != 1 || done.Run.Seed != 1<<63 ||
		done.Run.Metrics["retransmissions"] != 3 || done.Run.Metrics["mct_us_mean"] != 12.5 || done.Run.ScenarioHash != "abc" ||
		!done.FinishedAt.Equal(t0.Add(time.Second)) || done.Run.Label != "#1" {
		t.Errorf("complete run = %+v", done)
	}
	only, err := d.List(Filter{Scenario: "listing2"})
	if err != nil || len(only) != 1 || only[0].ID != a {
		t.Errorf("List(scenario listing2) = %+v, %v", only, err)
	}
	lim, err := d.List(Filter{Limit: 1})
	if err != nil || len(lim) != 1 || lim[0].ID != b {
		t.Errorf("List(limit 1) = %+v, %v", lim, err)
	}
	g, err := d.Get(a)
	if err != nil || g.Run.Metrics["retransmissions"] != 3 {
		t.Errorf("Get(%d) = %+v, %v", a, g, err)
	}
	if _, err := d.Get(99); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(99) error %v; want ErrNotFound", err)
	}
	if s, err := d.IntegrityCheck(); err != nil || s != "ok" {
		t.Errorf("integrity_check = %q, %v", s, err)
	}
}

// Opening again runs no migration twice and keeps the runs; a database of a newer schema is refused.
func TestMigrations(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h.db")
	d, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Begin(Start{Scenario: "s", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := d.List(Filter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("after reopening: %d runs, %v; want 1", len(runs), err)
	}
	var mode string
	d.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	if mode != "wal" {
		t.Errorf("journal_mode %q, want wal", mode)
	}
	// Every migration runs harmlessly again (IF NOT EXISTS).
	for i, m := range migrations {
		if _, err := d.db.Exec(m); err != nil {
			t.Errorf("migration %d is not idempotent: %v", i+1, err)
		}
	}
	if _, err := d.db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("opening a schema-99 database: %v; want a refusal naming the newer schema", err)
	}
	// A file that is not SQLite is refused, not overwritten.
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, []byte(strings.Repeat("not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); err == nil {
		t.Error("opening a text file as the history succeeded")
	}
}

// envChild makes the test binary a child that records a run and stops inside the completing transaction,
// before its commit, until it is killed (TestMain).
const envChild = "LUMINA_TEST_HISTORY_CHILD"

func TestMain(m *testing.M) {
	if p := os.Getenv(envChild); p != "" {
		d, err := Open(p)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		id, err := d.Begin(Start{Scenario: "killed", Time: time.Now()})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		d.Step = func(name string) {
			if name == "commit" {
				fmt.Println("before commit", id)
				select {} // until killed
			}
		}
		d.Complete(id, Finish{Verdict: "pass", Metrics: rundiff.Metrics{"packets": 10, "cnps": 2}, Time: time.Now()})
		fmt.Println("error: committed")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// A process killed (SIGKILL) inside its completing transaction, every statement run but the commit, leaves the
// run started, with no verdict and no metric, in a database whose integrity check passes; a run completed
// before is intact.
func TestUncommittedCompletionIsNotComplete(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h.db")
	d, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := d.Begin(Start{Scenario: "done", Time: time.Now()})
	if err := d.Complete(done, Finish{Verdict: "fail", ExitStatus: 1, Metrics: rundiff.Metrics{"packets": 5}, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !strings.HasPrefix(line, "before commit ") {
		t.Fatalf("the child did not stop before its commit: %q", line)
	}
	r, err := OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runs, err := r.List(Filter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs, %v; want 2", len(runs), err)
	}
	var n int
	r.db.QueryRow(`SELECT count(*) FROM metrics WHERE run_id = ?`, runs[0].ID).Scan(&n)
	if e := runs[0]; e.Run.Scenario != "killed" || e.State != StateStarted || e.Run.Verdict != "" || e.ExitStatus != nil || n != 0 {
		t.Errorf("after a kill before the commit: %+v, %d metric rows; want started, no verdict, no metric", e, n)
	}
	if e := runs[1]; e.State != StateComplete || e.Run.Verdict != "fail" || e.Run.Metrics["packets"] != 5 {
		t.Errorf("the run completed before: %+v", e)
	}
	if s, err := r.IntegrityCheck(); err != nil || s != "ok" {
		t.Errorf("integrity_check %q, %v", s, err)
	}
}

// Parallel recordings into one database, opened at the same moment (the schema created by whichever comes
// first): every run is recorded whole, under its own id.
func TestConcurrentWriters(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h.db")
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := Open(p)
			if err != nil {
				errs <- err
				return
			}
			defer d.Close()
			for i := range each {
				id, err := d.Begin(Start{Scenario: fmt.Sprintf("w%d", w), Seed: uint64(i), Time: time.Now()})
				if err == nil {
					err = d.Complete(id, Finish{Verdict: "pass", Metrics: rundiff.Metrics{"packets": float64(w*100 + i), "cnps": 1}, Time: time.Now()})
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r, err := OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runs, err := r.List(Filter{})
	if err != nil || len(runs) != writers*each {
		t.Fatalf("%d runs, %v; want %d", len(runs), err, writers*each)
	}
	seen := map[string]bool{}
	for _, e := range runs {
		key := fmt.Sprintf("%s/%d", e.Run.Scenario, e.Run.Seed)
		w := int(e.Run.Scenario[1] - '0')
		if seen[key] || e.State != StateComplete || len(e.Run.Metrics) != 2 || e.Run.Metrics["packets"] != float64(w*100+int(e.Run.Seed)) {
			t.Errorf("run %d (%s): %+v", e.ID, key, e)
		}
		seen[key] = true
	}
	if s, err := r.IntegrityCheck(); err != nil || s != "ok" {
		t.Errorf("integrity_check %q, %v", s, err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv(EnvPath, "/x/h.db")
	t.Setenv("XDG_DATA_HOME", "/data")
	t.Setenv("HOME", "/home/u")
	for _, c := range []struct{ env, xdg, want string }{
		{"/x/h.db", "/data", "/x/h.db"},
		{"", "/data", "/data/lumina/history.db"},
		{"", "relative", "/home/u/.local/share/lumina/history.db"}, // XDG: a relative path is ignored
		{"", "", "/home/u/.local/share/lumina/history.db"},
	} {
		os.Setenv(EnvPath, c.env)
		os.Setenv("XDG_DATA_HOME", c.xdg)
		if got, err := DefaultPath(); err != nil || got != c.want {
			t.Errorf("LUMINA_HISTORY=%q XDG_DATA_HOME=%q: %q %v, want %q", c.env, c.xdg, got, err, c.want)
		}
	}
}

// A path with '?', '#' or '%' in it names the file: it is never read as the start of the DSN's query.
func TestPathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a?b#c%20d")
	p := filepath.Join(dir, "h?x#y.db")
	d, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Begin(Start{Scenario: "s", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	names, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "*"))
	if len(names) != 1 || names[0] != dir {
		t.Fatalf("the history's directory: %v; want only %s", names, dir)
	}
	if st, err := os.Stat(p); err != nil || st.Size() == 0 {
		t.Fatalf("the history is not at %s: %v", p, err)
	}
	r, err := OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if runs, err := r.List(Filter{}); err != nil || len(runs) != 1 {
		t.Errorf("reading %s: %d runs, %v; want 1", p, len(runs), err)
	}
}

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// A reader opens the history read-only (SQLite mode=ro, which holds even for root): it lists and gets runs from
// a file and directory it may not write, writes nothing, and cannot write.
func TestReaderIsReadOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "h")
	p := filepath.Join(dir, "history.db")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.Begin(Start{Scenario: "s", Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Complete(id, Finish{Verdict: "pass", Metrics: rundiff.Metrics{"packets": 10}, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	os.Chmod(p, 0o444)
	os.Chmod(dir, 0o555)
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	before := fileSum(t, p)
	r, err := OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := r.List(Filter{})
	if err != nil || len(runs) != 1 || runs[0].Run.Metrics["packets"] != 10 {
		t.Errorf("List: %+v, %v", runs, err)
	}
	if e, err := r.Get(id); err != nil || e.Run.Verdict != "pass" {
		t.Errorf("Get: %+v, %v", e, err)
	}
	if _, err := r.Begin(Start{Scenario: "x", Time: time.Now()}); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("writing through a reader: %v; want SQLite's readonly error", err)
	}
	r.Close()
	if fileSum(t, p) != before {
		t.Error("reading the history changed the database file")
	}
	if _, err := OpenReader(filepath.Join(dir, "none.db")); err == nil {
		t.Error("OpenReader of a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Error("OpenReader created the missing file")
	}
}

// A reader never migrates: an older schema stays as it is (version 0, no runs table, is refused as not a
// history), a newer one is refused.
func TestReaderNeverMigrates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h.db")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	w.db.Exec(`DROP TABLE metrics`)
	w.db.Exec(`DROP TABLE runs`)
	if _, err := w.db.Exec(`PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	w.Close()
	version := func() int {
		d, err := sql.Open("sqlite", "file:"+p+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var v int
		d.QueryRow(`PRAGMA user_version`).Scan(&v)
		return v
	}
	if _, err := OpenReader(p); err == nil || !strings.Contains(err.Error(), "schema version 0") {
		t.Errorf("reading a schema-0 database: %v; want a refusal naming schema version 0", err)
	}
	if v := version(); v != 0 {
		t.Errorf("after a reader opened it, the schema is version %d; want 0 (no migration)", v)
	}
	w, err = Open(p) // a writer migrates
	if err != nil {
		t.Fatal(err)
	}
	w.db.Exec(`PRAGMA user_version = 99`)
	w.Close()
	if _, err := OpenReader(p); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("reading a schema-99 database: %v; want a refusal naming the newer schema", err)
	}
}
