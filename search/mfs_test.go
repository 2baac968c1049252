package search

import (
	"context"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// probeWith evaluates probes directly on an evaluator, counting them.
func probeWith(t *testing.T, ev Evaluator, count *int) probeFunc {
	return func(ws []Workload) ([]Symptom, error) {
		out := make([]Symptom, len(ws))
		for i, w := range ws {
			m, err := ev.Evaluate(context.Background(), w, 1)
			if err != nil {
				return nil, err
			}
			*count++
			out[i] = DefaultMonitor().Check(m)
		}
		return out, nil
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMFSRecoversPlantedConditions checks that the MFS of a point inside each planted region is exactly the
// region's conditions, as they read in the space (e.g. RC READ is opcode read: no other QP type allows it).
func TestMFSRecoversPlantedConditions(t *testing.T) {
	syn := SyntheticF()
	sp := DefaultSpace()
	base := OrdinaryWorkload()
	cases := []struct {
		name string
		p    func(w *Workload)
		sym  Symptom
		want string
	}{
		{"ud-batch-depth", func(w *Workload) {
			w.QPType, w.Opcode, w.WQEBatch, w.WQDepth, w.MTU, w.MsgSizes = "ud", "send", 64, 512, 2048, []int{2048}
		}, Pause, `{"qp_type":["ud"],"wq_depth":[256,1024],"wqe_batch":[64,128]}`},
		{"read-mtu1k-large", func(w *Workload) {
			w.Opcode, w.MTU, w.MsgSizes = "read", 1024, []int{32768, 65536}
		}, Pause, `{"msg_sizes":[16384,131072],"mtu":[1024],"opcode":["read"]}`},
		{"write-many-qps", func(w *Workload) {
			w.NumQPs, w.WQDepth, w.MsgSizes = 1000, 8, []int{512, 256}
		}, LowThroughput, `{"msg_sizes":[32,1024],"num_qps":[512,20000],"opcode":["write"],"qp_type":["rc"],"wq_depth":[1,16]}`},
		{"bi-sge-mix", func(w *Workload) {
			w.Direction, w.SGE, w.MsgSizes = "bi", 3, []int{65536, 128, 128, 128}
		}, Pause, `{"direction":["bi"],"msg_max":[65536,131072],"msg_min":[32,1024],"sge":[3,4]}`},
		{"write-many-mrs", func(w *Workload) {
			w.NumMRs, w.MsgSizes = 10000, []int{512}
		}, LowThroughput, `{"msg_sizes":[32,1024],"num_mrs":[8192,200000],"opcode":["write"],"qp_type":["rc"],"wqe_batch":[1,1]}`},
		{"loopback-incast", func(w *Workload) {
			w.Direction, w.NumQPs, w.MsgSizes = "loopback", 64, []int{131072}
		}, Pause, `{"direction":["loopback"],"msg_sizes":[65536,131072],"num_qps":[16,20000]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := clone(base)
			tc.p(&p)
			if err := sp.Validate(p); err != nil {
				t.Fatalf("test point invalid: %v", err)
			}
			m, _ := syn.Evaluate(context.Background(), p, 1)
			if got := DefaultMonitor().Check(m); got != tc.sym {
				t.Fatalf("test point shows %q, want %q", got, tc.sym)
			}
			probes := 0
			mfs, err := findMFS(&sp, p, tc.sym, probeWith(t, syn, &probes), false)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustJSON(t, mfs); got != tc.want {
				t.Errorf("MFS\n got %s\nwant %s", got, tc.want)
			}
			if !mfs.Match(p) {
				t.Errorf("MFS %s does not match its own point", mfs)
			}
			if probes < 10 || probes > mfsProbeBound(&sp) {
				t.Errorf("%d probes, want between 10 and %d", probes, mfsProbeBound(&sp))
			}
			q := simplify(&sp, p, mfs)
			if !mfs.Match(q) || sp.Validate(q) != nil {
				t.Errorf("simplified %s outside its MFS or invalid", q)
			}
			qm, _ := syn.Evaluate(context.Background(), q, 1)
			if DefaultMonitor().Check(qm) != tc.sym {
				t.Errorf("simplified %s does not reproduce", q)
			}
			t.Logf("%d probes; reproducer %s", probes, q)
		})
	}
}

// syntheticPoints sets a workload inside each planted region of SyntheticF (and only inside it).
func syntheticPoints() map[string]func(w *Workload) {
	return map[string]func(w *Workload){
		"ud-batch-depth": func(w *Workload) {
			w.QPType, w.Opcode, w.WQEBatch, w.WQDepth, w.MTU, w.MsgSizes = "ud", "send", 64, 512, 2048, []int{2048}
		},
		"read-mtu1k-large": func(w *Workload) { w.Opcode, w.MTU, w.MsgSizes = "read", 1024, []int{32768, 65536} },
		"write-many-qps":   func(w *Workload) { w.NumQPs, w.WQDepth, w.MsgSizes = 1000, 8, []int{512, 256} },
		"bi-sge-mix": func(w *Workload) {
			w.Direction, w.SGE, w.MsgSizes = "bi", 3, []int{65536, 128, 128, 128}
		},
		"write-many-mrs":  func(w *Workload) { w.NumMRs, w.MsgSizes = 10000, []int{512} },
		"loopback-incast": func(w *Workload) { w.Direction, w.NumQPs, w.MsgSizes = "loopback", 64, []int{131072} },
		"bi-read-batch-sge": func(w *Workload) {
			// 4 KB requests: with 64 KB ones its loopback neighbour would be inside loopback-incast too.
			w.Direction, w.Opcode, w.WQEBatch, w.SGE, w.NumQPs, w.WQDepth = "bi", "read", 32, 4, 128, 128
			w.MsgSizes = []int{4096}
		},
		"send-mtu1k-batch-depth": func(w *Workload) {
			w.Opcode, w.MTU, w.WQEBatch, w.WQDepth, w.MsgSizes = "send", 1024, 64, 512, []int{4096}
		},
	}
}

// TestMFSProbesPerDimensionAndExact plants each of SyntheticF's eight anomalies and checks that findMFS (1)
// takes at most N probes, N counted per dimension: every other value of each categorical dimension and the
// MTU, one probe at each end of every ordered dimension and of both ends of the message vector, and a binary
// search (2 x ceil(log2 of the grid)) only for the dimensions the region bounds; and (2) finds exactly the
// planted region: on every one-factor neighbour of the point (each dimension at each of its grid values or
// alternatives) and on 3,000 random points, the feature set matches a workload if and only if the region
// contains it. A walk over the whole grid of an irrelevant dimension (as the procedure before took: 59-82
// probes on these points) breaks the bound.
func TestMFSProbesPerDimensionAndExact(t *testing.T) {
	syn := SyntheticF()
	sp := DefaultSpace()
	points := syntheticPoints()
	searchBits := func(gridLen int) int { return 2 * bits.Len(uint(gridLen)) }
	rng := rand.New(rand.NewPCG(7, 7))
	var random []Workload
	for range 3000 {
		random = append(random, sp.Sample(rng))
	}
	for ri, r := range syn.Regions {
		t.Run(r.Name, func(t *testing.T) {
			set, ok := points[r.Name]
			if !ok {
				t.Fatalf("no test point for region %s", r.Name)
			}
			p := OrdinaryWorkload()
			set(&p)
			if err := sp.Validate(p); err != nil {
				t.Fatalf("test point invalid: %v", err)
			}
			if in := syn.Inside(p); !slices.Equal(in, []int{ri}) {
				t.Fatalf("test point %s is inside regions %v, want only %d", p, in, ri)
			}
			probes := 0
			mfs, err := findMFS(&sp, p, r.Symptom, probeWith(t, syn, &probes), false)
			if err != nil {
				t.Fatal(err)
			}
			n := len(sp.QPTypes) - 1 + len(sp.Opcodes) - 1 + len(sp.Directions) - 1 + len(sp.Memories) - 1 +
				len(sp.MTUs) - 1 + 2*len(orderedDims) + 2*2
			bounded := map[string][2]int{"num_qps": r.NumQPs, "wqe_batch": r.WQEBatch, "sge": r.SGE,
				"wq_depth": r.WQDepth, "num_mrs": r.NumMRs, "mr_size": r.MRSize}
			for _, d := range orderedDims {
				if bounded[d.name] != [2]int{} {
					n += searchBits(len(d.rng(&sp).grid(d.rng(&sp).Min)))
				}
			}
			for _, b := range [][2]int{r.MsgMin, r.MsgMax} {
				if b != [2]int{} {
					n += searchBits(len(sp.MsgSize.grid(sp.MsgSize.Min)) + 1)
				}
			}
			if probes > n {
				t.Errorf("%d probes, want at most %d", probes, n)
			}
			if n > mfsProbeBound(&sp) {
				t.Errorf("per-dimension bound %d above mfsProbeBound %d", n, mfsProbeBound(&sp))
			}
			inRegion := func(w Workload) bool { return slices.Contains(syn.Inside(w), ri) }
			checked := 0
			check := func(w Workload) {
				if sp.Validate(w) != nil {
					return
				}
				checked++
				if got, want := mfs.Match(w), inRegion(w); got != want {
					t.Errorf("MFS %s matches %s: %v, region contains it: %v", mfs, w, got, want)
				}
			}
			for _, w := range oneFactorNeighbours(&sp, p) {
				check(w)
			}
			for _, w := range random {
				check(w)
			}
			t.Logf("%d probes (bound %d), MFS %s, %d workloads compared", probes, n, mfs, checked)
		})
	}
}

// TestMFSEndsOnly checks Collie's way of spanning an ordered dimension (MFSEnds) on SyntheticF's planted
// anomalies: no binary search, so at most one probe per other categorical value and MTU and two per ordered
// dimension and end of the message vector, fewer than bisecting wherever the region bounds a dimension; and
// a side whose end loses the anomaly stops at the point's own value, so the set holds the point and only
// workloads inside the region (on 3,000 random points and every one-factor neighbour).
func TestMFSEndsOnly(t *testing.T) {
	syn := SyntheticF()
	sp := DefaultSpace()
	points := syntheticPoints()
	rng := rand.New(rand.NewPCG(7, 7))
	var random []Workload
	for range 3000 {
		random = append(random, sp.Sample(rng))
	}
	n := len(sp.QPTypes) - 1 + len(sp.Opcodes) - 1 + len(sp.Directions) - 1 + len(sp.Memories) - 1 +
		len(sp.MTUs) - 1 + 2*len(orderedDims) + 2*2
	for ri, r := range syn.Regions {
		t.Run(r.Name, func(t *testing.T) {
			p := OrdinaryWorkload()
			points[r.Name](&p)
			var ends, bisect int
			mfs, err := findMFS(&sp, p, r.Symptom, probeWith(t, syn, &ends), true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := findMFS(&sp, p, r.Symptom, probeWith(t, syn, &bisect), false); err != nil {
				t.Fatal(err)
			}
			if ends > n {
				t.Errorf("%d probes, want at most %d", ends, n)
			}
			if ends >= bisect {
				t.Errorf("%d probes with ends only, %d bisecting: want fewer", ends, bisect)
			}
			if !mfs.Match(p) {
				t.Errorf("MFS %s does not hold its own point %s", mfs, p)
			}
			for _, w := range append(oneFactorNeighbours(&sp, p), random...) {
				if sp.Validate(w) == nil && mfs.Match(w) && !slices.Contains(syn.Inside(w), ri) {
					t.Errorf("MFS %s matches %s, outside the region", mfs, w)
				}
			}
			t.Logf("%d probes (%d bisecting), MFS %s", ends, bisect, mfs)
		})
	}
}

// oneFactorNeighbours is p with one dimension changed to each of its other values: categorical alternatives,
// MTUs, every grid value of each ordered dimension, and message vectors whose smallest or largest request
// takes every grid value.
func oneFactorNeighbours(sp *Space, p Workload) []Workload {
	var out []Workload
	with := func(f func(w *Workload)) {
		q := clone(p)
		f(&q)
		out = append(out, q)
	}
	for _, v := range sp.QPTypes {
		with(func(w *Workload) { w.QPType = v })
	}
	for _, v := range sp.Opcodes {
		with(func(w *Workload) { w.Opcode = v })
	}
	for _, v := range sp.Directions {
		with(func(w *Workload) { w.Direction = v })
	}
	for _, v := range sp.Memories {
		with(func(w *Workload) { w.Memory = v })
	}
	for _, v := range sp.MTUs {
		with(func(w *Workload) { w.MTU = v })
	}
	for _, d := range orderedDims {
		for _, x := range d.rng(sp).grid(d.rng(sp).Min) {
			with(func(w *Workload) { *d.ptr(w) = x })
		}
	}
	for _, x := range sp.MsgSize.grid(sp.MsgSize.Min) {
		with(func(w *Workload) { w.MsgSizes = []int{x} })
		with(func(w *Workload) { w.MsgSizes = append(slices.Clone(w.MsgSizes), x) })
		with(func(w *Workload) { w.MsgSizes = []int{x, sp.MsgSize.Min} })
		with(func(w *Workload) { w.MsgSizes = []int{x, sp.MsgSize.Max} })
	}
	return out
}

// The message conditions of an MFS say what the anomaly needs of the smallest and of the largest request, each a
// range with Low <= High, and match exactly the planted region on every vector of one to three grid sizes: one
// small request, one large, both (a mixture), or both overlapping (one request between them meets both). The
// reproducer has one request unless the anomaly needs a mixture. A single msg_mix of [min(b, d), max(c, a)]
// read Low >= High in all but the mixture: "(<= 128K & >= 32K)" for one request of 32 KB or more.
func TestMFSMessageConditions(t *testing.T) {
	sp := DefaultSpace()
	grid := sp.MsgSize.grid(sp.MsgSize.Min)
	minOf, maxOf := func(w Workload) int { return slices.Min(w.MsgSizes) }, func(w Workload) int { return slices.Max(w.MsgSizes) }
	cases := []struct {
		name    string
		in      func(w Workload) bool
		start   []int
		want    string
		mixture bool
	}{
		{"one request >= 32K", func(w Workload) bool { return maxOf(w) >= 32768 }, []int{1024, 65536},
			`{"msg_max":[32768,131072]}`, false},
		{"one request <= 1K", func(w Workload) bool { return minOf(w) <= 1024 }, []int{512, 131072},
			`{"msg_min":[32,1024]}`, false},
		{"overlapping: one <= 8K and one >= 4K", func(w Workload) bool { return minOf(w) <= 8192 && maxOf(w) >= 4096 }, []int{128, 128, 65536},
			`{"msg_max":[4096,131072],"msg_min":[32,8192]}`, false},
		{"mixture: one <= 1K and one >= 64K", func(w Workload) bool { return minOf(w) <= 1024 && maxOf(w) >= 65536 }, []int{1024, 65536},
			`{"msg_max":[65536,131072],"msg_min":[32,1024]}`, true},
		{"all >= 2K and one >= 64K", func(w Workload) bool { return minOf(w) >= 2048 && maxOf(w) >= 65536 }, []int{2048, 65536},
			`{"msg_max":[65536,131072],"msg_sizes":[2048,131072]}`, false},
		{"32K <= largest <= 64K", func(w Workload) bool { return maxOf(w) >= 32768 && maxOf(w) <= 65536 }, []int{1024, 65536},
			`{"msg_max":[32768,65536],"msg_sizes":[32,65536]}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := OrdinaryWorkload()
			p.MsgSizes = tc.start
			probe := func(ws []Workload) ([]Symptom, error) {
				out := make([]Symptom, len(ws))
				for i, w := range ws {
					if tc.in(w) {
						out[i] = Pause
					}
				}
				return out, nil
			}
			m, err := findMFS(&sp, p, Pause, probe, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustJSON(t, m); got != tc.want {
				t.Errorf("MFS %s, want %s", got, tc.want)
			}
			for dim, c := range m {
				if k, _ := dimKind(dim); k == kindRange && c.Low > c.High {
					t.Errorf("%s: Low %d > High %d", dim, c.Low, c.High)
				}
			}
			if c, ok := m["msg_mix"]; ok && c.Low >= c.High {
				t.Errorf("msg_mix Low %d >= High %d: not a mixture", c.Low, c.High)
			}
			// Exact on every vector of one to three grid sizes (the other dimensions at p's values).
			var vecs [][]int
			for _, x := range grid {
				vecs = append(vecs, []int{x})
				for _, y := range grid {
					vecs = append(vecs, []int{x, y})
					for _, z := range []int{grid[0], 4096, grid[len(grid)-1]} {
						vecs = append(vecs, []int{x, y, z})
					}
				}
			}
			for _, v := range vecs {
				q := clone(p)
				q.MsgSizes = v
				if sp.Validate(q) == nil && m.Match(q) != tc.in(q) {
					t.Errorf("%v: the MFS says %v, the region %v", v, m.Match(q), tc.in(q))
				}
			}
			r := simplify(&sp, p, m)
			if !tc.in(r) || len(r.MsgSizes) != map[bool]int{false: 1, true: 2}[tc.mixture] {
				t.Errorf("reproducer requests %v: want %s inside the region", r.MsgSizes, map[bool]string{false: "one request", true: "a small and a large request"}[tc.mixture])
			}
		})
	}
}
