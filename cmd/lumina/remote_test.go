package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lumina run --dry-run on a remote scenario prints the hosts' operations and exits 0 without writing the
// results directory; a remote scenario missing a host field exits 2 naming it; the agent refuses to start
// without its directory.
func TestRunDryRunRemote(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(key, []byte("x"), 0o600)
	os.WriteFile(kh, nil, 0o600)
	host := func(ip, nic string) string {
		return "  control-ip: " + ip + "\n  username: root\n  ssh-key-filepath: " + key + "\n  known-hosts: " + kh + "\n" + nic
	}
	y := "testbed: remote\nindex-base: 1\nseed: 3\n" +
		"requester:\n" + host("192.0.2.1", "  nic: {type: cx5, ip-list: [10.0.0.2/24], if-name: eth0, switch-port: sw0}\n") +
		"responder:\n" + host("192.0.2.2", "  nic: {type: cx5, ip-list: [10.0.0.3/24], if-name: eth0, switch-port: sw1}\n") +
		"switch:\n" + host("192.0.2.3", "") +
		"requester-mirror:\n" + host("192.0.2.4", "  nic: {if-name: eth1, switch-port: sw2}\n") +
		"traffic: {num-connections: 1, num-msgs-per-qp: 2, data-pkt-events: [{qpn: 1, psn: 3, type: drop, iter: 1}]}\n"
	p := writeFile(t, "remote.yaml", y)
	out := filepath.Join(dir, "results")
	code, stdout, stderr := lumina(t, "run", "--dry-run", p, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"host requester: ssh requester (root@192.0.2.1:22)", "op switch-install conns=1", "agent:  exec .cache/lumina/agent/lumina-"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("dry run lacks %q:\n%s", w, stdout)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("dry run created %s", out)
	}
	bad := writeFile(t, "bad.yaml", strings.Replace(y, "  control-ip: 192.0.2.3\n", "", 1))
	code, _, stderr = lumina(t, "run", "--dry-run", bad)
	if code != 2 || !strings.Contains(stderr, "switch.control-ip is missing") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = lumina(t, "agent")
	if code != 2 || !strings.Contains(stderr, "exactly one of --run-dir DIR and --cleanup DIR") {
		t.Errorf("agent without a directory: exit %d: %s", code, stderr)
	}
}

// Real RNICs (nic.ib-device): --verbs-binary names the generator, and the dry run shows hostnic's steps on
// each end; without it the run exits 2 saying how to give it.
func TestRunDryRunRemoteRealNIC(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(key, []byte("x"), 0o600)
	os.WriteFile(kh, nil, 0o600)
	vb := filepath.Join(dir, "lumina-verbs")
	os.WriteFile(vb, []byte("not run by a dry run"), 0o755)
	host := func(ip, nic string) string {
		return "  control-ip: " + ip + "\n  username: root\n  ssh-key-filepath: " + key + "\n  known-hosts: " + kh + "\n" + nic
	}
	y := "testbed: remote\nindex-base: 1\nseed: 3\n" +
		"requester:\n" + host("192.0.2.1", "  nic: {type: rxe, ip-list: [10.0.0.2/24], if-name: eth0, ib-device: rxe0, switch-port: sw0}\n") +
		"responder:\n" + host("192.0.2.2", "  nic: {type: rxe, ip-list: [10.0.0.3/24], if-name: eth0, ib-device: rxe1, switch-port: sw1}\n") +
		"switch:\n" + host("192.0.2.3", "") +
		"requester-mirror:\n" + host("192.0.2.4", "  nic: {if-name: eth1, switch-port: sw2}\n") +
		"traffic: {num-connections: 1, num-msgs-per-qp: 2, data-pkt-events: [{qpn: 1, psn: 3, type: drop, iter: 1}]}\n"
	p := writeFile(t, "remote-rxe.yaml", y)
	t.Setenv("LUMINA_VERBS_BINARY", "")
	code, stdout, stderr := lumina(t, "run", "--dry-run", "--verbs-binary", vb, p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{
		"step responder (root@192.0.2.2:22): create the Soft-RoCE device rxe1 on eth0: rdma link add rxe1 type rxe netdev eth0 [undo: rdma link delete rxe1]",
		"op verbs-server-start device=rxe1 listen=10.0.0.3:18515",
		"(lumina-verbs, sha256 ",
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("dry run lacks %q:\n%s", w, stdout)
		}
	}
	code, _, stderr = lumina(t, "run", "--dry-run", p)
	if code != 2 || !strings.Contains(stderr, "--verbs-binary PATH or LUMINA_VERBS_BINARY=PATH") {
		t.Errorf("no generator: exit %d: %s", code, stderr)
	}
}
