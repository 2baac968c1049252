package main

import (
	"strings"
	"testing"
)

// TestUnsupportedQPType: p2100g's NIC cannot create UC QPs (bnxt_re refuses them), so a workload scenario asking
// for UC on it and a search restricted to UC on it are bad input (exit 2) with an error naming qp_type and the
// profile; the same workload runs on cx6vpi-200g.
func TestUnsupportedQPType(t *testing.T) {
	const sc = `
requester: {nic: {type: %s}}
responder: {nic: {type: %s}}
workload: {qp_type: uc, opcode: write, num_qps: 1, mtu: 4096, wqe_batch: 16, msg_sizes: [65536]}
`
	for _, c := range []struct {
		nic  string
		code int
	}{{"p2100g", 2}, {"cx6vpi-200g", 0}} {
		f := writeFile(t, "uc.yaml", strings.ReplaceAll(sc, "%s", c.nic))
		code, _, stderr := lumina(t, "run", f, "--out", t.TempDir())
		if code != c.code {
			t.Fatalf("%s: lumina run UC: exit %d, want %d; stderr: %s", c.nic, code, c.code, stderr)
		}
		if c.code == 2 && (!strings.Contains(stderr, "qp_type uc") || !strings.Contains(stderr, "p2100g cannot create UC QPs") ||
			!strings.Contains(stderr, "requester.nic.type")) {
			t.Errorf("stderr %q: want the field (qp_type uc), the host's nic.type and the profile named", stderr)
		}
	}
	space := writeFile(t, "uc-space.yaml", "qp_type: [uc]\nopcode: [write]\n")
	t.Chdir(t.TempDir())
	code, _, stderr := lumina(t, "search", "--profile", "p2100g", "--restrict", space, "--budget", "4", "--out", "s")
	if code != 2 || !strings.Contains(stderr, "uc-space.yaml") || !strings.Contains(stderr, "qp_type uc: profile p2100g cannot create UC QPs") {
		t.Errorf("search restricted to UC on p2100g: exit %d, stderr %q: want 2 naming the restriction, qp_type uc and the profile", code, stderr)
	}
}
