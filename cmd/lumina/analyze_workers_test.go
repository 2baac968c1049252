package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/version"
)

// scenarioWorkers is a run whose trace has many connections in both directions (SEND and READ) with drops,
// ECN marks, corruption, reordering and duplicates, long enough for the analysis pipeline's batches (256
// packets) to wrap many times.
const scenarioWorkers = `
seed: 11
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic:
  num-connections: "24,24"
  rdma-verb: send_read
  num-msgs-per-qp: 16
  mtu: 1024
  message-size: 8192
  data-pkt-events:
    - {qpn: all, psn: 1, every: 7, type: ecn}
    - {qpn: [1, 5, 9, 30], psn: 4, msg: 2, type: drop}
    - {qpn: 3, psn: 6, type: drop, iter: all}
    - {qpn: 2, psn: 7, type: reorder, behind: 2}
    - {qpn: 4, psn: 9, type: duplicate, copies: 2}
    - {qpn: 6, psn: 3, type: corrupt}
    - {qpn: 7, nth: 1, packet: ack, type: drop}
`

// analyzeDoc is the whole document of lumina analyze --json on paths with the given number of workers.
func analyzeDoc(t *testing.T, paths []string, workers int) []byte {
	t.Helper()
	opts := summary.Options{Port: 4791, TopFlows: -1, Workers: workers}
	doc, err := analyzeCaptures(paths, opts, true, nil)
	if err != nil {
		return []byte("error: " + err.Error())
	}
	b, err := version.MarshalDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAnalyzeWorkersSameDocument: the analysis pipeline (reading, decoding and ICRC checks on other
// goroutines) gives byte for byte the document of the one-worker path, on real captures, on a run's dumps
// merged by mirror sequence number and its trace.pcapng, on a capture cut in the middle of a packet and on
// one malformed midway; whatever the number of workers and GOMAXPROCS.
func TestAnalyzeWorkersSameDocument(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(sc, []byte(scenarioWorkers), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "res")
	if code, _, e := lumina(t, "run", sc, "--out", out); code > 1 {
		t.Fatalf("run: exit %d: %s", code, e)
	}
	dumps, _ := filepath.Glob(filepath.Join(out, "dump", "*.pcap"))
	if len(dumps) == 0 {
		t.Fatal("the run wrote no dumps")
	}
	tr := filepath.Join(out, "trace.pcapng")
	real, _ := filepath.Glob(filepath.Join(realDir, "*.pcap*"))
	if len(real) < 5 {
		t.Fatalf("want the real captures of %s, found %d", realDir, len(real))
	}

	// The trace cut in the middle of a packet, and with a record whose length is absurd.
	whole, err := os.ReadFile(dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) < 200_000 {
		t.Fatalf("dump %s has %d bytes, want a trace of many batches", dumps[0], len(whole))
	}
	cut := filepath.Join(dir, "cut.pcap")
	if err := os.WriteFile(cut, whole[:len(whole)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), whole...)
	off := 24 // the first record; then walk to one about half way
	for n := 0; off < len(bad)/2; n++ {
		off += 16 + int(uint32(bad[off+8])|uint32(bad[off+9])<<8|uint32(bad[off+10])<<16|uint32(bad[off+11])<<24)
	}
	bad[off+8], bad[off+9], bad[off+10], bad[off+11] = 0xff, 0xff, 0xff, 0x7f
	malformed := filepath.Join(dir, "malformed.pcap")
	if err := os.WriteFile(malformed, bad, 0o644); err != nil {
		t.Fatal(err)
	}

	inputs := [][]string{dumps, {tr}, {cut}, {malformed}}
	for _, r := range real {
		inputs = append(inputs, []string{r})
	}
	inputs = append(inputs, real[:3]) // merged by time
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, paths := range inputs {
		want := analyzeDoc(t, paths, 1)
		for _, procs := range []int{1, 2, 5} {
			runtime.GOMAXPROCS(procs)
			for _, w := range []int{0, 2, 3, 8} {
				if got := analyzeDoc(t, paths, w); !bytes.Equal(got, want) {
					t.Errorf("%v: GOMAXPROCS=%d, %d workers: the document differs from the one-worker path's:\n%s\nwant:\n%s",
						paths, procs, w, firstDiff(got, want), firstDiff(want, got))
				}
			}
		}
	}
	// The inputs exercise what they claim to: the cut capture is reported cut, the malformed one fails.
	if d := analyzeDoc(t, []string{cut}, 1); !bytes.Contains(d, []byte(`"truncated"`)) {
		t.Errorf("cut capture: no truncation in the document")
	}
	if d := analyzeDoc(t, []string{malformed}, 1); !bytes.HasPrefix(d, []byte("error: ")) {
		t.Errorf("malformed capture: no error, got %.200s", d)
	}
}

// firstDiff returns a window of a around its first difference from b.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo, hi := max(i-200, 0), min(i+200, len(a))
	return string(a[lo:hi])
}
