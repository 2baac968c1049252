package collie_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/search/collie"
)

// TestCollieFIsCX6VPIWithoutRelaxedOrdering: the search-time profile differs from cx6vpi-200g only in its name,
// description and PCIe relaxed ordering, so a narrowing of one that forgets the other fails here.
func TestCollieFIsCX6VPIWithoutRelaxedOrdering(t *testing.T) {
	a, err := rnic.LoadProfile("cx6vpi-200g")
	if err != nil {
		t.Fatal(err)
	}
	b, err := rnic.LoadProfile("collie-f")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Micro.PCIe.RelaxedOrdering || b.Micro.PCIe.RelaxedOrdering {
		t.Fatalf("relaxed ordering: cx6vpi-200g %v, collie-f %v; want on and off", a.Micro.PCIe.RelaxedOrdering, b.Micro.PCIe.RelaxedOrdering)
	}
	ma := *b.Micro
	ma.PCIe.RelaxedOrdering = true
	bb := *b
	bb.Micro, bb.Name, bb.Description = &ma, a.Name, a.Description
	if !reflect.DeepEqual(a, &bb) {
		t.Errorf("collie-f differs from cx6vpi-200g beyond name, description and relaxed ordering")
	}
}

// TestAgreement measures, on a fixed seeded sample of the default space (smaller than the benchmark's 1,000
// points: CI has two shared cores), how often each profile's simulated anomalies and Collie's published
// conditions agree, and holds the figures at or above the floors measured when the profiles were last narrowed.
// `go run ./bench/agreement` prints the 1,000-point figures. cx6vpi-200g's and collie-f's floors are below the
// issue's 95% target: see the README's limits for the mechanisms that are broader than the published
// conditions.
func TestAgreement(t *testing.T) {
	cat, err := collie.Load()
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for _, c := range []struct {
		profile string
		floor   float64 // agreement
		maxGap  float64 // anomalous share minus predicted share
	}{
		{"cx6vpi-200g", 0.90, 0.03}, // measured 90%, gap -4 points (1,000 points: 91.0%, gap 2.4)
		{"collie-f", 0.88, 0.04},    // measured 88%, gap -2 points (1,000 points: 88.6%, gap 3.0)
		{"p2100g", 0.98, 0.05},      // measured 98%, gap 0 points (1,000 points: 96.7%, gap 1.3)
	} {
		p, err := cat.Profile(c.profile)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := search.EvaluatorFor(c.profile)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := search.ProfileSpace(c.profile, search.DefaultSpace())
		if err != nil {
			t.Fatal(err)
		}
		r, err := search.Agreement(context.Background(), ev, sp, search.DefaultMonitor(), n, 1, 0,
			func(w search.Workload) []int { return p.Predict(cat, w.Workload) })
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Points) != n || r.Both+r.Extra+r.Missed+r.Neither != n {
			t.Fatalf("%s: %d points, counts %d/%d/%d/%d", c.profile, len(r.Points), r.Both, r.Extra, r.Missed, r.Neither)
		}
		t.Logf("%s: agreement %.0f%%, anomalous %.0f%%, predicted %.0f%%", c.profile, 100*r.Agreement(),
			100*r.AnomalousShare(), 100*r.PredictedShare())
		if r.Agreement() < c.floor {
			t.Errorf("%s: agreement %.2f below the floor %.2f", c.profile, r.Agreement(), c.floor)
		}
		if gap := r.AnomalousShare() - r.PredictedShare(); gap > c.maxGap {
			t.Errorf("%s: anomalous share %.2f exceeds the predicted %.2f by more than %.2f", c.profile,
				r.AnomalousShare(), r.PredictedShare(), c.maxGap)
		}
		// Every point the published conditions predict on this sample and the profile shows is a real
		// evaluation: its symptom comes from the monitor, not from the prediction.
		for _, pt := range r.Points {
			if pt.Symptom != search.DefaultMonitor().Check(pt.Metrics) {
				t.Fatalf("%s: a point's symptom %q is not the monitor's verdict on its metrics", c.profile, pt.Symptom)
			}
		}
	}
}
