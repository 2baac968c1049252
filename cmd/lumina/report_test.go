package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lumina run --report writes report.html beside the results; lumina report on the directory writes the same
// bytes (the report is made of what analysis.json holds, and of nothing else), every time.
func TestRunReportAndReportAgree(t *testing.T) {
	sc := writeFile(t, "ok.yaml", scenarioOK)
	out := filepath.Join(t.TempDir(), "res")
	if code, _, stderr := lumina(t, "run", sc, "--out", out, "--report", "-q"); code != 0 {
		t.Fatalf("run --report: exit %d: %s", code, stderr)
	}
	fromRun, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(fromRun, []byte(`id="lumina-data"`)) || !bytes.Contains(fromRun, []byte(`"verdict":"pass"`)) {
		t.Fatal("report.html lacks the page data or the verdict")
	}
	a, b := filepath.Join(t.TempDir(), "a.html"), filepath.Join(t.TempDir(), "b.html")
	for _, p := range []string{a, b} {
		if code, stdout, stderr := lumina(t, "report", out, "-o", p); code != 0 || strings.TrimSpace(stdout) != p {
			t.Fatalf("report: exit %d, stdout %q: %s", code, stdout, stderr)
		}
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ba, bb) || !bytes.Equal(ba, fromRun) {
		t.Errorf("reports of the same results differ: report %d/%d bytes, run --report %d bytes", len(ba), len(bb), len(fromRun))
	}
	// Without -o the report goes into the results directory.
	if code, stdout, _ := lumina(t, "report", out); code != 0 || strings.TrimSpace(stdout) != filepath.Join(out, "report.html") {
		t.Errorf("report without -o: exit %d, wrote %q", code, stdout)
	}
}

// Bad input: exit 2, a message naming the input, and no HTML written.
func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	incomplete := filepath.Join(dir, "incomplete")
	if err := os.MkdirAll(incomplete, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(incomplete, "INCOMPLETE"), []byte("SIGINT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := writeFile(t, "notes.txt", "not a capture\n")
	outDir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		msg  string
	}{
		{"missing dir", []string{filepath.Join(dir, "nope")}, "no such file or directory"},
		{"incomplete results dir", []string{incomplete}, "incomplete"},
		{"empty dir", []string{outDir}, "not a results directory"},
		{"unknown file type", []string{text}, "not a pcap or pcapng capture"},
		{"no argument", nil, "requires at least 1 arg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			html := filepath.Join(outDir, "r.html")
			args := append([]string{"report"}, c.args...)
			if c.args != nil {
				args = append(args, "-o", html)
			}
			code, _, stderr := lumina(t, args...)
			if code != 2 || !strings.Contains(stderr, c.msg) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, c.msg)
			}
			if _, err := os.Stat(html); err == nil {
				t.Error("an HTML file was written")
			}
			if _, err := os.Stat(filepath.Join(incomplete, "report.html")); err == nil {
				t.Error("report.html written into the incomplete directory")
			}
		})
	}
}

// lumina report A B shows lumina diff's comparison: the same rows, tolerances and statuses, so that a
// regression the diff exits 1 for is the row the page highlights.
func TestReportCompareIsTheDiff(t *testing.T) {
	one := writeFile(t, "one.yaml", scenarioDrops(3))
	three := writeFile(t, "three.yaml", scenarioDrops(3, 5, 7))
	base := t.TempDir()
	a, c := filepath.Join(base, "a"), filepath.Join(base, "c")
	for dir, sc := range map[string]string{a: one, c: three} {
		if code, _, e := lumina(t, "run", sc, "--out", dir, "-q", "--no-history"); code != 0 {
			t.Fatalf("run %s: exit %d %s", sc, code, e)
		}
	}
	page := filepath.Join(base, "ac.html")
	if code, _, e := lumina(t, "report", a, c, "-o", page, "-q"); code != 0 {
		t.Fatalf("report A B: exit %d %s", code, e)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const open = `<script type="application/json" id="lumina-data">`
	i := bytes.Index(html, []byte(open))
	j := bytes.Index(html[i+len(open):], []byte("</script>"))
	if i < 0 || j < 0 {
		t.Fatal("no page data in the report")
	}
	var data struct {
		Compare []struct {
			Name      string   `json:"name"`
			A         *float64 `json:"a"`
			B         *float64 `json:"b"`
			Tolerance string   `json:"tolerance"`
			Status    string   `json:"status"`
			Worse     string   `json:"worse"`
		} `json:"compare"`
		Notes []string `json:"compare_notes"`
	}
	if err := json.Unmarshal(html[i+len(open):i+len(open)+j], &data); err != nil {
		t.Fatalf("page data: %v", err)
	}
	var found bool
	for _, m := range data.Compare {
		if m.Name != "retransmissions" {
			continue
		}
		found = true
		if m.A == nil || m.B == nil || *m.A != 1 || *m.B != 3 || m.Status != "regressed" || m.Tolerance == "" || m.Worse != "up" {
			t.Errorf("retransmissions row: %v -> %v status %q tolerance %q worse %q; want 1 -> 3 regressed with a tolerance, worse up", m.A, m.B, m.Status, m.Tolerance, m.Worse)
		}
	}
	if !found || len(data.Compare) < 10 {
		t.Fatalf("compare table has %d rows, retransmissions found %v", len(data.Compare), found)
	}
	// The notes above the table are lumina diff's own lines: the scenarios differ, and the regression summary.
	_, diffOut, _ := lumina(t, "diff", a, c)
	var want []string
	for _, l := range strings.Split(diffOut, "\n") {
		if strings.HasPrefix(l, "note: ") || strings.HasPrefix(l, "REGRESSION:") {
			want = append(want, l)
		}
	}
	if len(want) != 2 || strings.Join(data.Notes, "|") != strings.Join(want, "|") {
		t.Errorf("page notes %q; lumina diff says %q (want its scenario note and its REGRESSION line)", data.Notes, want)
	}
}

// -o never overwrites an input: a capture given as input, or a file inside an input results directory, by
// any path to it; exit 2 and the file untouched.
func TestReportRefusesToOverwriteInput(t *testing.T) {
	sc := writeFile(t, "ok.yaml", scenarioOK)
	res := filepath.Join(t.TempDir(), "res")
	if code, _, stderr := lumina(t, "run", sc, "--out", res, "-q"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	capture := filepath.Join(t.TempDir(), "c.pcapng")
	b, err := os.ReadFile(filepath.Join(res, "trace.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(capture, b, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "alias.pcapng")
	if err := os.Symlink(capture, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"report", capture, "-o", capture},
		{"report", capture, "-o", link},
		{"report", res, "-o", filepath.Join(res, "trace.pcapng")},
		{"report", res, "-o", filepath.Join(res, "analysis.json")},
	} {
		victim := c[len(c)-1]
		before, _ := os.ReadFile(victim)
		code, _, stderr := lumina(t, c...)
		after, _ := os.ReadFile(victim)
		if code != 2 || !strings.Contains(stderr, "overwrite what it reads") || !bytes.Equal(before, after) {
			t.Errorf("%v: exit %d, %q, file changed %v; want exit 2, untouched", c, code, stderr, !bytes.Equal(before, after))
		}
	}
	// The report's own file in the directory is fine (it is what lumina run --report writes).
	if code, _, stderr := lumina(t, "report", res, "-o", filepath.Join(res, "report.html"), "-q"); code != 0 {
		t.Errorf("report into RES/report.html: exit %d: %s", code, stderr)
	}
}
