package live

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsDir is where `ip netns` keeps its named namespaces.
const NetnsDir = "/run/netns"

// InNetns runs fn on an OS thread switched into the named network namespace ("" = the current one), then
// switches back. Sockets opened by fn stay in that namespace for their whole life, which is how one process
// runs the switch, dumpers and endpoints of a testbed in their own namespaces.
func InNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns %s: opening the current namespace: %w", name, err)
	}
	defer unix.Close(orig)
	target, err := unix.Open(filepath.Join(NetnsDir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns %s: %w", name, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns %s: setns: %w", name, err)
	}
	ferr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so the runtime retires it with the goroutine instead of reusing it in the
		// wrong namespace.
		return fmt.Errorf("leaving netns %s: setns: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// sh runs a command (ip, ethtool, sysctl) and returns its error with its output.
func sh(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// RequireRoot reports why namespaces cannot be built here, or nil when they can.
func RequireRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the netns testbed needs root (network namespaces, veth pairs, AF_PACKET); running as uid %d", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("the netns testbed needs the ip command (apt-get install -y iproute2): %w", err)
	}
	return nil
}

// CleanupPrefix deletes every named namespace whose name starts with prefix (deleting a namespace destroys
// its veth ends, and with them their peers). It is idempotent, for leftovers of an interrupted run.
func CleanupPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("cleanup needs a non-empty namespace prefix")
	}
	ents, err := os.ReadDir(NetnsDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("listing %s: %w", NetnsDir, err)
	}
	var first error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := sh("ip", "netns", "del", e.Name()); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
