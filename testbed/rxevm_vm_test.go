//go:build rxevm

package testbed

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"lumina/roce"
	"lumina/scenario"
	"lumina/trace"
)

// TestRxeVMWriteDrop runs examples/rxe-vm-write-drop.yaml on real Soft-RoCE in a qemu guest (needs root,
// qemu and the Debian mirror for the first build; scripts/rxe-vm/ci.sh runs it): the dropped packet must be
// NAK'd and resent by go-back-N, the trace must pass the integrity check and every ICRC must be valid.
func TestRxeVMWriteDrop(t *testing.T) {
	sc, err := scenario.Load("../examples/rxe-vm-write-drop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("LUMINA_RXE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	o, err := Run(sc, Options{OutDir: out, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	doc := o.Doc
	if !doc.Integrity.OK {
		t.Fatalf("integrity check failed: %+v", doc.Integrity.Checks)
	}
	// Every frame of the trace is a mirrored RoCEv2 packet whose ICRC rxe computed: all must verify.
	f, err := trace.Open(filepath.Join(out, FileTrace))
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
		if mir, ok := trace.DecodeMirror(pk.Data); ok && mir.Event == trace.EventDrop {
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
