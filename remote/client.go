package remote

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Deployment is where the agent binary lives on a host and how it is started.
type Deployment struct {
	Base   string // agent and run directories live under it: <workspace> or .cache/lumina (relative to home)
	Bin    string // Base/agent/lumina-<sha256>
	RunDir string // Base/run/<run id>-<role>
	Sudo   bool   // the user is not root: the agent runs under sudo -n (never a password prompt)
}

// Plan computes the paths for a host; sum is the agent binary's SHA-256 in hex.
func PlanDeployment(workspace, user, runID, role, sum string) Deployment {
	// Commands over SSH start in the user's home: ~/x is written x, so that the quoting never hides a tilde.
	base := strings.TrimPrefix(strings.TrimPrefix(workspace, "~"), "/")
	if !strings.HasPrefix(workspace, "~") {
		base = workspace
	}
	if base == "" {
		base = ".cache/lumina"
	}
	if strings.HasPrefix(base, "-") {
		base = "./" + base // never read as an option by mkdir, mv, sha256sum or sudo
	}
	return Deployment{Base: base, Bin: path.Join(base, "agent", "lumina-"+sum),
		RunDir: path.Join(base, "run", runID+"-"+role), Sudo: user != "root"}
}

// Fixed commands of the deployment, built from the controller's own paths (quoted), never from scenario text
// other than the workspace path, which is quoted.

// ArchCommand asks the host's machine type.
func ArchCommand() string { return "uname -m" }

// HashCommand prints the installed agent's hash, or nothing.
func (d Deployment) HashCommand() string {
	return "sha256sum " + Quote(d.Bin) + " 2>/dev/null || true"
}

// InstallCommand writes the binary from standard input, then renames it into place (two roles on one host
// write their own temporary files; the rename is atomic).
func (d Deployment) InstallCommand() string {
	tmp := d.Bin + ".tmp-" + path.Base(d.RunDir)
	return "mkdir -p " + Quote(path.Dir(d.Bin)) + " && cat > " + Quote(tmp) + " && chmod 755 " + Quote(tmp) +
		" && mv -f " + Quote(tmp) + " " + Quote(d.Bin)
}

func (d Deployment) sudo() string {
	if d.Sudo {
		return "sudo -n "
	}
	return ""
}

// AgentCommand starts the agent.
func (d Deployment) AgentCommand() string {
	return "exec " + d.sudo() + Quote(d.Bin) + " agent --run-dir " + Quote(d.RunDir)
}

// CleanupCommand undoes a killed agent's changes and removes its run directory.
func (d Deployment) CleanupCommand() string {
	return d.sudo() + Quote(d.Bin) + " agent --cleanup " + Quote(d.RunDir)
}

// goarchMachine maps GOARCH to uname -m.
var goarchMachine = map[string][]string{"amd64": {"x86_64"}, "arm64": {"aarch64", "arm64"}, "riscv64": {"riscv64"},
	"ppc64le": {"ppc64le"}, "s390x": {"s390x"}}

// FileSHA256 hashes a file.
func FileSHA256(p string) (string, []byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", nil, err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), b, nil
}

// Deploy makes sure the host has the agent binary of this hash: checks the machine type, hashes what is
// installed, and copies the binary through the session's standard input when it is missing or differs.
func Deploy(c *Client, d Deployment, sum string, bin []byte, log io.Writer) error {
	out, err := c.Output(ArchCommand(), nil)
	if err != nil {
		return err
	}
	m := strings.TrimSpace(string(out))
	if want, ok := goarchMachine[runtime.GOARCH]; ok && !contains(want, m) {
		return fmt.Errorf("the host is %s but this lumina is built for %s; build lumina for the host's architecture (GOARCH)", m, runtime.GOARCH)
	}
	out, err = c.Output(d.HashCommand(), nil)
	if err != nil {
		return err
	}
	if f := strings.Fields(string(out)); len(f) > 0 && f[0] == sum {
		return nil
	}
	if log != nil {
		what := "the agent"
		if strings.HasPrefix(path.Base(d.Bin), "lumina-verbs-") {
			what = "the verbs generator"
		}
		fmt.Fprintf(log, "lumina: %s: copying %s (%d bytes) to %s\n", c.Target, what, len(bin), d.Bin)
	}
	if _, err := c.Output(d.InstallCommand(), bin); err != nil {
		return err
	}
	out, err = c.Output(d.HashCommand(), nil)
	if err != nil {
		return err
	}
	if f := strings.Fields(string(out)); len(f) == 0 || f[0] != sum {
		return fmt.Errorf("the copied binary %s has hash %q; expected %s", d.Bin, strings.TrimSpace(string(out)), sum)
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// RunID is a fresh run identifier: UTC time and random bits.
func RunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// tail keeps the last bytes written (an agent's log, for error messages).
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 64<<10 {
		t.buf = t.buf[len(t.buf)-64<<10:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// AgentConn is a running agent: requests go to its standard input, answers come from its standard output.
type AgentConn struct {
	Role   string
	Client *Client
	Deploy Deployment
	sess   *ssh.Session
	in     io.WriteCloser
	resp   chan Response
	exited chan struct{}
	exit   error
	log    tail
	id     int
	mu     sync.Mutex
	// Hello is the agent's answer to hello.
	Hello HelloResult
}

// StartAgent starts the agent over a new session and says hello, checking that the host has what the run
// needs (root, ip, ethtool, the interfaces named).
func StartAgent(ctx context.Context, c *Client, d Deployment, role string, hello Hello) (*AgentConn, error) {
	s, err := c.NewSession()
	if err != nil {
		return nil, err
	}
	a := &AgentConn{Role: role, Client: c, Deploy: d, sess: s, resp: make(chan Response, 1), exited: make(chan struct{})}
	a.in, err = s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	out, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Stderr = &a.log
	if err := s.Start(d.AgentCommand()); err != nil {
		s.Close()
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var r Response
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = Response{ID: -1, Error: fmt.Sprintf("unreadable answer %q: %v", truncate(sc.Text(), 200), err)}
			}
			a.resp <- r
		}
		a.exit = s.Wait()
		close(a.exited)
	}()
	var h HelloResult
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.Call(hctx, &hello, &h); err != nil {
		a.Close()
		return nil, err
	}
	if h.Version != Version {
		a.Close()
		return nil, fmt.Errorf("agent speaks %s; expected %s", h.Version, Version)
	}
	if len(h.Problems) > 0 {
		a.Close()
		return nil, errors.New(strings.Join(h.Problems, "; "))
	}
	a.Hello = h
	return a, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ErrAgentGone is returned when the agent's process ended (killed, crashed, connection lost).
var ErrAgentGone = errors.New("agent ended")

// Call sends one operation and waits for its answer, decoding the result into res (may be nil).
func (a *AgentConn) Call(ctx context.Context, op Op, res any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.id++
	args, err := json.Marshal(op)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(Request{ID: a.id, Op: op.Name(), Args: args})
	if _, err := a.in.Write(append(line, '\n')); err != nil {
		return a.gone(op.Name(), err)
	}
	select {
	case r := <-a.resp:
		if r.ID != a.id {
			return fmt.Errorf("%s: answer %d to request %d: %s", op.Name(), r.ID, a.id, r.Error)
		}
		if !r.OK {
			return fmt.Errorf("%s: %s", op.Name(), r.Error)
		}
		if res != nil {
			if err := json.Unmarshal(r.Result, res); err != nil {
				return fmt.Errorf("%s: decoding the answer: %w", op.Name(), err)
			}
		}
		return nil
	case <-a.exited:
		return a.gone(op.Name(), a.exit)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", op.Name(), ctx.Err())
	}
}

func (a *AgentConn) gone(op string, err error) error {
	<-a.exitedOrSoon()
	msg := "the agent's session ended"
	if a.exit != nil {
		msg = fmt.Sprintf("the agent ended (%v)", a.exit)
	} else if err != nil {
		msg = fmt.Sprintf("the agent's session failed (%v)", err)
	}
	if l := a.log.String(); l != "" {
		lines := strings.Split(l, "\n")
		msg += "; its last log line: " + lines[len(lines)-1]
	}
	return fmt.Errorf("%s: %s: %w", op, msg, ErrAgentGone)
}

func (a *AgentConn) exitedOrSoon() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-a.exited:
		case <-time.After(2 * time.Second):
		}
		close(ch)
	}()
	return ch
}

// Alive reports whether the agent's process still runs.
func (a *AgentConn) Alive() bool {
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// Close ends the agent's input, which makes it stop everything and clean up, and waits for it to exit (at most
// timeout); it reports whether the agent exited by itself.
func (a *AgentConn) Close() bool {
	a.in.Close()
	select {
	case <-a.exited:
		return true
	case <-time.After(15 * time.Second):
		a.sess.Close()
		return false
	}
}

// ExitErr is how the agent's process ended once it exited (nil: cleanly; an agent whose final cleanup could not
// undo everything exits with an error).
func (a *AgentConn) ExitErr() error {
	select {
	case <-a.exited:
		return a.exit
	default:
		return nil
	}
}

// Log is the agent's recent standard error.
func (a *AgentConn) Log() string { return a.log.String() }

// FetchFile copies a file from the agent's run directory to w and checks its hash.
func (a *AgentConn) FetchFile(ctx context.Context, name string, size int64, sum string, w io.Writer) error {
	h := sha256.New()
	var off int64
	for {
		var r FetchResult
		if err := a.Call(ctx, &Fetch{File: name, Offset: off, Length: MaxFetch}, &r); err != nil {
			return err
		}
		if _, err := w.Write(r.Data); err != nil {
			return err
		}
		h.Write(r.Data)
		off += int64(len(r.Data))
		if r.EOF || len(r.Data) == 0 {
			break
		}
	}
	if off != size {
		return fmt.Errorf("fetched %d bytes of %s; the agent wrote %d", off, name, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%s fetched with hash %s; the agent wrote %s", name, got, sum)
	}
	return nil
}
