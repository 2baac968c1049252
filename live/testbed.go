package live

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Interface names inside the testbed's namespaces.
const (
	HostIf    = "eth0"    // the requester's, responder's and each dumper's interface in its own namespace
	SwReqIf   = "sw-req"  // switch port 0, facing the requester
	SwRespIf  = "sw-resp" // switch port 1, facing the responder
	swDumpFmt = "sw-d%d"  // switch mirror port i
)

// TestbedPrefix starts every namespace name the testbed creates; the process id follows, so leftovers of a
// dead run can be told from a live run's namespaces.
const TestbedPrefix = "ltn"

// TestbedConfig shapes the namespaces.
type TestbedConfig struct {
	Dumpers int // dumper namespaces (0: 1)
	MTU     int // MTU of every veth (0: 1500); RoCE MTU 4096 needs at least 4200
	// Tag distinguishes testbeds of one process (0, 1, ...).
	Tag int
}

// Testbed is a set of namespaces joined by veth pairs: requester -- switch -- responder, and one namespace per
// dumper joined to the switch. Checksum offload is off on every veth (AF_PACKET would otherwise see partial
// checksums) and IPv6 is off so that no neighbour discovery noise crosses the switch.
type Testbed struct {
	Prefix string
	Req    string // namespace names
	Sw     string
	Resp   string
	Dump   []string
	SwDump []string // switch-side interface of each dumper
	closed bool
}

// NewTestbed removes leftovers of dead runs, then builds the namespaces. On error everything it created is
// removed again.
func NewTestbed(cfg TestbedConfig) (*Testbed, error) {
	if err := RequireRoot(); err != nil {
		return nil, err
	}
	if cfg.Dumpers == 0 {
		cfg.Dumpers = 1
	}
	if cfg.Dumpers < 0 || cfg.Dumpers > 16 {
		return nil, fmt.Errorf("testbed with %d dumpers; expected 1..16", cfg.Dumpers)
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.MTU < 1280 || cfg.MTU > 9000 {
		return nil, fmt.Errorf("testbed MTU %d; expected 1280..9000", cfg.MTU)
	}
	_ = CleanupStale()
	p := fmt.Sprintf("%s%d-%d-", TestbedPrefix, os.Getpid(), cfg.Tag)
	t := &Testbed{Prefix: p, Req: p + "req", Sw: p + "sw", Resp: p + "resp"}
	for i := 0; i < cfg.Dumpers; i++ {
		t.Dump = append(t.Dump, fmt.Sprintf("%sd%d", p, i))
		t.SwDump = append(t.SwDump, fmt.Sprintf(swDumpFmt, i))
	}
	if err := t.build(cfg.MTU); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

func (t *Testbed) build(mtu int) error {
	all := append([]string{t.Req, t.Sw, t.Resp}, t.Dump...)
	for _, ns := range all {
		if err := sh("ip", "netns", "add", ns); err != nil {
			return fmt.Errorf("building testbed: %w", err)
		}
		if err := sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
			"net.ipv6.conf.default.disable_ipv6=1"); err != nil {
			return fmt.Errorf("building testbed: %w", err)
		}
		if err := sh("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return fmt.Errorf("building testbed: %w", err)
		}
	}
	pairs := [][4]string{{t.Req, HostIf, t.Sw, SwReqIf}, {t.Resp, HostIf, t.Sw, SwRespIf}}
	for i, d := range t.Dump {
		pairs = append(pairs, [4]string{d, HostIf, t.Sw, t.SwDump[i]})
	}
	for _, pr := range pairs {
		if err := sh("ip", "link", "add", pr[1], "netns", pr[0], "mtu", strconv.Itoa(mtu), "type", "veth",
			"peer", "name", pr[3], "netns", pr[2], "mtu", strconv.Itoa(mtu)); err != nil {
			return fmt.Errorf("building testbed: %w", err)
		}
		for _, end := range [][2]string{{pr[0], pr[1]}, {pr[2], pr[3]}} {
			if err := sh("ip", "-n", end[0], "link", "set", end[1], "up"); err != nil {
				return fmt.Errorf("building testbed: %w", err)
			}
			if err := offloadOff(end[0], end[1]); err != nil {
				return fmt.Errorf("building testbed: %w", err)
			}
		}
	}
	return nil
}

// offloadOff turns TX checksum offload off (a veth hands AF_PACKET frames with partial checksums) and the
// segmentation offloads that would hand the switch frames larger than the MTU.
func offloadOff(ns, ifname string) error {
	return sh("ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tx", "off", "rx", "off", "tso", "off",
		"gso", "off", "gro", "off")
}

// Close deletes the namespaces (and with them the veth pairs). It is idempotent.
func (t *Testbed) Close() error {
	if t == nil || t.closed {
		return nil
	}
	t.closed = true
	return CleanupPrefix(t.Prefix)
}

// CleanupStale deletes testbed namespaces left by processes that no longer run (an interrupted run that
// could not clean up, e.g. SIGKILL). Namespaces of running processes are left alone.
func CleanupStale() error {
	ents, err := os.ReadDir(NetnsDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("listing %s: %w", NetnsDir, err)
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, TestbedPrefix) {
			continue
		}
		rest := strings.TrimPrefix(name, TestbedPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		errs = append(errs, sh("ip", "netns", "del", name))
	}
	return errors.Join(errs...)
}
