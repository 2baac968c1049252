package campaign

import (
	"context"
	"encoding/json"
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
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/version"
)

// Files of a campaign directory.
const (
	FileSummaryJSON = "summary.json"
	FileSummaryText = "summary.txt"
	FileNATSURL     = "nats.url" // the embedded server's address while the coordinator runs
	DirNATS         = "nats"     // the embedded server's JetStream store
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
			Handlers: Handlers(WorkerOptions{}), AckWait: q.AckWait, Log: q.Log}
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

// ItemSummary is one run of the suite in the summary.
type ItemSummary struct {
	Index    int                `json:"index"`
	ID       string             `json:"id"`
	Scenario string             `json:"scenario"`
	Profile  string             `json:"profile,omitempty"`
	Testbed  string             `json:"testbed,omitempty"`
	Seed     uint64             `json:"seed"`
	Verdict  string             `json:"verdict"` // pass | fail | invalid | error | timeout | lost
	Exit     int                `json:"exit_status"`
	Reason   string             `json:"reason,omitempty"`
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	Results  string             `json:"results,omitempty"`
}

// Summary is summary.json: the suite's items in matrix order, the count per verdict and the campaign's exit
// status (2 if an item could not run, else 3 if one was invalid, else 1 if one failed, else 0).
type Summary struct {
	Campaign string         `json:"campaign"`
	File     string         `json:"file"`
	Items    []ItemSummary  `json:"items"`
	Totals   map[string]int `json:"totals"`
	Exit     int            `json:"exit_status"`
}

// RunOptions are how a campaign runs.
type RunOptions struct {
	Dir      string
	Queue    Queue
	Progress io.Writer
}

// ID is the campaign's queue token: its name and a hash of its directory, so that two campaigns of one
// cluster never share items.
func ID(name, dir string) string {
	abs, _ := filepath.Abs(dir)
	h := fnv.New64a()
	h.Write([]byte(hostname + ":" + abs))
	return queue.CampaignID(name, h.Sum64())
}

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
	s, err := Open(dir, o.Queue)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "campaign %s (queue token %s): %d items; queue %s", p.Name, ID(p.Name, dir), len(p.Items), s.URL)
		if s.Embedded {
			fmt.Fprintf(o.Progress, " (embedded; more workers on this machine: lumina worker --nats %s)", s.URL)
		}
		fmt.Fprintf(o.Progress, "; %d local workers\n", o.Queue.Workers)
	}
	c, err := queue.NewCoordinator(ctx, s.JS, ID(p.Name, dir), o.Queue.Replicas)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	items := make([]queue.Item, len(p.Items))
	for i, it := range p.Items {
		pl, err := json.Marshal(runPayload{Scenario: it.Abs, YAML: it.YAML, Profile: it.Profile, Seed: it.Seed, HasSeed: it.HasSeed, Rel: it.Rel})
		if err != nil {
			return nil, err
		}
		items[i] = queue.Item{Key: it.Key, Kind: KindRun, Cap: it.Cap(), Timeout: p.Timeout, Attempts: p.Attempts,
			Payload: pl, Host: hostname, Dir: dir}
	}
	var caps []string
	for _, it := range p.Items {
		if !slices.Contains(caps, it.Cap()) {
			caps = append(caps, it.Cap())
		}
	}
	var last time.Time
	lastDone := -1
	res, err := c.RunAll(ctx, items, func(done, total int) {
		if o.Progress != nil && (done != lastDone && time.Since(last) >= time.Second || done == total || time.Since(last) >= 30*time.Second) {
			stalled := done == lastDone
			last, lastDone = time.Now(), done
			fmt.Fprintf(o.Progress, "campaign %s: %d/%d items done\n", p.Name, done, total)
			if stalled && done < total {
				fmt.Fprintf(o.Progress, "campaign %s: no result for 30s: is a worker running that can take the items left (%s)?\n", p.Name, strings.Join(caps, ", "))
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("campaign stopped with %d of %d results (re-run the same command to continue): %w", countDone(res), len(items), err)
	}
	sum := Merge(p, res)
	return sum, WriteSummary(dir, sum)
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
	sum := &Summary{Campaign: p.Name, File: p.File, Totals: map[string]int{}}
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
			is.Verdict, is.Exit, is.Reason, is.Metrics, is.Results = rr.Verdict, rr.Exit, rr.Reason, rr.Metrics, rr.Results
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
func LoadSummary(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileSummaryJSON))
	if err != nil {
		return nil, err
	}
	if _, err := version.CheckSchema(b); err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", FileSummaryJSON, err)
	}
	return &s, nil
}

// ForEachRun calls fn with every item of a finished campaign whose results directory is on this machine, with
// that directory's path: the seam for recording a suite in the run history (another package's job).
func ForEachRun(dir string, fn func(it ItemSummary, resultsDir string) error) error {
	s, err := LoadSummary(dir)
	if err != nil {
		return err
	}
	for _, it := range s.Items {
		if it.Results == "" || strings.Contains(it.Results, ":") {
			continue // did not run, or kept on a remote worker
		}
		if err := fn(it, filepath.Join(dir, it.Results)); err != nil {
			return err
		}
	}
	return nil
}
