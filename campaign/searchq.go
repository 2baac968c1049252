package campaign

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/search"
)

// QueueEvaluator is a search.Evaluator that sends each evaluation through the work queue: the search engine
// calls it from as many goroutines as it has proposals in a round, each call publishes one item (key: a hash
// of profile, workload and seed, so a repeated or resumed evaluation is answered from the stream) and waits
// for its result. The engine merges results by proposal index, so the search is the same whatever workers ran
// the evaluations and in what order they finished.
type QueueEvaluator struct {
	Profile string
	// Timeout is each evaluation's deadline once a worker started it; 0 (default): none, as in process.
	Timeout  time.Duration
	Attempts int
	c        *queue.Coordinator
	s        *Session
}

// OpenSearchQueue opens the queue for a search whose results directory is dir (the embedded store goes in
// dir/nats) and returns its evaluator; Close it when the search is done.
func OpenSearchQueue(ctx context.Context, dir, profile string, q Queue) (*QueueEvaluator, error) {
	s, err := Open(dir, q)
	if err != nil {
		return nil, err
	}
	id, err := ID("search", dir)
	if err != nil {
		s.Close()
		return nil, err
	}
	c, err := queue.NewCoordinator(ctx, s.JS, id, q.Replicas)
	if err != nil {
		s.Close()
		return nil, err
	}
	if _, err := queue.EnsureConsumer(ctx, s.JS, queue.CapSim, q.AckWait, true); err != nil {
		c.Close()
		s.Close()
		return nil, err
	}
	// A failed evaluation (error, timeout, lost) is not an answer to keep: a resumed search asks again.
	c.Retry = true
	return &QueueEvaluator{Profile: profile, Attempts: DefaultAttempts, c: c, s: s}, nil
}

// URL is the queue's server.
func (e *QueueEvaluator) URL() string { return e.s.URL }

// Close stops reading results, the local workers and the embedded server.
func (e *QueueEvaluator) Close() {
	e.c.Close()
	e.s.Close()
}

// Evaluate implements search.Evaluator.
func (e *QueueEvaluator) Evaluate(ctx context.Context, w search.Workload, seed uint64) (search.Metrics, error) {
	pl, err := json.Marshal(evalPayload{Profile: e.Profile, Workload: w, Seed: seed})
	if err != nil {
		return search.Metrics{}, err
	}
	h := fnv.New64a()
	h.Write(pl)
	key := fmt.Sprintf("e%016x", h.Sum64())
	if _, err := e.c.Submit(ctx, queue.Item{Key: key, Kind: KindEval, Cap: queue.CapSim, Timeout: e.Timeout,
		Attempts: e.Attempts, Payload: pl}); err != nil {
		return search.Metrics{}, err
	}
	r, err := e.c.Wait(ctx, key)
	if err != nil {
		return search.Metrics{}, err
	}
	if r.Status != queue.StatusDone {
		return search.Metrics{}, fmt.Errorf("evaluation %s: %s: %s", key, r.Status, r.Reason)
	}
	var m search.Metrics
	if err := json.Unmarshal(r.Payload, &m); err != nil {
		return search.Metrics{}, fmt.Errorf("evaluation %s: malformed result: %w", key, err)
	}
	return m, nil
}
