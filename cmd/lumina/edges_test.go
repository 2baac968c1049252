package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/version"
)

// lumina --version names the module version, the commit and the Go toolchain.
func TestVersionFlag(t *testing.T) {
	code, stdout, stderr := lumina(t, "--version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := version.Get().String() + "\n"
	if stdout != want {
		t.Fatalf("--version printed %q, want %q", stdout, want)
	}
	if !strings.HasPrefix(stdout, "lumina ") || !strings.Contains(stdout, " commit ") || !strings.HasSuffix(stdout, runtime.Version()+"\n") {
		t.Fatalf("--version %q lacks the version, commit or Go version", stdout)
	}
}

// firstKey is the first key of a JSON object.
func firstKey(t *testing.T, name string, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is not a JSON object: %.40q", name, b)
	}
	tok, err := dec.Token()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	k, _ := tok.(string)
	return k
}

func checkSchema(t *testing.T, name string, b []byte) {
	t.Helper()
	if k := firstKey(t, name, b); k != "schema_version" {
		t.Errorf("%s: first key %q, want schema_version", name, k)
	}
	var v struct {
		S int `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.S != version.SchemaVersion {
		t.Errorf("%s: schema_version %d (%v), want %d", name, v.S, err, version.SchemaVersion)
	}
}

// Every JSON document of a results directory and of --json starts with schema_version; analysis.json and the
// effective scenario say which build wrote them, and the scenario still loads (lumina analyze re-reads it).
func TestSchemaVersionAndBuildEverywhere(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	out := filepath.Join(t.TempDir(), "res")
	code, stdout, stderr := lumina(t, "run", good, "--out", out, "--json")
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, stderr)
	}
	checkSchema(t, "run --json", []byte(stdout))
	for _, f := range []string{"analysis.json", "counters.json", "traffic.json", "connections.json", "switch.json"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		checkSchema(t, f, b)
	}
	var doc struct {
		Version version.Info `json:"version"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "analysis.json"))
	if err := json.Unmarshal(b, &doc); err != nil || doc.Version != version.Get() || doc.Version.Go != runtime.Version() {
		t.Fatalf("analysis.json version %+v (%v), want %+v", doc.Version, err, version.Get())
	}
	sc, _ := os.ReadFile(filepath.Join(out, "scenario.yaml"))
	if !strings.HasPrefix(string(sc), "# written by "+version.Get().String()+"\n") {
		t.Fatalf("scenario.yaml does not name the build:\n%.200s", sc)
	}
	code, stdout, stderr = lumina(t, "analyze", out, "--json")
	if code != 0 {
		t.Fatalf("analyze of the results directory: exit %d %s", code, stderr)
	}
	checkSchema(t, "analyze DIR --json", []byte(stdout))
	code, stdout, _ = lumina(t, "analyze", "--json", filepath.Join(realDir, "hexvec_cx4lx_cnp_from_scapy_test.pcap"))
	if code != 0 {
		t.Fatalf("analyze capture: exit %d", code)
	}
	checkSchema(t, "analyze CAPTURE --json", []byte(stdout))
}

// A results document from a newer lumina is refused, not misread.
func TestNewerSchemaRefused(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	out := filepath.Join(t.TempDir(), "res")
	if code, _, e := lumina(t, "run", good, "--out", out); code != 0 {
		t.Fatalf("run: exit %d %s", code, e)
	}
	p := filepath.Join(out, "traffic.json")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte(`"schema_version": 1`), []byte(`"schema_version": 7`), 1), 0o644)
	code, _, stderr := lumina(t, "analyze", out)
	if code != 2 || !strings.Contains(stderr, "traffic.json: schema_version 7: written by a newer lumina") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// An output path that cannot be a results directory is an environment error (exit 2) before anything runs,
// and a directory holding other files is never replaced.
func TestOutputPathErrors(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	file := writeFile(t, "file.txt", "not a directory")
	foreign := filepath.Join(t.TempDir(), "mine")
	os.Mkdir(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	cases := []struct {
		name, out, msg string
	}{
		{"a file", file, "exists and is not a directory"},
		{"inside a file", filepath.Join(file, "res"), "not a directory"},
		{"not writable", "/proc/self/lumina-res", "cannot"},
		{"foreign files", foreign, "holds files that are not results (notes.txt)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := lumina(t, "run", good, "--out", c.out)
			if code != 2 || !strings.Contains(stderr, c.msg) || strings.Contains(stdout, "PASS") {
				t.Fatalf("exit %d, stderr %q, want 2 and %q", code, stderr, c.msg)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(foreign, "notes.txt")); err != nil || string(b) != "mine" {
		t.Fatalf("the foreign directory was touched: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(foreign)); len(entries) != 1 {
		t.Fatalf("a refused run left %d entries beside %s", len(entries), foreign)
	}
}

// A results directory marked INCOMPLETE is refused with exit 3 and the marker's reason, even when it holds
// every file of a run.
func TestIncompleteResultsRefused(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	out := filepath.Join(t.TempDir(), "res")
	if code, _, e := lumina(t, "run", good, "--out", out); code != 0 {
		t.Fatalf("run: exit %d %s", code, e)
	}
	if _, err := os.Stat(filepath.Join(out, "INCOMPLETE")); err == nil {
		t.Fatal("a finished run left its INCOMPLETE marker")
	}
	os.WriteFile(filepath.Join(out, "INCOMPLETE"), []byte("lumina: this results directory is incomplete: the run failed: boom\n"), 0o644)
	code, stdout, stderr := lumina(t, "analyze", out)
	if code != 3 || !strings.Contains(stderr, "not analyzed: this results directory is incomplete: the run failed: boom") || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A second run over it replaces it whole.
	if code, _, e := lumina(t, "run", good, "--out", out); code != 0 {
		t.Fatalf("rerun: exit %d %s", code, e)
	}
	if code, _, e := lumina(t, "analyze", out); code != 0 {
		t.Fatalf("analyze after rerun: exit %d %s", code, e)
	}
}

// A capture cut in the middle of a packet (a killed tcpdump) is analyzed up to its last whole packet, with a
// warning, the cut in the JSON, and the exit status of the checks; a capture cut inside its file header is
// still bad input.
func TestTruncatedCapture(t *testing.T) {
	src := filepath.Join(realDir, "oferby-proxy_roce.pcap")
	whole, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	cut := writeFile(t, "cut.pcap", string(whole[:len(whole)-10]))
	code, stdout, stderr := lumina(t, "analyze", cut)
	if code != 0 || !strings.Contains(stdout, "(pcap, 122 packets) CUT SHORT at byte offset 76672") ||
		!strings.Contains(stdout, "cut short in the middle of a packet (byte offset 76672: truncated packet 122: need 78 bytes, file ends after 68)") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = lumina(t, "analyze", "--json", cut)
	var doc struct {
		Packets int `json:"packets"`
		Files   []struct {
			Truncated *struct {
				Offset  int64 `json:"offset"`
				Packets int   `json:"packets"`
			} `json:"truncated"`
		} `json:"files"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if doc.Packets != 122 || len(doc.Files) != 1 || doc.Files[0].Truncated == nil || doc.Files[0].Truncated.Offset != 76672 ||
		doc.Files[0].Truncated.Packets != 122 || len(doc.Warnings) == 0 {
		t.Fatalf("JSON: %+v", doc)
	}
	// The whole file: 123 packets, no cut.
	code, stdout, _ = lumina(t, "analyze", "--json", src)
	if code != 0 || strings.Contains(stdout, `"truncated"`) || !strings.Contains(stdout, `"packets": 123`) {
		t.Fatalf("whole capture: exit %d\n%.400s", code, stdout)
	}
	hdr := writeFile(t, "hdr.pcap", string(whole[:10]))
	if code, _, stderr := lumina(t, "analyze", hdr); code != 2 || !strings.Contains(stderr, "truncated pcap file header") {
		t.Fatalf("cut header: exit %d %q", code, stderr)
	}
}

// A results directory whose trace is cut short is an invalid test (exit 3) that says where the trace ends.
func TestTruncatedTraceInvalid(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	out := filepath.Join(t.TempDir(), "res")
	if code, _, e := lumina(t, "run", good, "--out", out); code != 0 {
		t.Fatalf("run: exit %d %s", code, e)
	}
	p := filepath.Join(out, "trace.pcapng")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-20], 0o644)
	code, stdout, _ := lumina(t, "analyze", out)
	if code != 3 || !strings.Contains(stdout, "INVALID TEST") || !strings.Contains(stdout, "trace.pcapng is cut short in the middle of a packet") {
		t.Fatalf("exit %d, want 3 naming the cut; output:\n%s", code, stdout)
	}
}
