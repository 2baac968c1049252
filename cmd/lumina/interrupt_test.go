package main

import (
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lumina-go/lumina/history"
	"github.com/lumina-go/lumina/trace"
)

// envMain makes the test binary act as the lumina command (arguments separated by US, 0x1f), so that a test can
// run it as a process and kill it.
const envMain = "LUMINA_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	// A worker's run item child process (runItemExec: this executable, here the test binary).
	if len(os.Args) > 2 && os.Args[1] == "worker" && os.Args[2] == "--run-item" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if args := os.Getenv(envMain); args != "" {
		os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	// Never the user's run history: every run of the tests (and of their child processes) records into a
	// temporary one.
	tmp, err := os.MkdirTemp("", "lumina-test-history-")
	if err != nil {
		panic(err)
	}
	os.Setenv(history.EnvPath, filepath.Join(tmp, "history.db"))
	os.Setenv("XDG_DATA_HOME", tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// luminaProcess starts the lumina command as a child process.
func luminaProcess(t *testing.T, stderr io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Stderr = stderr
	cmd.Env = append(os.Environ(), envMain+"="+strings.Join(args, "\x1f"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

const scenarioLong = `
seed: 5
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic:
  num-connections: 4
  num-msgs-per-qp: 300
  message-size: 65536
  data-pkt-events:
    - {qpn: 1, psn: 3, type: drop, iter: 1}
    - {qpn: 2, psn: 9, type: ecn, iter: 1}
expect:
  - integrity: ok
`

// A run killed at a random moment (SIGKILL or SIGINT, several seeds; half of them over a previous run's
// results) never leaves a results directory that lumina analyze takes as valid unless it is a complete run's;
// whatever else the run left is refused with exit status 3.
func TestInterruptedRunNeverLooksComplete(t *testing.T) {
	sc := writeFile(t, "long.yaml", scenarioLong)
	base := t.TempDir()
	prev := filepath.Join(base, "prev")
	start := time.Now()
	if code, _, e := lumina(t, "run", sc, "--out", prev, "-q"); code != 0 {
		t.Fatalf("reference run: exit %d %s", code, e)
	}
	full := time.Since(start)
	// The interrupted runs are child processes: time one too (its start-up included), and take the shorter, so
	// that a reference slowed by a busy machine does not put every interrupt after the end of the run.
	var sink strings.Builder
	start = time.Now()
	if p := luminaProcess(t, &sink, "run", sc, "--out", filepath.Join(base, "child"), "-q"); p.Wait() == nil {
		full = min(full, time.Since(start))
	}
	prevAnalysis, err := os.ReadFile(filepath.Join(prev, "analysis.json"))
	if err != nil {
		t.Fatal(err)
	}
	interrupted := 0
	// Eight seeds, and more (up to 24) until two runs were really interrupted: the check must not depend on the
	// machine being as fast as when the reference ran.
	for seed := uint64(1); seed <= 8 || (interrupted < 2 && seed <= 24); seed++ {
		rng := rand.New(rand.NewPCG(seed, 14))
		dir := t.TempDir()
		out := filepath.Join(dir, "res")
		withPrevious := seed%2 == 0
		if withPrevious { // a previous complete run is at --out: it must survive the kill intact
			if code, _, e := lumina(t, "run", sc, "--out", out, "-q"); code != 0 {
				t.Fatalf("seed %d: first run: exit %d %s", seed, code, e)
			}
		}
		delay := time.Duration(rng.Int64N(2*int64(full) + int64(30*time.Millisecond)))
		sig := []os.Signal{syscall.SIGKILL, os.Interrupt}[rng.IntN(2)]
		var errOut strings.Builder
		p := luminaProcess(t, &errOut, "run", sc, "--out", out, "-q")
		time.Sleep(delay)
		p.Process.Signal(sig)
		p.Wait()
		finished := p.ProcessState.Success()
		// Ctrl-C (unlike a kill) is caught once the command runs: exit 130 and a message (before that, the
		// signal's default action ends the process: exit code -1).
		if code := p.ProcessState.ExitCode(); sig == os.Interrupt && !finished {
			if (code != 130 && code != -1) || (code == 130 && !strings.Contains(errOut.String(), "lumina: SIGINT (Ctrl-C): stopped")) {
				t.Errorf("seed %d: SIGINT: exit %d, stderr %q", seed, code, errOut.String())
			}
		}
		if !finished {
			interrupted++
		}

		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			before, _ := os.ReadFile(filepath.Join(path, "analysis.json"))
			code, stdout, stderr := lumina(t, "analyze", path)
			switch {
			case e.Name() == "res" && code == 0:
				// Valid only as a complete run: this one's or the previous one's (the same scenario and seed,
				// so the same analysis, byte for byte).
				if string(before) != string(prevAnalysis) {
					t.Errorf("seed %d (%v after %v): %s passes analysis but is not a complete run's", seed, sig, delay, path)
				}
			case e.Name() == "res" && finished:
				t.Errorf("seed %d: the run finished but %s: analyze exit %d: %s%s", seed, path, code, stdout, stderr)
			default:
				// Anything else a kill left (the staging directory, the previous results being swapped out)
				// is refused as incomplete, and after a caught signal its dumps and trace (written while the
				// simulation runs) end at a packet boundary.
				dumps, _ := filepath.Glob(filepath.Join(path, "dump", "*.pcap"))
				if tr := filepath.Join(path, "trace.pcapng"); func() bool { _, err := os.Stat(tr); return err == nil }() {
					dumps = append(dumps, tr)
				}
				for _, d := range dumps {
					f, err := trace.Open(d)
					if err != nil {
						if st, _ := os.Stat(d); st != nil && st.Size() == 0 {
							continue // killed before its first write
						}
						t.Errorf("seed %d: %s: %v", seed, d, err)
						continue
					}
					for {
						if _, err := f.Next(); err != nil {
							break
						}
					}
					// A SIGKILL can cut the write in progress (the reader then takes the dump up to its last
					// whole packet); a caught signal waits for it.
					if c := f.Truncated(); c != nil && sig != syscall.SIGKILL {
						t.Errorf("seed %d (%v after %v): %s is cut inside a packet: %+v", seed, sig, delay, d, *c)
					}
					f.Close()
				}
				if code != 3 || !strings.Contains(stderr, "not analyzed") {
					t.Errorf("seed %d (%v after %v): %s: analyze exit %d, want 3 refusing it as incomplete; stdout %q stderr %q",
						seed, sig, delay, path, code, stdout, stderr)
				}
			}
		}
		t.Logf("seed %d: %v after %v (run takes %v), finished %v, left %d entries", seed, sig, delay, full, finished, len(entries))
	}
	if interrupted == 0 {
		t.Errorf("no run was interrupted: the test checked nothing")
	}
}

// TestInterruptedRunTraceWhole: a run stopped by SIGINT while the simulator streams trace.pcapng and the dumps
// to disk leaves them cut between packets, never inside one (the trace is written between blocks only, under
// the lock Quiesce takes), and the partial results are refused.
func TestInterruptedRunTraceWhole(t *testing.T) {
	sc := writeFile(t, "long.yaml", scenarioLong)
	dir := t.TempDir()
	out := filepath.Join(dir, "res")
	var errOut strings.Builder
	p := luminaProcess(t, &errOut, "run", sc, "--out", out, "-q")
	// Wait until the trace has a few MiB on disk (the run is well under way), then interrupt it.
	var tr string
	deadline := time.Now().Add(60 * time.Second)
	for tr == "" && time.Now().Before(deadline) {
		paths, _ := filepath.Glob(filepath.Join(dir, "*", "trace.pcapng"))
		for _, q := range paths {
			if st, err := os.Stat(q); err == nil && st.Size() > 3<<20 {
				tr = q
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if tr == "" {
		p.Process.Kill()
		p.Wait()
		t.Fatalf("no trace.pcapng of more than 3 MiB appeared while the run went on")
	}
	p.Process.Signal(os.Interrupt)
	p.Wait()
	if code := p.ProcessState.ExitCode(); code != 130 || !strings.Contains(errOut.String(), "SIGINT (Ctrl-C): stopped") {
		t.Fatalf("SIGINT during the run: exit %d, stderr %q; want 130 (the run must still be going on)", code, errOut.String())
	}
	staging := filepath.Dir(tr)
	files, _ := filepath.Glob(filepath.Join(staging, "dump", "*.pcap"))
	files = append(files, tr)
	for _, name := range files {
		f, err := trace.Open(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		n := 0
		for ; ; n++ {
			if _, err := f.Next(); err != nil {
				break
			}
		}
		if c := f.Truncated(); c != nil || (name == tr && n == 0) {
			t.Errorf("%s: %d whole packets, then cut inside a record: %+v", name, n, c)
		}
		t.Logf("%s: %d whole packets", name, n)
		f.Close()
	}
	if code, stdout, stderr := lumina(t, "analyze", staging); code != 3 || !strings.Contains(stderr, "not analyzed") {
		t.Errorf("%s: analyze exit %d, want 3 refusing it as incomplete; stdout %q stderr %q", staging, code, stdout, stderr)
	}
}
