package remote

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/version"
)

// A workspace from a scenario never changes what a deployment command runs: an assignment-looking first word
// is quoted, and a leading '-' is not an option.
func TestDeploymentPathsStayWords(t *testing.T) {
	for in, want := range map[string]string{
		"PATH=/x":  `'PATH=/x'`,
		"a b":      `'a b'`,
		"it's":     `'it'\''s'`,
		"/opt/lum": "/opt/lum",
		"":         "''",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	d := PlanDeployment("PATH=/x", "root", "run1", "switch", "abc")
	if got := d.CleanupCommand(); got[0] != '\'' {
		t.Errorf("cleanup command %q starts with an unquoted word", got)
	}
	d = PlanDeployment("-rf", "root", "run1", "switch", "abc")
	if d.Base != "./-rf" {
		t.Errorf("base %q, want ./-rf", d.Base)
	}
}

// A cleanup that cannot undo everything keeps the run directory with exactly what is left to undo, so that a
// later lumina agent --cleanup retries it and the host is never left changed with no record.
func TestCleanupKeepsWhatFailed(t *testing.T) {
	dir := t.TempDir() + "/run"
	a := &Agent{RunDir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"ip", "link", "set", "dev", "a", "mtu", "1500"}, {"ip", "link", "set", "dev", "b", "down"}} {
		if err := a.journal(c); err != nil {
			t.Fatal(err)
		}
	}
	var ran []string
	fail := func(argv []string) (string, error) {
		ran = append(ran, strings.Join(argv, " "))
		if argv[4] == "a" {
			return "", errors.New("RTNETLINK answers: Operation not permitted")
		}
		return "", nil
	}
	err := Cleanup(dir, fail, nil)
	if err == nil || !strings.Contains(err.Error(), "not fully restored") || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("error %v; want the failure and that the host is not fully restored", err)
	}
	if len(ran) != 2 || ran[0] != "ip link set dev b down" {
		t.Errorf("ran %q; want both undone in reverse order", ran)
	}
	b, rerr := os.ReadFile(filepath.Join(dir, JournalFile))
	if rerr != nil {
		t.Fatalf("the journal is gone: %v", rerr)
	}
	var left []journalEntry
	if err := version.UnmarshalList(b, journalKey, &left); err != nil || len(left) != 1 || left[0].Argv[4] != "a" {
		t.Fatalf("journal left %+v (%v); want only the failed undo", left, err)
	}
	// The retry succeeds and removes the directory.
	if err := Cleanup(dir, func([]string) (string, error) { return "", nil }, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("run directory still there after a clean retry: %v", err)
	}
}
