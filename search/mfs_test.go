package search

import (
	"context"
	"encoding/json"
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
		}, Pause, `{"direction":["bi"],"msg_mix":[1024,65536],"sge":[3,4]}`},
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
			mfs, err := findMFS(&sp, p, tc.sym, probeWith(t, syn, &probes))
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
