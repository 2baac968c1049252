package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Coordinator publishes one campaign's items and collects their results, keyed by item: whatever order and
// however many times results arrive, each key has one result, the stream's (workers publish a result only
// onto an empty subject, so the first result of an item is the only one).
type Coordinator struct {
	js       jetstream.JetStream
	campaign string
	work     jetstream.Stream
	res      jetstream.Stream
	cc       jetstream.ConsumeContext

	mu      sync.Mutex
	results map[string]*Result
	waiters map[string][]chan *Result
	notify  chan struct{}
	nonce   string            // distinguishes this coordinator's item message IDs from an earlier run's
	retried map[string]uint64 // key -> stream sequence of a failed result set aside by Retry
	// purgedUpTo is the results stream's last sequence when Purge ran: results up to it are gone.
	purgedUpTo uint64
	// Retry, when set before the first Submit, publishes again the item of a key whose result in the stream
	// is not done (error, timeout, lost): the failed result is removed and not merged.
	Retry bool
	// OnResult, when set before the first Submit, is called once per key as its result arrives.
	OnResult func(*Result)
}

// NewCoordinator sets up the streams and starts reading the campaign's results from the beginning of the
// stream: those of an earlier coordinator of the same campaign count (a stopped campaign resumes).
func NewCoordinator(ctx context.Context, js jetstream.JetStream, campaign string, replicas int) (*Coordinator, error) {
	if err := CheckToken("campaign", campaign); err != nil {
		return nil, err
	}
	if err := Setup(ctx, js, replicas); err != nil {
		return nil, err
	}
	c := &Coordinator{js: js, campaign: campaign, results: map[string]*Result{}, waiters: map[string][]chan *Result{},
		notify: make(chan struct{}, 1), nonce: nonce(), retried: map[string]uint64{}}
	var err error
	if c.work, err = js.Stream(ctx, WorkStream); err != nil {
		return nil, err
	}
	if c.res, err = js.Stream(ctx, ResultStream); err != nil {
		return nil, err
	}
	cons, err := c.res.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{resultPrefix + campaign + ".>"}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	c.cc, err = cons.Consume(func(m jetstream.Msg) {
		var r Result
		if json.Unmarshal(m.Data(), &r) != nil || r.Campaign != campaign {
			return // not ours to judge: a result that does not parse is never merged
		}
		var seq uint64
		if md, err := m.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
		c.deliver(&r, seq)
	})
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	return c, nil
}

func (c *Coordinator) deliver(r *Result, seq uint64) {
	c.mu.Lock()
	if seq != 0 && seq <= c.purgedUpTo {
		c.mu.Unlock()
		return // read before a Purge
	}
	if old, ok := c.retried[r.Key]; ok && seq <= old {
		c.mu.Unlock()
		return // the failed result Retry set aside
	}
	if _, dup := c.results[r.Key]; dup {
		c.mu.Unlock()
		return
	}
	c.results[r.Key] = r
	ws := c.waiters[r.Key]
	delete(c.waiters, r.Key)
	on := c.OnResult
	c.mu.Unlock()
	for _, w := range ws {
		w <- r
	}
	select {
	case c.notify <- struct{}{}:
	default:
	}
	if on != nil {
		on(r)
	}
}

// Close stops reading results.
func (c *Coordinator) Close() { c.cc.Stop() }

// Submit publishes the item unless its result is already in the stream or the item itself is still queued
// (a resumed coordinator). fresh says whether it was published now.
func (c *Coordinator) Submit(ctx context.Context, it Item) (fresh bool, err error) {
	it.Campaign = c.campaign
	if err := it.Check(); err != nil {
		return false, err
	}
	c.mu.Lock()
	r, have := c.results[it.Key]
	c.mu.Unlock()
	if have && !(c.Retry && r.Status != StatusDone) {
		return false, nil
	}
	if m, err := c.res.GetLastMsgForSubject(ctx, resultSubject(c.campaign, it.Key)); err == nil {
		var r Result
		if json.Unmarshal(m.Data, &r) == nil && r.Campaign == c.campaign {
			if !c.Retry || r.Status == StatusDone {
				c.deliver(&r, m.Sequence)
				return false, nil
			}
			// Retry: set the failed result aside and publish the item again.
			c.mu.Lock()
			c.retried[it.Key] = m.Sequence
			delete(c.results, it.Key)
			c.mu.Unlock()
			if err := c.res.Purge(ctx, jetstream.WithPurgeSubject(resultSubject(c.campaign, it.Key))); err != nil {
				return false, fmt.Errorf("removing the failed result of %s: %w", it.Key, err)
			}
		}
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, fmt.Errorf("looking up the result of %s: %w", it.Key, err)
	}
	if _, err := c.work.GetLastMsgForSubject(ctx, workSubject(&it)); err == nil {
		return false, nil // still queued (or running) from an earlier coordinator
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, fmt.Errorf("looking up item %s: %w", it.Key, err)
	}
	data, err := json.Marshal(&it)
	if err != nil {
		return false, err
	}
	if _, err := c.js.Publish(ctx, workSubject(&it), data, jetstream.WithMsgID("item."+c.campaign+"."+it.Key+"."+c.nonce)); err != nil {
		return false, fmt.Errorf("publishing item %s: %w", it.Key, err)
	}
	return true, nil
}

// Wait returns the result of key once it arrived.
func (c *Coordinator) Wait(ctx context.Context, key string) (*Result, error) {
	c.mu.Lock()
	if r, ok := c.results[key]; ok {
		c.mu.Unlock()
		return r, nil
	}
	ch := make(chan *Result, 1)
	c.waiters[key] = append(c.waiters[key], ch)
	c.mu.Unlock()
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Result returns the result of key if it arrived.
func (c *Coordinator) Result(key string) (*Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.results[key]
	return r, ok
}

// RunAll submits every item and waits for all their results, returned in the items' order. progress, when set,
// is called with the number of results so far, at most every interval.
func (c *Coordinator) RunAll(ctx context.Context, items []Item, progress func(done, total int)) ([]*Result, error) {
	seen := map[string]bool{}
	for i := range items {
		if seen[items[i].Key] {
			return nil, fmt.Errorf("two items with the key %s", items[i].Key)
		}
		seen[items[i].Key] = true
		if _, err := c.Submit(ctx, items[i]); err != nil {
			return nil, err
		}
	}
	out := make([]*Result, len(items))
	pending := make([]int, len(items))
	for i := range pending {
		pending[i] = i
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		left := pending[:0]
		for _, i := range pending {
			if out[i], _ = c.Result(items[i].Key); out[i] == nil {
				left = append(left, i)
			}
		}
		pending = left
		if progress != nil {
			progress(len(items)-len(pending), len(items))
		}
		if len(pending) == 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-tick.C:
		case <-c.notify:
		}
	}
}

// Purge removes the campaign's items and results from the streams (a campaign started afresh). Results this
// coordinator read before are forgotten, and any copy of them still on its way is ignored.
func (c *Coordinator) Purge(ctx context.Context) error {
	info, err := c.res.Info(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.purgedUpTo = info.State.LastSeq
	c.results = map[string]*Result{}
	c.mu.Unlock()
	if err := c.res.Purge(ctx, jetstream.WithPurgeSubject(resultPrefix+c.campaign+".>")); err != nil {
		return err
	}
	return c.work.Purge(ctx, jetstream.WithPurgeSubject(workPrefix+"*."+c.campaign+".>"))
}

// PurgeOthers removes the campaign's queued items whose key is not in keep (items of an earlier version of
// the campaign), so that they do not run.
func (c *Coordinator) PurgeOthers(ctx context.Context, keep map[string]bool) error {
	filter := workPrefix + "*." + c.campaign + ".>"
	info, err := c.work.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return fmt.Errorf("listing queued items: %w", err)
	}
	for subj := range info.State.Subjects {
		if keep[subj[strings.LastIndexByte(subj, '.')+1:]] {
			continue
		}
		if err := c.work.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return fmt.Errorf("removing queued item %s: %w", subj, err)
		}
	}
	return nil
}

// CampaignID makes a campaign token from a name and a distinguishing string (e.g. the directory).
func CampaignID(name string, h uint64) string {
	var b strings.Builder
	for _, r := range name {
		if r < 128 && tokenRE.MatchString(string(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[:40]
	}
	return fmt.Sprintf("%s-%012x", s, h&0xffffffffffff)
}
