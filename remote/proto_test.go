package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Bad requests are rejected with an error naming the problem; nothing of a request reaches a shell.
func TestDecodeRequestRejects(t *testing.T) {
	cases := []struct{ line, want string }{
		{`not json`, "decoding request"},
		{`{"id":1,"op":"sh","args":{"cmd":"rm -rf /"}}`, `unknown operation "sh"`},
		{`{"id":1,"op":"iface-setup","args":{"iface":"eth0; reboot","mtu":1500}}`, `iface "eth0; reboot" is not an interface name`},
		{`{"id":1,"op":"iface-setup","args":{"iface":"-x"}}`, "is not an interface name"},
		{`{"id":1,"op":"iface-setup","args":{"iface":"eth0","mtu":100}}`, "mtu 100; expected 1280..9216"},
		{`{"id":1,"op":"iface-setup","args":{"iface":"eth0","command":"x"}}`, `unknown field "command"`},
		{`{"id":1,"op":"fetch","args":{"file":"../../etc/shadow","offset":0,"length":10}}`, "expected a plain file name"},
		{`{"id":1,"op":"fetch","args":{"file":"dump.pcap","offset":0,"length":0}}`, "length 1.."},
		{`{"id":1,"op":"switch-start","args":{"ports":["a","a"],"dumpers":["d"],"dumper_weights":[1],"frame_size":4096}}`, "ports are both"},
		{`{"id":1,"op":"switch-start","args":{"ports":["a","b"],"dumpers":["d"],"dumper_weights":[1,1],"frame_size":4096}}`, "2 dumper weights for 1 mirror ports"},
		{`{"id":1,"op":"switch-install","args":{"conns":[]}}`, "no connections"},
		{`{"id":1,"op":"traffic-run","args":{"limit_ms":0}}`, "limit_ms 0"},
		{`{"id":1,"op":"dump-start","args":{"iface":"eth0","workers":2,"snaplen":10}}`, "snaplen 10"},
		{`{"id":1,"op":"endpoint-start","args":{"iface":"eth0","profile":"cx5","spec":{"qps":[],"frame_size":4096}}}`, "no QPs"},
	}
	for _, c := range cases {
		_, _, err := DecodeRequest([]byte(c.line))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want it to contain %q", c.line, err, c.want)
		}
	}
	_, op, err := DecodeRequest([]byte(`{"id":7,"op":"iface-setup","args":{"iface":"eth0","mtu":1500,"offload_off":true,"promisc":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := op.Commands()
	want := [][]string{{"ip", "link", "set", "dev", "eth0", "mtu", "1500"}, {"ip", "link", "set", "dev", "eth0", "up"},
		{"ip", "link", "set", "dev", "eth0", "promisc", "on"},
		{"ethtool", "-K", "eth0", "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"}}
	if len(got) != len(want) {
		t.Fatalf("commands %q; want %q", got, want)
	}
	for i := range want {
		if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("command %d %q; want %q", i, got[i], want[i])
		}
	}
}

// The agent answers a bad request with an error and keeps serving; when its input ends it undoes its
// journal in reverse order and removes its run directory.
func TestAgentServeAndCleanup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var ran [][]string
	a := &Agent{RunDir: dir, Run: func(argv []string) (string, error) {
		ran = append(ran, argv)
		if argv[0] == "ethtool" && argv[1] == "-k" {
			return "tx-checksumming: on\nrx-checksumming: off\ngeneric-receive-offload: on [fixed]\n", nil
		}
		return "", nil
	}}
	in := strings.NewReader(`{"id":1,"op":"bogus"}` + "\n" +
		`{"id":2,"op":"hello"}` + "\n" +
		`{"id":3,"op":"iface-setup","args":{"iface":"lo","mtu":1500,"offload_off":true,"promisc":true}}` + "\n" +
		`{"id":4,"op":"fetch","args":{"file":"nothere","offset":0,"length":10}}` + "\n")
	var out bytes.Buffer
	if err := a.Serve(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var rs []Response
	for dec.More() {
		var r Response
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if len(rs) != 4 || rs[0].OK || !strings.Contains(rs[0].Error, "unknown operation") || !rs[1].OK || !rs[2].OK || rs[3].OK {
		t.Fatalf("responses %+v", rs)
	}
	var h HelloResult
	if err := json.Unmarshal(rs[1].Result, &h); err != nil || h.Version != Version || h.RunDir != dir {
		t.Errorf("hello %+v %v", h, err)
	}
	// Setup: read offloads, mtu, up, ethtool -K; then the undo in reverse: offloads back on (tx, gro), mtu back.
	lo, _ := os.ReadFile("/sys/class/net/lo/mtu")
	var joined []string
	for _, c := range ran {
		joined = append(joined, strings.Join(c, " "))
	}
	n := len(joined)
	if n < 4 || joined[n-3] != "ethtool -K lo tx on gro on" || joined[n-2] != "ip link set dev lo promisc off" ||
		joined[n-1] != "ip link set dev lo mtu "+strings.TrimSpace(string(lo)) {
		t.Errorf("commands run %q; want the undo (offloads on, promiscuous off, then the old MTU) last", joined)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
}

// A jump host is read in ProxyJump form.
func TestParseJump(t *testing.T) {
	for in, want := range map[string]string{"bastion": "lab@bastion:22", "ops@10.1.1.1:2222": "ops@10.1.1.1:2222", "[::1]:22": "lab@::1:22"} {
		u, a, err := ParseJump(in, "lab")
		if err != nil || u+"@"+strings.Replace(strings.Trim(a, "[]"), "]", "", 1) != want && u+"@"+a != want {
			t.Errorf("%s: %s %s %v; want %s", in, u, a, err, want)
		}
	}
	if _, _, err := ParseJump("h:99999", "lab"); err == nil {
		t.Error("port 99999 accepted")
	}
	if Quote("a b'c") != `'a b'\''c'` || Quote("plain/path-1") != "plain/path-1" {
		t.Errorf("quote %s %s", Quote("a b'c"), Quote("plain/path-1"))
	}
}

// An encrypted key without an ssh-agent is a clear error, never a prompt.
func TestEncryptedKeyNoPrompt(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	blk, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "enc")
	os.WriteFile(p, pem.EncodeToMemory(blk), 0o600)
	t.Setenv("SSH_AUTH_SOCK", "")
	_, err = Dial(context.Background(), Target{Role: "requester", Host: "192.0.2.1", User: "lab", KeyFile: p})
	if err == nil || !strings.Contains(err.Error(), "is encrypted and no ssh-agent is running") || !strings.Contains(err.Error(), "ssh-add "+p) ||
		!strings.Contains(err.Error(), "requester (lab@192.0.2.1:22)") {
		t.Errorf("error %v", err)
	}
	var he *HostError
	if !errors.As(err, &he) || !he.Env {
		t.Errorf("error %T is not an environment HostError", err)
	}
}

// The deployment's paths: the default workspace, a home-relative one (~ would be quoted away), an absolute one;
// non-root users go through sudo -n.
func TestPlanDeployment(t *testing.T) {
	for ws, want := range map[string]string{"": ".cache/lumina/agent/lumina-ab", "~/lab": "lab/agent/lumina-ab",
		"~": ".cache/lumina/agent/lumina-ab", "/opt/lu mina": "/opt/lu mina/agent/lumina-ab"} {
		d := PlanDeployment(ws, "root", "r1", "switch", "ab")
		if d.Bin != want || d.Sudo {
			t.Errorf("workspace %q: bin %q sudo %v; want %q", ws, d.Bin, d.Sudo, want)
		}
	}
	d := PlanDeployment("/opt/lu mina", "lab", "r1", "switch", "ab")
	if got := d.AgentCommand(); got != "exec sudo -n '/opt/lu mina/agent/lumina-ab' agent --run-dir '/opt/lu mina/run/r1-switch'" {
		t.Errorf("agent command %s", got)
	}
	if got := d.InstallCommand(); !strings.Contains(got, "cat > '/opt/lu mina/agent/lumina-ab.tmp-r1-switch' && chmod 755") {
		t.Errorf("install command %s", got)
	}
}
