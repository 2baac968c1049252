//go:build rxevm

package testbed

import (
	"context"
	"fmt"
	"github.com/lumina-go/lumina/resultsdir"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lumina-go/lumina/remote"
	"github.com/lumina-go/lumina/scenario"
)

// remoteRxeScenario is rxe-vm-verbs-write-drop.yaml on testbed remote: every role is a namespace of the guest
// reached over SSH through the guest's own sshd (the jump host, forwarded to 127.0.0.1:PORT), and the two
// ends are real Soft-RoCE devices that hostnic creates (nic.ib-device on the parent netdev nic.if-name).
const remoteRxeScenario = `testbed: remote
seed: 1
index-base: 1
requester:
  ROLE(10.99.1.2)
  nic: {type: rxe, ip-list: [10.0.0.2/24], if-name: eth0, ib-device: rxereq, switch-port: sw-req}
responder:
  ROLE(10.99.2.2)
  nic: {type: rxe, ip-list: [10.0.0.3/24], if-name: eth0, ib-device: rxeresp, switch-port: sw-resp}
switch:
  ROLE(10.99.3.2)
requester-mirror:
  ROLE(10.99.4.2)
  nic: {if-name: eth0, switch-port: sw-d0}
network:
  snap-len: 65535   # whole frames: every ICRC is checked
traffic:
  num-connections: 1
  rdma-verb: write
  num-msgs-per-qp: 20
  mtu: 1024
  message-size: 10240
  tx-depth: 1
  min-retransmit-timeout: 18
  data-pkt-events:
    - {every-msg: false, qpn: 1, psn: 5, type: drop, iter: 1}
expect:
  - integrity: ok
  - check: gbn
  - {path: "retransmissions[qp=1,psn=5].trigger", equals: nack}
`

// TestRxeVMRemoteWriteDrop drives real Soft-RoCE end to end through testbed remote: the guest boots in sshd
// mode (guest-init.sh), lumina's agents reach each role's namespace over SSH through the guest's jump host,
// hostnic creates the rxe devices and puts the addresses on, the verbs generator reports its QPNs and PSNs
// over the agent channel before the switch is installed, and the switch drops (qp 1, psn 5, iter 1). Asserted:
// the NAK and the go-back-N resend in the trace, integrity, every ICRC good (rxeVMCheckDrop), counters.json's
// start and finish snapshots from hostnic under rxe's names with the deltas the trace implies, the counter
// analyzer consistent, and the NIC changes undone on the guest afterwards.
func TestRxeVMRemoteWriteDrop(t *testing.T) {
	cache := rxeCacheDir()
	verbsBin := filepath.Join(cache, "bin", "lumina-verbs")
	for _, f := range []string{"vmlinuz", "base.cpio.zst", "bin/lumina", "bin/lumina-verbs"} {
		if _, err := os.Stat(filepath.Join(cache, f)); err != nil {
			t.Fatalf("%v: build the guest first (scripts/rxe-vm/build.sh; scripts/rxe-vm/ci.sh does)", err)
		}
	}
	scripts, err := rxeScriptsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	job := filepath.Join(dir, "job")
	if err := os.MkdirAll(filepath.Join(job, "ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	hostKey := writeKey(t, filepath.Join(job, "ssh", "host_key"))
	clientKey := filepath.Join(dir, "client_key")
	cpub := writeKey(t, clientKey)
	os.WriteFile(filepath.Join(job, "ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(cpub), 0o600)
	os.WriteFile(filepath.Join(job, "job.env"), []byte("MODE=sshd\nDUMPERS=1\nSSHD_TIMEOUT=600\n"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	kh := filepath.Join(dir, "known_hosts")
	hk := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey)))
	khText := fmt.Sprintf("[127.0.0.1]:%d %s\n", port, hk)
	for k := 1; k <= 4; k++ {
		khText += fmt.Sprintf("10.99.%d.2 %s\n", k, hk)
	}
	os.WriteFile(kh, []byte(khText), 0o600)

	// The guest, in the background until the test tells it to stop.
	guestOut := filepath.Join(dir, "guest")
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	guest := exec.CommandContext(ctx, "bash", filepath.Join(scripts, "run.sh"), "--job", job, "--out", guestOut, "--cache", cache,
		"--timeout", "700", "--ssh-port", fmt.Sprint(port))
	var glog strings.Builder
	guest.Stdout, guest.Stderr = &glog, &glog
	guest.WaitDelay = 20 * time.Second
	if err := guest.Start(); err != nil {
		t.Fatal(err)
	}
	guestDone := make(chan error, 1)
	go func() { guestDone <- guest.Wait() }()
	jump := remote.Target{Role: "jump", Host: "127.0.0.1", Port: port, User: "root", KeyFile: clientKey, KnownHosts: kh, Timeout: 20 * time.Second}
	var jc *remote.Client
	deadline := time.Now().Add(4 * time.Minute)
	for jc == nil {
		c, err := remote.Dial(ctx, jump)
		switch {
		case err == nil:
			jc = c
		case time.Now().After(deadline):
			t.Fatalf("the guest's sshd did not answer in 4 minutes: %v\nrun.sh: %s", err, glog.String())
		default:
			select {
			case err := <-guestDone:
				t.Fatalf("the guest ended before its sshd answered (%v): %s", err, glog.String())
			case <-time.After(2 * time.Second):
			}
		}
	}
	defer func() {
		// Stop the guest (it packs its log and powers off) and wait for it.
		if _, err := jc.Output("touch /run/lumina-stop", nil); err != nil {
			t.Logf("stopping the guest: %v", err)
		}
		jc.Close()
		select {
		case err := <-guestDone:
			if err != nil {
				t.Errorf("run.sh: %v: %s", err, glog.String())
			}
		case <-time.After(2 * time.Minute):
			cancel()
			t.Errorf("the guest did not power off: %s", glog.String())
		}
	}()

	agentBin := filepath.Join(dir, "lumina")
	build := exec.Command("go", "build", "-o", agentBin, "github.com/lumina-go/lumina/cmd/lumina")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	role := func(ip string) string {
		return fmt.Sprintf("control-ip: %s\n  username: root\n  ssh-key-filepath: %s\n  known-hosts: %s\n  jump: root@127.0.0.1:%d", ip, clientKey, kh, port)
	}
	text := remoteRxeScenario
	for _, ip := range []string{"10.99.1.2", "10.99.2.2", "10.99.3.2", "10.99.4.2"} {
		text = strings.Replace(text, "ROLE("+ip+")", role(ip), 1)
	}
	path := filepath.Join(dir, "remote-rxe.yaml")
	os.WriteFile(path, []byte(text), 0o644)
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	if o := os.Getenv("LUMINA_RXE_OUT"); o != "" {
		out = filepath.Join(o, "remote")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := runJudged(sc, Options{OutDir: out, Progress: testWriter{t}, Remote: RemoteOptions{AgentBinary: agentBin, VerbsBinary: verbsBin}})
	if err != nil {
		t.Fatal(err)
	}
	rxeVMCheckDrop(t, out, o.Doc)

	// counters.json: hostnic's snapshots under rxe's own names; the drop shows as one sequence error on each
	// side (rcvd_seq_err: the requester took a NAK; out_of_seq_request: the responder saw the gap).
	var cf resultsdir.CountersFile
	if err := readJSON(out, resultsdir.FileCounters, &cf); err != nil {
		t.Fatal(err)
	}
	delta := func(h resultsdir.HostCounters, name string) int64 {
		s, ok1 := h.Start[name]
		f, ok2 := h.Finish[name]
		if !ok1 || !ok2 {
			t.Errorf("counters.json %s: %s missing (start %v, finish %v)", h.NIC, name, ok1, ok2)
		}
		return int64(f) - int64(s)
	}
	if cf.Requester.Vendor != "rxe" || cf.Responder.Vendor != "rxe" {
		t.Errorf("vendors %q %q; want rxe", cf.Requester.Vendor, cf.Responder.Vendor)
	}
	if d := delta(cf.Requester, "rcvd_seq_err"); d != 1 {
		t.Errorf("requester rcvd_seq_err grew by %d; want 1 (one NAK)", d)
	}
	if d := delta(cf.Responder, "out_of_seq_request"); d != 1 {
		t.Errorf("responder out_of_seq_request grew by %d; want 1", d)
	}
	if d := delta(cf.Requester, "sent_pkts"); d < 200 {
		t.Errorf("requester sent_pkts grew by %d; want >= 200 (20 messages of 10 packets)", d)
	}
	var checked int
	for _, c := range o.Doc.Analysis.Counters {
		checked++
		if !c.OK {
			t.Errorf("counter analyzer: %+v", c)
		}
	}
	if checked == 0 {
		t.Error("the counter analyzer checked no counter")
	}
	// The NIC setup was undone: no rxe device and no data address left in the roles' namespaces.
	left, err := jc.Output("rdma link show; ip -n req -o addr show dev eth0; ip -n resp -o addr show dev eth0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(left); strings.Contains(s, "rxereq") || strings.Contains(s, "rxeresp") || strings.Contains(s, "10.0.0.") {
		t.Errorf("after the run the guest still has:\n%s", s)
	}
}
