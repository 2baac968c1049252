package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const realDir = "../../testdata/real-captures"

func lumina(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const scenarioOK = `
seed: 3
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic:
  num-connections: 1
  num-msgs-per-qp: 2
  data-pkt-events:
    - {qpn: 1, psn: 3, type: drop, iter: 1}
expect:
  - integrity: ok
  - check: gbn
`

func TestExitCodes(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	failing := writeFile(t, "fail.yaml", scenarioOK+"  - {path: \"retransmissions[qp=1].trigger\", equals: timeout}\n")
	bad := writeFile(t, "bad.yaml", strings.Replace(scenarioOK, "num-msgs-per-qp: 2", "num-msgs-per-qp: 2\n  mtu: 1000", 1))
	out := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"pass", []string{"run", good, "--out", out}, 0, ""},
		{"expectation fails", []string{"run", failing, "--out", t.TempDir()}, 1, ""},
		{"bad scenario", []string{"run", bad, "--out", t.TempDir()}, 2, "bad.yaml:8:"},
		{"missing scenario", []string{"run", "/nonexistent.yaml"}, 2, "nonexistent.yaml"},
		{"usage", []string{"run"}, 2, "accepts 1 arg"},
		{"unknown flag", []string{"run", good, "--bogus"}, 2, "unknown flag"},
		{"results dir", []string{"analyze", out}, 0, ""},
		{"real capture", []string{"analyze", filepath.Join(realDir, "oferby-proxy_roce.pcap")}, 0, ""},
		{"not a capture", []string{"analyze", good}, 2, "byte offset 0"},
		{"missing capture", []string{"analyze", "/nonexistent.pcap"}, 2, "nonexistent.pcap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := lumina(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, stderr)
			}
			if c.err != "" && !strings.Contains(stderr, c.err) {
				t.Errorf("stderr %q does not mention %q", stderr, c.err)
			}
		})
	}
}

func TestInvalidResultsDirExit3(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	out := t.TempDir()
	if code, _, e := lumina(t, "run", good, "--out", out); code != 0 {
		t.Fatalf("run: exit %d %s", code, e)
	}
	// Claim the switch mirrored one more packet than the dumpers hold.
	p := filepath.Join(out, "counters.json")
	b, _ := os.ReadFile(p)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	sw := m["switch"].(map[string]any)
	sw["mirrored"] = sw["mirrored"].(float64) + 1
	b, _ = json.Marshal(m)
	os.WriteFile(p, b, 0o644)
	code, stdout, _ := lumina(t, "analyze", out)
	if code != 3 || !strings.Contains(stdout, "INVALID TEST") {
		t.Fatalf("exit %d, want 3; output:\n%s", code, stdout)
	}
}

// --json prints the contract's fields.
func TestJSONFields(t *testing.T) {
	good := writeFile(t, "ok.yaml", scenarioOK)
	code, stdout, _ := lumina(t, "run", good, "--out", t.TempDir(), "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	for _, k := range []string{"integrity", "checks", "retransmissions", "cnp", "counters", "traffic", "expectations"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("analysis JSON lacks %q", k)
		}
	}
	r := doc["retransmissions"].([]any)[0].(map[string]any)
	for _, k := range []string{"qp", "psn", "psn_abs", "msg", "iter", "trigger", "nack_generation_us", "nack_reaction_us", "latency_us"} {
		if _, ok := r[k]; !ok {
			t.Errorf("retransmission lacks %q", k)
		}
	}
	code, stdout, _ = lumina(t, "analyze", "--json", filepath.Join(realDir, "hexvec_cx4lx_cnp_from_scapy_test.pcap"))
	if code != 0 {
		t.Fatalf("analyze exit %d", code)
	}
	doc = nil
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"packets", "roce_packets", "icrc", "opcodes", "ecn", "dscp", "cnps", "naks", "rnr_naks", "flows"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("capture JSON lacks %q", k)
		}
	}
	if doc["cnps"].(float64) != 1 {
		t.Errorf("cnps = %v, want 1", doc["cnps"])
	}
}

// The BPF data planes (tc, xdp) implement drop, ecn and corrupt; a scenario with another event is refused before any
// interface is touched, naming the event, never run without it.
func TestSwitchBPFRefusesUnsupportedEvent(t *testing.T) {
	sc := writeFile(t, "delay.yaml", `
seed: 3
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic:
  num-connections: 1
  num-msgs-per-qp: 2
  data-pkt-events:
    - {qpn: 1, psn: 1, type: drop, iter: 1}
    - {qpn: 1, psn: 3, type: delay, delay-us: 50, iter: 1}
`)
	code, _, stderr := lumina(t, "switch", "--in", "nonexistent0", "--out", "nonexistent1", "--dataplane", "xdp", "--events", sc, "--control", "127.0.0.1:0")
	if code != 2 || !strings.Contains(stderr, "delay.yaml:10:") || !strings.Contains(stderr, "not delay") {
		t.Fatalf("exit %d, stderr %q; expected exit 2 naming the delay event's line (delay.yaml:10)", code, stderr)
	}
	for _, args := range [][]string{{"--dataplane", "bpf"}, {"--dataplane", "dpdk"}, {"--dataplane", "tc", "--learn"}} {
		code, _, stderr = lumina(t, append([]string{"switch", "--in", "a", "--out", "b"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--") {
			t.Errorf("%v: exit %d, stderr %q; expected exit 2 with the flag named", args, code, stderr)
		}
	}
}
