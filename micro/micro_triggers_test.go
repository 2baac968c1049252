package micro

import (
	"slices"
	"testing"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/search/collie"
)

// trigger is one of Collie's concrete anomaly triggers (seeds/003 appendix A) and the symptom it must show.
type trigger struct {
	id      int
	profile string
	symptom string // pause | low
	w       scenario.Workload
	mod     func(*rnic.Profile) // a host setting that is part of the trigger
}

func wl(qp, op string, qps, mtu, batch, sge, depth, mrs, mrSize int, sizes []int, dir, mem string) scenario.Workload {
	return scenario.Workload{QPType: qp, Opcode: op, NumQPs: qps, MTU: mtu, WQEBatch: batch, SGE: sge, WQDepth: depth,
		NumMRs: mrs, MRSize: mrSize, MsgSizes: sizes, Direction: dir, Memory: mem}
}

const (
	kb = 1 << 10
	mb = 1 << 20
)

// collieTriggers are appendix A's "simplified concrete trigger settings", one per anomaly, read from the
// published catalog (search/collie/anomalies.yaml) with each anomaly's symptom; each runs on the first profile
// the catalog says must hold it (#9, which needs relaxed ordering off, on collie-f).
var collieTriggers = func() []trigger {
	cat, err := collie.Load()
	if err != nil {
		panic(err) // the catalog's own tests report the error; nothing here can run without it
	}
	var out []trigger
	for _, a := range cat.Anomalies {
		tr := trigger{id: a.ID, w: a.Trigger, symptom: "pause"}
		if a.Symptom == collie.LowThroughput {
			tr.symptom = "low"
		}
		for _, p := range cat.Profiles {
			if tr.profile == "" && slices.Contains(p.Anomalies, a.ID) {
				tr.profile = p.Name
			}
		}
		out = append(out, tr)
	}
	return out
}()

func runMicro(t testing.TB, profile string, w scenario.Workload, mod func(*rnic.Profile)) *WorkloadResult {
	t.Helper()
	p, err := rnic.LoadProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		q := *p
		m := *p.Micro
		q.Micro = &m
		mod(&q)
		p = &q
	}
	r, err := RunWorkload(WorkloadConfig{Seed: 1, Profiles: [2]*rnic.Profile{p, p}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// summary is what the anomaly monitor looks at: the worst pause ratio of the two NICs and the busier
// direction's goodput against the limits.
type summary struct {
	pause, gbps, mpps, limG, limP float64
}

func summarize(r *WorkloadResult) summary {
	s := summary{limG: r.LimitGbps, limP: r.LimitMpps}
	s.pause, s.gbps, s.mpps = r.Judged()
	return s
}

func (s summary) symptom() string {
	return DefaultThresholds.Classify(s.pause, s.gbps, s.mpps, s.limG, s.limP)
}
func (s summary) isPause() bool { return s.symptom() == "pause" }
func (s summary) isLow() bool   { return s.symptom() == "low-throughput" }

// verdict is the symptom lumina run of a workload and the search report: against the limits that include what
// the workload keeps in flight (Limits), where summary judges against the NIC's and the line's alone.
func verdict(r *WorkloadResult) string {
	pause, gbps, mpps := r.Judged()
	g, p := r.Limits()
	return DefaultThresholds.Classify(pause, gbps, mpps, g, p)
}

// wantClean runs w on the profile and reports what, with its goodput and limits, unless its verdict is normal.
func wantClean(t *testing.T, profile, what string, w scenario.Workload) {
	t.Helper()
	r := runMicro(t, profile, w, nil)
	if s := verdict(r); s != "" {
		_, gbps, mpps := r.Judged()
		g, p := r.Limits()
		t.Errorf("%s: %s (%.1f Gb/s, %.1f Mpps of %.1f Gb/s, %.1f Mpps), want no anomaly", what, s, gbps, mpps, g, p)
	}
}
