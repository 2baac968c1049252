package campaign

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lumina-go/lumina/campaign/suite"
	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/version"
)

// Files of a campaign directory.
const (
	FileSummaryJSON = suite.File
	FileSummaryText = "summary.txt"
	FileNATSURL     = "nats.url" // the embedded server's address while the coordinator runs
	DirNATS         = "nats"     // the embedded server's JetStream store
	// FileLock is held (flock) by the coordinator of the directory: a second one on the same --out refuses.
	FileLock = "nats.lock"
	// FileID holds the directory's campaign token (queue subjects): random when the directory is made, so a
	// directory removed and made again is a new campaign, never the old one's results.
	FileID = "campaign.id"
	// FileLocations says where each item's results directory is (machine and path): not merged, as it
	// depends on where the items ran.
	FileLocations = "locations.json"
)

// Queue says where the work queue is: an embedded server (URL empty) or a NATS cluster.
type Queue struct {
	URL      string
	Conn     queue.ConnOptions
	Listen   string // embedded server address (loopback; default 127.0.0.1:0)
	Replicas int    // stream replicas on a cluster
	Workers  int    // local workers in this process
	AckWait  time.Duration
	Log      func(format string, a ...any)
	// Exec runs the local workers' run items in child processes (WorkerOptions.Exec); nil: in process.
	Exec []string
}

// Session is a connected queue with its local workers: embedded server, connection, workers.
type Session struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	URL      string
	emb      *queue.Embedded
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	urlFile  string
	Embedded bool
}

// Open starts the embedded server (store under dir) when q.URL is empty, connects, and starts q.Workers local
// workers with every capability of the simulator.
func Open(dir string, q Queue) (*Session, error) {
	s := &Session{URL: q.URL}
	if q.URL == "" {
		emb, err := queue.StartEmbedded(filepath.Join(dir, DirNATS), q.Listen)
		if err != nil {
			return nil, err
		}
		s.emb, s.URL, s.Embedded = emb, emb.URL(), true
		s.urlFile = filepath.Join(dir, FileNATSURL)
		_ = os.WriteFile(s.urlFile, []byte(s.URL+"\n"), 0o644)
	}
	nc, err := queue.Connect(s.URL, q.Conn)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.NC = nc
	if s.JS, err = jetstream.New(nc); err != nil {
		s.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i := range q.Workers {
		w := &queue.Worker{JS: s.JS, Name: fmt.Sprintf("%s/local-%d", hostname, i+1), Caps: []string{queue.CapSim},
			Handlers: Handlers(WorkerOptions{Exec: q.Exec}), AckWait: q.AckWait, Log: q.Log}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); _ = w.Run(ctx) }()
	}
	return s, nil
}

// Close stops the local workers, the connection and the embedded server (its store stays).
func (s *Session) Close() {
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
	}
	if s.NC != nil {
		s.NC.Close()
	}
	if s.emb != nil {
		s.emb.Shutdown()
		_ = os.Remove(s.urlFile)
	}
}

// ItemSummary is one run of the suite in the summary (package suite: the HTML report reads it too).
type ItemSummary = suite.Item

// Summary is summary.json (package suite).
type Summary = suite.Summary

// RunOptions are how a campaign runs.
type RunOptions struct {
	Dir      string
	Queue    Queue
	Progress io.Writer
	// Fresh removes the campaign's results from the stream first: every item runs again.
	Fresh bool
	// Retry runs again the items whose result is error, timeout or lost; done results are kept.
	Retry bool
	// Deadline, when positive, bounds the whole campaign: past it the campaign stops (ErrDeadline).
	Deadline time.Duration
}

// ErrDeadline is returned by Run when the campaign's deadline passed before every item had its result.
var ErrDeadline = errors.New("campaign deadline passed")

// ID is the campaign's queue token for a directory: its name and a hash of the machine, the directory and a
// random nonce kept in the directory (FileID, made on first use), so that two campaigns of one cluster never
// share items and a directory removed and made again starts a new campaign.
func ID(name, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	f := filepath.Join(abs, FileID)
	if b, err := os.ReadFile(f); err == nil {
		if id := strings.TrimSpace(string(b)); queue.CheckToken("campaign id", id) == nil {
			return id, nil
		}
		return "", fmt.Errorf("%s: not a campaign token; remove it to start the campaign afresh", f)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	h := fnv.New64a()
	fmt.Fprintf(h, "%s:%s:%x", hostname, abs, nonce)
	id := queue.CampaignID(name, h.Sum64())
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", err
	}
	return id, writeFile(f, []byte(id+"\n"))
}

// lockDir takes the directory's coordinator lock; the returned file holds it until closed (or the process
// ends). A directory another coordinator holds is an error naming that process.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, FileLock)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(b))
		if who == "" {
			who = "another process"
		}
		return nil, fmt.Errorf("%w: %s is being run by %s (lock %s): wait for it or use another --out", ErrLocked, dir, who, path)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("lumina pid %d on %s\n", os.Getpid(), hostname)), 0)
	return f, nil
}

// ErrLocked is returned by Run when another coordinator runs the same directory.
var ErrLocked = errors.New("campaign directory in use")

// Run runs the plan: it publishes every item whose result is not already in the stream (a re-run on the same
// directory continues), waits for all results, and writes summary.json and summary.txt in o.Dir.
func Run(ctx context.Context, p *Plan, o RunOptions) (*Summary, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	id, err := ID(p.Name, dir)
	if err != nil {
		return nil, err
	}
	s, err := Open(dir, o.Queue)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "campaign %s (queue token %s): %d items; queue %s", p.Name, id, len(p.Items), s.URL)
		if s.Embedded {
			fmt.Fprintf(o.Progress, " (embedded; more workers on this machine: lumina worker --nats %s)", s.URL)
		}
		fmt.Fprintf(o.Progress, "; %d local workers\n", o.Queue.Workers)
	}
	c, err := queue.NewCoordinator(ctx, s.JS, id, o.Queue.Replicas)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.Retry = o.Retry
	if o.Fresh {
		if err := c.Purge(ctx); err != nil {
			return nil, fmt.Errorf("--fresh: removing the campaign's results: %w", err)
		}
	}
	items := make([]queue.Item, len(p.Items))
	keep := map[string]bool{}
	for i, it := range p.Items {
		pl, err := json.Marshal(runPayload{Scenario: it.Abs, YAML: it.YAML, Profile: it.Profile, Seed: it.Seed, HasSeed: it.HasSeed, Rel: it.Rel})
		if err != nil {
			return nil, err
		}
		items[i] = queue.Item{Key: it.Key, Kind: KindRun, Cap: it.Cap(), Timeout: p.Timeout, Attempts: p.Attempts,
			Payload: pl, Host: hostname, Dir: dir}
		keep[it.Key] = true
	}
	// Items of an earlier version of the campaign file are not run.
	if err := c.PurgeOthers(ctx, keep); err != nil {
		return nil, err
	}
	var caps []string
	for _, it := range p.Items {
		if !slices.Contains(caps, it.Cap()) {
			caps = append(caps, it.Cap())
		}
	}
	// The coordinator sets the ack wait of the consumers its items go through (workers never change it).
	for _, cp := range caps {
		if _, err := queue.EnsureConsumer(ctx, s.JS, cp, o.Queue.AckWait, true); err != nil {
			return nil, fmt.Errorf("consumer for %s: %w", cp, err)
		}
	}
	rctx := ctx
	if o.Deadline > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, o.Deadline)
		defer cancel()
	}
	var last time.Time
	lastDone := -1
	res, err := c.RunAll(rctx, items, func(done, total int) {
		if o.Progress != nil && (done != lastDone && time.Since(last) >= time.Second || done == total || time.Since(last) >= 30*time.Second) {
			stalled := done == lastDone
			last, lastDone = time.Now(), done
			fmt.Fprintf(o.Progress, "campaign %s: %d/%d items done\n", p.Name, done, total)
			if stalled && done < total {
				fmt.Fprintf(o.Progress, "campaign %s: no result for 30s: is a worker running that can take the items left (%s)?\n", p.Name, strings.Join(caps, ", "))
			}
		}
	})
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w: %s passed with %d of %d results: is a worker running that can take the items left (%s)? (re-run the same command to continue)",
			ErrDeadline, o.Deadline, countDone(res), len(items), strings.Join(caps, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("campaign stopped with %d of %d results (re-run the same command to continue): %w", countDone(res), len(items), err)
	}
	sum := Merge(p, res)
	if err := WriteLocations(dir, p, res); err != nil {
		return nil, err
	}
	return sum, WriteSummary(dir, sum)
}

// Locations is locations.json: where each item's results directory is, relative to the campaign directory
// when a worker on this machine wrote it there, else host:path on the worker's machine.
type Locations struct {
	Items []Location `json:"items"`
}

// Location is one item's entry in Locations.
type Location struct {
	Index   int    `json:"index"`
	Results string `json:"results"`
	Worker  string `json:"worker,omitempty"`
}

// WriteLocations writes locations.json for the items that ran.
func WriteLocations(dir string, p *Plan, res []*queue.Result) error {
	var l Locations
	for i, it := range p.Items {
		r := res[i]
		if r == nil || r.Status != queue.StatusDone {
			continue
		}
		var rr RunResult
		if json.Unmarshal(r.Payload, &rr) != nil || rr.Results == "" {
			continue
		}
		l.Items = append(l.Items, Location{Index: it.Index, Results: rr.Results, Worker: r.Worker})
	}
	b, err := version.MarshalDocument(&l)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, FileLocations), b)
}

func countDone(rs []*queue.Result) int {
	n := 0
	for _, r := range rs {
		if r != nil {
			n++
		}
	}
	return n
}

// Merge makes the summary from the results, by item index: arrival order, workers and deliveries do not
// enter it.
func Merge(p *Plan, res []*queue.Result) *Summary {
	sum := &Summary{Campaign: p.Name, File: filepath.Base(p.File), Totals: map[string]int{}}
	for i, it := range p.Items {
		is := ItemSummary{Index: it.Index, ID: it.ID, Scenario: it.Scenario, Profile: it.Profile, Testbed: it.Testbed, Seed: it.Seed}
		r := res[i]
		switch {
		case r == nil:
			is.Verdict, is.Exit, is.Reason = "lost", 2, "no result"
		case r.Status == queue.StatusDone:
			var rr RunResult
			if err := json.Unmarshal(r.Payload, &rr); err != nil {
				is.Verdict, is.Exit, is.Reason = "error", 2, "malformed result: "+err.Error()
				break
			}
			// Results is the item's directory relative to the campaign directory, wherever it ran (where it
			// is goes in locations.json).
			is.Verdict, is.Exit, is.Reason, is.Metrics = rr.Verdict, rr.Exit, rr.Reason, rr.Metrics
			if rr.Results != "" {
				is.Results = it.Rel
			}
		default:
			is.Verdict, is.Exit, is.Reason = r.Status, 2, r.Reason
		}
		sum.Totals[is.Verdict]++
		sum.Items = append(sum.Items, is)
	}
	for _, is := range sum.Items {
		sum.Exit = worse(sum.Exit, is.Exit)
	}
	return sum
}

// worse orders exit statuses by severity: 2 (did not run) > 3 (invalid) > 1 (failed) > 0.
func worse(a, b int) int {
	rank := map[int]int{0: 0, 1: 1, 3: 2, 2: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// WriteSummary writes summary.json and summary.txt into dir.
func WriteSummary(dir string, s *Summary) error {
	b, err := version.MarshalDocument(s)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, FileSummaryJSON), b); err != nil {
		return err
	}
	var t strings.Builder
	PrintSummary(&t, s)
	return writeFile(filepath.Join(dir, FileSummaryText), []byte(t.String()))
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// PrintSummary writes the summary as text: one line per item, then the totals.
func PrintSummary(w io.Writer, s *Summary) {
	// The table shows a few metrics, under short names; summary.json has them all.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tITEM\tVERDICT\tEXIT\tKEY METRICS\tRESULTS")
	for _, it := range s.Items {
		var mv []string
		for _, k := range textMetrics {
			if v, ok := it.Metrics[k]; ok {
				mv = append(mv, textMetricNames[k]+"="+short(v))
			}
		}
		res := it.Results
		if it.Reason != "" && it.Verdict != "pass" && it.Verdict != "fail" {
			res = strings.TrimSpace(res + " (" + firstLine(it.Reason) + ")")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", it.Index, it.ID, it.Verdict, it.Exit, strings.Join(mv, " "), res)
	}
	tw.Flush()
	totals := map[string]int{}
	for _, it := range s.Items {
		totals[it.Verdict]++
	}
	var ts []string
	for _, v := range []string{"pass", "fail", "invalid", "error", "timeout", "lost"} {
		if n := totals[v]; n > 0 {
			ts = append(ts, fmt.Sprintf("%d %s", n, v))
		}
	}
	fmt.Fprintf(w, "campaign %s: %d items: %s; exit status %d\n", s.Campaign, len(s.Items), strings.Join(ts, ", "), s.Exit)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// textMetrics are the metrics the text summary shows (in this order), of those an item has; textMetricNames
// are their short names in the table.
var textMetrics = []string{"packets", "retransmissions", "timeouts", "cnps", "expectations_failed", "checks_failed",
	"nack_generation_us_mean", "mct_us_mean", "pause_ratio", "goodput_gbps"}

var textMetricNames = map[string]string{"packets": "pkts", "retransmissions": "retx", "timeouts": "timeouts",
	"cnps": "cnps", "expectations_failed": "expect_failed", "checks_failed": "checks_failed",
	"nack_generation_us_mean": "nack_gen_us", "mct_us_mean": "mct_us", "pause_ratio": "pause", "goodput_gbps": "gbps"}

// short formats a metric for the text table: a whole number or one of 1000 or more without decimals, else about
// four significant digits.
func short(v float64) string {
	switch a := math.Abs(v); {
	case v == math.Trunc(v) && a < 1e15, a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 3-int(math.Log10(a)), 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// LoadSummary reads a campaign directory's summary.json.
func LoadSummary(dir string) (*Summary, error) { return suite.Load(dir) }

// ForEachRun calls fn with every item of a finished campaign whose results directory is on this machine, with
// that directory's path: the seam for recording a suite in the run history (another package's job). Where an
// item ran is in locations.json; without it, the summary's relative directories are taken as local.
func ForEachRun(dir string, fn func(it ItemSummary, resultsDir string) error) error {
	s, err := LoadSummary(dir)
	if err != nil {
		return err
	}
	where := map[int]string{}
	if b, err := os.ReadFile(filepath.Join(dir, FileLocations)); err == nil {
		var l Locations
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("%s: %w", FileLocations, err)
		}
		for _, x := range l.Items {
			where[x.Index] = x.Results
		}
	}
	for _, it := range s.Items {
		loc, ok := where[it.Index]
		if !ok {
			loc = it.Results
		}
		if loc == "" || strings.Contains(loc, ":") || !filepath.IsLocal(loc) {
			continue // did not run, or kept on a remote worker
		}
		if err := fn(it, filepath.Join(dir, loc)); err != nil {
			return err
		}
	}
	return nil
}
