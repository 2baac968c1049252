// Command campaign-bench measures the campaign work queue on this machine (embedded NATS JetStream server, file
// store in a temporary directory):
//
//  1. campaign throughput: a suite of real simulator runs (examples/listing2.yaml x NIC profiles x seeds) with
//     1, 2 and 4 local workers, items per second from the first publish to the last result;
//
//  2. the coordinator alone: -noop items that do nothing, taken by -noopworkers workers, items per second it
//     publishes (Submit: result and queue look-ups, publish with de-duplication id) and hands out and collects
//     end to end. That rate over one item's run time says how many workers one coordinator can feed.
//
//     go run ./bench/campaign                      # from the repository root
//     go run ./bench/campaign -seeds 4 -noop 5000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lumina-go/lumina/campaign"
	"github.com/lumina-go/lumina/queue"
)

func main() {
	seeds := flag.Int("seeds", 4, "seeds per profile in the suite (items = 4 profiles x seeds)")
	workers := flag.String("workers", "1,2,4", "local worker counts to measure")
	noop := flag.Int("noop", 5000, "no-op items for the coordinator measurement")
	noopWorkers := flag.Int("noopworkers", 4, "no-op workers")
	reps := flag.Int("reps", 3, "repetitions of each worker count, interleaved (the median is printed)")
	flag.Parse()
	if err := run(*seeds, *workers, *noop, *noopWorkers, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "campaign-bench:", err)
		os.Exit(1)
	}
}

func run(seeds int, workerList string, noop, noopWorkers, reps int) error {
	tmp, err := os.MkdirTemp("", "campaign-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	sc, err := filepath.Abs("examples/listing2.yaml")
	if err != nil {
		return err
	}
	var ss []string
	for i := 1; i <= seeds; i++ {
		ss = append(ss, fmt.Sprint(i))
	}
	file := filepath.Join(tmp, "suite.yaml")
	spec := fmt.Sprintf("name: bench\nscenarios: [%s]\nprofiles: [cx4lx, cx5, cx6dx, e810]\nseeds: [%s]\n", sc, strings.Join(ss, ", "))
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		return err
	}
	plan, err := campaign.Load(file)
	if err != nil {
		return err
	}
	fmt.Printf("campaign throughput: %d items (listing2.yaml x 4 profiles x %d seeds), embedded server, median of %d interleaved runs\n",
		len(plan.Items), seeds, reps)
	var counts []int
	for _, ws := range strings.Split(workerList, ",") {
		var n int
		if _, err := fmt.Sscan(ws, &n); err != nil || n < 1 {
			return fmt.Errorf("-workers: %q", ws)
		}
		counts = append(counts, n)
	}
	walls := make([][]time.Duration, len(counts))
	for r := range reps {
		for k, n := range counts {
			dir := filepath.Join(tmp, fmt.Sprintf("w%d-%d", n, r))
			start := time.Now()
			sum, err := campaign.Run(context.Background(), plan, campaign.RunOptions{Dir: dir, Queue: campaign.Queue{Workers: n, AckWait: 30 * time.Second}})
			if err != nil {
				return err
			}
			walls[k] = append(walls[k], time.Since(start))
			if len(sum.Items) != len(plan.Items) || sum.Totals["error"]+sum.Totals["lost"]+sum.Totals["timeout"] > 0 {
				return fmt.Errorf("%d workers: %v", n, sum.Totals)
			}
			_ = os.RemoveAll(dir)
		}
	}
	fmt.Printf("%8s %10s %10s %10s   %s\n", "workers", "wall", "items/s", "speedup", "all runs")
	var base float64
	for k, n := range counts {
		ws := slices.Clone(walls[k])
		slices.Sort(ws)
		wall := ws[len(ws)/2]
		rate := float64(len(plan.Items)) / wall.Seconds()
		if base == 0 {
			base = rate
		}
		fmt.Printf("%8d %10s %10.1f %9.2fx   %v\n", n, wall.Round(time.Millisecond), rate, rate/base, walls[k])
	}
	return coordinatorAlone(filepath.Join(tmp, "noop"), noop, noopWorkers)
}

func coordinatorAlone(dir string, n, workers int) error {
	s, err := campaign.Open(dir, campaign.Queue{Workers: 0})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	c, err := queue.NewCoordinator(ctx, s.JS, "noop-bench", 1)
	if err != nil {
		return err
	}
	defer c.Close()
	items := make([]queue.Item, n)
	for i := range items {
		items[i] = queue.Item{Key: fmt.Sprintf("n%06d", i), Kind: campaign.KindNoop, Cap: queue.CapSim, Attempts: 3, Payload: json.RawMessage(`{}`)}
	}
	// Publishing alone, no worker yet.
	start := time.Now()
	for i := range items {
		if _, err := c.Submit(ctx, items[i]); err != nil {
			return err
		}
	}
	pub := time.Since(start)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range workers {
		w := &queue.Worker{JS: s.JS, Name: fmt.Sprint("noop-", i), Caps: []string{queue.CapSim}, Handlers: campaign.Handlers(campaign.WorkerOptions{})}
		go func() { _ = w.Run(wctx) }()
	}
	start = time.Now()
	rs, err := c.RunAll(ctx, items, nil)
	if err != nil {
		return err
	}
	drain := time.Since(start)
	for _, r := range rs {
		if r.Status != queue.StatusDone {
			return fmt.Errorf("no-op item %s: %s %s", r.Key, r.Status, r.Reason)
		}
	}
	fmt.Printf("\ncoordinator alone: %d no-op items, %d no-op workers in process, embedded server\n", n, workers)
	fmt.Printf("  publish (Submit)          %8.0f items/s  (%s)\n", float64(n)/pub.Seconds(), pub.Round(time.Millisecond))
	fmt.Printf("  hand out + collect        %8.0f items/s  (%s)\n", float64(n)/drain.Seconds(), drain.Round(time.Millisecond))
	fmt.Printf("  end to end                %8.0f items/s\n", float64(n)/(pub+drain).Seconds())
	return nil
}
