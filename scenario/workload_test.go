package scenario

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const collieWorkload = `
requester: {nic: {type: cx6vpi-200g}}
responder: {nic: {type: cx6vpi-200g}}
workload:
  qp_type: ud
  opcode: send
  num_qps: 1
  mtu: 2048
  wqe_batch: 64
  sge: 1
  wq_depth: 256
  num_mrs: 1
  mr_size: 65536
  msg_sizes: [2048]
  direction: uni
  memory: local
`

func TestWorkloadSection(t *testing.T) {
	s, err := Parse([]byte(collieWorkload), "a1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Workload{QPType: "ud", Opcode: "send", NumQPs: 1, MTU: 2048, WQEBatch: 64, SGE: 1, WQDepth: 256,
		NumMRs: 1, MRSize: 65536, MsgSizes: []int{2048}, Direction: "uni", Memory: "local"}
	if s.Workload == nil || !reflect.DeepEqual(*s.Workload, want) {
		t.Fatalf("workload = %+v, want %+v", s.Workload, want)
	}
	out := roundTrip(t, s)
	if !strings.Contains(out, "workload:") || !strings.Contains(out, "wqe_batch: 64") {
		t.Errorf("effective scenario lacks the workload:\n%s", out)
	}
	// Keys left out take the perftest-like defaults; a scenario without the section has none.
	s, err = Parse([]byte("workload: {num_qps: 8, direction: bi}\n"), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultWorkload()
	d.NumQPs, d.Direction = 8, "bi"
	if !reflect.DeepEqual(*s.Workload, d) {
		t.Errorf("workload = %+v, want defaults with 8 QPs bi: %+v", *s.Workload, d)
	}
	roundTrip(t, s)
	if s, err := Parse([]byte("traffic: {num-connections: 2}\n"), "t.yaml"); err != nil || s.Workload != nil {
		t.Errorf("scenario without workload: %v, %+v", err, s.Workload)
	}
}

func TestWorkloadErrors(t *testing.T) {
	for _, c := range []struct {
		doc       string
		line, col int
		path      string
		want      string
	}{
		{"workload:\n  qp_type: xrc\n", 2, 12, "workload.qp_type", `"xrc" is not valid; expected one of rc, uc, ud`},
		{"workload:\n  mtu: 1500\n", 2, 8, "workload.mtu", "1500 is not a valid path MTU"},
		{"workload:\n  num_qps: 0\n", 2, 12, "workload.num_qps", "0 is out of range; expected an integer in 1..65536"},
		{"workload:\n  msg_sizes: []\n", 2, 14, "workload.msg_sizes", "0 sizes; expected a list of 1..64"},
		{"workload:\n  msg_sizes: [64, -1]\n", 2, 19, "workload.msg_sizes[1]", "-1 is out of range"},
		{"workload:\n  batch: 4\n", 2, 3, "workload.batch", "unknown key; expected one of qp_type, opcode"},
		{"workload:\n  qp_type: ud\n  opcode: write\n", 3, 11, "workload.opcode", "opcode write on a UD QP"},
		{"workload:\n  qp_type: uc\n  opcode: read\n", 3, 11, "workload.opcode", "opcode read on a UC QP"},
		{"workload:\n  wqe_batch: 64\n  wq_depth: 16\n", 3, 13, "workload.wq_depth", "wq_depth 16 is below wqe_batch 64"},
		{"events: [{qpn: 1, psn: 2, type: drop}]\nworkload:\n  num_qps: 2\n", 3, 3, "workload", "cannot be combined with events"},
		{"testbed: netns\nworkload: {num_qps: 2}\n", 2, 11, "workload", "simulated testbed only"},
	} {
		_, err := Parse([]byte(c.doc), "w.yaml")
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Errorf("%q: error %v, want positioned errors", c.doc, err)
			continue
		}
		e := es[0]
		if e.Line != c.line || e.Col != c.col || e.Path != c.path || !strings.Contains(e.Msg, c.want) {
			t.Errorf("%q: got %d:%d %s %q, want %d:%d %s containing %q", c.doc, e.Line, e.Col, e.Path, e.Msg,
				c.line, c.col, c.path, c.want)
		}
	}
}
