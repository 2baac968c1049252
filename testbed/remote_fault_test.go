package testbed

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/verdict"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/remote"
)

// Environment faults before any traffic: each is a bad-input error (exit 2) naming the host and the step,
// and leaves nothing behind on the hosts that were reached.
func TestRemoteEnvironmentFaults(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 1)
	otherKey := filepath.Join(h.dir, "other_key")
	writeKey(t, otherKey)
	changed := filepath.Join(h.dir, "known_hosts_changed")
	unknown := filepath.Join(h.dir, "known_hosts_unknown")
	kh, _ := os.ReadFile(h.knownHosts)
	var keep, swapped []string
	for _, l := range strings.Split(strings.TrimSpace(string(kh)), "\n") {
		if strings.HasPrefix(l, h.ips["switch"]+" ") {
			swapped = append(swapped, h.ips["switch"]+" "+string(ssh.MarshalAuthorizedKey(h.hostKeys["requester"])))
			continue
		}
		keep = append(keep, l)
		swapped = append(swapped, l)
	}
	os.WriteFile(unknown, []byte(strings.Join(keep, "\n")+"\n"), 0o600)
	os.WriteFile(changed, []byte(strings.Join(swapped, "\n")+"\n"), 0o600)
	cases := []struct {
		name, old, new string
		want           []string
	}{
		{"unreachable", "  control-ip: " + h.ips["responder"] + "\n", "  control-ip: " + h.ips["responder"] + "\n  ssh-port: 2\n",
			[]string{"responder (root@" + h.ips["responder"] + ":2)", "connecting", "refused"}},
		{"wrong key", "  ssh-key-filepath: " + h.key + "\n  known-hosts: " + h.knownHosts + "\n  workspace: " + h.workspace("switch"),
			"  ssh-key-filepath: " + otherKey + "\n  known-hosts: " + h.knownHosts + "\n  workspace: " + h.workspace("switch"),
			[]string{"switch (root@" + h.ips["switch"] + ":22)", "SSH handshake", "unable to authenticate"}},
		{"unknown host key", "  known-hosts: " + h.knownHosts + "\n  workspace: " + h.workspace("switch"),
			"  known-hosts: " + unknown + "\n  workspace: " + h.workspace("switch"),
			[]string{"switch (root@", "is not in " + unknown, "ssh-keyscan -t ed25519 " + h.ips["switch"] + " >> " + unknown,
				remote.Fingerprint(h.hostKeys["switch"])}},
		{"changed host key", "  known-hosts: " + h.knownHosts + "\n  workspace: " + h.workspace("switch"),
			"  known-hosts: " + changed + "\n  workspace: " + h.workspace("switch"),
			[]string{"HOST KEY CHANGED for " + h.ips["switch"] + ":22", remote.Fingerprint(h.hostKeys["switch"]),
				remote.Fingerprint(h.hostKeys["requester"]), "refused"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y := h.scenario(listing2, "")
			if !strings.Contains(y, c.old) {
				t.Fatalf("scenario lacks %q", c.old)
			}
			sc := load(t, strings.Replace(y, c.old, c.new, 1))
			dir := t.TempDir()
			_, err := runJudged(sc, Options{OutDir: dir, Remote: RemoteOptions{AgentBinary: h.agent}})
			if err == nil || !errors.Is(err, ErrInput) {
				t.Fatalf("error %v; want an environment error (exit 2)", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if resultsdir.IsDir(dir) {
				t.Error("a failed run left a results directory that looks valid")
			}
			h.assertClean(t)
		})
	}
}

// longWrite is a scenario whose traffic lasts long enough to be interrupted.
const longWrite = `
seed: 3
requester:
  nic: {type: cx5, ip-list: [10.0.0.2/24, 10.0.0.12/24]}
responder:
  nic: {type: cx5, ip-list: [10.0.0.3/24]}
traffic:
  num-connections: 1
  rdma-verb: write
  num-msgs-per-qp: 40000
  mtu: 1024
  message-size: 10240
network:
  run-timeout-ms: 60000
`

// waitTraffic waits until the switch forwards the run's frames.
func waitTraffic(t *testing.T, h *sshHosts, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for h.switchRx() < 2000 {
		select {
		case <-done:
			t.Fatal("the run ended before its traffic could be interrupted")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no traffic through the switch")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func assertInvalid(t *testing.T, o *verdict.Outcome, want ...string) {
	t.Helper()
	if o.Doc.Verdict != verdict.Invalid || o.ExitCode() != 3 {
		t.Fatalf("verdict %s exit %d; want invalid, 3", o.Doc.Verdict, o.ExitCode())
	}
	detail := ""
	for _, c := range o.Doc.Integrity.Checks {
		detail += c.Detail + "\n"
	}
	for _, w := range want {
		if !strings.Contains(detail, w) {
			t.Errorf("the invalid verdict's reason lacks %q:\n%s", w, detail)
		}
	}
}

// An agent killed mid-run: the verdict is invalid with the reason, the results directory does not look valid,
// and the hosts are cleaned (the dead agent's changes undone by a cleanup session).
func TestRemoteAgentKilled(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 2)
	sc := load(t, h.scenario(longWrite, ""))
	dir := t.TempDir()
	done := make(chan struct{})
	var o *verdict.Outcome
	var err error
	go func() {
		defer close(done)
		o, err = runJudged(sc, Options{OutDir: dir, Remote: RemoteOptions{AgentBinary: h.agent}})
	}()
	waitTraffic(t, h, done)
	pid := h.agentPID("responder")
	if pid == 0 {
		t.Fatal("no responder agent process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil {
		t.Fatal(err)
	}
	assertInvalid(t, o, "did not complete", "responder", "agent ended")
	if resultsdir.IsDir(dir) {
		t.Error("the results directory of a killed run looks valid")
	}
	// The partial results stay in the staging directory, marked: lumina analyze refuses them.
	if o.Dir == dir || !errors.Is(resultsdir.CheckComplete(o.Dir), resultsdir.ErrIncomplete) {
		t.Errorf("the killed run's partial results in %q are not marked incomplete", o.Dir)
	}
	h.assertClean(t)
}

// A dumper that fills up: its drops make the trace incomplete, the integrity check fails (exit 3), and the
// dumper's statistics say why.
func TestRemoteDumperFull(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 3)
	sc := load(t, h.scenario(listing2, "  pkt-dump-conf: {max-packets: 20}\n"))
	dir := t.TempDir()
	o, err := runJudged(sc, Options{OutDir: dir, Remote: RemoteOptions{AgentBinary: h.agent}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Doc.Verdict != verdict.Invalid || o.ExitCode() != 3 || o.Doc.Integrity.OK {
		t.Fatalf("verdict %s integrity %+v; want invalid (the dump is incomplete)", o.Doc.Verdict, o.Doc.Integrity)
	}
	st, err := os.ReadFile(filepath.Join(dir, resultsdir.DirDump, "dumper-0.stats.json"))
	if err != nil || !bytes.Contains(st, []byte(`"complete": false`)) || bytes.Contains(st, []byte(`"buffer_full_drop": 0,`)) {
		t.Errorf("dumper 0 stats do not report its drops: %v %s", err, st)
	}
	h.assertClean(t)
}

// Ctrl-C of lumina run: the hosts are cleaned and the results directory says invalid, with the reason.
func TestRemoteInterrupt(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 4)
	path := filepath.Join(h.dir, "long.yaml")
	if err := os.WriteFile(path, []byte(h.scenario(longWrite, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.dir, "results")
	cmd := exec.Command(h.agent, "run", path, "--out", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	waitTraffic(t, h, done)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("lumina run did not stop on SIGINT:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("exit %d; want 3:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "INVALID TEST") || !strings.Contains(out.String(), "[FAIL] run-completed: remote run") ||
		!strings.Contains(out.String(), "interrupted (SIGINT/SIGTERM)") {
		t.Errorf("lumina run's summary does not say why the test is invalid:\n%s", out.String())
	}
	// The invalid verdict is in the staging directory with the partial results, marked INCOMPLETE with the
	// reason; the results directory asked for was never created.
	partial, _ := filepath.Glob(dir + ".partial-*")
	if len(partial) != 1 {
		t.Fatalf("staging directories %q; want one", partial)
	}
	a, err := os.ReadFile(filepath.Join(partial[0], resultsdir.FileAnalysis))
	if err != nil || !bytes.Contains(a, []byte(`"verdict": "invalid"`)) || !bytes.Contains(a, []byte("interrupted")) {
		t.Errorf("analysis.json after SIGINT: %v\n%s", err, a)
	}
	if err := resultsdir.CheckComplete(partial[0]); !errors.Is(err, resultsdir.ErrIncomplete) || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("the staging directory of an interrupted run: %v; want its INCOMPLETE marker with the reason", err)
	}
	if resultsdir.IsDir(dir) {
		t.Error("the results directory of an interrupted run looks valid")
	}
	h.assertClean(t)
}

// Keys from an ssh-agent (no key file) and a jump host work as users' ssh does: the jump host is
// authenticated and host-key-checked, the target is dialled through it.
func TestRemoteSSHAgentAndJump(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 5)
	b, err := os.ReadFile(h.key)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	ring := agent.NewKeyring()
	if err := ring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(h.dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(ring, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	// The switch through a jump host: the switch host itself, the only other sshd its namespace reaches.
	target := remote.Target{Role: "switch", Host: h.ips["switch"], User: "root", KnownHosts: h.knownHosts,
		Jump: "root@" + h.ips["switch"] + ":22"}
	c, err := remote.Dial(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output("cat /proc/net/dev", nil)
	c.Close()
	if err != nil || !strings.Contains(string(out), live.SwReqIf) {
		t.Errorf("command through the jump host: %v\n%s", err, out)
	}
	// A jump host whose key is unknown is refused like a target.
	unknown := filepath.Join(h.dir, "kh_only_switch")
	kh, _ := os.ReadFile(h.knownHosts)
	var only []string
	for _, l := range strings.Split(string(kh), "\n") {
		if strings.HasPrefix(l, h.ips["switch"]+" ") {
			only = append(only, l)
		}
	}
	os.WriteFile(unknown, []byte(strings.Join(only, "\n")+"\n"), 0o600)
	target.KnownHosts, target.Jump = unknown, "root@"+h.ips["responder"]
	if _, err := remote.Dial(context.Background(), target); err == nil || !strings.Contains(err.Error(), "jump host") ||
		!strings.Contains(err.Error(), "is not in "+unknown) {
		t.Errorf("unknown jump host key: %v", err)
	}
	// Without the agent and without a key file nothing authenticates, and nothing prompts.
	t.Setenv("SSH_AUTH_SOCK", "")
	if _, err := remote.Dial(context.Background(), remote.Target{Host: h.ips["switch"], User: "root", KnownHosts: h.knownHosts}); err == nil ||
		!strings.Contains(err.Error(), "no SSH key") {
		t.Errorf("no key: %v", err)
	}
}

// The controller killed outright (no chance to clean up): each agent sees its session end, stops what it
// runs, undoes its changes and removes its run directory by itself.
func TestRemoteControllerKilled(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 7)
	path := filepath.Join(h.dir, "long.yaml")
	if err := os.WriteFile(path, []byte(h.scenario(longWrite, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.dir, "results")
	cmd := exec.Command(h.agent, "run", path, "--out", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	waitTraffic(t, h, done)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	if resultsdir.IsDir(dir) {
		t.Error("the results directory of a killed controller looks valid")
	}
	h.assertClean(t)
}

// A data interface that does not exist on its host is found by the agent's hello, before any change:
// an environment error (exit 2) naming the host and the interfaces it has.
func TestRemoteMissingInterface(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 8)
	y := strings.Replace(h.scenario(listing2, ""), "if-name: eth0, switch-port: sw-resp", "if-name: eth9, switch-port: sw-resp", 1)
	var progress bytes.Buffer
	_, err := runJudged(load(t, y), Options{OutDir: t.TempDir(), Progress: &progress, Remote: RemoteOptions{AgentBinary: h.agent}})
	if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "responder (root@"+h.ips["responder"]+":22): starting the agent") ||
		!strings.Contains(err.Error(), "interface eth9 does not exist") || !strings.Contains(err.Error(), "eth0") {
		t.Fatalf("error %v", err)
	}
	if strings.Contains(progress.String(), "setting up") {
		t.Errorf("the run went on to the setup:\n%s", progress.String())
	}
	h.assertClean(t)
}

// The agent is copied when it is missing or differs (checked by hash), and not otherwise.
func TestRemoteDeployByHash(t *testing.T) {
	if err := live.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	h := newSSHHosts(t, 9)
	c, err := remote.Dial(context.Background(), remote.Target{Role: "switch", Host: h.ips["switch"], User: "root",
		KeyFile: h.key, KnownHosts: h.knownHosts})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum, bin, err := remote.FileSHA256(h.agent)
	if err != nil {
		t.Fatal(err)
	}
	d := remote.PlanDeployment(h.workspace("switch"), "root", "r1", "switch", sum)
	deploy := func() string {
		var log bytes.Buffer
		if err := remote.Deploy(c, d, sum, bin, &log); err != nil {
			t.Fatal(err)
		}
		return log.String()
	}
	if l := deploy(); !strings.Contains(l, "copying the agent") {
		t.Errorf("first deployment did not copy: %q", l)
	}
	if l := deploy(); l != "" {
		t.Errorf("second deployment copied again: %q", l)
	}
	if err := os.WriteFile(d.Bin, []byte("stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	if l := deploy(); !strings.Contains(l, "copying the agent") {
		t.Errorf("a different binary was not replaced: %q", l)
	}
	if got, _, _ := remote.FileSHA256(d.Bin); got != sum {
		t.Errorf("deployed binary hash %s; want %s", got, sum)
	}
}
