package testbed

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
)

// The estimate is within 30% of what a run writes (no loss: no retransmission to add).
func TestEstimateDumpBytes(t *testing.T) {
	for _, traffic := range []string{
		"{num-connections: 2, num-msgs-per-qp: 200, message-size: 10240}",
		"{num-connections: 3, num-msgs-per-qp: 40, message-size: 65536, mtu: 4096}",
		"{num-connections: 2, num-msgs-per-qp: 50, rdma-verb: read, message-size: 8192}",
	} {
		sc, err := scenario.Parse([]byte("requester: {nic: {type: cx5}}\nresponder: {nic: {type: cx5}}\ntraffic: "+traffic+"\n"), "x.yaml")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "r")
		if err := Run(sc, Options{OutDir: dir}); err != nil {
			t.Fatal(err)
		}
		var written int64
		files, _ := filepath.Glob(filepath.Join(dir, resultsdir.DirDump, "*.pcap"))
		for _, f := range append(files, filepath.Join(dir, resultsdir.FileTrace)) {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			written += st.Size()
		}
		_, est := EstimateDumpBytes(sc)
		if r := float64(est) / float64(written); r < 0.7 || r > 1.3 {
			t.Errorf("%s: estimated %d bytes, wrote %d (ratio %.2f)", traffic, est, written, r)
		}
	}
}

// A run about to write gigabytes says so before it starts; a small one says nothing.
func TestAnnounce(t *testing.T) {
	big, err := scenario.Parse([]byte("requester: {nic: {type: cx5}}\nresponder: {nic: {type: cx5}}\ntraffic: {num-connections: 2000, num-msgs-per-qp: 1000}\n"), "big.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	announce(&b, big, "results/big")
	out := b.String()
	if !strings.Contains(out, "lumina: preparing 2000 connection(s) x 1000 message(s) x 10 packet(s) = 20000000 data packets on testbed sim...") ||
		!strings.Contains(out, "lumina: warning: this run will write about 7.0 GB of dumps and trace to results/big") {
		t.Fatalf("announce:\n%s", out)
	}
	small, _ := scenario.Parse([]byte("traffic: {num-connections: 2}\n"), "small.yaml")
	b.Reset()
	announce(&b, small, "results/small")
	if b.Len() != 0 {
		t.Fatalf("a small run announced %q", b.String())
	}
}

// Every range the scenario validator states ends where the simulator's own configuration check ends: the
// extreme values it accepts build a simulation configuration the simulator accepts too (and one more is
// refused by the validator, not by the run).
func TestValidatorRangesAreTestbedRanges(t *testing.T) {
	const hosts = "requester: {nic: {type: cx5}}\nresponder: {nic: {type: cx5}}\n"
	for _, traffic := range []string{
		"{num-connections: 65536, num-msgs-per-qp: 1048576, message-size: 2147483647, tx-depth: 4096, min-retransmit-timeout: 31, max-retransmit-retry: 7, rnr-retry: 7, dscp-list: [0, 63], mtu: 4096}",
		"{num-connections: 1, num-msgs-per-qp: 1, message-size: 1, tx-depth: 1, min-retransmit-timeout: 0, max-retransmit-retry: 0, rnr-retry: 0, mtu: 256}",
		"{num-connections: \"65535,1\", rdma-verb: send_read}",
	} {
		sc, err := scenario.Parse([]byte(hosts+"traffic: "+traffic+"\nnetwork: {link-gbps: 100000, propagation-ns: 0, switch-latency-ns: 0, dumpers: 16}\n"), "x.yaml")
		if err != nil {
			t.Fatalf("%s: %v", traffic, err)
		}
		if err := preflight(sc); err != nil {
			t.Errorf("%s: the validator accepts it, the testbed refuses it: %v", traffic, err)
		}
	}
	for _, bad := range []string{"{message-size: 2147483648}", "{num-msgs-per-qp: 1048577}", "{num-connections: 65537}", "{tx-depth: 4097}"} {
		if _, err := scenario.Parse([]byte(hosts+"traffic: "+bad+"\n"), "x.yaml"); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s: %v, want the validator's out-of-range error", bad, err)
		}
	}
	// Beyond the limit of 65,536 QPs in total as a send_read pair: refused naming the field and the limit.
	_, err := scenario.Parse([]byte(hosts+"traffic: {num-connections: \"65536,1\", rdma-verb: send_read}\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "traffic.num-connections") || !strings.Contains(err.Error(), "1..65536 QPs in total") {
		t.Errorf("send_read 65536,1: %v, want the validator's error naming traffic.num-connections and 1..65536", err)
	}
}
