package main

import (
	"bytes"
	"encoding/json"
	"github.com/lumina-go/lumina/resultsdir"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lumina-go/lumina/refdir"
	"github.com/lumina-go/lumina/trace"
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

// runDumps runs scenarioOK and returns its results directory (two dumpers).
func runDumps(t *testing.T) string {
	t.Helper()
	good := writeFile(t, "ok.yaml", scenarioOK)
	out := filepath.Join(t.TempDir(), "res")
	if code, _, e := lumina(t, "run", good, "--out", out); code != 0 {
		t.Fatalf("run: exit %d %s", code, e)
	}
	return out
}

func copyTo(t *testing.T, dir string, files ...string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// setMirrorTimestamp rewrites the mirror timestamp (destination MAC) of packet idx of a pcap.
func setMirrorTimestamp(t *testing.T, path string, idx int, ts uint64) {
	t.Helper()
	f, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = -1
	for {
		p, err := f.Next()
		if err != nil {
			break
		}
		if p.Index == idx {
			off = p.Offset + 16
		}
	}
	f.Close()
	if off < 0 {
		t.Fatalf("%s has no packet %d", path, idx)
	}
	b, _ := os.ReadFile(path)
	for i := 0; i < 6; i++ {
		b[off+int64(i)] = byte(ts >> (40 - 8*i))
	}
	os.WriteFile(path, b, 0o644)
}

// Lumina dumps analyzed directly get the integrity check: each condition printed, exit 3 when one fails, and
// then no checker verdict (a gap in the mirror is not a go-back-N violation).
func TestIntegrityOnDumps(t *testing.T) {
	res := runDumps(t)
	d0, d1 := filepath.Join(res, "dump", "dumper-0.pcap"), filepath.Join(res, "dump", "dumper-1.pcap")
	integrity := func(stdout string) string {
		i := strings.Index(stdout, "\nintegrity ")
		if i < 0 {
			t.Fatalf("no integrity section:\n%s", stdout)
		}
		return stdout[i+1:]
	}

	// Both dumps of a results directory: its counters are found, all four conditions hold.
	code, stdout, stderr := lumina(t, "analyze", d0, d1)
	if code != 0 || !strings.Contains(integrity(stdout), "integrity  ok (4/4 conditions hold)") ||
		!strings.Contains(stdout, "[ok]   count-equals-mirrored: trace has") || !strings.Contains(stdout, "checks     gbn") {
		t.Fatalf("both dumps: exit %d %s\n%s", code, stderr, stdout)
	}

	// One dumper's file: the other's packets are missing; nothing judged.
	code, stdout, _ = lumina(t, "analyze", d0)
	in := integrity(stdout)
	if code != 3 || !strings.Contains(in, "INVALID TRACE") || !strings.Contains(in, "[FAIL] consecutive-mirror-seq") ||
		!strings.Contains(in, "the other dumper's packets are missing") || strings.Contains(stdout, "checks ") || strings.Contains(stdout, "violation") {
		t.Fatalf("one dump: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = lumina(t, "analyze", "--json", d0)
	var doc struct {
		Integrity *struct {
			OK     bool `json:"ok"`
			Checks []struct {
				Name string `json:"name"`
				OK   bool   `json:"ok"`
			} `json:"checks"`
		} `json:"integrity"`
		Checks []any `json:"checks"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 3 || doc.Integrity == nil || doc.Integrity.OK ||
		len(doc.Integrity.Checks) != 4 || len(doc.Checks) != 0 {
		t.Fatalf("one dump --json: exit %d %v %+v", code, err, doc)
	}

	// Copied away from their results directory: the counters are unknown, the count conditions not checked
	// (never passed), the rest holds.
	elsewhere := copyTo(t, t.TempDir(), d0, d1)
	code, stdout, _ = lumina(t, append([]string{"analyze"}, elsewhere...)...)
	in = integrity(stdout)
	if code != 0 || !strings.Contains(in, "integrity  ok (2/4 conditions hold, 2 not checked)") || !strings.Contains(in, "[n/a]  count-equals-mirrored") {
		t.Fatalf("dumps without counters: exit %d\n%s", code, in)
	}
	// ...and given explicitly: a count that disagrees with the switch's fails.
	cf := filepath.Join(t.TempDir(), "counters.json")
	b, _ := os.ReadFile(filepath.Join(res, "counters.json"))
	var m map[string]any
	json.Unmarshal(b, &m)
	m["switch"].(map[string]any)["mirrored"] = m["switch"].(map[string]any)["mirrored"].(float64) + 2
	b, _ = json.Marshal(m)
	os.WriteFile(cf, b, 0o644)
	code, stdout, _ = lumina(t, "analyze", "--counters", cf, elsewhere[0], elsewhere[1])
	if code != 3 || !strings.Contains(integrity(stdout), "[FAIL] count-equals-mirrored") || !strings.Contains(stdout, "(2 missing)") {
		t.Fatalf("wrong counts: exit %d\n%s", code, stdout)
	}

	// A timestamp going backwards.
	back := copyTo(t, t.TempDir(), d0, d1)
	setMirrorTimestamp(t, back[1], 5, 1)
	code, stdout, _ = lumina(t, append([]string{"analyze"}, back...)...)
	if code != 3 || !strings.Contains(integrity(stdout), "[FAIL] timestamps-increasing: timestamp 1 ns at trace packet") {
		t.Fatalf("timestamp backwards: exit %d\n%s", code, stdout)
	}

	// A dumper that reports its own drops.
	dropped := copyTo(t, t.TempDir(), d0, d1)
	os.WriteFile(strings.TrimSuffix(dropped[1], ".pcap")+".stats.json", []byte(`{"kernel_drops": 3, "complete": false}`), 0o644)
	os.WriteFile(strings.TrimSuffix(dropped[0], ".pcap")+".stats.json", []byte(`{"kernel_drops": 0, "complete": true}`), 0o644)
	code, stdout, _ = lumina(t, append([]string{"analyze"}, dropped...)...)
	if code != 3 || !strings.Contains(integrity(stdout), "[FAIL] dumpers-dropped-nothing: dumper-1.pcap reports 3 kernel drops") {
		t.Fatalf("dumper drops: exit %d\n%s", code, stdout)
	}

	// A dump cut short.
	cut := copyTo(t, t.TempDir(), d0, d1)
	b, _ = os.ReadFile(cut[0])
	os.WriteFile(cut[0], b[:len(b)-7], 0o644)
	code, stdout, _ = lumina(t, append([]string{"analyze"}, cut...)...)
	if code != 3 || !strings.Contains(integrity(stdout), "[FAIL] dumps-whole: ") {
		t.Fatalf("cut dump: exit %d\n%s", code, stdout)
	}
}

// Bad input to analyze: exit 2, one clear error.
func TestAnalyzeBadInput(t *testing.T) {
	real := filepath.Join(realDir, "oferby-proxy_roce.pcap")
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"mirror order on a capture without Lumina metadata", []string{"analyze", "--order", "mirror-seq", real},
			"--order mirror-seq: " + real + " is not a Lumina dump"},
		{"port 0", []string{"analyze", "--port", "0", real}, "--port 0: want the RoCEv2 UDP destination port, 1 to 65535"},
		{"unknown order", []string{"analyze", "--order", "psn", real}, `--order: merge order "psn"`},
		{"counters not found", []string{"analyze", "--counters", "/nonexistent/counters.json", real}, "--counters: "},
		{"a directory of nothing known", []string{"analyze", realDir}, "is a directory but neither a results directory of lumina run (no scenario.yaml) nor one of the reference Lumina"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := lumina(t, c.args...)
			if code != 2 || !strings.Contains(stderr, c.msg) || stdout != "" || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and one line with %q", code, stdout, stderr, c.msg)
			}
		})
	}
}

const scenarioWrapBase = `
seed: 11
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic:
  num-connections: 2
  num-msgs-per-qp: 30
  message-size: 4096
  tx-depth: 4
  data-pkt-events:
    - {qpn: 1, psn: 6, type: drop, iter: 1}
    - {qpn: 1, psn: 6, type: drop, iter: 2}
    - {qpn: 2, psn: 30, type: drop, iter: 1}
`

// stripAbs removes the absolute PSNs (the only thing a PSN wrap may change) from decoded JSON.
func stripAbs(x any) any {
	switch v := x.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if k != "psn_abs" {
				out[k] = stripAbs(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = stripAbs(e)
		}
		return out
	}
	return x
}

// Mirror timestamps that wrap (48-bit ns) and PSNs that wrap (24-bit) during the run give the same
// verdicts and latencies as the same run without wraps, in every path: the run, the re-analysis of its
// results directory, and its dumps analyzed directly.
func TestWrapsEveryPath(t *testing.T) {
	base := writeFile(t, "base.yaml", scenarioWrapBase)
	// The PSNs start 16 below 2^24; the switch clock 20 us before its 48-bit wrap.
	wrapped := writeFile(t, "wrap.yaml", strings.Replace(scenarioWrapBase, "  tx-depth: 4\n", "  tx-depth: 4\n  initial-psn: 16777200\n", 1)+
		"network:\n  switch-clock-start-ns: 281474976690656\n")
	dirs := map[string]string{}
	for name, sc := range map[string]string{"base": base, "wrap": wrapped} {
		dirs[name] = filepath.Join(t.TempDir(), name)
		if code, _, e := lumina(t, "run", sc, "--out", dirs[name], "-q"); code != 0 {
			t.Fatalf("%s: exit %d %s", name, code, e)
		}
	}
	an, _ := os.ReadFile(filepath.Join(dirs["wrap"], "analysis.json"))
	if !strings.Contains(string(an), "1 wrap-around") || !strings.Contains(string(an), `"psn_abs": 13,`) {
		t.Fatalf("the wrapped run did not wrap both clocks:\n%.3000s", an)
	}
	paths := map[string]func(dir string) []string{
		"run":     func(dir string) []string { return []string{"analyze", dir} }, // analysis.json as the run wrote it is read below
		"results": func(dir string) []string { return []string{"analyze", "--json", dir} },
		"dump files": func(dir string) []string {
			return []string{"analyze", "--json", filepath.Join(dir, "dump", "dumper-0.pcap"), filepath.Join(dir, "dump", "dumper-1.pcap")}
		},
	}
	for pname, args := range paths {
		docs := map[string]map[string]any{}
		for name, dir := range dirs {
			var b []byte
			if pname == "run" {
				b, _ = os.ReadFile(filepath.Join(dir, "analysis.json"))
			} else {
				code, stdout, stderr := lumina(t, args(dir)...)
				if code != 0 {
					t.Fatalf("%s %s: exit %d %s", pname, name, code, stderr)
				}
				b = []byte(stdout)
			}
			var d map[string]any
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatalf("%s %s: %v", pname, name, err)
			}
			docs[name] = d
		}
		retx, _ := docs["wrap"]["retransmissions"].([]any)
		if len(retx) != 3 {
			t.Fatalf("%s: %d retransmissions, want 3", pname, len(retx))
		}
		for _, r := range retx {
			if l := r.(map[string]any)["latency_us"].(float64); l <= 0 {
				t.Errorf("%s: latency %v us", pname, l)
			}
		}
		for _, k := range []string{"retransmissions", "checks", "timeouts"} {
			a, _ := json.Marshal(stripAbs(docs["base"][k]))
			b, _ := json.Marshal(stripAbs(docs["wrap"][k]))
			if string(a) != string(b) {
				t.Errorf("%s: %s differ across the wraps:\nbase %s\nwrap %s", pname, k, a, b)
			}
		}
	}
}

// A capture whose snap length cut the transport headers is not judged: no go-back-N violation, retransmission
// or counter verdict made up from the packets it could not read.
func TestCutHeadersNotJudged(t *testing.T) {
	res := runDumps(t)
	// 64 bytes keep the BTH but cut the extended headers; 50 cut the BTH itself (the packet's connection is
	// unknown, so no connection is judged).
	for _, snap := range []int{64, 50} {
		cutHeadersNotJudged(t, res, snap)
	}
	// A scenario cannot ask for such copies.
	sc := writeFile(t, "snap.yaml", scenarioOK+"network: {snap-len: 64}\n")
	if code, _, stderr := lumina(t, "run", sc, "--out", filepath.Join(t.TempDir(), "r")); code != 2 ||
		!strings.Contains(stderr, "snap length 64 is too short; expected 128..65535") {
		t.Fatalf("snap-len 64: exit %d %q", code, stderr)
	}
}

func cutHeadersNotJudged(t *testing.T, res string, snap int) {
	dir := t.TempDir()
	var cut []string
	for _, name := range []string{"dumper-0.pcap", "dumper-1.pcap"} {
		f, err := trace.Open(filepath.Join(res, "dump", name))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		o, _ := os.Create(out)
		w, _ := trace.NewPcapWriter(o, trace.PcapWriterOptions{Nanosecond: true, SnapLen: uint32(snap), LinkType: trace.LinkTypeEthernet})
		for {
			p, err := f.Next()
			if err != nil {
				break
			}
			w.WritePacket(p.Timestamp, p.Data[:min(snap, len(p.Data))], p.OrigLen)
		}
		w.Close()
		o.Close()
		f.Close()
		cut = append(cut, out)
	}
	code, stdout, stderr := lumina(t, append([]string{"analyze"}, cut...)...)
	if code != 0 || strings.Contains(stdout, "[FAIL]") || strings.Contains(stdout, "violation") ||
		!strings.Contains(stdout, "transport headers") {
		t.Fatalf("snap %d: exit %d %s\n%s", snap, code, stderr, stdout)
	}
}

// Bad scenarios: exit 2 before anything runs, one error per bad value, never the file's bytes echoed back.
func TestScenarioBadInput(t *testing.T) {
	const hosts = "requester: {nic: {type: cx5}}\nresponder: {nic: {type: cx5}}\n"
	binary := string([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff, 0xfe, 0x1b, '[', '2', 'J'})
	cases := []struct {
		name, yaml, msg string
	}{
		{"same address", "requester: {nic: {type: cx5, ip-list: [10.0.0.9/24]}}\nresponder: {nic: {type: cx5, ip-list: [10.0.0.9/24]}}\n",
			"requester and responder both have the address 10.0.0.9"},
		{"binary file", binary, "byte offset 0 is 0x89, not text: this is not a YAML scenario file"},
		{"binary after text", hosts + "traffic: {mtu: 1024}\n" + binary, ":4:1: byte offset 81 is 0x89, not text"},
		{"round trip longer than the timeout", hosts + "network: {propagation-ns: 100000000}\n",
			"make a round trip of 400.001 ms, more than half the retransmission timeout 67.109 ms"},
		{"link too slow for the timeout", hosts + "network: {link-gbps: 0.000001}\n", "more than half the retransmission timeout"},
		{"snap length", hosts + "network: {snap-len: 100}\n", "snap length 100 is too short; expected 128..65535"},
		{"bad connection count, events naming connections", hosts + "traffic: {num-connections: 0, data-pkt-events: [{qpn: 2, psn: 3, type: drop}]}\n",
			"traffic.num-connections: 0 is out of range"},
		{"bad MTU, events naming packets", hosts + "traffic: {mtu: 1000, data-pkt-events: [{qpn: 1, psn: 5, type: drop}]}\n",
			"traffic.mtu: 1000 is not a valid path MTU"},
		{"bad message count, events naming messages", hosts + "traffic: {num-msgs-per-qp: x, data-pkt-events: [{qpn: 1, psn: 5, type: drop, msg: 3}]}\n",
			`traffic.num-msgs-per-qp: "x" is not an integer`},
		{"initial PSN on rxe-vm", "testbed: rxe-vm\n" + hosts + "traffic: {initial-psn: 5}\n",
			"traffic.initial-psn: the rxe-vm testbed cannot choose initial PSNs"},
		{"switch clock on rxe-vm", "testbed: rxe-vm\n" + hosts + "network: {switch-clock-start-ns: 5}\n",
			"network.switch-clock-start-ns: the rxe-vm testbed's switch runs on the guest's clock"},
		{"PSN out of range", hosts + "traffic: {initial-psn: 16777216}\n", "16777216 is out of range; expected an integer in 0..16777215"},
		{"more dumpers than the netns testbed runs", "testbed: netns\n" + hosts + "network: {dumpers: 17}\n",
			"network.dumpers 17: the netns testbed runs 1..16 dumpers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := writeFile(t, "bad.yaml", c.yaml)
			out := filepath.Join(t.TempDir(), "res")
			code, stdout, stderr := lumina(t, "run", sc, "--out", out)
			if code != 2 || !strings.Contains(stderr, c.msg) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, c.msg)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n") + 1; n != 1 {
				t.Errorf("%d error lines, want 1: %q", n, stderr)
			}
			if strings.ContainsAny(stderr, "\x00\x1b") || !utf8.ValidString(stderr) {
				t.Errorf("stderr echoes binary input: %q", stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a rejected run created %s", out)
			}
		})
	}
}

// A reference Lumina results directory: analyzed per repetition with the reference's facts, exit 0/1/3 as the
// verdict says, 2 when its configuration cannot be found.
func TestReferenceResultsDir(t *testing.T) {
	cfg := "../../refdir/testdata/cases/drops.yml"
	res := filepath.Join(t.TempDir(), "res")
	if code, _, e := lumina(t, "run", cfg, "--out", res, "-q"); code != 0 {
		t.Fatalf("run: exit %d %s", code, e)
	}
	mk := func() string {
		ref := filepath.Join(t.TempDir(), "ref")
		if err := refdir.FromResults(res, cfg, ref); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	ref := mk()
	code, stdout, stderr := lumina(t, "analyze", ref)
	if code != 0 || !strings.Contains(stdout, "repetition 0") || !strings.Contains(stdout, "NEXT-DELIV us") ||
		!strings.Contains(stdout, "[ok]   timestamps-increasing-per-direction") || !strings.HasSuffix(stdout, "PASS\n") {
		t.Fatalf("exit %d %s\n%s", code, stderr, stdout)
	}
	code, stdout, _ = lumina(t, "analyze", "--json", ref)
	checkSchema(t, "analyze REFDIR --json", []byte(stdout))
	var doc struct {
		Iterations []struct {
			Retransmissions []struct {
				NextDeliveredUs *float64 `json:"next_delivered_us"`
				LatencyUs       *float64 `json:"latency_us"`
			} `json:"retransmissions"`
		} `json:"iterations"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 || len(doc.Iterations) != 1 || len(doc.Iterations[0].Retransmissions) != 12 ||
		doc.Iterations[0].Retransmissions[0].NextDeliveredUs == nil || *doc.Iterations[0].Retransmissions[0].LatencyUs != 4.502 {
		t.Fatalf("json: exit %d %v\n%.600s", code, err, stdout)
	}
	// One repetition given directly, its configuration in the parent.
	if code, _, e := lumina(t, "analyze", filepath.Join(ref, "0")); code != 0 {
		t.Fatalf("one repetition: exit %d %s", code, e)
	}

	// A packet missing from a dumper's capture: invalid test.
	cut := mk()
	pc := filepath.Join(cut, "0", "pcap-result", "requester.pcap")
	f, _ := trace.Open(pc)
	var pkts []trace.Packet
	for {
		p, err := f.Next()
		if err != nil {
			break
		}
		q := *p
		q.Data = append([]byte(nil), p.Data...)
		pkts = append(pkts, q)
	}
	f.Close()
	o, _ := os.Create(pc)
	w, _ := trace.NewPcapWriter(o, trace.PcapWriterOptions{Nanosecond: true, SnapLen: 128, LinkType: trace.LinkTypeEthernet})
	for i, p := range pkts {
		if i != 5 {
			w.WritePacket(p.Timestamp, p.Data, p.OrigLen)
		}
	}
	w.Close()
	o.Close()
	code, stdout, _ = lumina(t, "analyze", cut)
	if code != 3 || !strings.Contains(stdout, "[FAIL] consecutive-mirror-seq") || !strings.Contains(stdout, "INVALID TEST") || strings.Contains(stdout, "retransmissions (") {
		t.Fatalf("missing packet: exit %d\n%s", code, stdout)
	}

	// A counter that disagrees with the trace: the check fails.
	bad := mk()
	cp := filepath.Join(bad, "0", "rdma-result", "responder_counter_finish.yml")
	b, _ := os.ReadFile(cp)
	os.WriteFile(cp, []byte(strings.Replace(string(b), "out_of_sequence: 8", "out_of_sequence: 9", 1)), 0o644)
	if code, stdout, _ := lumina(t, "analyze", bad); code != 1 || !strings.Contains(stdout, "out_of_sequence") {
		t.Fatalf("counter: exit %d\n%s", code, stdout)
	}

	// No configuration: bad input, naming --config; given explicitly, it works.
	nocfg := mk()
	os.Rename(filepath.Join(nocfg, "config.yml"), filepath.Join(t.TempDir(), "elsewhere.yml"))
	if code, _, stderr := lumina(t, "analyze", nocfg); code != 2 || !strings.Contains(stderr, "--config FILE") {
		t.Fatalf("no config: exit %d %q", code, stderr)
	}
	if code, _, e := lumina(t, "analyze", "--config", cfg, nocfg); code != 0 {
		t.Fatalf("--config: exit %d %s", code, e)
	}
	if code, _, stderr := lumina(t, "analyze", "--config", cfg, filepath.Join(realDir, "oferby-proxy_roce.pcap")); code != 2 || !strings.Contains(stderr, "--config applies to a reference") {
		t.Fatalf("--config on a capture: exit %d %q", code, stderr)
	}
}

// The flows line adds up: judged plus not judged is the number of flows listed, and the reasons add up to the
// flows not judged (each real capture).
func TestFlowAccountAddsUp(t *testing.T) {
	re := regexp.MustCompile(`(?m)^flows      (\d+): (\d+) in the \d+ judged connection\(s\), (\d+) not judged(?: \((.*)\))?$`)
	caps, _ := filepath.Glob(filepath.Join(realDir, "*.pcap"))
	seen := 0
	for _, c := range caps {
		code, stdout, _ := lumina(t, "analyze", c)
		if code == 2 {
			continue
		}
		m := re.FindStringSubmatch(stdout)
		if m == nil {
			if strings.Contains(stdout, "checks ") && !strings.Contains(stdout, "Flows (0") && strings.Contains(stdout, "\nFlows (") {
				t.Errorf("%s: checks and flows without a flows line:\n%s", c, stdout)
			}
			continue
		}
		seen++
		n, _ := strconv.Atoi(m[1])
		a, _ := strconv.Atoi(m[2])
		b, _ := strconv.Atoi(m[3])
		sum := 0
		if m[4] != "" {
			for _, part := range strings.Split(m[4], "; ") {
				i := strings.LastIndex(part, ": ")
				x, err := strconv.Atoi(part[i+2:])
				if err != nil {
					t.Fatalf("%s: reason %q", c, part)
				}
				sum += x
			}
		}
		var doc struct {
			Flows []any `json:"flows"`
		}
		_, js, _ := lumina(t, "analyze", "--json", c)
		json.Unmarshal([]byte(js), &doc)
		if a+b != n || sum != b || n != len(doc.Flows) {
			t.Errorf("%s: %q: %d + %d != %d, reasons %d, %d flows in the JSON", c, m[0], a, b, n, sum, len(doc.Flows))
		}
	}
	if seen < 4 {
		t.Fatalf("only %d captures had a flows line", seen)
	}
}

// lumina profiles says which profiles lumina search can search, and they are the ones it accepts.
func TestProfilesSaySearchable(t *testing.T) {
	code, stdout, _ := lumina(t, "profiles")
	if code != 0 || !strings.Contains(stdout, "SEARCH") ||
		!strings.Contains(stdout, "lumina search --profile takes collie-f or cx6vpi-200g or p2100g (profiles with a micro-architecture model)") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	for _, line := range strings.Split(stdout, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 6 || (f[5] != "yes" && f[5] != "-") {
			continue
		}
		t.Run(f[0], func(t *testing.T) {
			code, _, stderr := lumina(t, "search", "--profile", f[0], "--budget", "0", "--out", filepath.Join(t.TempDir(), "s"), "--json")
			rejected := code == 2 && strings.Contains(stderr, "no evaluator exists for profile")
			if (f[5] == "yes") == rejected {
				t.Errorf("profiles says SEARCH %s, search exits %d: %s", f[5], code, stderr)
			}
		})
	}
}

// lumina dump checks its output path before it captures anything.
func TestDumpOutputChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ out, msg string }{
		{dir, "is a directory; expected a file name"},
		{filepath.Join(dir, "missing", "d.pcap"), "cannot write in " + filepath.Join(dir, "missing")},
	} {
		code, _, stderr := lumina(t, "dump", "--iface", "lo", "--out", c.out)
		if code != 2 || !strings.Contains(stderr, "--out: ") || !strings.Contains(stderr, c.msg) {
			t.Errorf("--out %s: exit %d %q", c.out, code, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check left %d files", len(entries))
	}
}

// Delay, reorder and duplicate events change what the receiver sees after the switch mirrored the packets: the
// checkers, which read the switch's order, used to report go-back-N and counter violations the NIC never made.
// Now those connections and the counters are not judged, and say why.
func TestMovedPacketsNotJudged(t *testing.T) {
	for _, ev := range []string{"{qpn: 1, psn: 3, type: delay, delay-us: 50}", "{qpn: 1, psn: 3, type: reorder, behind: 2}",
		"{qpn: 1, psn: 3, type: duplicate, copies: 2}"} {
		sc := writeFile(t, "moved.yaml", "requester: {nic: {type: cx5}}\nresponder: {nic: {type: cx5}}\ntraffic: {num-msgs-per-qp: 3}\nevents: ["+ev+"]\n")
		code, stdout, stderr := lumina(t, "run", sc, "--out", filepath.Join(t.TempDir(), "r"))
		if code != 0 || strings.Contains(stdout, "[FAIL]") || strings.Contains(stdout, "gbn 0/") ||
			!strings.Contains(stdout, "not judged (delay, reorder or duplicate events changed the delivery of 1 of its packets") ||
			!strings.Contains(stdout, "the counters cannot be compared with the trace") {
			t.Errorf("%s: exit %d %s\n%s", ev, code, stderr, stdout)
		}
	}
}

// A dump left with no whole packet (its dumper lost everything, or it was cut inside its first packet) does not
// turn a pair of Lumina dumps into a time-ordered capture that skips the integrity check; and the files of a
// results directory a run left incomplete are refused as the directory is.
func TestEmptyDumpAndIncompleteFiles(t *testing.T) {
	res := runDumps(t)
	d0, d1 := filepath.Join(res, "dump", "dumper-0.pcap"), filepath.Join(res, "dump", "dumper-1.pcap")
	dir := filepath.Join(t.TempDir(), "copy")
	if err := os.MkdirAll(filepath.Join(dir, "dump"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyTo(t, dir, filepath.Join(res, "counters.json"))
	files := copyTo(t, filepath.Join(dir, "dump"), d0, d1)
	b, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{24, 24 + 16 + 30} { // header only; cut inside the first packet
		if err := os.WriteFile(files[1], b[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, _ := lumina(t, "analyze", files[0], files[1])
		if code != 3 || !strings.Contains(stdout, "by mirror-seq") || !strings.Contains(stdout, "INVALID TRACE") {
			t.Errorf("dumper-1 cut at %d bytes: exit %d, want 3 with the integrity check failing\n%s", cut, code, stdout)
		}
	}
	if err := os.WriteFile(filepath.Join(res, "INCOMPLETE"), []byte("lumina: stopped by the test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{d0, d1}, {filepath.Join(res, "trace.pcapng")}} {
		code, _, stderr := lumina(t, append([]string{"analyze"}, args...)...)
		if code != 3 || !strings.Contains(stderr, "not analyzed: stopped by the test") {
			t.Errorf("analyze %v of an incomplete directory: exit %d %s; want 3 with the marker's reason", args, code, stderr)
		}
	}
}

// On a Linux testbed run by hand there is no counters.json: the switch's --status file gives the two count
// conditions their numbers.
func TestCountersFromSwitchStatus(t *testing.T) {
	res := runDumps(t)
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(res, resultsdir.FileCounters, &cf); err != nil || len(cf.Switch.Ports) != 2 {
		t.Fatalf("counters.json: %v %+v", err, cf.Switch)
	}
	type port struct {
		RxRoCE   uint64 `json:"rx_roce"`
		Mirrored uint64 `json:"mirrored"`
	}
	status := struct {
		UptimeNs int64   `json:"uptime_ns"`
		Ports    [2]port `json:"ports"`
		Mirrored uint64  `json:"mirrored"`
	}{UptimeNs: 1}
	for i, p := range cf.Switch.Ports {
		status.Ports[i] = port{RxRoCE: p.RxRoCE, Mirrored: p.Mirrored}
		status.Mirrored += p.Mirrored
	}
	b, _ := json.Marshal(status)
	dir := t.TempDir()
	sw := filepath.Join(dir, "sw.json")
	if err := os.WriteFile(sw, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dumps := copyTo(t, dir, filepath.Join(res, "dump", "dumper-0.pcap"), filepath.Join(res, "dump", "dumper-1.pcap"))
	code, stdout, stderr := lumina(t, append([]string{"analyze", "--counters", sw}, dumps...)...)
	if code != 0 || !strings.Contains(stdout, "integrity  ok (4/4 conditions hold)") {
		t.Fatalf("exit %d %s\n%s", code, stderr, stdout)
	}
	// One mirrored copy fewer than the switch says: the count condition fails, exit 3.
	status.Ports[0].Mirrored++
	b, _ = json.Marshal(status)
	if err := os.WriteFile(sw, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := lumina(t, append([]string{"analyze", "--counters", sw}, dumps...)...); code != 3 || !strings.Contains(stdout, "[FAIL] count-equals-mirrored") {
		t.Fatalf("short trace: exit %d\n%s", code, stdout)
	}
}
