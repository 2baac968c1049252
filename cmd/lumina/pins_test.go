package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The pins: the SHA-256 of every file `lumina run` writes for a few scenarios, taken before the simulator's and
// the run's speed work (issue 17) and kept since: the same scenario and seed give a byte-identical trace.pcapng,
// dumps and results documents. A change that alters them on purpose regenerates the file with
// `go test ./cmd/lumina -run TestRunOutputsPinned -rewrite-pins` and says why in its commit.
var rewritePins = flag.Bool("rewrite-pins", false, "rewrite testdata/run-pins.txt from this build's outputs")

const pinsFile = "testdata/run-pins.txt"

// pinScenarios are examples that cover one and several dumpers, WRITE/READ/SEND, drops, ECN, CNPs, IRN,
// timeouts, ETS and interop; pinScenarioText adds many QPs and a snap length.
var pinScenarios = []string{
	"listing2", "irn-selective-repeat", "fast-retransmit-read-cx5", "noisy-neighbor-cx4lx-8",
	"ets-two-classes-cx5", "cnp-three-senders-cx5", "timeouts-adaptive-cx6dx", "interop-e810-to-cx5",
	"counters-cx5-implied-nak", "nak-cnp-e810",
}

var pinScenarioText = map[string]string{
	"many-qps": `
seed: 11
requester: {nic: {type: cx5, ip-list: [10.0.0.2/24, 10.0.0.12/24]}}
responder: {nic: {type: cx5}}
network: {dumpers: 3, snap-len: 128}
traffic:
  num-connections: 300
  rdma-verb: write
  num-msgs-per-qp: 2
  message-size: 3000
  mtu: 1024
  multi-gid: true
  data-pkt-events:
    - {qpn: 7, psn: 2, type: drop, iter: 1}
    - {qpn: 200, psn: 1, type: ecn, iter: 1}
`,
	"send-read": `
seed: 5
requester: {nic: {type: cx6dx}}
responder: {nic: {type: cx6dx}}
network: {dumpers: 2}
traffic:
  num-connections: "3,2"
  rdma-verb: send_read
  num-msgs-per-qp: 4
  message-size: 8192
  mtu: 2048
  data-pkt-events:
    - {qpn: 4, psn: 2, type: drop, iter: 1}
`,
}

var versionBlock = regexp.MustCompile(`(?s)"version": \{[^}]*\}`)

// runHashes runs the scenario and hashes every file of its results directory, with the build's identity and the
// scenario's path (the only things that differ between builds and checkouts) blanked.
func runHashes(t *testing.T, path string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "res")
	if code, _, stderr := lumina(t, "run", path, "--out", out, "-q"); code != 0 {
		t.Fatalf("lumina run %s: exit %d: %s", path, code, stderr)
	}
	var lines []string
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		switch rel {
		case "analysis.json", "switch.json":
			data = versionBlock.ReplaceAll(data, []byte(`"version": {}`))
			data = []byte(strings.ReplaceAll(string(data), path, "SCENARIO"))
		case "scenario.yaml":
			var keep []string
			for l := range strings.Lines(string(data)) {
				if !strings.HasPrefix(l, "# written by") && !strings.HasPrefix(l, "# from ") {
					keep = append(keep, l)
				}
			}
			data = []byte(strings.Join(keep, ""))
		}
		sum := sha256.Sum256(data)
		lines = append(lines, fmt.Sprintf("%s %s", filepath.ToSlash(rel), hex.EncodeToString(sum[:])))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}

func TestRunOutputsPinned(t *testing.T) {
	got := map[string][]string{}
	names := slices.Clone(pinScenarios)
	for _, name := range pinScenarios {
		got[name] = runHashes(t, "../../examples/"+name+".yaml")
	}
	for name, text := range pinScenarioText {
		got[name] = runHashes(t, writeFile(t, name+".yaml", text))
		names = append(names, name)
	}
	slices.Sort(names)
	if *rewritePins {
		var b strings.Builder
		b.WriteString("# SHA-256 of every file `lumina run` writes per scenario (cmd/lumina/pins_test.go)\n")
		for _, n := range names {
			for _, l := range got[n] {
				fmt.Fprintf(&b, "%s %s\n", n, l)
			}
		}
		if err := os.WriteFile(pinsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(pinsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		want[name] = append(want[name], rest)
	}
	if len(want) != len(names) {
		t.Errorf("%s pins %d scenarios; the test runs %d", pinsFile, len(want), len(names))
	}
	for _, n := range names {
		if !slices.Equal(got[n], want[n]) {
			t.Errorf("scenario %s: outputs differ from the pins\n got %q\nwant %q", n, got[n], want[n])
		}
	}
}
