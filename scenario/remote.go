package scenario

import (
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// Remote says where each role of `testbed: remote` runs: a host reached over SSH. It is filled from the
// reference configuration's host keys (control-ip, username, ssh-key-filepath, workspace, and the nic keys
// if-name, pci-addr, ib-device, ib-port, switch-port) plus this project's ssh-port, known-hosts and jump. For
// any other testbed those keys are accepted and recorded in IgnoredKeys, and Remote is nil.
type Remote struct {
	Requester RemoteHost `json:"requester"`
	Responder RemoteHost `json:"responder"`
	Switch    RemoteHost `json:"switch"`
	// Dumpers are requester-mirror then responder-mirror (those present), in that order: dumper 0, 1.
	Dumpers []RemoteHost `json:"dumpers"`
}

// RemoteHost is one host of the remote testbed.
type RemoteHost struct {
	// Role is requester, responder, switch, requester-mirror or responder-mirror (the section's key).
	Role string `json:"role"`
	// ControlIP (control-ip) is the address (or DNS name) SSH connects to.
	ControlIP string `json:"control-ip"`
	// Username (username) is the SSH user.
	Username string `json:"username"`
	// KeyFile (ssh-key-filepath) is the private key; "" uses only the ssh-agent at SSH_AUTH_SOCK.
	KeyFile string `json:"ssh-key-filepath,omitempty"`
	// Workspace (workspace) is where the agent keeps its run directory ("" = ~/.cache/lumina).
	Workspace string `json:"workspace,omitempty"`
	// SSHPort (ssh-port) is the SSH port (default 22).
	SSHPort int `json:"ssh-port,omitempty"`
	// KnownHosts (known-hosts) verifies the host key ("" = ~/.ssh/known_hosts).
	KnownHosts string `json:"known-hosts,omitempty"`
	// Jump (jump) is a jump host in ProxyJump form, [user@]host[:port].
	Jump string `json:"jump,omitempty"`
	// The data NIC (nic.if-name, nic.pci-addr, nic.ib-device, nic.ib-port): the interface the traffic or the
	// mirrored copies use on this host.
	IfName   string `json:"if-name,omitempty"`
	PCIAddr  string `json:"pci-addr,omitempty"`
	IBDevice string `json:"ib-device,omitempty"`
	IBPort   int    `json:"ib-port,omitempty"`
	// SwitchPort (nic.switch-port) is the switch host's interface cabled to this NIC. The reference's
	// Tofino port numbers are kept as written; the remote testbed needs an interface name.
	SwitchPort string `json:"switch-port,omitempty"`
	// MaxPackets (pkt-dump-conf.max-packets, dumpers only) bounds the packets a dumper keeps (0: 1 M).
	MaxPackets int `json:"max-packets,omitempty"`
}

// Port is the SSH port, 22 unless set.
func (h RemoteHost) Port() int {
	if h.SSHPort == 0 {
		return 22
	}
	return h.SSHPort
}

// Address is host:port for SSH.
func (h RemoteHost) Address() string {
	host := h.ControlIP
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(h.Port())
}

// Keys the remote testbed reads (the reference's host keys plus this project's SSH keys).
var (
	remoteHostKeys   = []string{"control-ip", "username", "ssh-key-filepath", "workspace", "ssh-port", "known-hosts", "jump"}
	remoteNICKeys    = []string{"if-name", "pci-addr", "ib-device", "ib-port", "switch-port"}
	remoteOnlyKeys   = []string{"ssh-port", "known-hosts", "jump", "max-packets"}
	switchRemoteKeys = append(slices.Clone(switchKeys), "ssh-port", "known-hosts", "jump")
)

// remoteKey reads one remote-testbed key into h and remembers the field: for another testbed it is recorded
// as ignored. It reports whether key is one.
func (d *decoder) remoteKey(f field, h *RemoteHost, nic bool) bool {
	keys := remoteHostKeys
	if nic {
		keys = remoteNICKeys
	}
	if !slices.Contains(keys, f.key) && !(f.key == "max-packets" && !nic) {
		return false
	}
	d.remoteFields = append(d.remoteFields, f)
	// Type errors count only for testbed: remote (remoteFinish); other testbeds never checked these values.
	n := len(d.errs)
	defer func() {
		d.remoteErrs = append(d.remoteErrs, d.errs[n:]...)
		d.errs = d.errs[:n]
	}()
	switch f.key {
	case "control-ip":
		if s, ok := d.str(f.v, "the host's address or name for SSH"); ok {
			h.ControlIP = s
		}
	case "username":
		if s, ok := d.str(f.v, "the SSH user name"); ok {
			h.Username = s
		}
	case "ssh-key-filepath":
		if s, ok := d.str(f.v, "the path of an SSH private key"); ok {
			h.KeyFile = s
		}
	case "workspace":
		if s, ok := d.str(f.v, "a directory on the host"); ok {
			h.Workspace = s
		}
	case "ssh-port":
		if p, ok := d.intIn(f.v, 1, 65535); ok {
			h.SSHPort = p
		}
	case "known-hosts":
		if s, ok := d.str(f.v, "the path of a known_hosts file"); ok {
			h.KnownHosts = s
		}
	case "jump":
		if s, ok := d.str(f.v, "a jump host [user@]host[:port]"); ok {
			h.Jump = s
		}
	case "if-name":
		if s, ok := d.str(f.v, "a network interface name"); ok {
			h.IfName = s
		}
	case "pci-addr":
		if s, ok := d.str(f.v, "a PCI address such as 0000:3b:00.0"); ok {
			h.PCIAddr = s
		}
	case "ib-device":
		if s, ok := d.str(f.v, "an RDMA device name such as mlx5_0"); ok {
			h.IBDevice = s
		}
	case "ib-port":
		if p, ok := d.intIn(f.v, 1, 255); ok {
			h.IBPort = p
		}
	case "switch-port":
		if n, ok := intOf(f.v.n); ok {
			h.SwitchPort = strconv.FormatInt(n, 10)
		} else if s, ok := d.str(f.v, "the switch's interface name facing this NIC"); ok {
			h.SwitchPort = s
		}
	case "max-packets":
		if p, ok := d.intIn(f.v, 1, 1<<30); ok {
			h.MaxPackets = p
		}
	}
	return true
}

// remoteFinish keeps the remote hosts for testbed: remote; for any other testbed the keys read are
// recorded as ignored, as before the remote testbed existed.
func (d *decoder) remoteFinish(s *Scenario) {
	if s.Testbed == "remote" {
		d.errs = append(d.errs, d.remoteErrs...)
		r := d.remote
		r.Requester.Role, r.Responder.Role, r.Switch.Role = "requester", "responder", "switch"
		s.Remote = &r
		return
	}
	for _, f := range d.remoteFields {
		d.ignore(f)
	}
	slices.SortStableFunc(d.ignoredAt, func(a, b ignoredKey) int {
		if a.line != b.line {
			return a.line - b.line
		}
		return a.col - b.col
	})
}

// switchSection reads the switch section: its SSH keys for the remote testbed; the Tofino keys are ignored.
func (d *decoder) switchSection(v val) {
	fields, _ := d.fields(v)
	for _, f := range fields {
		if d.remoteKey(f, &d.remote.Switch, false) && f.key != "max-packets" {
			continue
		}
		if f.key == "max-packets" {
			d.unknown(f, switchRemoteKeys)
			continue
		}
		if slices.Contains(switchKeys, f.key) {
			d.ignore(f)
		} else {
			d.unknown(f, switchRemoteKeys)
		}
	}
}

// effectiveRemote adds the remote hosts' keys to the effective scenario's sections.
func (s *Scenario) effectiveRemote(out yaml.MapSlice) yaml.MapSlice {
	if s.Remote == nil {
		return out
	}
	hostKV := func(h RemoteHost) yaml.MapSlice {
		m := yaml.MapSlice{{Key: "control-ip", Value: h.ControlIP}, {Key: "username", Value: h.Username}}
		if h.KeyFile != "" {
			m = append(m, kv{Key: "ssh-key-filepath", Value: h.KeyFile})
		}
		if h.Workspace != "" {
			m = append(m, kv{Key: "workspace", Value: h.Workspace})
		}
		if h.SSHPort != 0 {
			m = append(m, kv{Key: "ssh-port", Value: h.SSHPort})
		}
		if h.KnownHosts != "" {
			m = append(m, kv{Key: "known-hosts", Value: h.KnownHosts})
		}
		if h.Jump != "" {
			m = append(m, kv{Key: "jump", Value: h.Jump})
		}
		return m
	}
	nicKV := func(h RemoteHost) yaml.MapSlice {
		var m yaml.MapSlice
		for _, x := range []kv{{Key: "if-name", Value: h.IfName}, {Key: "pci-addr", Value: h.PCIAddr},
			{Key: "ib-device", Value: h.IBDevice}, {Key: "switch-port", Value: h.SwitchPort}} {
			if x.Value != "" {
				m = append(m, x)
			}
		}
		if h.IBPort != 0 {
			m = append(m, kv{Key: "ib-port", Value: h.IBPort})
		}
		return m
	}
	for i := range out {
		var h RemoteHost
		switch out[i].Key {
		case "requester":
			h = s.Remote.Requester
		case "responder":
			h = s.Remote.Responder
		default:
			continue
		}
		sec := out[i].Value.(yaml.MapSlice)
		for j := range sec {
			if sec[j].Key == "nic" {
				sec[j].Value = append(sec[j].Value.(yaml.MapSlice), nicKV(h)...)
			}
		}
		out[i].Value = append(sec, hostKV(h)...)
	}
	out = append(out, kv{Key: "switch", Value: hostKV(s.Remote.Switch)})
	for _, m := range s.Remote.Dumpers {
		sec := hostKV(m)
		if m.MaxPackets != 0 {
			sec = append(sec, kv{Key: "pkt-dump-conf", Value: yaml.MapSlice{{Key: "max-packets", Value: m.MaxPackets}}})
		}
		if n := nicKV(m); len(n) > 0 {
			sec = append(sec, kv{Key: "nic", Value: n})
		}
		out = append(out, kv{Key: m.Role, Value: sec})
	}
	return out
}

// ignoredKey is one accepted hardware-only key and where it is.
type ignoredKey struct {
	line, col int
	s         string
}

func (d *decoder) ignoredStrings() []string {
	var out []string
	for _, k := range d.ignoredAt {
		out = append(out, k.s)
	}
	return out
}
