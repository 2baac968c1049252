package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lumina-go/lumina/campaign"
	"github.com/lumina-go/lumina/history"
	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rundiff"
	"github.com/lumina-go/lumina/version"
)

// queueFlags are the work-queue options shared by campaign, search and worker.
type queueFlags struct {
	q campaign.Queue
}

func (f *queueFlags) add(fs *pflag.FlagSet, local bool) {
	fs.StringVar(&f.q.URL, "nats", "", "NATS server URL of a cluster (nats://host:4222, tls://...); none: an embedded server in this process")
	fs.StringVar(&f.q.Conn.Creds, "nats-creds", "", "NATS credentials file (user JWT and nkey seed)")
	fs.StringVar(&f.q.Conn.NKey, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&f.q.Conn.TLSCA, "nats-tls-ca", "", "CA certificate that signed the NATS server's")
	fs.StringVar(&f.q.Conn.TLSCrt, "nats-tls-cert", "", "client certificate (mutual TLS)")
	fs.StringVar(&f.q.Conn.TLSKey, "nats-tls-key", "", "client certificate's key (mutual TLS)")
	fs.DurationVar(&f.q.AckWait, "ack-wait", queue.DefaultAckAge, "how long a silent worker keeps an item before it is delivered to another (running items send heartbeats)")
	if local {
		fs.IntVar(&f.q.Workers, "workers", runtime.NumCPU(), "local workers in this process (0: only workers started with lumina worker); default one per core, 0 with --nats")
		fs.StringVar(&f.q.Listen, "nats-listen", "127.0.0.1:0", "embedded server address, loopback only (lumina worker --nats on this machine joins it)")
		fs.IntVar(&f.q.Replicas, "nats-replicas", 1, "stream replicas on a clustered JetStream")
	}
}

// localDefault makes --workers default to 0 with --nats: local workers would join the cluster's shared
// consumer and take other campaigns' items.
func (f *queueFlags) localDefault(fs *pflag.FlagSet) {
	if f.q.URL != "" && !fs.Changed("workers") {
		f.q.Workers = 0
	}
}

func (f *queueFlags) check() error {
	if f.q.Workers < 0 {
		return badInput("--workers %d: expected 0 or more", f.q.Workers)
	}
	if f.q.URL == "" && (f.q.Conn != queue.ConnOptions{}) {
		return badInput("--nats-creds, --nats-nkey and --nats-tls-* configure the connection to --nats URL; the embedded server needs none")
	}
	if f.q.AckWait < time.Second {
		return badInput("--ack-wait %s: expected at least 1s", f.q.AckWait)
	}
	for _, p := range []string{f.q.Conn.Creds, f.q.Conn.NKey, f.q.Conn.TLSCA, f.q.Conn.TLSCrt, f.q.Conn.TLSKey} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return badInput("NATS connection file: %v", err)
		}
	}
	return nil
}

func newCampaignCmd(stdout, stderr io.Writer) *cobra.Command {
	var qf queueFlags
	var out string
	var jsonOut, quiet, noHist, fresh, retry bool
	var histPath string
	var deadline time.Duration
	cmd := &cobra.Command{
		Use:   "campaign FILE.yaml",
		Short: "Run a suite (scenarios x NIC profiles or testbeds x seeds) through a NATS JetStream work queue",
		Long: `campaign runs every item of the campaign file's matrix (scenarios x profiles or testbeds x seeds) and
writes a campaign directory: items/NNNN-.../ (one results directory per item), summary.json and
summary.txt (per item: verdict, exit status, key metrics, results directory). docs/campaign.md
describes the file and the directory.

With no --nats, an embedded NATS server runs in this process (its store in DIR/nats, listening on
loopback) with --workers local workers (default one per core); more workers on this machine join
with lumina worker --nats URL (the URL is printed, and in DIR/nats.url). With --nats URL the items go
to that NATS cluster, where lumina worker processes on any machine take the items they can run; no
local workers then unless --workers N (they would share the cluster's queue with other campaigns).

The summary is merged by item, so it is the same whatever the number of workers. Re-running the same
command on the same --out continues a stopped campaign from the results already in the stream;
--retry runs again the items that could not run (error, timeout, lost), --fresh runs everything again.

Exit status: 0 every item passed, 1 one failed, 3 one was invalid, 2 bad input, another coordinator on
the same --out, --deadline passed, or an item that could not run (error, timeout, lost), 130 stopped by
SIGINT or SIGTERM as lumina run (re-run to continue).`,
		Example: `  lumina campaign examples/campaigns/smoke.yaml --out /tmp/smoke
  lumina campaign nightly.yaml --nats tls://nats.lab:4222 --nats-creds lab.creds --workers 0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			qf.localDefault(cmd.Flags())
			if err := qf.check(); err != nil {
				return err
			}
			qf.q.Exec = runItemExec()
			if deadline < 0 {
				return badInput("--deadline %s: expected a positive duration (0: none)", deadline)
			}
			if fresh && retry {
				return badInput("--fresh runs every item again; --retry only those that could not run: give one")
			}
			plan, err := campaign.Load(args[0])
			if err != nil {
				return badInput("%v", err)
			}
			if out == "" {
				out = filepath.Join("campaigns", plan.Name)
			}
			var progress io.Writer
			if !quiet {
				progress = stderr
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			sum, err := campaign.Run(ctx, plan, campaign.RunOptions{Dir: out, Queue: qf.q, Progress: progress,
				Fresh: fresh, Retry: retry, Deadline: deadline})
			if err != nil {
				if ctx.Err() != nil {
					return fail(130, err)
				}
				return fail(exitBadArgs, err)
			}
			if !noHist {
				recordSuite(histPath, out, stderr)
			}
			if jsonOut {
				if err := writeIndentedJSON(stdout, sum); err != nil {
					return err
				}
			} else {
				campaign.PrintSummary(stdout, sum)
				fmt.Fprintf(stdout, "summary: %s\n", filepath.Join(out, campaign.FileSummaryJSON))
			}
			if sum.Exit != exitOK {
				return fail(sum.Exit, errors.New(""))
			}
			return nil
		},
	}
	qf.add(cmd.Flags(), true)
	cmd.Flags().StringVarP(&out, "out", "o", "", "campaign directory (default campaigns/<name>)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the summary as JSON")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	cmd.Flags().StringVar(&histPath, "history", "", "record the suite's runs in this history database (default $LUMINA_HISTORY, else the user's data directory: lumina history)")
	cmd.Flags().BoolVar(&noHist, "no-history", false, "do not record the suite's runs in the run history")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "remove the campaign's results from the stream first: run every item again")
	cmd.Flags().BoolVar(&retry, "retry", false, "run again the items whose result is error, timeout or lost")
	cmd.Flags().DurationVar(&deadline, "deadline", 0, "stop (exit 2) when the campaign has not finished after this long (0: no deadline)")
	return cmd
}

// fileHistoryRecorded lists, per item, the result of a campaign directory already recorded in the run history:
// re-running a finished campaign (which reads its results back from the stream) records nothing twice, and an
// item run again (--retry, --fresh, a changed input) is recorded as the new run it is.
const fileHistoryRecorded = "history.recorded"

// itemFingerprint names one result of an item: its results directory as written (a run moves a new directory
// into place, so its modification time changes even when a deterministic run writes the same bytes) and its
// analysis.json whenever it exists (raw, when rundiff.ReadDoc read it, else read here: ReadDoc reads none in a
// directory it refuses, INCOMPLETE or not a results directory, and the fingerprints history.recorded already
// holds hash it there too), else (no verdict reached) its verdict and reason.
func itemFingerprint(it campaign.ItemSummary, resultsDir string, raw []byte) string {
	h := sha256.New()
	if st, err := os.Stat(resultsDir); err == nil {
		fmt.Fprintf(h, "%d\x00", st.ModTime().UnixNano())
	}
	if raw == nil {
		if b, err := os.ReadFile(filepath.Join(resultsDir, resultsdir.FileAnalysis)); err == nil {
			raw = b
		}
	}
	if raw != nil {
		h.Write(raw)
	} else {
		fmt.Fprintf(h, "%s\x00%d\x00%s", it.Verdict, it.Exit, it.Reason)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// recordSuite records every run of a finished campaign whose results directory is on this machine in the
// run history, as lumina run records a run, each result once (fileHistoryRecorded): a suite's items then list
// in lumina history and compare with lumina diff like any run. The history is a convenience: when it cannot be
// written, a warning says so.
func recordSuite(flag, dir string, stderr io.Writer) {
	marker := filepath.Join(dir, fileHistoryRecorded)
	done := map[string]string{} // item index -> fingerprint of the result recorded
	if b, err := os.ReadFile(marker); err == nil {
		if json.Unmarshal(b, &done) != nil {
			done = map[string]string{}
		}
	}
	path, err := historyPath(flag)
	var db *history.DB
	if err == nil {
		db, err = history.Open(path)
	}
	if err == nil {
		defer db.Close()
		now := time.Now()
		err = campaign.ForEachRun(dir, func(it campaign.ItemSummary, rd string) error {
			doc, raw, rerr := rundiff.ReadDoc(rd) // read once: the fingerprint and the record
			key, fp := strconv.Itoa(it.Index), itemFingerprint(it, rd, raw)
			if done[key] == fp {
				return nil
			}
			start := history.Start{Scenario: rundiff.ScenarioName(it.Scenario), ScenarioPath: it.Scenario, Testbed: orSim(it.Testbed),
				NIC: it.Profile, Seed: it.Seed, Version: version.Get().String(), Time: now}
			start.ResultsDir, _ = filepath.Abs(rd)
			var r *rundiff.Run
			if rerr == nil {
				r, rerr = rundiff.FromDoc(rd, doc)
			}
			if rerr != nil {
				doc = nil // no verdict to record: the item's error, with what it left
			} else {
				start.Scenario, start.NIC, start.Testbed = r.Scenario, r.NIC, r.Testbed
			}
			fin := finishRecord(rd, doc, it.Exit)
			fin.Time = now
			id, err := db.Begin(start)
			if err == nil {
				err = db.Complete(id, fin)
			}
			if err == nil {
				done[key] = fp
			}
			return err
		})
		// What was recorded stays listed, even when a later item failed to record.
		if b, merr := json.MarshalIndent(done, "", "  "); merr == nil {
			if werr := os.WriteFile(marker, append(b, '\n'), 0o644); err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "lumina: warning: the campaign's runs are not (all) recorded in the history: %v (--no-history to not try)\n", err)
	}
}

func newWorkerCmd(stdout, stderr io.Writer) *cobra.Command {
	var qf queueFlags
	var testbeds []string
	var noSim, quiet, runItem bool
	var name, results string
	cmd := &cobra.Command{
		Use:   "worker --nats URL",
		Short: "Take campaign and search items from a NATS JetStream work queue and run them",
		Long: `worker connects to the NATS server of a campaign or search (a cluster, or the embedded server of a
coordinator on this machine) and runs the items it can: simulator runs and search evaluations
(unless --no-sim), and the runs of each testbed it owns (--testbed NAME, as the campaign file's
testbeds: names it; the scenario runs as written). It runs one item at a time, each run in a child
process killed at the item's deadline, until stopped (SIGINT, SIGTERM): an item it was running then
goes back to the queue for another worker without using up one of its attempts.

Results directories stay where they ran: in the campaign directory when the coordinator is on this
machine, else under --results DIR/<campaign>/, and the campaign's locations.json names them host:path.`,
		Example: `  lumina worker --nats nats://127.0.0.1:4222
  lumina worker --nats tls://nats.lab:4222 --nats-creds lab.creds --testbed lab1 --no-sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runItem { // the child process of a run item (runItemExec)
				if err := campaign.RunItemMain(os.Stdin, stdout); err != nil {
					return badInput("%v", err)
				}
				return nil
			}
			if qf.q.URL == "" {
				return badInput("--nats URL is required (the coordinator prints its embedded server's URL)")
			}
			if err := qf.check(); err != nil {
				return err
			}
			var caps []string
			if !noSim {
				caps = append(caps, queue.CapSim)
			}
			for _, tb := range testbeds {
				if err := queue.CheckToken("--testbed", tb); err != nil {
					return badInput("%v", err)
				}
				caps = append(caps, "testbed-"+tb)
			}
			if len(caps) == 0 {
				return badInput("--no-sim and no --testbed: this worker could run nothing")
			}
			if name == "" {
				h, _ := os.Hostname()
				name = fmt.Sprintf("%s/%d", h, os.Getpid())
			}
			qf.q.Conn.Name = "lumina worker " + name
			nc, err := queue.Connect(qf.q.URL, qf.q.Conn)
			if err != nil {
				return badInput("%v", err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return badInput("%v", err)
			}
			w := &queue.Worker{JS: js, Name: name, Caps: caps, Handlers: campaign.Handlers(campaign.WorkerOptions{ResultsRoot: results, Exec: runItemExec()}),
				AckWait: qf.q.AckWait}
			if !quiet {
				w.Log = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
				fmt.Fprintf(stderr, "worker %s: taking %v from %s\n", name, caps, qf.q.URL)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := w.Run(ctx); err != nil {
				return badInput("%v", err)
			}
			return nil
		},
	}
	qf.add(cmd.Flags(), false)
	cmd.Flags().StringSliceVar(&testbeds, "testbed", nil, "a testbed this worker owns, by the name campaign files use (repeatable)")
	cmd.Flags().BoolVar(&noSim, "no-sim", false, "take no simulator runs or search evaluations")
	cmd.Flags().StringVar(&name, "name", "", "worker name in logs (default host/pid)")
	cmd.Flags().StringVar(&results, "results", "lumina-worker-results", "where results directories of campaigns on other machines go")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no log lines")
	cmd.Flags().BoolVar(&runItem, "run-item", false, "run one item read on standard input (the child process of a worker)")
	_ = cmd.Flags().MarkHidden("run-item")
	return cmd
}

// runItemExec is how a worker runs a run item in a child process (killed when the item is given up): this
// executable as lumina worker --run-item. nil (in process) when the executable is unknown.
func runItemExec() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "worker", "--run-item"}
}
