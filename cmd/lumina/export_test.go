package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/export"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/wireshark"
)

// lumina export: a run's directory and a real capture export with exit 0 and every table; bad input exits 2
// and leaves no output; a directory a run left incomplete exits 3.
func TestExportCommand(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	run := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := lumina(t, "run", good, "--out", run); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	tmp := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		msg  string // in stdout for exit 0, in stderr otherwise
	}{
		{"results dir", []string{"export", run, "--parquet", filepath.Join(tmp, "a")}, 0, "metadata comment"},
		{"again into the same output", []string{"export", run, "--parquet", filepath.Join(tmp, "a")}, 0, "retransmissions"},
		{"real capture", []string{"export", filepath.Join(realDir, "oferby-proxy_roce.pcap"), "--parquet", filepath.Join(tmp, "b")}, 0, "metadata none"},
		{"one dump of two", []string{"export", filepath.Join(run, resultsdir.DirDump, "dumper-0.pcap"), "--parquet", filepath.Join(tmp, "f")}, 3, "INVALID TRACE"},
		{"both dumps", []string{"export", filepath.Join(run, resultsdir.DirDump, "dumper-0.pcap"), filepath.Join(run, resultsdir.DirDump, "dumper-1.pcap"), "--parquet", filepath.Join(tmp, "g")}, 0, "metadata mirror"},
		{"over a user's directory", []string{"export", run, "--parquet", run}, 2, "neither empty nor an earlier export"},
		{"no --parquet", []string{"export", run}, 2, "--parquet OUT is required"},
		{"not a capture", []string{"export", good, "--parquet", filepath.Join(tmp, "c")}, 2, "ok.yaml"},
		{"missing input", []string{"export", "/nonexistent.pcap", "--parquet", filepath.Join(tmp, "d")}, 2, "nonexistent.pcap"},
		{"output is a file", []string{"export", run, "--parquet", good}, 2, "is a file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := lumina(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, stderr)
			}
			where := stderr
			if code == 0 {
				where = stdout
			}
			if !strings.Contains(where, c.msg) {
				t.Errorf("output %q does not mention %q", where, c.msg)
			}
		})
	}
	for _, out := range []string{"a", "b", "g"} {
		for _, f := range export.Files {
			if st, err := os.Stat(filepath.Join(tmp, out, f)); err != nil || st.Size() == 0 {
				t.Errorf("%s/%s: %v", out, f, err)
			}
		}
	}
	ents, _ := os.ReadDir(tmp)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "a b g" {
		t.Errorf("the output folder holds %v; want the two exports only (no failed or temporary output)", names)
	}

	if err := os.WriteFile(filepath.Join(run, resultsdir.FileIncomplete), []byte("interrupted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := lumina(t, "export", run, "--parquet", filepath.Join(tmp, "e")); code != 3 {
		t.Errorf("incomplete results directory: exit %d, want 3; %s", code, stderr)
	}
}

// lumina wireshark install --dir: installs, is idempotent, and --print-path writes nothing.
func TestWiresharkInstallCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins")
	code, stdout, _ := lumina(t, "wireshark", "install", "--dir", dir, "--print-path")
	if code != 0 || strings.TrimSpace(stdout) != filepath.Join(dir, wireshark.FileName) {
		t.Fatalf("--print-path: exit %d, %q", code, stdout)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("--print-path created the folder")
	}
	if code, stdout, _ := lumina(t, "wireshark", "install", "--dir", dir); code != 0 || !strings.HasPrefix(stdout, "installed ") {
		t.Fatalf("install: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := lumina(t, "wireshark", "install", "--dir", dir); code != 0 || !strings.Contains(stdout, "already current") {
		t.Fatalf("second install: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := lumina(t, "wireshark", "script"); code != 0 || stdout != string(wireshark.Script) {
		t.Errorf("wireshark script: exit %d, %d bytes", code, len(stdout))
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, wireshark.FileName), []byte("-- mine\n"), 0o644)
	if code, _, stderr := lumina(t, "wireshark", "install", "--dir", foreign); code != 2 || !strings.Contains(stderr, "--force") {
		t.Errorf("install over a foreign lumina.lua: exit %d, %q; want 2", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(foreign, wireshark.FileName)); string(b) != "-- mine\n" {
		t.Error("the foreign lumina.lua was changed")
	}
	if code, stdout, _ := lumina(t, "wireshark", "install", "--dir", foreign, "--force"); code != 0 || !strings.HasPrefix(stdout, "installed ") {
		t.Errorf("install --force: exit %d, %q", code, stdout)
	}
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	if code, _, stderr := lumina(t, "wireshark", "install", "--dir", filepath.Join(blocker, "sub")); code != 2 || !strings.Contains(stderr, "plugins folder") {
		t.Errorf("install under a file: exit %d, %q; want 2", code, stderr)
	}
}
