package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	if code != 2 || !strings.Contains(stderr, "uc-space.yaml:1:") || !strings.Contains(stderr, "qp_type: uc is not one of rc, ud") ||
		!strings.Contains(stderr, "profile p2100g") {
		t.Errorf("search restricted to UC on p2100g: exit %d, stderr %q: want 2 naming the restriction, qp_type uc and the profile", code, stderr)
	}
	// A restriction that does not name qp_type keeps the profile's QP types: it is not refused for a UC the user
	// never asked for.
	other := writeFile(t, "write-space.yaml", "opcode: [write]\n")
	code, _, stderr = lumina(t, "search", "--profile", "p2100g", "--restrict", other, "--budget", "3", "--algo", "random", "--out", "s2", "-q")
	if code != 0 && code != 1 {
		t.Errorf("search on p2100g restricted to WRITE: exit %d, stderr %q: want 0 or 1 (an anomaly found)", code, stderr)
	}
	var cfg struct {
		Config struct {
			Space struct {
				QPType []string `json:"qp_type"`
			} `json:"space"`
		} `json:"config"`
	}
	if b, err := os.ReadFile(filepath.Join("s2", "search-config.json")); err != nil {
		t.Error(err)
	} else if err := json.Unmarshal(b, &cfg); err != nil || !slices.Equal(cfg.Config.Space.QPType, []string{"rc", "ud"}) {
		t.Errorf("search-config.json space qp_type %v (%v): want the profile's rc and ud", cfg.Config.Space.QPType, err)
	}
	// A search an earlier version ran over UC on p2100g cannot be resumed, and the error says why, not "use the
	// same options" (no option brings UC back).
	saved := filepath.Join("s2", "search-config.json")
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(b), `"qp_type": [`, `"qp_type": ["uc", `, 1)
	if old == string(b) {
		t.Fatalf("%s has no qp_type list to edit:\n%s", saved, b)
	}
	if err := os.WriteFile(saved, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = lumina(t, "search", "--profile", "p2100g", "--restrict", other, "--budget", "4", "--algo", "random", "--out", "s2", "--resume", "-q")
	if code != 2 || !strings.Contains(stderr, "QP types uc, ") || !strings.Contains(stderr, "start the search again") {
		t.Errorf("resume of a search over UC on p2100g: exit %d, stderr %q: want 2 saying the profile's space has no UC", code, stderr)
	}
}
