// Package hostnic configures a real RDMA NIC on the host it runs on, the way the reference Lumina orchestrator
// does before each run, and reads the NIC's counters from their real sources.
//
// The package is split so that everything that decides is pure and everything that touches the host goes
// through one small interface:
//
//   - Config names the NIC (vendor nvidia, intel or rxe; interface, PCI address, IB device and port, the
//     addresses to put on the interface) and the reference's roce-parameters. FromScenario builds it from a
//     scenario host section plus the hardware keys (if-name, pci-addr, ib-device, ib-port, and for rxe the
//     parent netdev).
//   - Plan(cfg) returns the ordered Steps for that vendor: each is exactly one action (an argv, never a shell
//     string; a file write; a file read check; a tool lookup) with a sentence a human reads in a dry run, and,
//     when it changes state, how it is undone (a sysfs write is undone by writing back the value read just
//     before it; a command by an inverse command, filled in from the state queried just before it). Plan is
//     deterministic and validates the Config: an unknown vendor, a missing interface name or a value out of
//     range is an error naming the field and what was expected.
//   - Apply(ctx, runner, steps, report) runs the steps in order through a Runner (OSRunner on a real host, a
//     fake in tests), stops at the first failure with an error naming the host and the step (a missing tool or
//     a permission error said as such), and returns the undo list for what it changed; Undo runs that list in
//     reverse. Apply never leaves a change without its undo entry: on failure the caller undoes what the
//     returned list holds.
//   - ReadCounters(ctx, runner, cfg) reads sysfs hw_counters and counters, `ethtool -S` and `rdma statistic`,
//     and merges them into one map under the vendor's own names: the Start/Finish maps of counters.json (the
//     simulator's shape, read by the counter analyzer unchanged). Where one name comes from several sources the
//     first source in SourceOrder wins; Snapshot.Source records which one it was.
//
// No SSH here: the remote testbed's agent calls this package on each host.
package hostnic

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
)

// Vendors Config.Vendor accepts.
const (
	VendorNVIDIA = "nvidia" // mlx5: ConnectX-4 Lx, -5, -6 Dx
	VendorIntel  = "intel"  // irdma: E810
	VendorRxe    = "rxe"    // Soft-RoCE (rdma_rxe) on any Ethernet netdev
)

// Config is one host's NIC and the settings a run puts on it. Its JSON form (keys as the reference's config
// spells them) is what a controller sends to the agent on the host.
type Config struct {
	// Host names the host in messages (e.g. "requester" or its address).
	Host string `json:"host,omitempty"`
	// Vendor is nvidia, intel or rxe.
	Vendor string `json:"vendor"`
	// IfName is the Ethernet interface (the reference's nic.if-name). For rxe it is the parent netdev the rxe
	// device is bound to unless Parent is set.
	IfName string `json:"if-name"`
	// PCIAddr is the NIC's PCI address (nic.pci-addr), e.g. 0000:3b:00.0; NVIDIA needs it for mlxreg.
	PCIAddr string `json:"pci-addr,omitempty"`
	// IBDevice is the RDMA device (nic.ib-device), e.g. mlx5_0, irdma0, rxe0. For rxe it is the name the
	// device is created with.
	IBDevice string `json:"ib-device,omitempty"`
	// IBPort is the RDMA port (nic.ib-port), 1 when zero.
	IBPort int `json:"ib-port,omitempty"`
	// Parent is, for rxe, the netdev the rxe device is created on; empty = IfName.
	Parent string `json:"parent,omitempty"`
	// IPs are put on the interface (nic.ip-list) after flushing its addresses, as the reference does; empty =
	// leave the addresses alone.
	IPs []netip.Prefix `json:"ip-list,omitempty"`
	// MTU is the netdev MTU to set (bytes, 576..9216); 0 = leave it.
	MTU int `json:"mtu,omitempty"`
	// PrioDSCPMap maps a priority (0..7) to the DSCP values it carries (nic.prio-dscp-map); nil = the
	// reference's default (priority p carries DSCP 8p..8p+7; Intel only 0..31).
	PrioDSCPMap map[int][]int `json:"prio-dscp-map,omitempty"`
	// ConfigureQoS sets DSCP trust, the DSCP-to-priority map and ETS (12/13% per class on NVIDIA, 25% on four
	// classes on Intel) as the reference does. Off, the QoS configuration of the NIC is left alone.
	ConfigureQoS bool `json:"configure-qos,omitempty"`
	// RoCE holds the reference's roce-parameters; a nil field leaves that setting alone.
	RoCE RoCEParameters `json:"roce-parameters"`
}

// RoCEParameters are the reference's roce-parameters. nil = not set (the NIC's current value stays).
type RoCEParameters struct {
	DCQCNRPEnable *bool `json:"dcqcn-rp-enable,omitempty"` // NVIDIA: /sys/class/net/IF/ecn/roce_rp/enable/0..7
	DCQCNNPEnable *bool `json:"dcqcn-np-enable,omitempty"` // NVIDIA: /sys/class/net/IF/ecn/roce_np/enable/0..7
	// MinTimeBetweenCNPsUs is NVIDIA's CNP limiter interval in microseconds (0..4095, integral):
	// /sys/class/net/IF/ecn/roce_np/min_time_between_cnps.
	MinTimeBetweenCNPsUs *float64 `json:"min-time-between-cnps,omitempty"`
	AdaptiveRetrans      *bool    `json:"adaptive-retrans,omitempty"` // NVIDIA: mlxreg ROCE_ACCL roce_adp_retrans_en
	SlowRestart          *bool    `json:"slow-restart,omitempty"`     // NVIDIA: mlxreg ROCE_ACCL roce_slow_restart_en
	DCQCNEnable          *bool    `json:"dcqcn-enable,omitempty"`     // Intel: /sys/kernel/config/irdma/DEV/roce_dcqcn_enable
}

// Op is the kind of one Step.
type Op string

// Step kinds.
const (
	OpLookPath Op = "lookpath" // Argv[0] must be on PATH (no state change)
	OpCheck    Op = "check"    // Path must be readable; with Value set, its trimmed content must equal Value
	OpWrite    Op = "write"    // write Value to Path; undone by writing back the value read before
	OpRun      Op = "run"      // run Argv; undone by Undo (fixed) or Query + UndoArgv (filled in at apply time)
)

// Step is exactly one action on the host.
type Step struct {
	// Host is Config.Host, for messages.
	Host string `json:"host"`
	// Desc is what the step does, for a human reading a dry run.
	Desc string `json:"desc"`
	Op   Op     `json:"op"`
	// Argv is the command of OpRun and the tool of OpLookPath (never a shell string).
	Argv []string `json:"argv,omitempty"`
	// Path and Value are the file and the content of OpWrite and OpCheck.
	Path  string `json:"path,omitempty"`
	Value string `json:"value,omitempty"`
	// Undo is the fixed inverse of an OpRun step (e.g. `ip addr del` for `ip addr replace`); nil with no
	// Query = the step changes nothing that needs undoing, or cannot be undone (NoUndo says why).
	Undo *Step `json:"undo,omitempty"`
	// Query, for an OpRun step whose inverse depends on the state before it, is read just before the step
	// runs; its parser yields one set of values per undo command, each filling UndoArgv's {name}
	// placeholders.
	Query *Query `json:"query,omitempty"`
	// UndoArgv is the template of the inverse command (with Query).
	UndoArgv []string `json:"undo_argv,omitempty"`
	// NoUndo, when set, says why a state-changing step is not undone (e.g. a kernel module left loaded).
	NoUndo string `json:"no_undo,omitempty"`
}

// Query reads the state a step is about to change, so its undo can restore it.
type Query struct {
	Argv []string `json:"argv"`
	// Parser names the output parser: see parsers in apply.go (ip-addrs, mlxreg:FIELD, mlnx-trust,
	// mlnx-dscp2prio:DSCP, mlnx-ets, ethtool-priv-flag:FLAG, lldp-app, lldp-ets).
	Parser string `json:"parser"`
}

// StepReport is what Apply and Undo report for each step as it finishes.
type StepReport struct {
	Index int    // 0-based position in the list being applied
	Step  Step   // the step as run (undo steps with their placeholders filled in)
	Err   error  // nil: done
	Note  string // e.g. "was 1" for a write, or what the query found
}

// Runner is how a plan touches the host: the OS (OSRunner) or a fake in tests.
type Runner interface {
	// Run runs argv (argv[0] looked up on PATH) and returns its standard output; a non-zero exit is an error
	// carrying the standard error.
	Run(ctx context.Context, argv []string) (stdout []byte, err error)
	ReadFile(path string) ([]byte, error)
	WriteFile(path string, data []byte) error
	LookPath(name string) (string, error)
	// ReadDir lists the names in a directory, sorted (the sysfs counter directories).
	ReadDir(path string) ([]string, error)
}

// Snapshot is one reading of a NIC's counters under the vendor's names.
type Snapshot struct {
	// Values is the merged counter map: counters.json's "start" or "finish" object for this host.
	Values map[string]uint64 `json:"values"`
	// Source tells, per name, which source the value came from (one of SourceOrder).
	Source map[string]string `json:"source"`
	// Skipped lists sysfs attributes that could not be read (path: error); they are left out of Values.
	Skipped []string `json:"skipped,omitempty"`
}

// Counter sources, in precedence order: a name found in several sources takes the first one's value.
const (
	SourceHWCounters = "sysfs-hw_counters" // /sys/class/infiniband/DEV/ports/PORT/hw_counters/*
	SourceCounters   = "sysfs-counters"    // /sys/class/infiniband/DEV/ports/PORT/counters/*
	SourceRdmaStat   = "rdma-statistic"    // rdma statistic show link DEV/PORT
	SourceEthtool    = "ethtool-S"         // ethtool -S IF
)

// SourceOrder is the precedence of the counter sources.
var SourceOrder = []string{SourceHWCounters, SourceCounters, SourceRdmaStat, SourceEthtool}

// String renders the step on one line for a dry run: what runs or is written, and how it is undone.
func (s Step) String() string {
	var b []byte
	b = append(b, s.Host...)
	if s.Host != "" {
		b = append(b, ": "...)
	}
	b = append(b, s.Desc...)
	b = append(b, ": "...)
	b = append(b, s.action()...)
	switch {
	case s.Undo != nil:
		b = append(b, " [undo: "...)
		b = append(b, s.Undo.action()...)
		b = append(b, ']')
	case s.Query != nil && !strings.Contains(argvString(s.UndoArgv), "{"):
		// Nothing to fill in: the query only says whether there is anything to undo (an entry already there).
		b = append(b, " [undo: "...)
		b = append(b, argvString(s.UndoArgv)...)
		b = append(b, " unless "...)
		b = append(b, argvString(s.Query.Argv)...)
		b = append(b, " already lists it before]"...)
	case s.Query != nil:
		b = append(b, " [undo: "...)
		b = append(b, argvString(s.UndoArgv)...)
		b = append(b, " with the values "...)
		b = append(b, argvString(s.Query.Argv)...)
		b = append(b, " prints before]"...)
	case s.Op == OpWrite && !strings.HasPrefix(s.Desc, "restore "):
		b = append(b, " [undo: write back the value read before]"...)
	case s.NoUndo != "":
		b = append(b, " [not undone: "...)
		b = append(b, s.NoUndo...)
		b = append(b, ']')
	}
	return string(b)
}

func (s Step) action() string {
	switch s.Op {
	case OpLookPath:
		return "look up " + argvString(s.Argv) + " on PATH"
	case OpCheck:
		if s.Value != "" {
			return "read " + s.Path + ", expect " + s.Value
		}
		return "read " + s.Path
	case OpWrite:
		return "write " + s.Value + " to " + s.Path
	}
	return argvString(s.Argv)
}

func argvString(argv []string) string {
	out := ""
	for i, a := range argv {
		if i > 0 {
			out += " "
		}
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>*?()[]{}#~") && !isPlaceholder(a) {
			a = strconv.Quote(a)
		}
		out += a
	}
	return out
}

// isPlaceholder tells whether a contains only {name} placeholders among the characters that would need quoting.
func isPlaceholder(a string) bool {
	t := a
	for {
		i := strings.Index(t, "{")
		if i < 0 {
			break
		}
		j := strings.Index(t[i:], "}")
		if j < 0 {
			return false
		}
		t = t[:i] + t[i+j+1:]
	}
	return !strings.ContainsAny(t, " \t\n\"'\\$`;&|<>*?()[]{}#~")
}
