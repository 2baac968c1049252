package scenario

import (
	"github.com/goccy/go-yaml"

	"github.com/lumina-go/lumina/roce"
)

// Workload is a Collie-style workload (seeds/003 §4, spec/nic-microarchitecture.md): with a `workload:`
// section the simulated testbed runs the NIC micro-architecture model of both hosts' profiles on it, instead
// of Lumina's traffic generator, and reports pause and throughput against the profile's limits. Keys are the
// search's dimension names; a key left out takes the perftest-like default (DefaultWorkload).
type Workload struct {
	QPType    string `json:"qp_type" yaml:"qp_type"`     // rc | uc | ud
	Opcode    string `json:"opcode" yaml:"opcode"`       // send | write | read
	NumQPs    int    `json:"num_qps" yaml:"num_qps"`     // connections per direction
	MTU       int    `json:"mtu" yaml:"mtu"`             // 256..4096
	WQEBatch  int    `json:"wqe_batch" yaml:"wqe_batch"` // work requests per doorbell
	SGE       int    `json:"sge" yaml:"sge"`             // scatter-gather entries per work request
	WQDepth   int    `json:"wq_depth" yaml:"wq_depth"`   // send and receive queue depth
	NumMRs    int    `json:"num_mrs" yaml:"num_mrs"`     // memory regions per QP
	MRSize    int    `json:"mr_size" yaml:"mr_size"`     // bytes per memory region
	MsgSizes  []int  `json:"msg_sizes" yaml:"msg_sizes"` // request sizes, used in turn
	Direction string `json:"direction" yaml:"direction"` // uni | bi | loopback
	Memory    string `json:"memory" yaml:"memory"`       // local | remote-numa | gpu-same-switch | gpu-cross-switch
}

// DefaultWorkload is perftest-like: one RC QP writing 64 KB messages at MTU 4096.
func DefaultWorkload() Workload {
	return Workload{QPType: "rc", Opcode: "write", NumQPs: 1, MTU: 4096, WQEBatch: 1, SGE: 1, WQDepth: 128,
		NumMRs: 1, MRSize: 65536, MsgSizes: []int{65536}, Direction: "uni", Memory: "local"}
}

var workloadKeys = []string{"qp_type", "opcode", "num_qps", "mtu", "wqe_batch", "sge", "wq_depth", "num_mrs",
	"mr_size", "msg_sizes", "direction", "memory"}

// workload decodes the workload section; every key is checked where it is written.
func (d *decoder) workload(v val) *Workload {
	w := DefaultWorkload()
	fields, _ := d.fields(v)
	pos := map[string]val{}
	for _, f := range fields {
		pos[f.key] = f.v
		switch f.key {
		case "qp_type":
			if x, ok := d.oneOf(f.v, "rc", "uc", "ud"); ok {
				w.QPType = x
			}
		case "opcode":
			if x, ok := d.oneOf(f.v, "send", "write", "read"); ok {
				w.Opcode = x
			}
		case "num_qps":
			if x, ok := d.intIn(f.v, 1, 65536); ok {
				w.NumQPs = x
			}
		case "mtu":
			x, isInt := intOf(f.v.n)
			switch {
			case !isInt || !roce.ValidMTU(int(x)):
				d.errv(f.v, "%s is not a valid path MTU; expected one of 256, 512, 1024, 2048, 4096", show(f.v.n))
			default:
				w.MTU = int(x)
			}
		case "wqe_batch":
			if x, ok := d.intIn(f.v, 1, 1024); ok {
				w.WQEBatch = x
			}
		case "sge":
			if x, ok := d.intIn(f.v, 1, 32); ok {
				w.SGE = x
			}
		case "wq_depth":
			if x, ok := d.intIn(f.v, 1, 32768); ok {
				w.WQDepth = x
			}
		case "num_mrs":
			if x, ok := d.intIn(f.v, 1, 1<<20); ok {
				w.NumMRs = x
			}
		case "mr_size":
			if x, ok := d.intIn(f.v, 1, 1<<34); ok {
				w.MRSize = x
			}
		case "msg_sizes":
			its, ok := d.items(f.v)
			if !ok {
				continue
			}
			if len(its) == 0 || len(its) > 64 {
				d.errv(f.v, "%d sizes; expected a list of 1..64 message sizes in bytes", len(its))
				continue
			}
			sizes := make([]int, 0, len(its))
			for _, it := range its {
				if x, ok := d.intIn(it, 1, 1<<30); ok {
					sizes = append(sizes, x)
				}
			}
			if len(sizes) == len(its) {
				w.MsgSizes = sizes
			}
		case "direction":
			if x, ok := d.oneOf(f.v, "uni", "bi", "loopback"); ok {
				w.Direction = x
			}
		case "memory":
			if x, ok := d.oneOf(f.v, "local", "remote-numa", "gpu-same-switch", "gpu-cross-switch"); ok {
				w.Memory = x
			}
		default:
			d.unknown(f, workloadKeys)
		}
	}
	at := func(key string) val {
		if p, ok := pos[key]; ok {
			return p
		}
		return v
	}
	switch {
	case w.QPType == "ud" && w.Opcode != "send":
		d.errv(at("opcode"), "opcode %s on a UD QP; expected send (UD carries only SEND)", w.Opcode)
	case w.QPType == "uc" && w.Opcode == "read":
		d.errv(at("opcode"), "opcode read on a UC QP; expected send or write (READ needs RC)")
	}
	if w.WQDepth < w.WQEBatch {
		d.errv(at("wq_depth"), "wq_depth %d is below wqe_batch %d; expected a queue that holds one batch", w.WQDepth, w.WQEBatch)
	}
	return &w
}

// effective writes every key of the workload, defaults included.
func (w *Workload) effective() yaml.MapSlice {
	sizes := w.MsgSizes
	if sizes == nil {
		sizes = []int{}
	}
	return yaml.MapSlice{
		{Key: "qp_type", Value: w.QPType},
		{Key: "opcode", Value: w.Opcode},
		{Key: "num_qps", Value: w.NumQPs},
		{Key: "mtu", Value: w.MTU},
		{Key: "wqe_batch", Value: w.WQEBatch},
		{Key: "sge", Value: w.SGE},
		{Key: "wq_depth", Value: w.WQDepth},
		{Key: "num_mrs", Value: w.NumMRs},
		{Key: "mr_size", Value: w.MRSize},
		{Key: "msg_sizes", Value: sizes},
		{Key: "direction", Value: w.Direction},
		{Key: "memory", Value: w.Memory},
	}
}
