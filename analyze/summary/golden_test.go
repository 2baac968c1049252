package summary

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGoldenText pins the human summary of a small real capture (read, write, UD CM traffic) and the JSON of a
// synthetic one with every table populated. Regenerate with: go test ./analyze/summary -run Golden -update
func TestGoldenText(t *testing.T) {
	r := analyzeReal(t, "montybeatnik_roce_capture_read-write-ecn.pcap")
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "montybeatnik.txt.golden", buf.Bytes())
}

func TestGoldenBusyText(t *testing.T) {
	r := busyReport(t)
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "synthetic.txt.golden", buf.Bytes())
	buf.Reset()
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "synthetic.json.golden", buf.Bytes())
}

// busyReport has CE marks, CNPs, NAKs, PFC, VLANs, retransmissions, gaps and more flows than the text lists.
func busyReport(t *testing.T) *Report {
	s := NewStats(Options{TopFlows: 3})
	ts := int64(1_700_000_000_000_000_000)
	add := func(f []byte) {
		ts += 1500
		s.AddFrame(f, len(f), ts)
	}
	for qp := uint32(1); qp <= 5; qp++ {
		for psn := uint32(0); psn < 4*qp; psn++ {
			if qp == 2 && psn == 3 {
				continue // a gap
			}
			tos := uint8(2)
			if psn%5 == 4 {
				tos = 3
			}
			add(frame(t, frameSpec{op: 0x07, psn: psn, qp: qp, tos: tos, payload: 1024, vlan: uint16(100 + qp%2)}))
		}
	}
	add(frame(t, frameSpec{op: 0x07, psn: 2, qp: 3, tos: 2, payload: 1024})) // a retransmission
	add(frame(t, frameSpec{op: 0x11, psn: 3, qp: 0x40, from: hostB, to: hostA, syndrome: 0x60}))
	add(frame(t, frameSpec{op: 0x11, psn: 3, qp: 0x40, from: hostB, to: hostA, syndrome: 0x21}))
	add(frame(t, frameSpec{op: 0x81, qp: 0x40, from: hostB, to: hostA, tos: 0xc2}))
	add(pfcFrame(0x100))
	return s.Report()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output; got:\n%s", path, got)
	}
}
