package queue

import (
	"context"
	"encoding/json"
	"fmt"
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
