package testbed

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/scenario"
)

// dryScenario points at hosts that do not exist (TEST-NET-1): a dry run must not contact them.
func dryScenario(t *testing.T, dir string) string {
	t.Helper()
	key := filepath.Join(dir, "key")
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(key, []byte("not read by a dry run\n"), 0o600)
	os.WriteFile(kh, nil, 0o600)
	host := func(ip, extra string) string {
		return "  control-ip: " + ip + "\n  username: lab\n  ssh-key-filepath: " + key + "\n  known-hosts: " + kh + "\n" + extra
	}
	s := "testbed: remote\nindex-base: 1\n" + oneMessageEvents(listing2)
	s = strings.Replace(s, "requester:\n", "requester:\n"+host("192.0.2.11", ""), 1)
	s = strings.Replace(s, "responder:\n", "responder:\n"+host("192.0.2.12", ""), 1)
	s = strings.Replace(s, "[10.0.0.2/24, 10.0.0.12/24]}", "[10.0.0.2/24, 10.0.0.12/24], if-name: ens1f0, switch-port: enp1s0}", 1)
	s = strings.Replace(s, "[10.0.0.3/24]}", "[10.0.0.3/24], if-name: ens1f0, switch-port: enp2s0}", 1)
	s += "switch:\n" + host("192.0.2.10", "  jump: ops@bastion:2222\n")
	s += "requester-mirror:\n" + host("192.0.2.13", "  nic: {if-name: ens2f0, switch-port: enp3s0}\n")
	return s
}

// --dry-run prints every host's connection, deployment, agent, operations and commands, and touches nothing.
func TestRemoteDryRun(t *testing.T) {
	dir := t.TempDir()
	sc := load(t, dryScenario(t, dir))
	out := filepath.Join(dir, "results")
	var b bytes.Buffer
	if err := DryRun(sc, Options{OutDir: out, Remote: RemoteOptions{AgentBinary: os.Args[0]}}, &b); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, w := range []string{
		"host requester: ssh requester (lab@192.0.2.11:22)",
		"host switch: ssh switch (lab@192.0.2.10:22) via ops@bastion:2222",
		"host requester-mirror: ssh requester-mirror (lab@192.0.2.13:22)",
		"deploy: uname -m",
		"agent:  exec sudo -n .cache/lumina/agent/lumina-",
		"op switch-start ports=[enp1s0 enp2s0] mirror=[enp3s0] intents=3 weights=[1]",
		"exec ethtool -K enp1s0 tx off rx off tso off gso off gro off",
		"exec ip link set dev ens1f0 mtu 1500",
		"exec ip link set dev enp3s0 promisc on",
		"read /sys/class/net/enp3s0/{mtu,flags}; exec ethtool -k enp3s0 (the state to restore",
		"op hello ifaces=[enp1s0 enp2s0 enp3s0]",
		"counted from 1 (index-base)",
		"op endpoint-start iface=ens1f0 requester=true profile=cx5 qps=2",
		"op switch-install conns=2 [0 write 10.0.0.2->10.0.0.3",
		"op traffic-run limit_ms=10000",
		"op dump-stop\n  op fetch file=dump.pcap",
	} {
		if !strings.Contains(s, w) {
			t.Errorf("dry run lacks %q:\n%s", w, s)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a dry run created %s", out)
	}
}

// A remote scenario missing what a run needs is bad input (exit 2) before anything is contacted.
func TestRemoteValidation(t *testing.T) {
	dir := t.TempDir()
	base := dryScenario(t, dir)
	// Two hosts with one data address are a bad scenario on every testbed: the scenario validator refuses it.
	if _, err := scenario.Parse([]byte(strings.Replace(base, "[10.0.0.3/24]", "[10.0.0.2/24]", 1)), "test.yaml"); err == nil ||
		!strings.Contains(err.Error(), "both have the address 10.0.0.2") {
		t.Errorf("requester and responder with one address: %v", err)
	}
	cases := []struct{ old, new, want string }{
		{"  control-ip: 192.0.2.12\n", "", "responder.control-ip is missing"},
		{"switch-port: enp2s0", "switch-port: enp1s0", "responder.nic.switch-port enp1s0 is also requester's"},
		{"switch-port: enp2s0", "switch-port: 140", "is a Tofino port number"},
		{"if-name: ens2f0, ", "", "requester-mirror.nic.if-name is missing"},
		{"known-hosts: " + filepath.Join(dir, "known_hosts") + "\n  jump", "known-hosts: /nonexistent/kh\n  jump", "known_hosts /nonexistent/kh"},
		{"ssh-key-filepath: " + filepath.Join(dir, "key") + "\n  known-hosts: " + filepath.Join(dir, "known_hosts") + "\n  nic",
			"ssh-key-filepath: /nonexistent/key\n  known-hosts: " + filepath.Join(dir, "known_hosts") + "\n  nic", "requester.ssh-key-filepath: open /nonexistent/key"},
	}
	for _, c := range cases {
		if !strings.Contains(base, c.old) {
			t.Fatalf("scenario lacks %q", c.old)
		}
		sc := load(t, strings.Replace(base, c.old, c.new, 1))
		err := DryRun(sc, Options{OutDir: filepath.Join(dir, "r"), Remote: RemoteOptions{AgentBinary: os.Args[0]}}, &bytes.Buffer{})
		if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q: error %v; want bad input containing %q", c.old, c.new, err, c.want)
		}
	}
}

// The configuration example of docs/testbed-remote.md loads, with the hosts it shows.
func TestRemoteDocExample(t *testing.T) {
	data, err := os.ReadFile("../docs/testbed-remote.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/testbed-remote.md has no yaml block")
	}
	sc := load(t, block)
	r := sc.Remote
	if r == nil || r.Switch.Jump != "ops@bastion:2222" || r.Requester.SwitchPort != "enp1s0f0" || len(r.Dumpers) != 1 ||
		sc.IndexBase != 1 || len(sc.Events) != 1 {
		t.Errorf("remote %+v base %d events %d", r, sc.IndexBase, len(sc.Events))
	}
}
