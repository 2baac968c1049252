package search

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
)

func TestSimEvaluatorRegistered(t *testing.T) {
	ps := Profiles()
	for _, want := range []string{"cx6vpi-200g", "p2100g"} {
		if !slices.Contains(ps, want) {
			t.Errorf("profiles with an evaluator %v lack %s", ps, want)
		}
	}
	if slices.Contains(ps, "cx5") {
		t.Errorf("cx5 has no micro section but got an evaluator: %v", ps)
	}
	if _, err := NewSimEvaluator("cx5"); err == nil || !strings.Contains(err.Error(), "no micro section") {
		t.Errorf("NewSimEvaluator(cx5) error %v, want a missing micro section", err)
	}
}

// TestSimEvaluatorMonitor: the ordinary workload is normal, Collie's anomaly #1 trigger is a pause anomaly and
// #7's a low-throughput one, as the monitor judges the evaluator's metrics.
func TestSimEvaluatorMonitor(t *testing.T) {
	ev, err := EvaluatorFor("cx6vpi-200g")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mon := DefaultMonitor()
	ord, err := ev.Evaluate(ctx, OrdinaryWorkload(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if s := mon.Check(ord); s != None || ord.TxGbps < 190 || ord.LimitGbps != 200 {
		t.Errorf("ordinary workload: %s, %+v: want normal at ~200 Gb/s", s, ord)
	}
	a1 := Workload{Workload: scenario.Workload{QPType: "ud", Opcode: "send", NumQPs: 1, MTU: 2048, WQEBatch: 64, SGE: 1,
		WQDepth: 256, NumMRs: 1, MRSize: 65536, MsgSizes: []int{2048}, Direction: "uni", Memory: "local"}}
	m, err := ev.Evaluate(ctx, a1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s := mon.Check(m); s != Pause || m.Counters["rx_wqe_cache_miss"] == 0 || m.Counters["tx_prio3_pause_duration"] < 1000 {
		t.Errorf("anomaly #1: %s, pause %.4f, counters %v: want pause with receive-WQE misses", s, m.PauseRatio, m.Counters)
	}
	a7 := Workload{Workload: scenario.Workload{QPType: "rc", Opcode: "write", NumQPs: 480, MTU: 1024, WQEBatch: 1, SGE: 1,
		WQDepth: 16, NumMRs: 1, MRSize: 65536, MsgSizes: []int{512}, Direction: "uni", Memory: "local"}}
	m, err = ev.Evaluate(ctx, a7, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s := mon.Check(m); s != LowThroughput || m.Counters["qpc_cache_miss"] == 0 {
		t.Errorf("anomaly #7: %s, %.1f Gb/s, counters %v: want low throughput with QP-context misses", s, m.TxGbps, m.Counters)
	}
}

func TestSimEvaluatorErrors(t *testing.T) {
	ev, err := NewSimEvaluator("p2100g")
	if err != nil {
		t.Fatal(err)
	}
	w := OrdinaryWorkload()
	w.Events = []Event{{QP: 1, PSN: 3, Iter: 1, Type: "drop"}}
	if _, err := ev.Evaluate(context.Background(), w, 1); err == nil || !strings.Contains(err.Error(), "cannot inject events") {
		t.Errorf("events: error %v", err)
	}
	w = OrdinaryWorkload()
	w.MTU = 1500
	if _, err := ev.Evaluate(context.Background(), w, 1); err == nil || !strings.Contains(err.Error(), "mtu 1500") {
		t.Errorf("bad mtu: error %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ev.Evaluate(ctx, OrdinaryWorkload(), 1); err == nil {
		t.Error("cancelled context: no error")
	}
}

// TestSimEvaluatorProfile: an evaluator built from a profile changed in memory runs that profile (a QP-context
// cache too small for the workload's QPs shows misses the loaded profile does not), and a profile without a
// micro section, or none, is refused.
func TestSimEvaluatorProfile(t *testing.T) {
	p, err := rnic.LoadProfile("cx6vpi-200g")
	if err != nil {
		t.Fatal(err)
	}
	w := OrdinaryWorkload()
	w.NumQPs = 64
	misses := func(p *rnic.Profile) float64 {
		ev, err := NewSimEvaluatorProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ev.Evaluate(context.Background(), w, 1)
		if err != nil {
			t.Fatal(err)
		}
		return m.Counters["qpc_cache_miss"]
	}
	small := *p
	mc := *p.Micro
	mc.Cache.QPCEntries = 8
	small.Micro = &mc
	if a, b := misses(p), misses(&small); a != 0 || b == 0 {
		t.Errorf("QP-context misses with 64 QPs: %v with the profile's cache, %v with 8 entries; want 0 and > 0", a, b)
	}
	if p.Micro.Cache.QPCEntries == 8 {
		t.Errorf("the loaded profile changed with its copy")
	}
	nomicro := *p
	nomicro.Micro = nil
	for _, q := range []*rnic.Profile{nil, &nomicro} {
		if _, err := NewSimEvaluatorProfile(q); err == nil || !strings.Contains(err.Error(), "no micro section") {
			t.Errorf("NewSimEvaluatorProfile(%v): error %v, want a missing micro section", q, err)
		}
	}
}
