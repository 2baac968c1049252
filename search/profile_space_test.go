package search

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestProfileSpace: the search space on p2100g leaves out UC (its NIC cannot create UC QPs): no random sample
// nor mutation of it is UC, while on cx6vpi-200g UC points are drawn; an explicit UC restriction on p2100g is an
// error naming qp_type and the profile, and the evaluator refuses a UC workload on it.
func TestProfileSpace(t *testing.T) {
	const n = 2000
	count := func(sp Space) (uc, ud int) {
		rng := rand.New(rand.NewPCG(7, 7))
		w := sp.Sample(rng)
		for range n {
			switch w.QPType {
			case "uc":
				uc++
			case "ud":
				ud++
			}
			if rng.IntN(2) == 0 {
				w = sp.Sample(rng)
			} else {
				w, _ = sp.Mutate(rng, w)
			}
			if err := sp.Validate(w); err != nil {
				t.Fatalf("point %s outside its space: %v", w.String(), err)
			}
		}
		return uc, ud
	}
	p2, err := ProfileSpace("p2100g", DefaultSpace())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p2.QPTypes, []string{"rc", "ud"}) {
		t.Errorf("p2100g space qp types %v, want [rc ud]", p2.QPTypes)
	}
	if uc, ud := count(p2); uc != 0 || ud == 0 {
		t.Errorf("p2100g: %d UC and %d UD of %d points, want no UC and some UD", uc, ud, n)
	}
	cx, err := ProfileSpace("cx6vpi-200g", DefaultSpace())
	if err != nil {
		t.Fatal(err)
	}
	if uc, _ := count(cx); uc < n/10 {
		t.Errorf("cx6vpi-200g: %d UC of %d points, want UC still drawn (about a third)", uc, n)
	}
	if syn, err := ProfileSpace(SyntheticProfile, DefaultSpace()); err != nil || !slices.Equal(syn.QPTypes, DefaultSpace().QPTypes) {
		t.Errorf("synthetic space %v, %v: want the default qp types", syn.QPTypes, err)
	}

	uc := DefaultSpace()
	uc.QPTypes = []string{"uc"}
	if _, err := ProfileSpace("p2100g", uc); err == nil || !strings.Contains(err.Error(), "p2100g") {
		t.Errorf("a UC-only space on p2100g: error %v, want one naming the profile", err)
	}
	if err := CheckProfileSpace("p2100g", uc); err == nil || !strings.Contains(err.Error(), "qp_type uc") ||
		!strings.Contains(err.Error(), "p2100g") {
		t.Errorf("CheckProfileSpace: %v, want an error naming qp_type uc and p2100g", err)
	}
	if err := CheckProfileSpace("cx6vpi-200g", uc); err != nil {
		t.Errorf("cx6vpi-200g supports UC: %v", err)
	}

	ev, err := NewSimEvaluator("p2100g")
	if err != nil {
		t.Fatal(err)
	}
	w := OrdinaryWorkload()
	w.QPType = "uc"
	if _, err := ev.Evaluate(context.Background(), w, 1); err == nil || !strings.Contains(err.Error(), "cannot create UC QPs") {
		t.Errorf("evaluating UC on p2100g: %v, want a refusal", err)
	}
}

// TestWindowLimitedNotAnomalous: an RC READ workload of 3 QPs with 4 READs each in flight, both ways, from GPU
// memory behind another PCIe switch, is limited by its own window once that window's round trip includes the
// profile's host-path latency: the monitor calls it normal on p2100g (without that latency, its throughput was
// more than 20% below the window's and it was judged low throughput).
func TestWindowLimitedNotAnomalous(t *testing.T) {
	ev, err := NewSimEvaluator("p2100g")
	if err != nil {
		t.Fatal(err)
	}
	w := OrdinaryWorkload()
	w.QPType, w.Opcode, w.NumQPs, w.MTU, w.WQEBatch, w.SGE, w.WQDepth = "rc", "read", 3, 4096, 4, 2, 4
	w.NumMRs, w.MRSize, w.MsgSizes, w.Direction, w.Memory = 22, 28<<10, []int{288, 64, 2688}, "bi", "gpu-cross-switch"
	m, err := ev.Evaluate(context.Background(), w, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s := DefaultMonitor().Check(m); s != None || m.LimitGbps >= 100 {
		t.Errorf("%s: symptom %q, tx %.1f Gb/s %.2f Mpps against limits %.1f Gb/s %.2f Mpps: want a window limit below the line and normal",
			w.String(), s, m.TxGbps, m.TxMpps, m.LimitGbps, m.LimitMpps)
	}
}
