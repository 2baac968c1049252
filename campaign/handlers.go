package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rundiff"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/verdict"
)

// Item kinds.
const (
	KindRun  = "run"  // one lumina run of a scenario
	KindEval = "eval" // one search evaluation
	KindNoop = "noop" // nothing (benchmarks of the coordinator; tests of deadlines)
)

// runPayload is a run item: everything a worker on another machine needs.
type runPayload struct {
	Scenario string `json:"scenario"` // absolute path on the coordinator's machine (resolves relative profile files)
	YAML     []byte `json:"yaml"`
	Profile  string `json:"profile,omitempty"`
	Seed     uint64 `json:"seed"`
	HasSeed  bool   `json:"has_seed,omitempty"`
	Rel      string `json:"rel"`
}

// RunResult is a run item's result document.
type RunResult struct {
	Verdict string             `json:"verdict"` // pass | fail | invalid | error
	Exit    int                `json:"exit_status"`
	Reason  string             `json:"reason,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Results is the results directory: relative to the campaign directory when the worker wrote it there
	// (same machine), else host:path on the worker's machine.
	Results string `json:"results,omitempty"`
}

type evalPayload struct {
	Profile  string          `json:"profile"`
	Workload search.Workload `json:"workload"`
	Seed     uint64          `json:"seed"`
}

type noopPayload struct {
	SleepMS int `json:"sleep_ms,omitempty"`
}

// WorkerOptions configure the handlers of a worker.
type WorkerOptions struct {
	// ResultsRoot keeps the results directories of items whose campaign directory is on another machine:
	// ROOT/<campaign>/items/... (default ./lumina-worker-results).
	ResultsRoot string
	// Exec, when set, runs each run item in a child process (Exec[0] with Exec[1:] as arguments, which must
	// end up in RunItemMain), killed when the item is given up (its deadline, the worker stopping): the
	// simulator has no way to stop mid-run, so in process an abandoned run would go on to its end. nil: in
	// process.
	Exec []string
}

// Handlers are the item handlers every worker has.
func Handlers(o WorkerOptions) map[string]queue.Handler {
	if o.ResultsRoot == "" {
		o.ResultsRoot = "lumina-worker-results"
	}
	var evs sync.Map // profile -> search.Evaluator
	return map[string]queue.Handler{
		KindRun: func(ctx context.Context, it *queue.Item) (json.RawMessage, error) {
			var p runPayload
			if err := json.Unmarshal(it.Payload, &p); err != nil {
				return nil, fmt.Errorf("malformed run item: %w", err)
			}
			run := runOne
			if len(o.Exec) > 0 {
				run = func(ctx context.Context, it *queue.Item, p *runPayload, root string) (*RunResult, error) {
					return runChild(ctx, o.Exec, it, p, root)
				}
			}
			r, err := run(ctx, it, &p, o.ResultsRoot)
			if err != nil {
				return nil, err
			}
			return json.Marshal(r)
		},
		KindEval: func(ctx context.Context, it *queue.Item) (json.RawMessage, error) {
			var p evalPayload
			if err := json.Unmarshal(it.Payload, &p); err != nil {
				return nil, fmt.Errorf("malformed evaluation item: %w", err)
			}
			ev, ok := evs.Load(p.Profile)
			if !ok {
				e, err := search.EvaluatorFor(p.Profile)
				if err != nil {
					return nil, err
				}
				ev, _ = evs.LoadOrStore(p.Profile, e)
			}
			m, err := ev.(search.Evaluator).Evaluate(ctx, p.Workload, p.Seed)
			if err != nil {
				return nil, err
			}
			return json.Marshal(m)
		},
		KindNoop: func(ctx context.Context, it *queue.Item) (json.RawMessage, error) {
			var p noopPayload
			if len(it.Payload) > 0 {
				if err := json.Unmarshal(it.Payload, &p); err != nil {
					return nil, err
				}
			}
			if p.SleepMS > 0 {
				select {
				case <-time.After(time.Duration(p.SleepMS) * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return json.RawMessage(`{}`), nil
		},
	}
}

// hostname is this machine's name ("" when unknown: never the same host as another).
var hostname = func() string { h, _ := os.Hostname(); return h }()

// childRequest is what a child process of runChild reads on its standard input.
type childRequest struct {
	Item queue.Item `json:"item"`
	Root string     `json:"root"`
}

// runChild runs a run item in a child process and kills it (its whole process group) when ctx is done; the
// staging directory the killed run left is removed, so an item given up writes nothing afterwards.
func runChild(ctx context.Context, argv []string, it *queue.Item, p *runPayload, root string) (*RunResult, error) {
	out, _, err := itemDir(it, p.Rel, root)
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(childRequest{Item: *it, Root: root})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if ctx.Err() != nil {
		removeStalePartials(out) // the killed child's (its process is gone)
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("run item %s: child process: %v: %s", it.Key, err, strings.TrimSpace(stderr.String()))
	}
	var r RunResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("run item %s: child process: malformed result: %v", it.Key, err)
	}
	return &r, nil
}

// RunItemMain is the child process of WorkerOptions.Exec: it reads the item on in, runs it and writes its
// RunResult on out.
func RunItemMain(in io.Reader, out io.Writer) error {
	var req childRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("run item: malformed request: %w", err)
	}
	var p runPayload
	if err := json.Unmarshal(req.Item.Payload, &p); err != nil {
		return fmt.Errorf("malformed run item: %w", err)
	}
	r, err := runOne(context.Background(), &req.Item, &p, req.Root)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(r)
}

// itemDir is where a run item's results directory goes: in the campaign directory when it is on this
// machine and holds the item's campaign (its FileID names it), else under the worker's own results root.
// Rel, from the payload, must be a local path under items/: nothing from the queue writes elsewhere.
func itemDir(it *queue.Item, rel, root string) (out, where string, err error) {
	if !filepath.IsLocal(rel) || !strings.HasPrefix(filepath.ToSlash(rel), "items/") || strings.ContainsAny(rel, ":") {
		return "", "", fmt.Errorf("item %s: results directory %q: expected a relative path under items/", it.Key, rel)
	}
	if it.Host != "" && it.Host == hostname && filepath.IsAbs(it.Dir) {
		if b, err := os.ReadFile(filepath.Join(it.Dir, FileID)); err == nil && strings.TrimSpace(string(b)) == it.Campaign {
			return filepath.Join(it.Dir, rel), rel, nil
		}
	}
	out = filepath.Join(root, it.Campaign, rel)
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", "", err
	}
	return out, hostname + ":" + abs, nil
}

var markerPID = regexp.MustCompile(`\(pid (\d+)\)`)

// removeStalePartials removes the staging directories (resultsdir.Begin: <out>.partial-*) that runs of the
// item left when their process was killed: those whose INCOMPLETE marker names a process that is gone. A
// staging directory of a run still going (the same item redelivered while its first worker still runs it) is
// left alone.
func removeStalePartials(out string) {
	dirs, _ := filepath.Glob(out + ".partial-*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, resultsdir.FileIncomplete))
		if err != nil {
			continue // no marker yet: a run that is starting
		}
		m := markerPID.FindSubmatch(b)
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(string(m[1]))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// runOne runs a scenario and judges it, as lumina run does. Once ctx is done (the item's deadline, or the
// worker stopping) the run's directory is not moved into place and its staging directory is removed: an item
// given up never writes its results directory afterwards. (The simulator itself has no way to stop early:
// it runs to its end, then its results are dropped.)
func runOne(ctx context.Context, it *queue.Item, p *runPayload, root string) (*RunResult, error) {
	out, where, err := itemDir(it, p.Rel, root)
	if err != nil {
		return nil, err
	}
	removeStalePartials(out)
	r := &RunResult{Results: where}
	sc, err := scenario.Parse(p.YAML, p.Scenario)
	if err != nil {
		r.Verdict, r.Exit, r.Reason = "error", 2, err.Error()
		return r, nil
	}
	if p.Profile != "" {
		sc.Requester.NIC.Type, sc.Responder.NIC.Type = p.Profile, p.Profile
	}
	if p.HasSeed {
		sc.WithSeed(p.Seed)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		r.Verdict, r.Exit, r.Reason = "error", 2, err.Error()
		return r, nil
	}
	var o *verdict.Outcome
	var staged string
	var ts *verdict.Stream // a simulator run's trace is judged while it is written, as lumina run does
	err = testbed.Run(sc, testbed.Options{OutDir: out, Staged: func(d string) { staged = d }, Trace: func(d string, conns []resultsdir.ConnRecord) testbed.TraceConsumer {
		ts = verdict.NewStream(d, sc, conns)
		return ts
	}, Finish: func(d string) (err error) {
		if ctx.Err() != nil {
			return ctx.Err() // given up: the directory is not committed
		}
		o, err = verdict.JudgeStream(d, sc, ts)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		return err
	}})
	if ctx.Err() != nil {
		if staged != "" {
			_ = os.RemoveAll(staged)
		}
		return nil, ctx.Err()
	}
	var invalid *testbed.InvalidRunError
	if errors.As(err, &invalid) {
		o, err = verdict.RecordInvalid(invalid.Dir, sc, invalid.Reason)
		if err == nil {
			r.Reason = "the run could not finish: " + invalid.Reason
		}
	}
	if err != nil {
		r.Verdict, r.Exit, r.Reason = "error", 2, err.Error()
		return r, nil
	}
	r.Verdict, r.Exit = o.Doc.Verdict, o.ExitCode()
	r.Metrics = keyMetrics(o.Doc)
	return r, nil
}

// keyMetrics are a run's key metrics as lumina diff and the run history know them (rundiff.Extract), so a
// suite's items compare with any other run; a workload run adds the monitor's pause ratio and limit share.
func keyMetrics(doc *verdict.Document) map[string]float64 {
	m := rundiff.Extract(doc)
	if w := doc.Workload; w != nil {
		m["pause_ratio"], m["limit_share"] = w.PauseRatio, w.LimitShare
		if _, ok := m["goodput_gbps"]; !ok {
			m["goodput_gbps"] = w.GoodputGbps
		}
	}
	return m
}
