package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func startQueue(t *testing.T) (*Embedded, jetstream.JetStream) {
	t.Helper()
	emb, err := StartEmbedded(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := Connect(emb.URL(), ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return emb, js
}

func TestWorkerRunsItems(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewCoordinator(ctx, js, "t1", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := &Worker{JS: js, Name: "w", Caps: []string{CapSim}, AckWait: 2 * time.Second, Log: t.Logf,
		Handlers: map[string]Handler{"echo": func(ctx context.Context, it *Item) (json.RawMessage, error) { return it.Payload, nil }}}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go w.Run(wctx)
	var items []Item
	for i := range 5 {
		items = append(items, Item{Key: fmt.Sprintf("k%d", i), Kind: "echo", Cap: CapSim, Payload: json.RawMessage(fmt.Sprint(i))})
	}
	rs, err := c.RunAll(ctx, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Status != StatusDone || string(r.Payload) != fmt.Sprint(i) {
			t.Errorf("item %d: %+v", i, r)
		}
	}
}

func newCoord(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) *Coordinator {
	t.Helper()
	c, err := NewCoordinator(ctx, js, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A worker stopped mid-item leaves it unacknowledged: another worker gets it after the ack wait, and it is
// one result.
func TestKilledWorkerItemRedelivered(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "redeliver")
	started := make(chan struct{}, 1)
	block := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	w1ctx, kill := context.WithCancel(ctx)
	w1 := &Worker{JS: js, Name: "w1", Caps: []string{CapSim}, AckWait: time.Second, Handlers: map[string]Handler{"x": block}, dieOnStop: true}
	go w1.Run(w1ctx)
	if _, err := c.Submit(ctx, Item{Key: "a", Kind: "x", Cap: CapSim, Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	<-started
	kill() // w1 dies mid-item (dieOnStop: as a killed process, it does not give the item back)
	w2 := &Worker{JS: js, Name: "w2", Caps: []string{CapSim}, AckWait: time.Second,
		Handlers: map[string]Handler{"x": func(ctx context.Context, it *Item) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil }}}
	go w2.Run(ctx)
	r, err := c.Wait(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusDone || r.Worker != "w2" || r.Delivery != 2 || string(r.Payload) != `"ok"` {
		t.Fatalf("result %+v: want done by w2 on the second delivery", r)
	}
}

// A long item keeps its worker with heartbeats: it runs three ack waits and is delivered once.
func TestHeartbeatsKeepLongItem(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "long")
	var mu sync.Mutex
	runs := 0
	slow := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		time.Sleep(3500 * time.Millisecond)
		return json.RawMessage(`1`), nil
	})
	for _, n := range []string{"w1", "w2"} {
		w := &Worker{JS: js, Name: n, Caps: []string{CapSim}, AckWait: time.Second, Handlers: map[string]Handler{"x": slow}}
		go w.Run(ctx)
	}
	if _, err := c.Submit(ctx, Item{Key: "a", Kind: "x", Cap: CapSim, Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if r.Status != StatusDone || r.Delivery != 1 || runs != 1 {
		t.Fatalf("result %+v after %d runs: want done on the first delivery, run once", r, runs)
	}
}

// An item whose workers keep dying is given up after its attempts, with the reason; one past its deadline
// times out with the reason.
func TestLostAndTimedOutItems(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "stuck")
	started := make(chan struct{}, 10)
	block := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if _, err := c.Submit(ctx, Item{Key: "dies", Kind: "x", Cap: CapSim, Attempts: 2}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // two workers die mid-item
		wctx, kill := context.WithCancel(ctx)
		go (&Worker{JS: js, Name: "doomed", Caps: []string{CapSim}, AckWait: time.Second, Handlers: map[string]Handler{"x": block}, dieOnStop: true}).Run(wctx)
		<-started
		kill()
	}
	hang := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) { select {} })
	go (&Worker{JS: js, Name: "last", Caps: []string{CapSim}, AckWait: time.Second, Handlers: map[string]Handler{"x": hang}}).Run(ctx)
	r, err := c.Wait(ctx, "dies")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusLost || !strings.Contains(r.Reason, "given up after 2 deliveries") {
		t.Fatalf("result %+v: want lost after 2 deliveries", r)
	}
	// The hanging handler ignores its context: the worker abandons it at the deadline.
	if _, err := c.Submit(ctx, Item{Key: "hangs", Kind: "x", Cap: CapSim, Attempts: 5, Timeout: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r, err = c.Wait(ctx, "hangs")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusTimeout || r.Reason != "ran past its deadline of 1.5s" || r.Delivery != 1 {
		t.Fatalf("result %+v: want a timeout on the first delivery", r)
	}
}

// Workers take only the items of their capabilities.
func TestWorkersTakeOnlyTheirCapabilities(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "caps")
	name := func(n string) Handler {
		return func(ctx context.Context, it *Item) (json.RawMessage, error) { return json.Marshal(n) }
	}
	go (&Worker{JS: js, Name: "sim", Caps: []string{CapSim}, AckWait: time.Second, Handlers: map[string]Handler{"x": name("sim")}}).Run(ctx)
	go (&Worker{JS: js, Name: "lab", Caps: []string{"testbed-lab1"}, AckWait: time.Second, Handlers: map[string]Handler{"x": name("lab")}}).Run(ctx)
	var items []Item
	for i := range 6 {
		cp := CapSim
		if i%2 == 1 {
			cp = "testbed-lab1"
		}
		items = append(items, Item{Key: fmt.Sprint("k", i), Kind: "x", Cap: cp})
	}
	rs, err := c.RunAll(ctx, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		want := `"sim"`
		if i%2 == 1 {
			want = `"lab"`
		}
		if string(r.Payload) != want {
			t.Errorf("item %d (%s) ran on %s", i, items[i].Cap, r.Payload)
		}
	}
}

// A new coordinator of the same campaign takes the results already in the stream and does not publish their
// items again.
func TestCoordinatorResumesFromStream(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	runs := map[string]int{}
	h := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) {
		mu.Lock()
		runs[it.Key]++
		mu.Unlock()
		return it.Payload, nil
	})
	wctx, stopW := context.WithCancel(ctx)
	go (&Worker{JS: js, Name: "w", Caps: []string{CapSim}, AckWait: time.Second, Handlers: map[string]Handler{"x": h}}).Run(wctx)
	c1, err := NewCoordinator(ctx, js, "resume", 1)
	if err != nil {
		t.Fatal(err)
	}
	var items []Item
	for i := range 4 {
		items = append(items, Item{Key: fmt.Sprint("k", i), Kind: "x", Cap: CapSim, Payload: json.RawMessage(fmt.Sprint(i))})
	}
	if _, err := c1.RunAll(ctx, items[:2], nil); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	stopW()
	// Item 2 is queued by the first coordinator and still in the stream when the second starts.
	c1b := newCoord(t, ctx, js, "resume")
	if fresh, err := c1b.Submit(ctx, items[2]); err != nil || !fresh {
		t.Fatalf("submit: fresh %v, %v", fresh, err)
	}
	c2 := newCoord(t, ctx, js, "resume")
	go (&Worker{JS: js, Name: "w2", Caps: []string{CapSim}, AckWait: time.Second, Handlers: map[string]Handler{"x": h}}).Run(ctx)
	published := 0
	for _, it := range items {
		fresh, err := c2.Submit(ctx, it)
		if err != nil {
			t.Fatal(err)
		}
		if fresh {
			published++
		}
	}
	if published != 1 {
		t.Errorf("the resumed coordinator published %d items; want 1 (two have results, one is queued)", published)
	}
	rs, err := c2.RunAll(ctx, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, r := range rs {
		if string(r.Payload) != fmt.Sprint(i) || runs[items[i].Key] != 1 {
			t.Errorf("item %d: payload %s, ran %d times; want %d, once", i, r.Payload, runs[items[i].Key], i)
		}
	}
}

func TestEmbeddedListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.1.2.3:4222", "nohost"} {
		if _, err := StartEmbedded(t.TempDir(), addr); err == nil {
			t.Errorf("StartEmbedded(%q) accepted a non-loopback address", addr)
		}
	}
}

func TestItemCheckNamesTheToken(t *testing.T) {
	err := (&Item{Campaign: "c", Key: "a.b", Kind: "x", Cap: CapSim}).Check()
	if err == nil || !strings.Contains(err.Error(), `item key "a.b"`) {
		t.Fatalf("got %v", err)
	}
}

func TestEmbeddedAddressInUse(t *testing.T) {
	emb, _ := startQueue(t)
	addr := strings.TrimPrefix(emb.URL(), "nats://")
	start := time.Now()
	_, err := StartEmbedded(t.TempDir(), addr)
	if err == nil || !strings.Contains(err.Error(), "address already in use") || time.Since(start) > 5*time.Second {
		t.Fatalf("got %v after %s; want an immediate address-in-use error", err, time.Since(start))
	}
}

// A worker stopped gracefully (its context cancelled) mid-item gives the item back without using up an
// attempt: with attempts 1 the next worker still runs it, on a first delivery.
func TestStoppedWorkerKeepsTheAttempt(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "stopped")
	started := make(chan struct{}, 1)
	block := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	w1ctx, stop := context.WithCancel(ctx)
	done1 := make(chan struct{})
	go func() {
		defer close(done1)
		(&Worker{JS: js, Name: "w1", Caps: []string{CapSim}, AckWait: 5 * time.Second, Handlers: map[string]Handler{"x": block}}).Run(w1ctx)
	}()
	if _, err := c.Submit(ctx, Item{Key: "a", Kind: "x", Cap: CapSim, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()
	<-done1
	go (&Worker{JS: js, Name: "w2", Caps: []string{CapSim}, AckWait: 5 * time.Second,
		Handlers: map[string]Handler{"x": func(ctx context.Context, it *Item) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil }}}).Run(ctx)
	r, err := c.Wait(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusDone || r.Worker != "w2" || r.Delivery != 1 {
		t.Fatalf("result %+v: want done by w2 on a first delivery (the stopped worker used no attempt)", r)
	}
}

// After a purge, the same items published again within the duplicate window are not dropped as duplicates.
func TestRepublishAfterPurge(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go (&Worker{JS: js, Name: "w", Caps: []string{CapSim}, AckWait: 5 * time.Second,
		Handlers: map[string]Handler{"x": func(ctx context.Context, it *Item) (json.RawMessage, error) { return it.Payload, nil }}}).Run(ctx)
	items := []Item{{Key: "a", Kind: "x", Cap: CapSim, Payload: json.RawMessage(`1`)}}
	c1 := newCoord(t, ctx, js, "again")
	if _, err := c1.RunAll(ctx, items, nil); err != nil {
		t.Fatal(err)
	}
	if err := c1.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	c2 := newCoord(t, ctx, js, "again")
	if fresh, err := c2.Submit(ctx, items[0]); err != nil || !fresh {
		t.Fatalf("submit after purge: fresh %v, %v", fresh, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if r, err := c2.Wait(wctx, "a"); err != nil || r.Status != StatusDone {
		t.Fatalf("after a purge the item got %+v, %v; want it run again", r, err)
	}
}

// The first result of an item stays for good: a second one is refused by the stream, and a coordinator
// reads the first.
func TestFirstResultWins(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Setup(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"first", "second"} {
		if err := PublishResult(ctx, js, &Result{Campaign: "fw", Key: "a", Status: StatusDone, Worker: w, Payload: json.RawMessage(`"` + w + `"`)}); err != nil {
			t.Fatal(err)
		}
	}
	c := newCoord(t, ctx, js, "fw")
	r, err := c.Wait(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Worker != "first" {
		t.Fatalf("result by %s; want the first one", r.Worker)
	}
}

// Retry publishes again the items whose result failed; done results are kept.
func TestRetryResubmitsFailures(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Setup(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Result{{Campaign: "rt", Key: "bad", Status: StatusLost, Reason: "given up"}, {Campaign: "rt", Key: "good", Status: StatusDone, Payload: json.RawMessage(`"old"`)}} {
		if err := PublishResult(ctx, js, &r); err != nil {
			t.Fatal(err)
		}
	}
	go (&Worker{JS: js, Name: "w", Caps: []string{CapSim}, AckWait: 5 * time.Second,
		Handlers: map[string]Handler{"x": func(ctx context.Context, it *Item) (json.RawMessage, error) { return json.RawMessage(`"new"`), nil }}}).Run(ctx)
	c := newCoord(t, ctx, js, "rt")
	c.Retry = true
	rs, err := c.RunAll(ctx, []Item{{Key: "bad", Kind: "x", Cap: CapSim}, {Key: "good", Kind: "x", Cap: CapSim}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Status != StatusDone || string(rs[0].Payload) != `"new"` || string(rs[1].Payload) != `"old"` {
		t.Fatalf("results %+v %+v: want the lost item run again and the done one kept", rs[0], rs[1])
	}
}

// Items of the campaign that are no longer in its plan are removed from the queue; the others stay.
func TestPurgeOthers(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "edit")
	other := newCoord(t, ctx, js, "other")
	for _, k := range []string{"keep", "gone"} {
		if _, err := c.Submit(ctx, Item{Key: k, Kind: "x", Cap: CapSim}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Submit(ctx, Item{Key: "gone", Kind: "x", Cap: CapSim}); err != nil {
		t.Fatal(err)
	}
	if err := c.PurgeOthers(ctx, map[string]bool{"keep": true}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, WorkStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"lumina.work.sim.edit.keep": 1, "lumina.work.sim.other.gone": 1}
	if fmt.Sprint(info.State.Subjects) != fmt.Sprint(want) {
		t.Fatalf("queued %v; want %v", info.State.Subjects, want)
	}
}

// A worker binds to the consumer as the coordinator configured it: its own --ack-wait does not rewrite it.
func TestWorkerKeepsTheConsumersAckWait(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Setup(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureConsumer(ctx, js, CapSim, 7*time.Second, true); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Worker{JS: js, Name: "w", Caps: []string{CapSim}, AckWait: time.Second}).Run(wctx)
	}()
	time.Sleep(500 * time.Millisecond)
	stop()
	<-done
	cn, err := js.Consumer(ctx, WorkStream, ConsumerName(CapSim))
	if err != nil {
		t.Fatal(err)
	}
	if aw := cn.CachedInfo().Config.AckWait; aw != 7*time.Second {
		t.Fatalf("consumer ack wait %s after a worker with 1s bound; want the coordinator's 7s", aw)
	}
}

// Workers bound before the coordinator set a shorter ack wait send their heartbeats at the consumer's pace:
// a long item is still delivered once.
func TestHeartbeatsFollowTheConsumersAckWait(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "pace")
	var mu sync.Mutex
	runs := 0
	slow := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		time.Sleep(3500 * time.Millisecond)
		return json.RawMessage(`1`), nil
	})
	for _, n := range []string{"w1", "w2"} {
		go (&Worker{JS: js, Name: n, Caps: []string{CapSim}, AckWait: 30 * time.Second, Handlers: map[string]Handler{"x": slow}}).Run(ctx)
	}
	time.Sleep(500 * time.Millisecond) // bound, with the consumer at 30s
	if _, err := EnsureConsumer(ctx, js, CapSim, time.Second, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, Item{Key: "a", Kind: "x", Cap: CapSim, Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if r.Delivery != 1 || runs != 1 {
		t.Fatalf("result %+v after %d runs: want one delivery, one run", r, runs)
	}
}

// The reason of an item no handler takes does not depend on which worker took it (it is merged).
func TestNoHandlerReasonNamesNoWorker(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "nohandler")
	go (&Worker{JS: js, Name: "host-a/123", Caps: []string{CapSim}, AckWait: 5 * time.Second, Handlers: map[string]Handler{}}).Run(ctx)
	rs, err := c.RunAll(ctx, []Item{{Key: "a", Kind: "nope", Cap: CapSim}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Status != StatusError || rs[0].Reason != `the worker has no handler for items of kind "nope"` {
		t.Fatalf("result %+v", rs[0])
	}
}

// Purge forgets the results the coordinator had read: the items run again.
func TestPurgeForgetsResultsRead(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Setup(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	if err := PublishResult(ctx, js, &Result{Campaign: "pf", Key: "a", Status: StatusDone, Payload: json.RawMessage(`"old"`)}); err != nil {
		t.Fatal(err)
	}
	c := newCoord(t, ctx, js, "pf")
	if r, err := c.Wait(ctx, "a"); err != nil || string(r.Payload) != `"old"` {
		t.Fatalf("%+v %v", r, err)
	}
	if err := c.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	go (&Worker{JS: js, Name: "w", Caps: []string{CapSim}, AckWait: 5 * time.Second,
		Handlers: map[string]Handler{"x": func(ctx context.Context, it *Item) (json.RawMessage, error) { return json.RawMessage(`"new"`), nil }}}).Run(ctx)
	rs, err := c.RunAll(ctx, []Item{{Key: "a", Kind: "x", Cap: CapSim}}, nil)
	if err != nil || string(rs[0].Payload) != `"new"` {
		t.Fatalf("after a purge: %+v, %v; want the item run again", rs[0], err)
	}
}

// A stopping worker waits for a handler that honours its context to finish (a run in a child process is
// killed before the worker exits, so it never writes after its item went back to the queue).
func TestStopWaitsForTheHandler(t *testing.T) {
	_, js := startQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCoord(t, ctx, js, "grace")
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	cleaned := false
	h := Handler(func(ctx context.Context, it *Item) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond) // killing and reaping a child
		mu.Lock()
		cleaned = true
		mu.Unlock()
		return nil, ctx.Err()
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Worker{JS: js, Name: "w", Caps: []string{CapSim}, AckWait: 5 * time.Second, Handlers: map[string]Handler{"x": h}}).Run(wctx)
	}()
	if _, err := c.Submit(ctx, Item{Key: "a", Kind: "x", Cap: CapSim}); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if !cleaned {
		t.Fatal("the worker returned before its handler finished")
	}
}
