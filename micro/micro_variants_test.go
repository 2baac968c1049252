package micro

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/search/collie"
)

// collieMTUs are the MTUs of Collie's search space (its mtu 3..5), the values its MFS tries.
var collieMTUs = []int{1024, 2048, 4096}

// The bounds of Collie's search space that its MFS tries for the endhost dimensions: send and receive batch
// 1-64, WQ depth 1-1024 (at least the batch), request sizes 32 B-128 KB.
const (
	collieMaxBatch = 64
	collieMaxDepth = 1024
	collieMinSize  = 32
	collieMaxSize  = 131072
)

// TestTriggerOneFactorVariants holds each published trigger's one-factor variants to what Collie's minimal
// feature set algorithm measured, as its reference implementation probes (one factor at a time from the
// anomalous point) and table 2 records the result. A dimension the table names (a transport, an opcode, an
// MTU, an SG list, which Collie collapses to one entry) was recorded because some other value tried removed
// the anomaly, so at least one alternative must be clean; a dimension the table leaves open ("-") kept the
// anomaly at every value tried, so every alternative must stay anomalous. Direction and memory: traffic that needs both directions (or loopback) is clean one way
// alone, and an anomaly of remote or GPU memory is clean on the NIC's local node. QP types and opcodes are
// tried where the verbs and the NIC allow them (UD only SENDs, and its messages are cut to the MTU, as
// Collie's are; p2100g has no UC), MTUs among Collie's three. The endhost dimensions (WQE batch, WQ depth,
// request sizes) are tried at the bounds of Collie's space, as its MFS tries them (a depth at least the batch,
// as Collie forces it), and each must be anomalous exactly where the anomaly's published range holds. An
// alternative inside another published anomaly's conditions (#17's workload as UD is #15's) is anomalous
// either way and does not count.
//
// Where the model still differs, the case is listed with the reason, and the test fails once it holds, so
// the list only shrinks.
func TestTriggerOneFactorVariants(t *testing.T) {
	cat, err := collie.Load()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{
		"#9 mtu":     "at MTU 1K #9's mix runs clean on collie-f",
		"#10 mtu":    "at MTU 2K and 4K #10's receivers keep up: fewer packets, fewer queued context reads",
		"#14 opcode": "p2100g stages only the requester's WRITE/SEND packets (tx.staging-bytes), not READ responses",
		// The endhost dimensions at the bounds of Collie's space (wqe_batch, wq_depth, msg_sizes).
		"#1 msg_sizes":  "with every request 32 B, #1's UD workload runs clean (16.6 of 19.3 Gb/s); not analysed",
		"#4 wqe_batch":  "#4 pauses at a WQE batch of 1 too: 128 B READ responses both ways overrun the packet processor whatever the batch",
		"#4 msg_sizes":  "#4 with 128 KB requests reaches line rate: the processor's per-response cost matters for small responses only",
		"#5 msg_sizes":  "#5 stays anomalous with 32 B requests (low) and 128 KB (pause), where the table bounds them to 2-8 KB; not analysed",
		"#7 wq_depth":   "#7 stays low with WQs of 1024: the context misses of its 480 QPs cost per WQE whatever the depth",
		"#8 wq_depth":   "#8 with a WQ of 1 is bound by its in-flight window (45.5 Gb/s) and reaches 80% of it, so it is not judged low",
		"#9 wq_depth":   "#9 runs clean with WQs of 8 (its batch); not analysed",
		"#11 msg_sizes": "#11 runs clean with 32 B requests: both directions of small packets fit the cross-socket budget",
		"#14 msg_sizes": "#14 runs clean with 32 B requests; not analysed",
		"#15 wqe_batch": "#15 runs clean at a batch of 64: more receive-WQE misses than at 1 (3,076 against 1,234 in the window) but the buffer stays below XOFF; not analysed further",
		"#15 msg_sizes": "#15 runs clean with every request 32 B and with every request 2 KB (the MTU); not analysed",
		"#17 msg_sizes": "#17 runs clean with 32 B requests; not analysed",
		"#18 msg_sizes": "#18 pauses with 128 KB requests: the RC-state swap is paid per frame, so nothing tells 64 KB from 128 KB",
	}
	anomalous := func(tr trigger, w scenario.Workload) (bool, string) {
		r := runMicro(t, tr.profile, w, tr.mod)
		s := verdict(r)
		_, g, m := r.Judged()
		lg, lm := r.Limits()
		return s != "", fmt.Sprintf("%q at %.1f Gb/s %.1f Mpps of %.1f / %.1f", s, g, m, lg, lm)
	}
	for _, tr := range collieTriggers {
		a := cat.Anomaly(tr.id)
		prof, err := rnic.LoadProfile(tr.profile)
		if err != nil {
			t.Fatal(err)
		}
		published, err := cat.Profile(tr.profile)
		if err != nil {
			t.Fatal(err)
		}
		type variant struct {
			name string
			w    scenario.Workload
		}
		with := func(f func(w *scenario.Workload)) scenario.Workload {
			w := tr.w
			w.MsgSizes = slices.Clone(tr.w.MsgSizes)
			f(&w)
			if w.QPType == "ud" {
				for i := range w.MsgSizes {
					w.MsgSizes[i] = min(w.MsgSizes[i], w.MTU)
				}
			}
			return w
		}
		dims := []struct {
			name       string
			restricted bool // table 2 names the dimension: some alternative is clean
			oneWay     bool // only "clean" is known, for the listed alternatives
			ranged     bool // each alternative is anomalous exactly where the anomaly's published range holds
			alts       []variant
		}{
			{name: "qp_type", restricted: len(a.When.QPType) > 0},
			{name: "opcode", restricted: len(a.When.Opcode) > 0},
			{name: "mtu", restricted: len(a.When.MTU) > 0},
			{name: "sge", restricted: a.When.SGE != nil},
			{name: "direction", restricted: true, oneWay: true},
			{name: "memory", restricted: true, oneWay: true},
			{name: "wqe_batch", ranged: true},
			{name: "wq_depth", ranged: true},
			{name: "msg_sizes", ranged: true},
		}
		for _, q := range []string{"rc", "uc", "ud"} {
			if q != tr.w.QPType && verbsAllow(q, tr.w.Opcode) && prof.CheckQPType(q) == nil {
				dims[0].alts = append(dims[0].alts, variant{q, with(func(w *scenario.Workload) { w.QPType = q })})
			}
		}
		for _, o := range []string{"send", "write", "read"} {
			if o != tr.w.Opcode && verbsAllow(tr.w.QPType, o) {
				dims[1].alts = append(dims[1].alts, variant{o, with(func(w *scenario.Workload) { w.Opcode = o })})
			}
		}
		for _, m := range collieMTUs {
			if m != tr.w.MTU {
				dims[2].alts = append(dims[2].alts, variant{fmt.Sprint(m), with(func(w *scenario.Workload) { w.MTU = m })})
			}
		}
		if tr.w.SGE > 1 {
			// Collie's MFS collapses the SG list to one entry per WQE.
			dims[3].alts = []variant{{"1", with(func(w *scenario.Workload) { w.SGE = 1 })}}
		}
		if len(a.When.Direction) > 0 && !slices.Contains(a.When.Direction, DirUni) {
			dims[4].alts = []variant{{DirUni, with(func(w *scenario.Workload) { w.Direction = DirUni })}}
		}
		if len(a.When.Memory) > 0 && !slices.Contains(a.When.Memory, MemLocal) {
			dims[5].alts = []variant{{MemLocal, with(func(w *scenario.Workload) { w.Memory = MemLocal })}}
		}
		// Endhost dimensions at the bounds of Collie's space, as its MFS tries them: the WQE batch (1-64), the
		// WQ depth (at least the batch, up to 1024) and every request at the smallest and the largest size
		// (32 B, 128 KB; UD's cut to the MTU).
		for _, b := range []int{1, collieMaxBatch} {
			if b != tr.w.WQEBatch {
				dims[6].alts = append(dims[6].alts, variant{fmt.Sprint(b), with(func(w *scenario.Workload) {
					w.WQEBatch = b
					w.WQDepth = max(w.WQDepth, b)
				})})
			}
		}
		for _, d := range []int{tr.w.WQEBatch, collieMaxDepth} {
			if d != tr.w.WQDepth {
				dims[7].alts = append(dims[7].alts, variant{fmt.Sprint(d), with(func(w *scenario.Workload) { w.WQDepth = d })})
			}
		}
		for _, sz := range []int{collieMinSize, collieMaxSize} {
			v := with(func(w *scenario.Workload) { w.MsgSizes = slices.Repeat([]int{sz}, len(w.MsgSizes)) })
			if !slices.Equal(v.MsgSizes, tr.w.MsgSizes) {
				dims[8].alts = append(dims[8].alts, variant{fmt.Sprintf("all %d", v.MsgSizes[0]), v})
			}
		}
		for _, d := range dims {
			if len(d.alts) == 0 {
				continue
			}
			key := fmt.Sprintf("#%d %s", tr.id, d.name)
			var clean, anom, wrong []string
			others := 0 // alternatives inside another published anomaly's conditions: anomalous either way
			for _, v := range d.alts {
				inside := a.When.Holds(v.w)
				if (d.ranged && !inside || d.restricted && !d.oneWay) && len(published.Predict(cat, v.w)) > 0 {
					others++
					continue
				}
				ok, what := anomalous(tr, v.w)
				if ok {
					anom = append(anom, v.name+": "+what)
				} else {
					clean = append(clean, v.name+": "+what)
				}
				if d.ranged && ok != inside {
					wrong = append(wrong, v.name)
				}
			}
			if others == len(d.alts) {
				continue
			}
			var holds bool
			var want string
			switch {
			case d.ranged:
				holds, want = len(wrong) == 0, "anomalous exactly inside the published range (wrong at "+strings.Join(wrong, ", ")+")"
			case d.oneWay:
				holds, want = len(anom) == 0, "clean"
			case d.restricted:
				holds, want = len(clean) > 0, "at least one clean (table 2 names the "+d.name+")"
			default:
				holds, want = len(clean) == 0, "all anomalous (table 2 leaves the "+d.name+" open)"
			}
			t.Logf("%s %s: clean %v, anomalous %v", key, tr.profile, clean, anom)
			if why, ok := known[key]; ok {
				if holds {
					t.Errorf("%s now holds (%s): take it off the known list", key, want)
				} else {
					t.Logf("%s: known difference: %s", key, why)
				}
				continue
			}
			if !holds {
				t.Errorf("%s on %s: clean %v, anomalous %v: want %s", key, tr.profile, clean, anom, want)
			}
		}
	}
}

// verbsAllow says whether a QP type carries an opcode: UD only SENDs, UC has no READ.
func verbsAllow(qp, op string) bool {
	switch qp {
	case "ud":
		return op == "send"
	case "uc":
		return op != "read"
	}
	return true
}
