// Package remote runs Lumina on real hosts over SSH: the SSH transport (host keys verified against
// known_hosts, keys from a file or ssh-agent, jump hosts, keepalives), the deployment of the lumina binary as
// the agent on each host, the agent's typed protocol (a closed set of operations, never a shell string from a
// scenario), the agent itself, and the client the remote testbed drives it with.
package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Target is one SSH destination.
type Target struct {
	Role       string // for messages: requester, switch, ...
	Host       string // address or name
	Port       int    // 0: 22
	User       string
	KeyFile    string // "" = ssh-agent only
	KnownHosts string // "" = ~/.ssh/known_hosts
	Jump       string // [user@]host[:port], "" = direct
	// Timeout bounds the TCP connect and the SSH handshake (0: 10 s).
	Timeout time.Duration
}

// Addr is host:port.
func (t Target) Addr() string {
	p := t.Port
	if p == 0 {
		p = 22
	}
	return net.JoinHostPort(strings.Trim(t.Host, "[]"), strconv.Itoa(p))
}

func (t Target) String() string {
	s := t.User + "@" + t.Addr()
	if t.Role != "" {
		s = t.Role + " (" + s + ")"
	}
	if t.Jump != "" {
		s += " via " + t.Jump
	}
	return s
}

// HostError is a failure on one host at one step (connecting, authenticating, deploying, an operation).
// Env marks environment problems (unreachable, auth, host key): the run had not started traffic.
type HostError struct {
	Host string
	Step string
	Env  bool
	Err  error
}

func (e *HostError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Host, e.Step, e.Err) }
func (e *HostError) Unwrap() error { return e.Err }

// DefaultKnownHosts is ~/.ssh/known_hosts.
func DefaultKnownHosts() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ".ssh/known_hosts"
	}
	return filepath.Join(home, ".ssh", "known_hosts")
}

// ExpandHome replaces a leading ~/ by the user's home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// Fingerprint is the key's SHA256 fingerprint as ssh-keygen -l prints it.
func Fingerprint(k ssh.PublicKey) string {
	h := sha256.Sum256(k.Marshal())
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(h[:])
}

// authMethods are the key file's signer and the ssh-agent's keys; never a password or keyboard-interactive.
func authMethods(t Target) ([]ssh.AuthMethod, func(), error) {
	var signers []ssh.Signer
	if t.KeyFile != "" {
		path := ExpandHome(t.KeyFile)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the SSH key: %w", err)
		}
		s, err := ssh.ParsePrivateKey(b)
		var pm *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pm):
			// An encrypted key is used through the agent, where the user unlocked it; never prompt.
			if os.Getenv("SSH_AUTH_SOCK") == "" {
				return nil, nil, fmt.Errorf("SSH key %s is encrypted and no ssh-agent is running; lumina never prompts for a passphrase: load it with `ssh-add %s` (SSH_AUTH_SOCK set) or use a key without one", path, path)
			}
		case err != nil:
			return nil, nil, fmt.Errorf("SSH key %s: %w", path, err)
		default:
			signers = append(signers, s)
		}
	}
	closeFn := func() {}
	var methods []ssh.AuthMethod
	if len(signers) > 0 {
		methods = append(methods, ssh.PublicKeys(signers...))
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if c, err := net.Dial("unix", sock); err == nil {
			ag := agent.NewClient(c)
			methods = append(methods, ssh.PublicKeysCallback(ag.Signers))
			closeFn = func() { c.Close() }
		}
	}
	if len(methods) == 0 {
		return nil, nil, errors.New("no SSH key: set ssh-key-filepath or run an ssh-agent (SSH_AUTH_SOCK)")
	}
	return methods, closeFn, nil
}

// hostKeyCheck verifies the server's key against known_hosts: an unknown host is refused with the line to add,
// a changed key is refused naming both fingerprints. It also returns the key algorithms known_hosts holds for
// the host, so that the server offers a key of a kind the file can check.
func hostKeyCheck(t Target, addr string) (ssh.HostKeyCallback, []string, error) {
	path := t.KnownHosts
	if path == "" {
		path = DefaultKnownHosts()
	}
	path = ExpandHome(path)
	cb, err := knownhosts.New(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading known_hosts %s: %w (lumina verifies every host key; create it with ssh-keyscan, see docs/testbed-remote.md)", path, err)
	}
	// A probe with a key no host has lists the keys known for addr.
	var algos []string
	probe := probeKey{}
	if err := cb(addr, &net.TCPAddr{IP: net.IPv4zero}, probe); err != nil {
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			seen := map[string]bool{}
			for _, k := range ke.Want {
				for _, a := range algorithmsFor(k.Key.Type()) {
					if !seen[a] {
						seen[a] = true
						algos = append(algos, a)
					}
				}
			}
		}
	}
	host, port, _ := net.SplitHostPort(addr)
	check := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				scan := "ssh-keyscan -t " + keyscanType(key.Type()) + " "
				if port != "22" {
					scan += "-p " + port + " "
				}
				scan += host + " >> " + path
				return fmt.Errorf("host key %s %s of %s is not in %s; lumina never accepts an unknown key: check the fingerprint with the host's administrator, then add it: %s",
					key.Type(), Fingerprint(key), addr, path, scan)
			}
			var known []string
			for _, w := range ke.Want {
				known = append(known, fmt.Sprintf("%s %s (%s:%d)", w.Key.Type(), Fingerprint(w.Key), w.Filename, w.Line))
			}
			return fmt.Errorf("HOST KEY CHANGED for %s: it offers %s %s, %s holds %s; refused (a reinstalled host or a man in the middle: check, then remove the old entry with ssh-keygen -R %s -f %s)",
				addr, key.Type(), Fingerprint(key), path, strings.Join(known, ", "), knownHostsName(host, port), path)
		}
		var re *knownhosts.RevokedError
		if errors.As(err, &re) {
			return fmt.Errorf("host key of %s is revoked in %s: %w", addr, path, err)
		}
		return err
	}
	return check, algos, nil
}

func knownHostsName(host, port string) string {
	if port == "22" {
		return host
	}
	return "'[" + host + "]:" + port + "'"
}

func keyscanType(t string) string {
	switch {
	case t == ssh.KeyAlgoED25519:
		return "ed25519"
	case strings.HasPrefix(t, "ecdsa"):
		return "ecdsa"
	case t == ssh.KeyAlgoRSA:
		return "rsa"
	}
	return t
}

func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// probeKey is a public key no host has.
type probeKey struct{}

func (probeKey) Type() string                        { return "lumina-probe" }
func (probeKey) Marshal() []byte                     { return []byte("lumina-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe") }
func (probeKey) String() string                      { return "probe" }

// ParseJump reads a ProxyJump [user@]host[:port]; the user defaults to def.
func ParseJump(s, def string) (user, addr string, err error) {
	user = def
	if u, h, ok := strings.Cut(s, "@"); ok {
		user, s = u, h
	}
	if s == "" || user == "" {
		return "", "", fmt.Errorf("jump host %q; expected [user@]host[:port]", s)
	}
	host, port := s, "22"
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("jump host %q: port %q; expected 1..65535", s, port)
	}
	return user, net.JoinHostPort(host, port), nil
}

// Client is an SSH connection to one host, possibly through a jump host.
type Client struct {
	*ssh.Client
	Target Target
	jump   *ssh.Client
	stop   chan struct{}
	closed bool
}

// Dial connects and authenticates, verifying the host key. Errors are HostErrors with Env set.
func Dial(ctx context.Context, t Target) (*Client, error) {
	if t.Timeout == 0 {
		t.Timeout = 10 * time.Second
	}
	fail := func(step string, err error) (*Client, error) {
		return nil, &HostError{Host: t.String(), Step: step, Env: true, Err: err}
	}
	methods, closeAgent, err := authMethods(t)
	if err != nil {
		return fail("authenticating", err)
	}
	defer closeAgent()
	config := func(addr, user string) (*ssh.ClientConfig, error) {
		cb, algos, err := hostKeyCheck(t, addr)
		if err != nil {
			return nil, err
		}
		return &ssh.ClientConfig{User: user, Auth: methods, HostKeyCallback: cb, HostKeyAlgorithms: algos,
			Timeout: t.Timeout}, nil
	}
	var jump *ssh.Client
	dial := func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: t.Timeout}
		return d.DialContext(ctx, network, addr)
	}
	if t.Jump != "" {
		ju, ja, err := ParseJump(t.Jump, t.User)
		if err != nil {
			return fail("reading the jump host", err)
		}
		jc, err := config(ja, ju)
		if err != nil {
			return fail("checking the jump host's key", err)
		}
		conn, err := dial("tcp", ja)
		if err != nil {
			return fail("connecting to the jump host "+ja, err)
		}
		jump, err = handshake(conn, ja, jc, t.Timeout)
		if err != nil {
			return fail("SSH handshake with the jump host "+ja, err)
		}
		dial = func(network, addr string) (net.Conn, error) { return jump.Dial(network, addr) }
	}
	addr := t.Addr()
	cfg, err := config(addr, t.User)
	if err != nil {
		if jump != nil {
			jump.Close()
		}
		return fail("checking the host key", err)
	}
	conn, err := dial("tcp", addr)
	if err != nil {
		if jump != nil {
			jump.Close()
		}
		return fail("connecting", err)
	}
	c, err := handshake(conn, addr, cfg, t.Timeout)
	if err != nil {
		if jump != nil {
			jump.Close()
		}
		return fail("SSH handshake", err)
	}
	cl := &Client{Client: c, Target: t, jump: jump, stop: make(chan struct{})}
	go cl.keepalive(5*time.Second, 3)
	return cl, nil
}

func handshake(conn net.Conn, addr string, cfg *ssh.ClientConfig, timeout time.Duration) (*ssh.Client, error) {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// keepalive sends keepalive@openssh.com every period and closes the connection after misses unanswered ones
// in a row (a host that died or a cable pulled ends the run instead of hanging it).
func (c *Client) keepalive(period time.Duration, misses int) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	missed := 0
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				return // the connection is gone; its sessions see it
			}
			missed = 0
		case <-time.After(period):
			missed++
			if missed >= misses {
				c.Client.Close()
				return
			}
		case <-c.stop:
			return
		}
	}
}

// Close closes the connection (and the jump host's).
func (c *Client) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.stop)
	err := c.Client.Close()
	if c.jump != nil {
		c.jump.Close()
	}
	return err
}

// Output runs a fixed command the controller built (never scenario text) and returns its standard output.
func (c *Client) Output(cmd string, stdin []byte) ([]byte, error) {
	s, err := c.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if stdin != nil {
		s.Stdin = bytes.NewReader(stdin)
	}
	var out, errb strings.Builder
	s.Stdout, s.Stderr = &out, &errb
	if err := s.Run(cmd); err != nil {
		return []byte(out.String()), fmt.Errorf("%s: %w: %s", cmd, err, strings.TrimSpace(errb.String()))
	}
	return []byte(out.String()), nil
}

// Quote quotes a word for a POSIX shell. '=' is quoted too: an unquoted first word NAME=... would be an
// assignment, not the command.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
