package campaign

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/search"
)

// The chaos test runs the coordinator and the workers as processes of this test binary (TestMain picks the
// role from the environment), kills them at random points and checks the merged summary byte for byte.
const (
	envRole  = "LUMINA_CAMPAIGN_TEST_ROLE"
	envDir   = "LUMINA_CAMPAIGN_TEST_DIR"
	envAddr  = "LUMINA_CAMPAIGN_TEST_ADDR"
	envFile  = "LUMINA_CAMPAIGN_TEST_FILE"
	childArg = "run-item-child"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg { // a run item's child process (WorkerOptions.Exec)
		if err := RunItemMain(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	// Never the user's run history (nothing here records a run; a child process never will either).
	tmp := ""
	if os.Getenv("LUMINA_HISTORY") == "" {
		if d, err := os.MkdirTemp("", "lumina-campaign-test-history-"); err == nil {
			tmp = d
			os.Setenv("LUMINA_HISTORY", filepath.Join(tmp, "history.db"))
		}
	}
	switch os.Getenv(envRole) {
	case "coordinator":
		os.Exit(roleCoordinator())
	case "worker":
		os.Exit(roleWorker())
	case "search":
		os.Exit(roleSearch())
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// roleCoordinator runs the campaign with no local worker on a fixed loopback address.
func roleCoordinator() int {
	p, err := Load(os.Getenv(envFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, err = Run(context.Background(), p, RunOptions{Dir: os.Getenv(envDir),
		Queue: Queue{Listen: os.Getenv(envAddr), AckWait: 2 * time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// The search of the search chaos test: a simulated profile (evaluations of tens of milliseconds, so that kills
// land mid-item), resumed from its search.jsonl when the directory holds one.
const chaosProfile = "cx6vpi-200g"

func chaosSearchConfig() search.Config {
	cfg := search.DefaultConfig()
	cfg.Budget = 40
	cfg.Workers = 8
	return cfg
}

func roleSearch() int {
	dir := os.Getenv(envDir)
	qe, err := OpenSearchQueue(context.Background(), dir, chaosProfile, Queue{Listen: os.Getenv(envAddr), AckWait: 2 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer qe.Close()
	// The test kills a worker every ~1 s on average, and an evaluation of thousands of QPs runs for a second or
	// more on a loaded machine: three deliveries (the default) can all land on workers that get killed, and the
	// search then rightly gives up. What is tested is that kills change nothing, so items may be delivered often.
	qe.Attempts = 50
	st, err := os.Stat(filepath.Join(dir, search.LogFile))
	resume := err == nil && st.Size() > 0
	if _, err := search.RunDir(context.Background(), qe, chaosSearchConfig(), search.DirOptions{Dir: dir, Profile: chaosProfile, Resume: resume}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func roleWorker() int {
	nc, err := queue.Connect("nats://"+os.Getenv(envAddr), queue.ConnOptions{})
	for err != nil { // the coordinator (and its server) may not be up yet
		time.Sleep(100 * time.Millisecond)
		nc, err = queue.Connect("nats://"+os.Getenv(envAddr), queue.ConnOptions{})
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return 2
	}
	w := &queue.Worker{JS: js, Name: fmt.Sprint(os.Getpid()), Caps: []string{queue.CapSim}, Handlers: Handlers(WorkerOptions{}),
		AckWait: 2 * time.Second, Log: func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }}
	_ = w.Run(context.Background())
	return 0
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type procs struct {
	t    *testing.T
	mu   sync.Mutex
	all  []*exec.Cmd
	env  []string
	logs *os.File
}

func (p *procs) start(role string) *exec.Cmd {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), p.env...), envRole+"="+role)
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.all = append(p.all, cmd)
	p.mu.Unlock()
	return cmd
}

func (p *procs) killAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.all {
		if c.ProcessState == nil {
			_ = c.Process.Signal(syscall.SIGKILL)
		}
	}
}

// referenceSummary runs the suite with one in-process worker.
func referenceSummary(t *testing.T, file string) []byte {
	t.Helper()
	p, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ref")
	sum, err := Run(context.Background(), p, RunOptions{Dir: dir, Queue: Queue{Workers: 1, AckWait: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	// Listing 2's expectations hold on cx5 and cx6dx and not on e810 (its NAK handling differs): a suite with
	// both verdicts.
	if sum.Exit != 1 || sum.Totals["pass"] != 12 || sum.Totals["fail"] != 6 || len(sum.Items) != len(p.Items) {
		t.Fatalf("reference run: exit %d, %+v", sum.Exit, sum.Totals)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileSummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChaosKillsWorkersAndCoordinator: three worker processes and the coordinator process are killed
// (SIGKILL) at random points and restarted; re-running the coordinator on the same directory continues from
// the stream. The merged summary must equal, byte for byte, the one of a one-worker run.
func TestChaosKillsWorkersAndCoordinator(t *testing.T) {
	file, err := filepath.Abs("testdata/suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := referenceSummary(t, file)
	redeliveries := 0
	defer func() {
		if !t.Failed() && redeliveries == 0 {
			t.Errorf("no item was ever delivered twice: the kills never hit a worker mid-item")
		}
	}()
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			dir := t.TempDir()
			logs, err := os.Create(filepath.Join(t.TempDir(), "logs"))
			if err != nil {
				t.Fatal(err)
			}
			defer logs.Close()
			showLogs := func() string { b, _ := os.ReadFile(logs.Name()); return string(b) }
			p := &procs{t: t, env: []string{envDir + "=" + dir, envAddr + "=" + freeAddr(t), envFile + "=" + file}, logs: logs}
			defer p.killAll()
			coord := p.start("coordinator")
			workers := []*exec.Cmd{p.start("worker"), p.start("worker"), p.start("worker")}
			coordKills, workerKills := 0, 0
			deadline := time.Now().Add(4 * time.Minute)
			for step := 0; ; step++ {
				if time.Now().After(deadline) {
					t.Fatalf("the campaign did not finish in 4 minutes; logs:\n%s", showLogs())
				}
				pause := 50 + rng.IntN(350)
				if step < 2 {
					pause = 20 + rng.IntN(100) // early: while the first items run
				}
				time.Sleep(time.Duration(pause) * time.Millisecond)
				if coord.ProcessState == nil {
					// Done already?
					if b, err := os.ReadFile(filepath.Join(dir, FileSummaryJSON)); err == nil && len(b) > 0 {
						if err := coord.Wait(); err != nil {
							t.Fatalf("coordinator: %v; logs:\n%s", err, showLogs())
						}
						break
					}
				}
				// The first steps kill a worker, then the coordinator, so that every seed does both.
				switch r := rng.IntN(10); {
				case step == 1 || r < 2 && coordKills < 2:
					_ = coord.Process.Signal(syscall.SIGKILL)
					_ = coord.Wait()
					coordKills++
					coord = p.start("coordinator")
				case step == 0 || r < 6:
					k := rng.IntN(len(workers))
					_ = workers[k].Process.Signal(syscall.SIGKILL)
					_ = workers[k].Wait()
					workerKills++
					workers[k] = p.start("worker")
				}
			}
			got, err := os.ReadFile(filepath.Join(dir, FileSummaryJSON))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("after %d coordinator and %d worker kills the summary differs from the one-worker run:\n%s\nwant:\n%s", coordKills, workerKills, got, want)
			}
			if coordKills == 0 || workerKills == 0 {
				t.Fatalf("the campaign finished before the test killed a coordinator and a worker (%d, %d): make it longer", coordKills, workerKills)
			}
			redelivered := strings.Count(showLogs(), "(delivery 2)")
			t.Logf("seed %d: %d coordinator kills, %d worker kills, %d items redelivered: summary identical", seed, coordKills, workerKills, redelivered)
			redeliveries += redelivered
		})
	}
}

// TestSearchChaos: a search whose evaluations go through the queue to three worker processes, workers and the
// search process killed at random points (the search resumed with its search.jsonl, the evaluations from the
// stream), writes the same search.jsonl and anomalies.json as the search in process.
func TestSearchChaos(t *testing.T) {
	refDir := filepath.Join(t.TempDir(), "ref")
	ev, err := search.EvaluatorFor(chaosProfile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := search.RunDir(context.Background(), ev, chaosSearchConfig(), search.DirOptions{Dir: refDir, Profile: chaosProfile}); err != nil {
		t.Fatal(err)
	}
	read := func(dir string) (string, string) {
		a, err := os.ReadFile(filepath.Join(dir, "anomalies.json"))
		if err != nil {
			t.Fatal(err)
		}
		l, err := os.ReadFile(filepath.Join(dir, search.LogFile))
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(a), dir, "DIR"), string(l)
	}
	wantA, wantL := read(refDir)
	if strings.Count(wantL, "\n") != 40 {
		t.Fatalf("the reference search logged %d evaluations, want 40", strings.Count(wantL, "\n"))
	}
	for _, seed := range []uint64{1, 2} {
		t.Run("seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			dir := t.TempDir()
			logs, err := os.Create(filepath.Join(t.TempDir(), "logs"))
			if err != nil {
				t.Fatal(err)
			}
			defer logs.Close()
			showLogs := func() string { b, _ := os.ReadFile(logs.Name()); return string(b) }
			p := &procs{t: t, env: []string{envDir + "=" + dir, envAddr + "=" + freeAddr(t)}, logs: logs}
			defer p.killAll()
			coord := p.start("search")
			exited := make(chan error, 1)
			go func(c *exec.Cmd) { exited <- c.Wait() }(coord)
			workers := []*exec.Cmd{p.start("worker"), p.start("worker"), p.start("worker")}
			kills := 0
			deadline := time.After(4 * time.Minute)
		loop:
			for step := 0; ; step++ {
				pause := time.Duration(100+rng.IntN(600)) * time.Millisecond
				select {
				case err := <-exited:
					if err != nil {
						t.Fatalf("search process: %v; logs:\n%s", err, showLogs())
					}
					break loop
				case <-deadline:
					t.Fatalf("the search did not finish in 4 minutes; logs:\n%s", showLogs())
				case <-time.After(pause):
				}
				switch r := rng.IntN(10); {
				case step == 2 || r < 1:
					_ = coord.Process.Signal(syscall.SIGKILL)
					<-exited
					kills++
					coord = p.start("search")
					go func(c *exec.Cmd) { exited <- c.Wait() }(coord)
				case step == 0 || r < 5:
					k := rng.IntN(len(workers))
					_ = workers[k].Process.Signal(syscall.SIGKILL)
					_ = workers[k].Wait()
					kills++
					workers[k] = p.start("worker")
				}
			}
			gotA, gotL := read(dir)
			if gotA != wantA || gotL != wantL {
				t.Fatalf("after %d kills the search differs from the one in process", kills)
			}
			t.Logf("seed %d: %d kills, %d redeliveries: same search.jsonl and anomalies.json", seed, kills, strings.Count(showLogs(), "(delivery 2)"))
		})
	}
}
