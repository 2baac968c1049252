// Package history is the run history: every `lumina run` records who it was (scenario, its hash, NICs,
// testbed, seed, lumina version), what it decided (verdict, exit status) and its key metrics (rundiff) in an
// embedded SQLite database (pure Go: modernc.org/sqlite), for `lumina history` and `lumina diff`.
//
// A run is recorded twice: a row in state "started" when it begins, then, in one transaction, the outcome, its
// metrics and state "complete". A run killed before that transaction commits stays "started" (shown as such,
// never with a verdict), and SQLite's journal (WAL) rolls a half-written transaction back when the database
// is next opened: no run is ever half-recorded as complete.
package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/lumina-go/lumina/rundiff"
)

// EnvPath names the environment variable that moves the database (the --history flag wins over it).
const EnvPath = "LUMINA_HISTORY"

// States of a recorded run.
const (
	StateStarted  = "started"  // the run began and has not been recorded as finished (still running, or killed)
	StateComplete = "complete" // the run finished: verdict, exit status and metrics are recorded
)

// DefaultPath is where the history lives unless moved: $LUMINA_HISTORY, else $XDG_DATA_HOME/lumina/history.db,
// else ~/.local/share/lumina/history.db.
func DefaultPath() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "lumina", "history.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("the run history: no home directory (%v); set --history PATH or $%s", err, EnvPath)
	}
	return filepath.Join(home, ".local", "share", "lumina", "history.db"), nil
}

// migrations bring the schema from version i to i+1 (PRAGMA user_version). Each runs in the transaction that
// sets the new version, and is written to run again harmlessly (IF NOT EXISTS).
var migrations = []string{
	`CREATE TABLE IF NOT EXISTS runs (
		id             INTEGER PRIMARY KEY AUTOINCREMENT,
		state          TEXT    NOT NULL CHECK (state IN ('started', 'complete')),
		started_at     TEXT    NOT NULL,
		finished_at    TEXT,
		scenario       TEXT    NOT NULL,
		scenario_path  TEXT    NOT NULL,
		scenario_hash  TEXT    NOT NULL DEFAULT '',
		testbed        TEXT    NOT NULL,
		nic            TEXT    NOT NULL,
		seed           INTEGER NOT NULL,
		verdict        TEXT,
		exit_status    INTEGER,
		results_dir    TEXT    NOT NULL,
		lumina_version TEXT    NOT NULL,
		metric_count   INTEGER
	);
	CREATE INDEX IF NOT EXISTS runs_by_scenario ON runs (scenario, id);
	CREATE TABLE IF NOT EXISTS metrics (
		run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		name   TEXT    NOT NULL,
		value  REAL    NOT NULL,
		PRIMARY KEY (run_id, name)
	) WITHOUT ROWID;`,
}

// SchemaVersion is the schema this build writes.
var SchemaVersion = len(migrations)

// DB is an open run history.
type DB struct {
	db   *sql.DB
	Path string
	// Step, if not nil, is called before each statement of the transaction that completes a run (a test hook:
	// a test stops the process there to prove a run is never half-recorded).
	Step func(name string)
}

// dsn is the SQLite URI of the database at path with the query q: the path made absolute and escaped, so that
// a '?', '#' or '%' in it names the file and is never read as the start of the query.
func dsn(path, q string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q}).String(), nil
}

// Open opens (creating it and its directory if needed) the history at path for recording runs and brings its
// schema up to date. A database of a newer schema is refused. Commands that only read use OpenReader.
func Open(path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("the run history %s: %w", path, err)
	}
	name, err := dsn(path, "_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("the run history %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, fmt.Errorf("the run history %s: %w", path, err)
	}
	d := &DB{db: db, Path: path}
	if err := d.walMode(); err != nil {
		db.Close()
		return nil, fmt.Errorf("the run history %s: %w", path, err)
	}
	if err := d.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("the run history %s: %w", path, err)
	}
	return d, nil
}

// OpenReader opens the existing history at path for reading only (SQLite mode=ro): it needs no write access
// to the file or its directory, never creates anything and never migrates the schema. A newer schema is
// refused; an older one is read as it is (version 0, no runs table, is refused as not a history).
func OpenReader(path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the run history %s: %w", path, err)
	}
	d, err := openReader(path, "mode=ro&_pragma=busy_timeout(10000)")
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqliteReadonlyDirectory {
		// A WAL database read-only to us, with no -wal and -shm beside it (its last writer closed it cleanly)
		// and a directory we cannot create them in: no writer is at work (one would have created them), so
		// the file is whole and is read as immutable.
		d, err = openReader(path, "mode=ro&immutable=1")
	}
	if err != nil {
		return nil, fmt.Errorf("the run history %s: %w", path, err)
	}
	return d, nil
}

// sqliteReadonlyDirectory is SQLITE_READONLY_DIRECTORY: a WAL database's -shm cannot be created.
const sqliteReadonlyDirectory = 1544

func openReader(path, q string) (*DB, error) {
	name, err := dsn(path, q)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, err
	}
	d := &DB{db: db, Path: path}
	if err := d.checkSchema(); err != nil {
		db.Close()
		return nil, err
	}
	return d, nil
}

// checkSchema refuses, without writing, a database this build cannot read.
func (d *DB) checkSchema() error {
	var v int
	if err := d.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("not an SQLite database, or unreadable: %w", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than this lumina's (%d): use a newer lumina, or another --history", v, SchemaVersion)
	}
	if v == 0 {
		return fmt.Errorf("not a run history (schema version 0: no runs table); lumina run creates one")
	}
	return nil
}

// walMode puts the database in WAL mode (a setting kept in the file). With several connections opening a new
// history at the same moment (parallel `lumina run`s), SQLite can refuse the switch with SQLITE_BUSY at once,
// busy_timeout not waited (TestConcurrentWriters failed so in 11 of 300 runs when the switch was a connection
// pragma), so a refused switch is tried again, for as long as busy_timeout would have waited.
func (d *DB) walMode() error {
	deadline := time.Now().Add(10 * time.Second)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var mode string
		err := d.db.QueryRow(`PRAGMA journal_mode = WAL`).Scan(&mode)
		var se *sqlite.Error
		if err == nil && mode != "wal" {
			return fmt.Errorf("SQLite kept journal mode %q where WAL was asked", mode)
		}
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqliteBusy || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// sqliteBusy is SQLITE_BUSY, the primary code of every busy result.
const sqliteBusy = 5

func (d *DB) migrate() error {
	tx, err := d.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("not an SQLite database, or unreadable: %w", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than this lumina's (%d): use a newer lumina, or another --history", v, SchemaVersion)
	}
	if v == SchemaVersion {
		return nil
	}
	for i := v; i < SchemaVersion; i++ {
		if _, err := tx.Exec(migrations[i]); err != nil {
			return fmt.Errorf("migrating the schema to version %d: %w", i+1, err)
		}
	}
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// readTx begins a read transaction (deferred: it takes no write lock), one snapshot for a run and its metrics.
func (d *DB) readTx() (*sql.Tx, error) {
	return d.db.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// IntegrityCheck runs SQLite's integrity_check and returns its report ("ok" when sound).
func (d *DB) IntegrityCheck() (string, error) {
	rows, err := d.db.Query(`PRAGMA integrity_check`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", err
		}
		lines = append(lines, s)
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// Start is what is known of a run when it begins.
type Start struct {
	Scenario     string // name (the file's base name without extension)
	ScenarioPath string
	Testbed      string
	NIC          string
	Seed         uint64
	ResultsDir   string
	Version      string
	Time         time.Time
}

// Begin records a run as started and returns its id.
func (d *DB) Begin(s Start) (int64, error) {
	res, err := d.db.Exec(`INSERT INTO runs (state, started_at, scenario, scenario_path, testbed, nic, seed, results_dir, lumina_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, StateStarted, s.Time.UTC().Format(time.RFC3339Nano), s.Scenario, s.ScenarioPath,
		s.Testbed, s.NIC, int64(s.Seed), s.ResultsDir, s.Version)
	if err != nil {
		return 0, fmt.Errorf("the run history %s: recording the run: %w", d.Path, err)
	}
	return res.LastInsertId()
}

// Finish is what a run decided.
type Finish struct {
	ScenarioHash string
	ResultsDir   string // where the results ended up (a staging directory for an invalid run; for an error the partial directory left, or "")
	Verdict      string // pass | fail | invalid | error (no verdict reached)
	ExitStatus   int
	Metrics      rundiff.Metrics
	Time         time.Time
}

// Complete records, in one transaction, the outcome and metrics of run id and marks it complete.
func (d *DB) Complete(id int64, f Finish) error {
	err := d.complete(id, f)
	if err != nil {
		return fmt.Errorf("the run history %s: recording run %d: %w", d.Path, id, err)
	}
	return nil
}

func (d *DB) complete(id int64, f Finish) error {
	tx, err := d.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	d.step("begin")
	res, err := tx.Exec(`UPDATE runs SET finished_at = ?, scenario_hash = ?, results_dir = ?, verdict = ?, exit_status = ?, metric_count = ?
		WHERE id = ? AND state = ?`, f.Time.UTC().Format(time.RFC3339Nano), f.ScenarioHash, f.ResultsDir, f.Verdict, f.ExitStatus,
		len(f.Metrics), id, StateStarted)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("no started run with id %d", id)
	}
	for _, name := range sortedNames(f.Metrics) {
		d.step("metric " + name)
		if _, err := tx.Exec(`INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)`, id, name, f.Metrics[name]); err != nil {
			return err
		}
	}
	d.step("state")
	if _, err := tx.Exec(`UPDATE runs SET state = ? WHERE id = ?`, StateComplete, id); err != nil {
		return err
	}
	d.step("commit")
	return tx.Commit()
}

func (d *DB) step(name string) {
	if d.Step != nil {
		d.Step(name)
	}
}

// Entry is one recorded run.
type Entry struct {
	ID           int64      `json:"id"`
	State        string     `json:"state"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	ScenarioPath string     `json:"scenario_path"`
	ExitStatus   *int       `json:"exit_status"`
	// Run holds the scenario, its hash, the NICs, testbed, seed, verdict, version, results directory and
	// metrics, as `lumina diff` compares them.
	Run rundiff.Run `json:"run"`
}

// Filter selects runs for List.
type Filter struct {
	Scenario string // only this scenario (name); "" all
	Limit    int    // the newest Limit runs; 0 all
}

const entryColumns = `id, state, started_at, finished_at, scenario, scenario_path, scenario_hash, testbed, nic, seed, verdict,
	exit_status, results_dir, lumina_version, metric_count`

// List returns the runs, newest first.
func (d *DB) List(f Filter) ([]Entry, error) {
	q := `SELECT ` + entryColumns + ` FROM runs`
	var args []any
	if f.Scenario != "" {
		q += ` WHERE scenario = ?`
		args = append(args, f.Scenario)
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	tx, err := d.readTx()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.Query(q, args...)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if err := loadMetrics(tx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ErrNotFound is returned by Get for an id the history does not hold.
var ErrNotFound = errors.New("no such run in the history")

// Get returns run id.
func (d *DB) Get(id int64) (*Entry, error) {
	tx, err := d.readTx()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.Query(`SELECT `+entryColumns+` FROM runs WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		rows.Close()
		return nil, fmt.Errorf("run %d: %w (%s)", id, ErrNotFound, d.Path)
	}
	e, err := scanEntry(rows)
	rows.Close()
	if err != nil {
		return nil, err
	}
	return &e, loadMetrics(tx, &e)
}

type scanner interface{ Scan(...any) error }

func scanEntry(r scanner) (Entry, error) {
	var (
		e                      Entry
		started                string
		finished, verdict, dir sql.NullString
		exit, count            sql.NullInt64
		seed                   int64
	)
	err := r.Scan(&e.ID, &e.State, &started, &finished, &e.Run.Scenario, &e.ScenarioPath, &e.Run.ScenarioHash, &e.Run.Testbed,
		&e.Run.NIC, &seed, &verdict, &exit, &dir, &e.Run.Version, &count)
	if err != nil {
		return e, err
	}
	e.Run.Seed = uint64(seed)
	e.Run.Label = fmt.Sprintf("#%d", e.ID)
	e.Run.Dir = dir.String
	if t, err := time.Parse(time.RFC3339Nano, started); err == nil {
		e.StartedAt = t
	}
	if e.State == StateComplete {
		if t, err := time.Parse(time.RFC3339Nano, finished.String); err == nil {
			e.FinishedAt = &t
		}
		e.Run.Verdict = verdict.String
		x := int(exit.Int64)
		e.ExitStatus = &x
	}
	return e, nil
}

func loadMetrics(tx *sql.Tx, e *Entry) error {
	e.Run.Metrics = rundiff.Metrics{}
	if e.State != StateComplete {
		return nil
	}
	rows, err := tx.Query(`SELECT name, value FROM metrics WHERE run_id = ?`, e.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v float64
		if err := rows.Scan(&name, &v); err != nil {
			return err
		}
		e.Run.Metrics[name] = v
	}
	return rows.Err()
}

func sortedNames(m rundiff.Metrics) []string {
	var names []string
	for _, d := range rundiff.Defs {
		if _, ok := m[d.Name]; ok {
			names = append(names, d.Name)
		}
	}
	for k := range m {
		if _, ok := rundiff.DefOf(k); !ok {
			names = append(names, k)
		}
	}
	return names
}
