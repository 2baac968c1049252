package remote

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/live"
)

// envFakeVerbs makes this test binary, copied as lumina-verbs-SUM, play the generator: the agent runs it as
// it would run the real one. Its behaviour: "ok" (report the connection, wait for ready, print a report
// naming the entries it was told), "die" (exit 1 before reporting), "hang" (a server that never ends).
const envFakeVerbs = "LUMINA_TEST_FAKE_VERBS"

// envAgent makes this test binary an agent serving its standard input in that run directory (VerbsDir is
// envAgentVerbsDir), so that a test can kill it as a controller's session would lose it.
const (
	envAgent          = "LUMINA_TEST_AGENT"
	envAgentVerbsDir  = "LUMINA_TEST_AGENT_VERBS_DIR"
	envVerbsPIDs      = "LUMINA_TEST_VERBS_PIDS" // "hang": write "PID CHILDPID" there, CHILDPID a process it started
	envVerbsIntruder  = "LUMINA_TEST_VERBS_INTRUDER"
	modeIntruder      = "intruder"
	intruderQPN       = 666
	intruderDialError = "intruder could not connect: "
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envAgent); dir != "" {
		os.Unsetenv(envAgent)
		a := &Agent{RunDir: dir, VerbsDir: os.Getenv(envAgentVerbsDir)}
		if err := a.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if mode := os.Getenv(envFakeVerbs); mode != "" {
		os.Exit(fakeVerbs(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// intrude plays another local user: it connects to the control socket and, if it can, reports a fake QPN.
func intrude(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, intruderDialError+err.Error())
		return 1
	}
	fmt.Fprintf(c, `{"conns":[{"index":0,"verb":"write","req_ip":"10.0.0.2","resp_ip":"10.0.0.3","req_qpn":%d,"resp_qpn":%d,"req_ipsn":1,"resp_ipsn":1,"packets_per_msg":1,"num_msgs":1}]}`+"\n", intruderQPN, intruderQPN)
	time.Sleep(2 * time.Second)
	return 0
}

func fakeVerbs(mode string, args []string) int {
	if len(args) == 0 {
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	device := fs.String("device", "", "")
	fs.Int("gid-index", -1, "")
	fs.Duration("timeout", time.Minute, "")
	fs.String("listen", "", "")
	fs.String("connect", "", "")
	job := fs.String("job", "", "")
	control := fs.String("control", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	switch {
	case mode == modeIntruder:
		return intrude(args[1])
	case mode == "hang":
		if f := os.Getenv(envVerbsPIDs); f != "" {
			child := exec.Command(os.Args[0], "server")
			child.Env = append(os.Environ(), envVerbsPIDs+"=")
			if err := child.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := os.WriteFile(f+".tmp", []byte(fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)), 0o600); err != nil {
				return 1
			}
			os.Rename(f+".tmp", f)
		}
		time.Sleep(time.Hour)
		return 0
	case mode == "die":
		fmt.Fprintln(os.Stderr, "lumina-verbs client: ibv_open_device("+*device+"): No such device")
		return 1
	case args[0] == "server":
		fmt.Println(`{"received":0}`)
		return 0
	}
	if _, err := os.Stat(*job); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if os.Getenv(envVerbsIntruder) != "" {
		// Another local user (nobody) tries to be first on the control socket while this generator waits.
		sock, err := filepath.Abs(strings.TrimPrefix(*control, "unix:"))
		if err != nil {
			return 1
		}
		in := exec.Command(os.Args[0], "client", sock)
		in.Env = append(os.Environ(), envFakeVerbs+"="+modeIntruder)
		in.Dir = "/"
		in.Stderr = os.Stderr
		in.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if err := in.Run(); err == nil {
			fmt.Fprintln(os.Stderr, "the intruder reported its connections")
		}
	}
	// The generator's own client side of the control protocol, on the address the agent gave it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := live.SendMetadata(ctx, *control, []inject.ConnMeta{{Index: 0, Verb: "write", ReqIP: netip.MustParseAddr("10.0.0.2"),
		RespIP: netip.MustParseAddr("10.0.0.3"), ReqQPN: 17, RespQPN: 18, ReqIPSN: 100, RespIPSN: 200, PacketsPerMsg: 10, NumMsgs: 20}})
	if err != nil || !r.Ready {
		fmt.Fprintln(os.Stderr, "no ready:", err)
		return 1
	}
	fmt.Printf(`{"conns":[],"error":"","entries_seen":%d}`+"\n", r.Entries)
	return 0
}

// deployFake copies this test binary as a deployed generator and returns its hash.
func deployFake(t *testing.T, dir string) string {
	t.Helper()
	sum, b, err := FileSHA256(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, VerbsBinName(sum)), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return sum
}

func verbsReq(id int, op, sum string, extra string) string {
	return fmt.Sprintf(`{"id":%d,"op":"%s","args":{"sha256":"%s","device":"rxe0","gid_index":-1,"timeout_ms":20000%s}}`, id, op, sum, extra)
}

// The requester's agent runs the deployed generator, hands its connections' metadata to the controller
// (verbs-client-start), lets it go only on verbs-client-run (the generator sees "ready" with the entry count)
// and returns its report; the server's output comes back from verbs-server-stop.
func TestAgentVerbsClientServer(t *testing.T) {
	bin := t.TempDir()
	sum := deployFake(t, bin)
	t.Setenv(envFakeVerbs, "ok")
	a := &Agent{RunDir: filepath.Join(t.TempDir(), "run"), VerbsDir: bin}
	rs := serveLines(t, a,
		verbsReq(1, OpVerbsServerStart, sum, `,"listen":"10.0.0.3:18515"`),
		verbsReq(2, OpVerbsClientStart, sum, `,"connect":"10.0.0.3:18515","scenario_yaml":"traffic: {}\n"`),
		`{"id":3,"op":"verbs-client-run","args":{"entries":3,"limit_ms":20000}}`,
		`{"id":4,"op":"verbs-server-stop","args":{"limit_ms":20000}}`)
	for _, r := range rs {
		if !r.OK {
			t.Fatalf("response %d: %s", r.ID, r.Error)
		}
	}
	var msg live.ControlMsg
	if err := json.Unmarshal(rs[1].Result, &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Conns) != 1 || msg.Conns[0].ReqQPN != 17 || msg.Conns[0].RespQPN != 18 || msg.Conns[0].ReqIPSN != 100 {
		t.Errorf("connections %+v; want the generator's QPNs 17/18 and PSN 100", msg.Conns)
	}
	var cres, sres VerbsResult
	json.Unmarshal(rs[2].Result, &cres)
	json.Unmarshal(rs[3].Result, &sres)
	if cres.Exit != 0 || !strings.Contains(string(cres.Output), `"entries_seen":3`) {
		t.Errorf("client result %+v; want exit 0 and a report that saw ready with 3 entries", cres)
	}
	if sres.Exit != 0 || string(sres.Output) != `{"received":0}` {
		t.Errorf("server result %+v", sres)
	}
}

// A generator that is missing or differs from its hash is never run, and the error says how the controller
// provides it; a client that dies before reporting is an error with its standard error; a server that never
// ends is killed when the session ends.
func TestAgentVerbsErrors(t *testing.T) {
	bin := t.TempDir()
	a := &Agent{RunDir: filepath.Join(t.TempDir(), "run"), VerbsDir: bin}
	missing := strings.Repeat("ab", 32)
	rs := serveLines(t, a, verbsReq(1, OpVerbsServerStart, missing, `,"listen":"10.0.0.3:18515"`))
	if rs[0].OK || !strings.Contains(rs[0].Error, "is not deployed on this host") || !strings.Contains(rs[0].Error, "--verbs-binary") ||
		!strings.Contains(rs[0].Error, "hosts need no compiler") {
		t.Errorf("missing generator: %+v", rs[0])
	}
	os.WriteFile(filepath.Join(bin, VerbsBinName(missing)), []byte("#!/bin/sh\necho pwned\n"), 0o755)
	a = &Agent{RunDir: filepath.Join(t.TempDir(), "run"), VerbsDir: bin}
	rs = serveLines(t, a, verbsReq(1, OpVerbsServerStart, missing, `,"listen":"10.0.0.3:18515"`))
	if rs[0].OK || !strings.Contains(rs[0].Error, "refusing to run it") {
		t.Errorf("generator with another hash: %+v", rs[0])
	}

	sum := deployFake(t, bin)
	t.Setenv(envFakeVerbs, "die")
	a = &Agent{RunDir: filepath.Join(t.TempDir(), "run"), VerbsDir: bin}
	rs = serveLines(t, a, verbsReq(1, OpVerbsClientStart, sum, `,"connect":"10.0.0.3:18515","scenario_yaml":"x: 1\n"`))
	if rs[0].OK || !strings.Contains(rs[0].Error, "ended (exit status 1) before reporting its connections") ||
		!strings.Contains(rs[0].Error, "ibv_open_device(rxe0): No such device") {
		t.Errorf("dying client: %+v", rs[0])
	}

	t.Setenv(envFakeVerbs, "hang")
	a = &Agent{RunDir: filepath.Join(t.TempDir(), "run"), VerbsDir: bin}
	start := time.Now()
	rs = serveLines(t, a, verbsReq(1, OpVerbsServerStart, sum, `,"listen":"10.0.0.3:18515"`),
		`{"id":2,"op":"verbs-server-stop","args":{"limit_ms":300}}`)
	var sres VerbsResult
	json.Unmarshal(rs[1].Result, &sres)
	if !rs[0].OK || !rs[1].OK || !strings.Contains(sres.Log, "killed by the agent") || sres.Exit == 0 {
		t.Errorf("hanging server: %+v %+v", rs, sres)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the session took %s", d)
	}
	// Bad arguments are refused before anything runs.
	a = &Agent{RunDir: filepath.Join(t.TempDir(), "run"), VerbsDir: bin}
	rs = serveLines(t, a, `{"id":1,"op":"verbs-server-start","args":{"sha256":"x","device":"rxe0","gid_index":-1,"timeout_ms":20000,"listen":"10.0.0.3:1"}}`,
		verbsReq(2, OpVerbsServerStart, sum, `,"listen":"10.0.0.3:1","device2":"x"`),
		`{"id":3,"op":"verbs-client-start","args":{"sha256":"`+sum+`","device":"rxe0; rm -rf /","gid_index":-1,"timeout_ms":20000,"connect":"10.0.0.3:1","scenario_yaml":"x"}}`)
	if rs[0].OK || !strings.Contains(rs[0].Error, "64 lowercase hex digits") || rs[1].OK || !strings.Contains(rs[1].Error, "unknown field") ||
		rs[2].OK || !strings.Contains(rs[2].Error, "is not an RDMA device name") {
		t.Errorf("bad arguments: %+v", rs)
	}
}

// readPIDs waits for the "hang" generator's pid file: its own pid and its child's.
func readPIDs(t *testing.T, f string) (int, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(f)
		if err == nil {
			var p, c int
			if _, err := fmt.Sscanf(string(b), "%d %d", &p, &c); err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			return p, c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the generator wrote no pid file: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive: the process exists and is not a zombie waiting for a parent that does not reap.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// When the session ends, the agent kills the generator's whole process group: a process the generator
// started does not outlive it either.
func TestAgentVerbsStopKillsProcessGroup(t *testing.T) {
	bin := t.TempDir()
	sum := deployFake(t, bin)
	pids := filepath.Join(t.TempDir(), "pids")
	t.Setenv(envFakeVerbs, "hang")
	t.Setenv(envVerbsPIDs, pids)
	a := &Agent{RunDir: filepath.Join(t.TempDir(), "run"), VerbsDir: bin}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- a.Serve(context.Background(), inR, outW); outW.Close() }()
	defer inW.Close()
	go fmt.Fprintln(inW, verbsReq(1, OpVerbsServerStart, sum, `,"listen":"10.0.0.3:18515"`))
	var r Response
	if err := json.NewDecoder(outR).Decode(&r); err != nil || !r.OK {
		t.Fatalf("verbs-server-start: %v %+v", err, r)
	}
	go io.Copy(io.Discard, outR)
	p, c := readPIDs(t, pids)
	if !alive(p) || !alive(c) {
		t.Fatal("the generator and its child are not running before the session ends")
	}
	inW.Close() // the session ends: the controller is gone
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the generator", p)
	waitGone(t, "the generator's child", c)
}

// An agent that is killed (SIGKILL: no shutdown runs, and lumina agent --cleanup cannot know the process)
// takes the generator with it: the kernel's parent-death signal ends it, so nothing keeps port 18515 and the
// RDMA device.
func TestKilledAgentTakesVerbsGenerator(t *testing.T) {
	bin := t.TempDir()
	sum := deployFake(t, bin)
	pids := filepath.Join(t.TempDir(), "pids")
	agent := exec.Command(os.Args[0], "-test.run=^$")
	agent.Env = append(os.Environ(), envAgent+"="+filepath.Join(t.TempDir(), "run"), envAgentVerbsDir+"="+bin,
		envFakeVerbs+"=hang", envVerbsPIDs+"="+pids)
	in, err := agent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Wait()
	defer agent.Process.Kill()
	fmt.Fprintln(in, verbsReq(1, OpVerbsServerStart, sum, `,"listen":"10.0.0.3:18515"`))
	var r Response
	if err := json.NewDecoder(out).Decode(&r); err != nil || !r.OK {
		t.Fatalf("verbs-server-start: %v %+v", err, r)
	}
	p, _ := readPIDs(t, pids)
	if !alive(p) {
		t.Fatal("the generator is not running before the agent is killed")
	}
	if err := agent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	agent.Wait()
	waitGone(t, "the generator of a killed agent", p)
}

// The generator reports its connections on a unix socket in the agent's 0700 run directory: another local
// user cannot connect to it, so cannot be first to feed the switch table its own QPNs; the agent hands the
// controller the generator's connections.
func TestAgentVerbsControlOnlyFromAgentUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the intruder as another user")
	}
	// Directories the intruder (nobody) can traverse and execute from: only the run directory guards the socket.
	open := func() string {
		d := t.TempDir()
		for _, p := range []string{d, filepath.Dir(d)} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	bin := open()
	sum := deployFake(t, bin)
	t.Setenv(envFakeVerbs, "ok")
	t.Setenv(envVerbsIntruder, "1")
	runDir := filepath.Join(open(), "run")
	a := &Agent{RunDir: runDir, VerbsDir: bin}
	rs := serveLines(t, a,
		verbsReq(1, OpVerbsClientStart, sum, `,"connect":"10.0.0.3:18515","scenario_yaml":"traffic: {}\n"`),
		`{"id":2,"op":"verbs-client-run","args":{"entries":1,"limit_ms":20000}}`)
	if !rs[0].OK || !rs[1].OK {
		t.Fatalf("responses %+v", rs)
	}
	var msg live.ControlMsg
	if err := json.Unmarshal(rs[0].Result, &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Conns) != 1 || msg.Conns[0].ReqQPN != 17 {
		t.Errorf("connections %+v; want only the generator's (QPN 17), never the intruder's %d", msg.Conns, intruderQPN)
	}
	var res VerbsResult
	json.Unmarshal(rs[1].Result, &res)
	if !strings.Contains(res.Log, intruderDialError) || !strings.Contains(res.Log, "permission denied") {
		t.Errorf("generator log %q; want the intruder refused (permission denied)", res.Log)
	}
}
