package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
)

// AgreementPoint is one sampled workload: what the evaluator showed and which published conditions hold.
type AgreementPoint struct {
	Workload  Workload `json:"workload"`
	Symptom   Symptom  `json:"symptom"`   // the monitor's verdict on the evaluation ("" = normal)
	Predicted []int    `json:"predicted"` // anomalies whose published conditions hold
	Metrics   Metrics  `json:"metrics"`
}

// Agree reports whether the evaluation and the prediction agree on "anomalous or not".
func (p *AgreementPoint) Agree() bool { return (p.Symptom != None) == (len(p.Predicted) > 0) }

// AgreementResult compares a profile's anomalies with published conditions over a fixed random sample.
type AgreementResult struct {
	Points []AgreementPoint
	// Both: anomalous and predicted; Extra: anomalous, nothing predicted; Missed: predicted, not anomalous.
	Both, Extra, Missed, Neither int
}

// Agreement is the share of points where the evaluator and the prediction agree.
func (r *AgreementResult) Agreement() float64 {
	return float64(r.Both+r.Neither) / float64(max(len(r.Points), 1))
}

// AnomalousShare is the share of points the evaluator finds anomalous; PredictedShare the share a published
// condition holds at.
func (r *AgreementResult) AnomalousShare() float64 {
	return float64(r.Both+r.Extra) / float64(max(len(r.Points), 1))
}

// PredictedShare is the share of points at which some published condition holds.
func (r *AgreementResult) PredictedShare() float64 {
	return float64(r.Both+r.Missed) / float64(max(len(r.Points), 1))
}

// Agreement samples n workloads of the space with a generator seeded by seed (the same n and seed give the
// same points), evaluates each (in parallel on workers goroutines, 0: GOMAXPROCS), classifies it with the
// monitor and asks predict which published anomalies hold there.
func Agreement(ctx context.Context, ev Evaluator, sp Space, mon Monitor, n int, seed uint64, workers int,
	predict func(Workload) []int) (*AgreementResult, error) {
	if err := sp.Check(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("agreement: %d points, want at least 1", n)
	}
	rng := rand.New(rand.NewPCG(seed, 0x636f6c6c6965)) // "collie"
	pts := make([]AgreementPoint, n)
	for i := range pts {
		pts[i].Workload = sp.Sample(rng)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     int
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := firstErr != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				p := &pts[i]
				m, err := ev.Evaluate(ctx, p.Workload, evalSeed(seed, p.Workload.Key()))
				if err == nil {
					err = checkMetrics(m)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("agreement point %d (%s): %w", i+1, p.Workload.String(), err)
					}
					mu.Unlock()
					return
				}
				p.Symptom = mon.Check(m)
				p.Metrics = m
				p.Predicted = predict(p.Workload)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	r := &AgreementResult{Points: pts}
	for i := range pts {
		anom, pred := pts[i].Symptom != None, len(pts[i].Predicted) > 0
		switch {
		case anom && pred:
			r.Both++
		case anom:
			r.Extra++
		case pred:
			r.Missed++
		default:
			r.Neither++
		}
	}
	return r, nil
}
