package testbed

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		if _, err := Run(sc, Options{OutDir: dir}); err != nil {
			t.Fatal(err)
		}
		var written int64
		files, _ := filepath.Glob(filepath.Join(dir, DirDump, "*.pcap"))
		for _, f := range append(files, filepath.Join(dir, FileTrace)) {
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
