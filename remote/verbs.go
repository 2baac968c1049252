package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lumina-go/lumina/live"
)

// agentVerbs is one lumina-verbs process the agent started.
type agentVerbs struct {
	cmd    *exec.Cmd
	stdout lockedBuf
	stderr tail
	done   chan struct{}
	err    error
	// client: the control listener and the generator's connection on it
	ln  net.Listener
	ctl net.Conn
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// verbsBin is the deployed generator of this hash, next to the agent's own binary (VerbsDir in tests). It is
// checked by hash before it runs: an agent never runs another binary under that name, and never builds one.
func (a *Agent) verbsBin(sum string) (string, error) {
	dir := a.VerbsDir
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("finding the agent's directory: %w", err)
		}
		dir = filepath.Dir(exe)
	}
	p := filepath.Join(dir, VerbsBinName(sum))
	got, _, err := FileSHA256(p)
	if err != nil {
		return "", fmt.Errorf("the verbs generator lumina-verbs (sha256 %s) is not deployed on this host: %w; the controller copies it when the run names it (lumina run --verbs-binary PATH or LUMINA_VERBS_BINARY); hosts need no compiler, only libibverbs1 and the RNIC's provider (ibverbs-providers)", sum, err)
	}
	if got != sum {
		return "", fmt.Errorf("%s has sha256 %s; expected %s: refusing to run it", p, got, sum)
	}
	return p, nil
}

func (a *Agent) startVerbs(argv []string) (*agentVerbs, error) {
	v := &agentVerbs{done: make(chan struct{})}
	a.logf("exec %s", strings.Join(argv, " "))
	v.cmd = exec.Command(argv[0], argv[1:]...)
	v.cmd.Stdout, v.cmd.Stderr = &v.stdout, &v.stderr
	v.cmd.Dir = a.RunDir
	// Its own process group, killed whole on stop, and SIGKILL from the kernel when the agent dies: a killed
	// agent (which lumina agent --cleanup cannot stop) must not leave it holding port 18515 and the RDMA device.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The kernel sends the parent-death signal when the thread that forked the child ends, not the process:
	// fork from a thread locked for the child's whole life (the runtime could otherwise retire it earlier).
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := v.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		v.err = v.cmd.Wait()
		close(v.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting lumina-verbs: %w", err)
	}
	return v, nil
}

func (v *agentVerbs) result() VerbsResult {
	r := VerbsResult{Exit: -1, Log: v.stderr.String()}
	if v.cmd.ProcessState != nil {
		r.Exit = v.cmd.ProcessState.ExitCode()
	}
	if out := bytes.TrimSpace(v.stdout.Bytes()); json.Valid(out) {
		r.Output = out
	}
	return r
}

// wait waits at most limit for the process to end, then kills it.
func (v *agentVerbs) wait(ctx context.Context, limit time.Duration) (killed bool) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-v.done:
		return false
	case <-t.C:
	case <-ctx.Done():
	}
	v.kill()
	<-v.done
	return true
}

// kill kills the generator's process group: it and anything it started.
func (v *agentVerbs) kill() {
	_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
}

func (v *agentVerbs) stop() {
	if v.ctl != nil {
		v.ctl.Close()
	}
	if v.ln != nil {
		v.ln.Close()
	}
	select {
	case <-v.done:
	default:
		v.kill()
		<-v.done
	}
}

func (a *Agent) verbsServerStart(o *VerbsServerStart) error {
	if a.vsrv != nil {
		return errors.New("a verbs server is already running on this agent")
	}
	bin, err := a.verbsBin(o.SHA256)
	if err != nil {
		return err
	}
	argv := o.Commands()[0]
	argv[0] = bin
	v, err := a.startVerbs(argv)
	if err != nil {
		return err
	}
	a.vsrv = v
	return nil
}

func (a *Agent) verbsServerStop(ctx context.Context, o *VerbsServerStop) (any, error) {
	v := a.vsrv
	if v == nil {
		return nil, errors.New("no verbs server runs on this agent")
	}
	killed := v.wait(ctx, time.Duration(o.LimitMs)*time.Millisecond)
	r := v.result()
	if killed {
		r.Log = strings.TrimSpace(r.Log + "\n(killed by the agent: still running after the limit)")
	}
	return r, nil
}

func (a *Agent) verbsClientStart(ctx context.Context, o *VerbsClientStart) (any, error) {
	if a.vcli != nil {
		return nil, errors.New("a verbs client is already running on this agent")
	}
	bin, err := a.verbsBin(o.SHA256)
	if err != nil {
		return nil, err
	}
	job, err := filepath.Abs(filepath.Join(a.RunDir, VerbsJobFile))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(job, []byte(o.ScenarioYAML), 0o600); err != nil {
		return nil, fmt.Errorf("writing the generator's job: %w", err)
	}
	// The control listener is a unix socket in the run directory (0700): only the agent's user can connect, so
	// no other local user can be first to feed the switch table fake QPNs and PSNs, as on a 127.0.0.1 port.
	// The generator runs in the run directory and is given the socket's relative name (short of the limit of
	// a socket path, wherever the run directory is).
	sock := filepath.Join(a.RunDir, VerbsControlSocket)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("the control listener: %w", err)
	}
	argv := append(o.args("client"), "--connect", o.Connect.String(), "--job", job, "--control", "unix:"+VerbsControlSocket)
	argv[0] = bin
	v, err := a.startVerbs(argv)
	if err != nil {
		ln.Close()
		return nil, err
	}
	v.ln = ln
	a.vcli = v
	type accepted struct {
		c   net.Conn
		msg live.ControlMsg
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			acc <- accepted{err: err}
			return
		}
		line, err := bufio.NewReader(c).ReadBytes('\n')
		var m live.ControlMsg
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			err = dec.Decode(&m)
		}
		acc <- accepted{c: c, msg: m, err: err}
	}()
	t := time.NewTimer(time.Duration(o.TimeoutMs) * time.Millisecond)
	defer t.Stop()
	select {
	case r := <-acc:
		if r.err != nil {
			if r.c != nil {
				r.c.Close()
			}
			return nil, fmt.Errorf("reading the generator's connections: %w; its log: %s", r.err, v.stderr.String())
		}
		v.ctl = r.c
		return r.msg, nil
	case <-v.done:
		return nil, fmt.Errorf("lumina-verbs client ended (%v) before reporting its connections: %s", v.err, v.stderr.String())
	case <-t.C:
		return nil, fmt.Errorf("lumina-verbs client reported no connections in %d ms: %s", o.TimeoutMs, v.stderr.String())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *Agent) verbsClientRun(ctx context.Context, o *VerbsClientRun) (any, error) {
	v := a.vcli
	if v == nil || v.ctl == nil {
		return nil, errors.New("no verbs client waits on this agent: verbs-client-start first")
	}
	if err := json.NewEncoder(v.ctl).Encode(live.ControlReply{Ready: true, Entries: o.Entries}); err != nil {
		return nil, fmt.Errorf("telling the generator to start: %w", err)
	}
	killed := v.wait(ctx, time.Duration(o.LimitMs)*time.Millisecond)
	r := v.result()
	if killed {
		r.Log = strings.TrimSpace(r.Log + "\n(killed by the agent: still running after the limit)")
	}
	return r, nil
}
