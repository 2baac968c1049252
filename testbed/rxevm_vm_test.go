//go:build rxevm

package testbed

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
)

// TestRxeVMWriteDrop runs examples/rxe-vm-write-drop.yaml on real Soft-RoCE in a qemu guest (needs root,
// qemu and the Debian mirror for the first build; scripts/rxe-vm/ci.sh runs it): the dropped packet must be
// NAK'd and resent by go-back-N, the trace must pass the integrity check and every ICRC must be valid.
// The traffic is perftest with the switch in learning mode (TestRxeVMVerbsWriteDrop runs our generator).
func TestRxeVMWriteDrop(t *testing.T) {
	t.Setenv(EnvRxeTool, "perftest")
	rxeVMDrop(t, "../examples/rxe-vm-write-drop.yaml", "perftest")
}

// TestRxeVMVerbsWriteDrop is the same drop with our verbs generator (lumina-verbs): the switch gets the
// connection from the generator's control-plane report (nothing learned), and traffic.json holds the
// generator's message completion times.
func TestRxeVMVerbsWriteDrop(t *testing.T) {
	t.Setenv(EnvRxeTool, "verbs")
	out := rxeVMDrop(t, "../examples/rxe-vm-verbs-write-drop.yaml", "verbs")
	var st rxeSwitchStatus
	if err := readJSON(filepath.Join(out, RxeRawDir), "switch-status.json", &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Learned) != 0 || len(st.Entries) == 0 {
		t.Errorf("switch: %d learned connections (want 0: the control plane configures it), %d event entries (want >= 1)", len(st.Learned), len(st.Entries))
	}
	var rep VerbsReport
	if err := readJSON(filepath.Join(out, RxeRawDir), "verbs-client.json", &rep); err != nil {
		t.Fatal(err)
	}
	var conns []resultsdir.ConnRecord
	var traffic []resultsdir.TrafficRecord
	if err := resultsdir.ReadList(out, resultsdir.FileConnections, &conns); err != nil {
		t.Fatal(err)
	}
	if err := resultsdir.ReadList(out, resultsdir.FileTraffic, &traffic); err != nil {
		t.Fatal(err)
	}
	if len(rep.Conns) != 1 || len(conns) != 1 || len(traffic) != 1 {
		t.Fatalf("%d reported, %d connections.json, %d traffic.json records; want 1 each", len(rep.Conns), len(conns), len(traffic))
	}
	r, c, tr := rep.Conns[0], conns[0], traffic[0]
	if c.RequesterQPN != r.ReqQPN || c.ResponderQPN != r.RespQPN || c.RequesterIPSN != r.ReqIPSN || c.RequesterQPN == 0 || c.ResponderQPN == 0 {
		t.Errorf("connections.json %+v does not carry the generator's QPNs/PSN %+v", c, r)
	}
	if tr.Status != "ok" || tr.Posted != 20 || tr.Completed != 20 || len(tr.MCTUs) != 20 || tr.GoodputGbps <= 0 {
		t.Fatalf("traffic.json: %+v; want status ok, 20 posted and completed, 20 MCTs, goodput > 0", tr)
	}
	rest := append([]float64(nil), tr.MCTUs[1:]...)
	sort.Float64s(rest)
	for k, m := range tr.MCTUs {
		if m <= 0 {
			t.Errorf("MCT of message %d is %v us; want > 0", k+1, m)
		}
	}
	// The first message carries the drop: its completion waits for the NAK and the resend.
	t.Logf("MCTs (us): first %.0f, median of the others %.0f; goodput %.4f Gb/s", tr.MCTUs[0], rest[len(rest)/2], tr.GoodputGbps)
	if tr.MCTUs[0] <= rest[len(rest)/2] {
		t.Errorf("MCT of message 1 (with the drop) %.0f us is not above the median of the others, %.0f us", tr.MCTUs[0], rest[len(rest)/2])
	}
}

// rxeVMDrop runs a drop scenario ((qp 1, psn 5, iter 1) of a WRITE) on rxe and checks the trace and the
// analysis; it returns the results directory.
func rxeVMDrop(t *testing.T, path, outSuffix string) string {
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// LUMINA_RXE_OUT holds one results directory per traffic tool (a run replaces a results directory whole,
	// so they cannot nest).
	out := os.Getenv("LUMINA_RXE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	out = filepath.Join(out, outSuffix)
	o, err := runJudged(sc, Options{OutDir: out, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	rxeVMCheckDrop(t, out, o.Doc)
	return out
}

// rxeVMCheckDrop checks the results of the drop ((qp 1, psn 5, iter 1) of a WRITE) on rxe: integrity, every
// ICRC good, the NAK and the go-back-N resend, the expectations.
func rxeVMCheckDrop(t *testing.T, out string, doc *verdict.Document) {
	t.Helper()
	if !doc.Integrity.OK {
		t.Fatalf("integrity check failed: %+v", doc.Integrity.Checks)
	}
	// Every frame of the trace is a mirrored RoCEv2 packet whose ICRC rxe computed: all must verify.
	f, err := trace.Open(filepath.Join(out, resultsdir.FileTrace))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p roce.Packet
	var n, bad, naks, dropped int
	for {
		pk, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !p.Decode(pk.Data, pk.OrigLen) {
			t.Fatalf("trace packet %d is not RoCEv2", pk.Index)
		}
		n++
		if mir, ok := roce.DecodeMirror(pk.Data); ok && mir.Event == roce.EventDrop {
			dropped++
		}
		if p.CheckICRC() != roce.ICRCGood {
			bad++
		}
		if p.IsNAK() {
			naks++
		}
	}
	t.Logf("%d packets, %d bad ICRC, %d NAKs, %d dropped by the switch", n, bad, naks, dropped)
	if n < 200 || bad != 0 || naks < 1 || dropped != 1 {
		t.Errorf("trace: %d packets (want >= 200), %d bad ICRCs (want 0), %d NAKs (want >= 1), %d drops (want 1)", n, bad, naks, dropped)
	}
	var gbn bool
	for _, c := range doc.Checks {
		if c.Analyzer == "gbn" {
			gbn = true
			if !c.OK {
				t.Errorf("go-back-N check failed: %+v", c.Violations)
			}
		}
	}
	if !gbn {
		t.Error("no go-back-N check in the analysis")
	}
	var found bool
	for _, r := range doc.Retransmissions {
		if r.QP == 1 && r.PSN == 5 {
			found = true
			if r.Trigger == nil || *r.Trigger != "nack" || r.NACKGenerationUs == nil || r.NACKReactionUs == nil {
				b, _ := json.Marshal(r)
				t.Errorf("retransmission of (qp 1, psn 5): %s; want trigger nack with both latencies", b)
			} else {
				t.Logf("rxe NACK generation %.1f us, reaction %.1f us", *r.NACKGenerationUs, *r.NACKReactionUs)
			}
		}
	}
	if !found {
		t.Errorf("no retransmission of (qp 1, psn 5) in %d retransmissions", len(doc.Retransmissions))
	}
	for _, e := range doc.Expectations {
		if !e.OK {
			t.Errorf("expectation failed: %+v", e)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", b)
	return len(b), nil
}
