package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Handler runs one item and returns its result document. It should return when ctx is done (the item's
// deadline); a handler that does not is abandoned and the item reported timed out.
type Handler func(ctx context.Context, it *Item) (json.RawMessage, error)

// Worker takes items it can run from the work stream, one at a time.
type Worker struct {
	JS       jetstream.JetStream
	Name     string
	Caps     []string           // capabilities: one consumer each
	Handlers map[string]Handler // by item kind
	AckWait  time.Duration      // consumer ack wait; 0: DefaultAckAge (every worker of a cluster should agree)
	// Log, when set, receives one line per item and per problem.
	Log func(format string, a ...any)
	// dieOnStop makes a stop behave as a killed process (tests): the item it was running is left unacknowledged.
	dieOnStop bool
}

func (w *Worker) logf(format string, a ...any) {
	if w.Log != nil {
		w.Log(format, a...)
	}
}

// ConsumerName is the durable consumer the workers of a capability share.
func ConsumerName(capability string) string { return "work-" + capability }

// Run takes items until ctx is done. An item it was running then goes back to the queue (giveBack) for
// another worker; an item of a worker that is killed stays unacknowledged and is delivered again after the
// ack wait.
func (w *Worker) Run(ctx context.Context) error {
	if len(w.Caps) == 0 {
		return errors.New("a worker needs at least one capability")
	}
	ackWait := w.AckWait
	if ackWait <= 0 {
		ackWait = DefaultAckAge
	}
	var cons []jetstream.Consumer
	for _, c := range w.Caps {
		if err := CheckToken("capability", c); err != nil {
			return err
		}
		var cn jetstream.Consumer
		for {
			err := Setup(ctx, w.JS, 0)
			if err == nil {
				cn, err = EnsureConsumer(ctx, w.JS, c, ackWait, false)
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			// The server may be restarting (an embedded one with its coordinator): try again.
			w.logf("worker %s: binding to %s: %v; retrying", w.Name, c, err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(500 * time.Millisecond):
			}
		}
		cons = append(cons, cn)
	}
	wait := 2 * time.Second
	if len(cons) > 1 {
		wait = 300 * time.Millisecond
	}
	var lastErr time.Time
	for i := 0; ctx.Err() == nil; i++ {
		fctx, fcancel := context.WithTimeout(ctx, wait)
		cn := cons[i%len(cons)]
		m, err := cn.Next(jetstream.FetchContext(fctx))
		fcancel()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) && !errors.Is(err, context.DeadlineExceeded) &&
				!errors.Is(err, context.Canceled) && !errors.Is(err, jetstream.ErrNoMessages) {
				if time.Since(lastErr) > 10*time.Second {
					lastErr = time.Now()
					w.logf("worker %s: fetching: %v", w.Name, err)
				}
				select { // the server is away (restarting): do not spin
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
			continue
		}
		// Heartbeats follow the consumer's ack wait as it is now (the coordinator sets it, maybe after this
		// worker bound), or this worker's if that is shorter.
		beat := ackWait
		ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
		if info, err := cn.Info(ictx); err == nil && info.Config.AckWait > 0 {
			beat = min(beat, info.Config.AckWait)
		}
		icancel()
		w.handle(ctx, m, beat)
	}
	return nil
}

func (w *Worker) handle(ctx context.Context, m jetstream.Msg, ackWait time.Duration) {
	var it Item
	if err := json.Unmarshal(m.Data(), &it); err != nil || it.Check() != nil {
		w.logf("worker %s: dropping a malformed item on %s", w.Name, m.Subject())
		_ = m.Term()
		return
	}
	var delivered uint64 = 1
	if md, err := m.Metadata(); err == nil {
		delivered = md.NumDelivered
	}
	res := Result{Campaign: it.Campaign, Key: it.Key, Worker: w.Name, Delivery: delivered}
	switch h, ok := w.Handlers[it.Kind]; {
	case it.Attempts > 0 && delivered > uint64(it.Attempts):
		res.Status = StatusLost
		res.Reason = fmt.Sprintf("given up after %d deliveries: every worker that took it stopped before finishing (killed, disconnected, or silent longer than the ack wait)", it.Attempts)
	case !ok:
		res.Status, res.Reason = StatusError, fmt.Sprintf("the worker has no handler for items of kind %q", it.Kind)
	default:
		w.logf("worker %s: %s %s (delivery %d)", w.Name, it.Campaign, it.Key, delivered)
		w.runItem(ctx, m, &it, h, ackWait, &res)
		if ctx.Err() != nil {
			if w.dieOnStop {
				return
			}
			w.giveBack(m, &it) // stopped mid-item: the item goes back to the queue, this delivery not counted
			return
		}
	}
	// The result first, acknowledged by the stream; only then the item. Killed in between, the item comes
	// back and its result is published again under the same key: still one result.
	// First result wins for good: the publish expects no result on the subject yet, so a second copy (an item
	// that came back after its first worker published) is refused by the stream and the first one stays.
	for {
		err := PublishResult(ctx, w.JS, &res)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		w.logf("worker %s: publishing the result of %s: %v; retrying", w.Name, it.Key, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
	if err := m.Ack(); err != nil {
		w.logf("worker %s: acknowledging %s: %v (it will come back; its result is kept once)", w.Name, it.Key, err)
	}
}

// PublishResult publishes an item's result unless the stream has one already: first result wins for good
// (the publish expects no message on the subject yet, so a second copy is refused by the stream). A result
// refused because one is there is no error.
func PublishResult(ctx context.Context, js jetstream.JetStream, r *Result) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, resultSubject(r.Campaign, r.Key), data, jetstream.WithExpectLastSequencePerSubject(0))
	if IsWrongLastSequence(err) {
		return nil
	}
	return err
}

// giveBack returns the item of a worker stopped gracefully (its context cancelled) to the queue: a copy is
// published (a new message, so its delivery count starts again) and the delivery acknowledged. A stopped
// worker thus never uses up one of the item's attempts; only a worker that dies or goes silent does. If the
// copy cannot be published the delivery is negatively acknowledged, so it is at least redelivered at once.
func (w *Worker) giveBack(m jetstream.Msg, it *Item) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := fmt.Sprintf("item.%s.%s.back-%s", it.Campaign, it.Key, nonce())
	if _, err := w.JS.Publish(ctx, m.Subject(), m.Data(), jetstream.WithMsgID(id)); err != nil {
		w.logf("worker %s: returning %s to the queue: %v", w.Name, it.Key, err)
		_ = m.Nak()
		return
	}
	if err := m.Ack(); err != nil {
		w.logf("worker %s: acknowledging the returned %s: %v (it may run twice; its first result is kept)", w.Name, it.Key, err)
	}
}

// handlerGrace is how long a worker waits for a handler to return after its context was cancelled.
const handlerGrace = 2 * time.Second

// runItem runs the handler under the item's deadline, telling JetStream every ackWait/3 that it is still
// in progress.
func (w *Worker) runItem(ctx context.Context, m jetstream.Msg, it *Item, h Handler, ackWait time.Duration, res *Result) {
	ictx, cancel := context.WithCancel(ctx)
	if it.Timeout > 0 {
		ictx, cancel = context.WithTimeout(ctx, it.Timeout)
	}
	defer cancel()
	type out struct {
		data json.RawMessage
		err  error
	}
	done := make(chan out, 1)
	go func() {
		d, err := h(ictx, it)
		done <- out{d, err}
	}()
	beat := time.NewTicker(ackWait / 3)
	defer beat.Stop()
	for {
		select {
		case o := <-done:
			switch {
			case o.err != nil && errors.Is(ictx.Err(), context.DeadlineExceeded):
				res.Status, res.Reason = StatusTimeout, fmt.Sprintf("ran past its deadline of %s", it.Timeout)
			case o.err != nil:
				res.Status, res.Reason = StatusError, o.err.Error()
			default:
				res.Status, res.Payload = StatusDone, o.data
			}
			return
		case <-ictx.Done():
			// A handler that honours its context (a run in a child process it kills) returns at once: wait
			// a little for it, so that nothing it started outlives the item (nor this worker, when stopping).
			select {
			case <-done:
			case <-time.After(handlerGrace):
			}
			if ctx.Err() != nil {
				return
			}
			// The deadline passed: the item timed out, whether or not the handler returned (else abandoned).
			res.Status, res.Reason = StatusTimeout, fmt.Sprintf("ran past its deadline of %s", it.Timeout)
			return
		case <-beat.C:
			_ = m.InProgress()
		}
	}
}
