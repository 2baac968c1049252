package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// luminaWith runs the lumina command as a child process with stderr given and returns its stdout.
func luminaWith(t *testing.T, stderr *os.File, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	cmd.Env = append(append(os.Environ(), env...), envMain+"="+strings.Join(args, "\x1f"))
	err := cmd.Run()
	code := 0
	if err != nil {
		code = cmd.ProcessState.ExitCode()
	}
	return out.String(), code
}

// Progress of lumina run in its three modes: a bar when stderr is a terminal (a pty), plain lines when it is a
// pipe, nothing with --quiet; stdout and every results file are byte-identical in the three.
func TestRunProgressModes(t *testing.T) {
	sc := writeFile(t, "long.yaml", scenarioLong)
	base := t.TempDir()
	env := []string{envProgressDelay + "=0s"}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("pty: %v", err)
	}
	defer ptmx.Close()
	var term bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&term, ptmx); close(copied) }()
	stdoutBar, code := luminaWith(t, tty, env, "run", sc, "--out", filepath.Join(base, "bar"), "--no-history")
	tty.Close()
	<-copied // the pty reads EIO once the child and our end of the tty are closed
	if code != 0 {
		t.Fatalf("run on a terminal: exit %d: %s", code, term.String())
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var piped bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&piped, r); close(done) }()
	stdoutLines, code := luminaWith(t, w, env, "run", sc, "--out", filepath.Join(base, "lines"), "--no-history")
	w.Close()
	<-done
	if code != 0 {
		t.Fatalf("run with stderr a pipe: exit %d: %s", code, piped.String())
	}

	quiet, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	stdoutQuiet, code := luminaWith(t, quiet, env, "run", sc, "--out", filepath.Join(base, "quiet"), "--no-history", "-q")
	quiet.Close()
	q, _ := os.ReadFile(quiet.Name())
	if code != 0 || len(q) != 0 {
		t.Fatalf("--quiet: exit %d, stderr %q; want nothing", code, q)
	}

	bar := term.String()
	if !strings.Contains(bar, "\rlumina run: simulating [") || !strings.Contains(bar, "%") || !strings.Contains(bar, "\033[K") {
		t.Errorf("on a terminal: no bar redrawn in place:\n%q", bar)
	}
	if !strings.HasSuffix(bar, "\r\033[K") {
		t.Errorf("on a terminal: the bar is not cleared at the end:\n%q", bar)
	}
	lines := piped.String()
	for _, want := range []string{"lumina run: running on testbed sim", "lumina run: simulating ", "lumina run: analyzing", ", done\n"} {
		if !strings.Contains(lines, want) {
			t.Errorf("stderr a pipe: no line %q:\n%s", want, lines)
		}
	}
	if strings.ContainsAny(lines, "\r\033") {
		t.Errorf("stderr a pipe: terminal control characters in the lines:\n%q", lines)
	}

	// stdout is the same but for the results directory it names.
	for mode, got := range map[string]string{"bar": stdoutBar, "lines": stdoutLines} {
		got = strings.ReplaceAll(got, filepath.Join(base, mode), filepath.Join(base, "quiet"))
		if got != stdoutQuiet || !strings.Contains(got, "PASS") {
			t.Errorf("stdout differs with the %s:\n%s\nquiet:\n%s", mode, got, stdoutQuiet)
		}
	}
	// Every results file byte-identical.
	files := 0
	filepath.WalkDir(filepath.Join(base, "quiet"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(base, "quiet"), p)
		want, _ := os.ReadFile(p)
		for _, mode := range []string{"bar", "lines"} {
			got, err := os.ReadFile(filepath.Join(base, mode, rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s differs between --quiet and the %s run (%v)", rel, mode, err)
			}
		}
		files++
		return nil
	})
	if files < 5 {
		t.Errorf("compared only %d results files", files)
	}
}

// lumina analyze of a capture reports bytes read of its size; nothing with --quiet or --json; the report on
// stdout is the same.
func TestAnalyzeProgress(t *testing.T) {
	sc := writeFile(t, "long.yaml", scenarioLong)
	out := filepath.Join(t.TempDir(), "r")
	if code, _, e := lumina(t, "run", sc, "--out", out, "-q", "--no-history"); code != 0 {
		t.Fatalf("run: exit %d %s", code, e)
	}
	t.Setenv(envProgressDelay, "0s")
	capture := filepath.Join(out, "trace.pcapng")
	code, stdout, stderr := lumina(t, "analyze", capture)
	if code != 0 {
		t.Fatalf("analyze: exit %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "lumina analyze ") || !strings.Contains(lines[0], "MiB") ||
		!strings.Contains(lines[len(lines)-1], "(100%)") || !strings.HasSuffix(lines[len(lines)-1], ", done") {
		t.Errorf("analyze progress lines:\n%s", stderr)
	}
	code, stdoutQ, stderrQ := lumina(t, "analyze", capture, "-q")
	if code != 0 || stderrQ != "" || stdoutQ != stdout {
		t.Errorf("--quiet: exit %d, stderr %q, stdout the same: %v", code, stderrQ, stdoutQ == stdout)
	}
	if _, _, stderrJ := lumina(t, "analyze", capture, "--json"); stderrJ != "" {
		t.Errorf("--json: stderr %q; want nothing", stderrJ)
	}
}

// lumina search reports evaluations done of the budget and the anomalies found; nothing with --quiet; the
// search's files are the same.
func TestSearchProgress(t *testing.T) {
	space := writeFile(t, "nine.yaml", restrictNine)
	t.Chdir(t.TempDir())
	t.Setenv(envProgressDelay, "0s")
	code, stdout, stderr := lumina(t, "search", "--profile", "cx6vpi-200g", "--restrict", space, "--budget", "24", "--out", "a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "search: energy: lower is more anomalous") || !strings.Contains(stderr, "/24 (") ||
		!strings.Contains(stderr, "0 anomalies") || !strings.HasSuffix(stderr, ", done\n") {
		t.Errorf("search progress lines:\n%s", stderr)
	}
	codeQ, stdoutQ, stderrQ := lumina(t, "search", "--profile", "cx6vpi-200g", "--restrict", space, "--budget", "24", "--out", "b", "-q")
	if codeQ != 0 || stderrQ != "" || strings.ReplaceAll(stdoutQ, "in b", "in a") != stdout {
		t.Errorf("--quiet: exit %d, stderr %q, stdout\n%s\nwant\n%s", codeQ, stderrQ, stdoutQ, stdout)
	}
	for _, f := range []string{"anomalies.json", "search.jsonl"} {
		a, _ := os.ReadFile(filepath.Join("a", f))
		b, _ := os.ReadFile(filepath.Join("b", f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs with and without progress (%d, %d bytes)", f, len(a), len(b))
		}
	}
}

// LUMINA_PROGRESS=off is --quiet's silence on standard error: no meter, and no progress writer for the testbed
// to fall back to (a run of 1000 connections announces itself there before it starts).
func TestRunProgressOff(t *testing.T) {
	sc := writeFile(t, "many.yaml", `
seed: 1
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic:
  num-connections: 1000
  num-msgs-per-qp: 1
  message-size: 1000
expect:
  - integrity: ok
`)
	for _, c := range []struct {
		env  string
		want string
	}{
		{"lines", "lumina: preparing 1000 connection(s)"},
		{"off", ""},
	} {
		f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		_, code := luminaWith(t, f, []string{envProgressMode + "=" + c.env}, "run", sc, "--out", filepath.Join(t.TempDir(), "out"), "--no-history")
		f.Close()
		e, _ := os.ReadFile(f.Name())
		if code != 0 || (c.want == "") != (len(e) == 0) || !strings.Contains(string(e), c.want) {
			t.Errorf("%s=%s: exit %d, stderr %q; want exit 0 and %q", envProgressMode, c.env, code, e, c.want)
		}
	}
}

// Ctrl-C during a run with a bar drawn: the bar is cleared from its line before the message that says where the
// partial results are, so that the message does not land in the middle of the bar.
func TestInterruptClearsBar(t *testing.T) {
	sc := writeFile(t, "long.yaml", scenarioLong)
	t.Setenv(envProgressMode, "bar")
	t.Setenv(envProgressDelay, "0s")
	var stderr syncBuffer
	p := luminaProcess(t, &stderr, "run", sc, "--out", filepath.Join(t.TempDir(), "out"), "--no-history")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "simulating [") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.Process.Signal(os.Interrupt)
	p.Wait()
	e := stderr.String()
	if !strings.Contains(e, "simulating [") {
		t.Fatalf("no bar drawn before the interrupt:\n%q", e)
	}
	i := strings.Index(e, "lumina: SIGINT")
	if i < 0 || !strings.HasSuffix(e[:i], "\033[K\r\033[K") {
		t.Errorf("the interrupt's message does not follow a cleared bar:\n%q", e)
	}
}
