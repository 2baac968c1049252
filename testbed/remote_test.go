package testbed

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lumina-go/lumina/live"
)

// sshHosts is a testbed of real hosts made of network namespaces: the netns testbed's data links (requester,
// switch, responder, dumpers joined by veths) plus, per namespace, a control link to this namespace and a
// real sshd (Debian's openssh-server) that accepts only the test's key.
type sshHosts struct {
	t          *testing.T
	dir        string
	tb         *live.Testbed
	agent      string // the lumina binary deployed as the agent
	key        string // the user's private key file
	knownHosts string
	ips        map[string]string // role -> control IP
	ns         map[string]string // role -> namespace
	hostKeys   map[string]ssh.PublicKey
	sshd       []*exec.Cmd
	ctlIfs     []string
}

var (
	agentOnce sync.Once
	agentBin  string
	agentErr  error
)

// TestMain removes the agent binary built for the remote tests. The lumina runs of the tests record into a
// temporary run history, never the user's.
func TestMain(m *testing.M) {
	hist, err := os.MkdirTemp("", "lumina-test-history-")
	if err != nil {
		panic(err)
	}
	os.Setenv("LUMINA_HISTORY", filepath.Join(hist, "history.db"))
	code := m.Run()
	if agentBin != "" {
		os.RemoveAll(filepath.Dir(agentBin))
	}
	os.RemoveAll(hist)
	os.Exit(code)
}

// buildAgent builds the lumina binary once per test process.
func buildAgent(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lumina-agent-")
		if err != nil {
			agentErr = err
			return
		}
		agentBin = filepath.Join(dir, "lumina")
		out, err := exec.Command("go", "build", "-o", agentBin, "github.com/lumina-go/lumina/cmd/lumina").CombinedOutput()
		if err != nil {
			agentErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentBin
}

func writeKey(t *testing.T, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func must(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// newSSHHosts builds the hosts; data interfaces start with MTU 1400 so that the run's changes (MTU 1500) and
// their undoing can be seen.
func newSSHHosts(t *testing.T, tag int) *sshHosts {
	t.Helper()
	if err := live.RequireRoot(); err != nil {
		t.Skipf("the remote testbed's tests need root: %v", err)
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Fatalf("the remote testbed's tests need sshd: apt-get install -y openssh-server (scripts/test.sh does): %v", err)
	}
	h := &sshHosts{t: t, dir: t.TempDir(), agent: buildAgent(t), ips: map[string]string{}, ns: map[string]string{},
		hostKeys: map[string]ssh.PublicKey{}}
	tb, err := live.NewTestbed(live.TestbedConfig{Dumpers: 2, MTU: 1400, Tag: 100 + tag})
	if err != nil {
		t.Fatal(err)
	}
	h.tb = tb
	t.Cleanup(h.close)
	h.key = filepath.Join(h.dir, "id_ed25519")
	user := writeKey(t, h.key)
	auth := filepath.Join(h.dir, "authorized_keys")
	if err := os.WriteFile(auth, ssh.MarshalAuthorizedKey(user), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, "mkdir", "-p", "/run/sshd")
	roles := []string{"requester", "responder", "switch", "requester-mirror", "responder-mirror"}
	nss := []string{tb.Req, tb.Resp, tb.Sw, tb.Dump[0], tb.Dump[1]}
	// Control addresses in 198.18.0.0/15, the range RFC 2544 sets aside for test networks: never a real route.
	net3 := (os.Getpid()%40)*6 + tag%6
	var known bytes.Buffer
	for i, role := range roles {
		ns := nss[i]
		h.ns[role] = ns
		root := fmt.Sprintf("lrc%d-%d-%d", os.Getpid()%10000, tag%10, i)
		ip := fmt.Sprintf("198.18.%d.%d", net3, 4*i+2)
		must(t, "ip", "link", "add", root, "type", "veth", "peer", "name", "ctl", "netns", ns)
		h.ctlIfs = append(h.ctlIfs, root)
		must(t, "ip", "addr", "add", fmt.Sprintf("198.18.%d.%d/30", net3, 4*i+1), "dev", root)
		must(t, "ip", "link", "set", root, "up")
		must(t, "ip", "-n", ns, "addr", "add", ip+"/30", "dev", "ctl")
		must(t, "ip", "-n", ns, "link", "set", "ctl", "up")
		h.ips[role] = ip
		hk := filepath.Join(h.dir, role+"_host_key")
		h.hostKeys[role] = writeKey(t, hk)
		known.WriteString(ip + " " + string(ssh.MarshalAuthorizedKey(h.hostKeys[role])))
		cfg := filepath.Join(h.dir, role+"_sshd_config")
		conf := fmt.Sprintf("Port 22\nListenAddress %s\nHostKey %s\nAuthorizedKeysFile %s\nPermitRootLogin prohibit-password\n"+
			"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile %s\n",
			ip, hk, auth, filepath.Join(h.dir, role+"_sshd.pid"))
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f", cfg)
		cmd.Stderr = &bytes.Buffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		h.sshd = append(h.sshd, cmd)
	}
	h.knownHosts = filepath.Join(h.dir, "known_hosts")
	if err := os.WriteFile(h.knownHosts, known.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for role, ip := range h.ips {
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", ip+":22", time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sshd of %s on %s does not listen: %v", role, ip, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return h
}

func (h *sshHosts) close() {
	for _, c := range h.sshd {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	for _, i := range h.ctlIfs {
		_ = exec.Command("ip", "link", "del", i).Run()
	}
	h.tb.Close()
}

// workspace is the agent's directory on a role's host.
func (h *sshHosts) workspace(role string) string { return filepath.Join(h.dir, "ws-"+role) }

// oneMessageEvents gives a netns-style body's traffic.data-pkt-events every-msg: false, so that they keep their
// meaning (one packet of the connection) in a reference-format file, where they would apply to every message.
func oneMessageEvents(body string) string {
	i := strings.Index(body, "  data-pkt-events:\n")
	if i < 0 {
		return body
	}
	return body[:i] + strings.ReplaceAll(body[i:], "\n    - {qpn:", "\n    - {every-msg: false, qpn:")
}

// hostSection is a role's remote keys in the scenario.
func (h *sshHosts) hostSection(role string, extra string) string {
	return fmt.Sprintf("  control-ip: %s\n  username: root\n  ssh-key-filepath: %s\n  known-hosts: %s\n  workspace: %s\n%s",
		h.ips[role], h.key, h.knownHosts, h.workspace(role), extra)
}

// scenario turns a netns-style scenario body (requester/responder nic sections included) into testbed: remote.
// The reference's host keys make it a reference-format file, whose traffic.data-pkt-events apply to every
// message; the body's events keep their netns meaning (one packet of the connection) with every-msg: false.
func (h *sshHosts) scenario(body string, mirrorExtra string) string {
	s := "testbed: remote\nindex-base: 1\n" + oneMessageEvents(body)
	s = strings.Replace(s, "requester:\n", "requester:\n"+h.hostSection("requester", ""), 1)
	s = strings.Replace(s, "responder:\n", "responder:\n"+h.hostSection("responder", ""), 1)
	s = strings.Replace(s, "  nic: {type: cx5, ip-list: [10.0.0.2/24, 10.0.0.12/24]}",
		"  nic: {type: cx5, ip-list: [10.0.0.2/24, 10.0.0.12/24], if-name: eth0, switch-port: sw-req}", 1)
	s = strings.Replace(s, "  nic: {type: cx5, ip-list: [10.0.0.3/24]}",
		"  nic: {type: cx5, ip-list: [10.0.0.3/24], if-name: eth0, switch-port: sw-resp}", 1)
	s += "switch:\n" + h.hostSection("switch", "")
	s += "requester-mirror:\n" + h.hostSection("requester-mirror", "  nic: {if-name: eth0, switch-port: sw-d0}\n"+mirrorExtra)
	s += "responder-mirror:\n" + h.hostSection("responder-mirror", "  nic: {if-name: eth0, switch-port: sw-d1}\n")
	return s
}

// assertClean checks that nothing of the run is left on the hosts: no agent process, no run directory, the
// data interfaces' MTU back to what it was.
func (h *sshHosts) assertClean(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs := h.agentProcs()
		if len(procs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("agent processes left: %v", procs)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for role := range h.ips {
		runs, _ := filepath.Glob(filepath.Join(h.workspace(role), "run", "*"))
		if len(runs) > 0 {
			t.Errorf("%s: run directories left: %v", role, runs)
		}
	}
	for ns, ifn := range map[string]string{h.tb.Req: live.HostIf, h.tb.Resp: live.HostIf, h.tb.Sw: live.SwReqIf} {
		out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+ifn+"/mtu").Output()
		if err != nil || strings.TrimSpace(string(out)) != "1400" {
			t.Errorf("%s %s: MTU %q (%v) after the run; want 1400 restored", ns, ifn, out, err)
		}
		out, err = exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+ifn+"/flags").Output()
		var flags uint64
		fmt.Sscanf(strings.TrimSpace(string(out)), "0x%x", &flags)
		if err != nil || flags&0x100 != 0 {
			t.Errorf("%s %s: flags %q (%v) after the run; want promiscuous mode off again", ns, ifn, out, err)
		}
	}
}

// agentProcs lists processes running a deployed agent of this test.
func (h *sshHosts) agentProcs() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cl, h.dir) && strings.Contains(cl, " agent ") {
			out = append(out, e.Name()+": "+cl)
		}
	}
	return out
}

// agentPID finds the agent process of a role.
func (h *sshHosts) agentPID(role string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cl, " agent --run-dir "+h.workspace(role)+"/") {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			return pid
		}
	}
	return 0
}

// switchRx is the number of frames the switch's requester-facing port received.
func (h *sshHosts) switchRx() int {
	out, err := exec.Command("ip", "netns", "exec", h.tb.Sw, "cat", "/sys/class/net/"+live.SwReqIf+"/statistics/rx_packets").Output()
	if err != nil {
		return 0
	}
	var n int
	fmt.Sscan(strings.TrimSpace(string(out)), &n)
	return n
}
