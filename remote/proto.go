package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"

	"github.com/lumina-go/lumina/hostnic"
	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/live"
)

// The agent protocol: the controller writes one Request per line on the agent's standard input; the agent
// answers one Response per line on its standard output, in order, and logs to standard error. The operations
// are a closed set of typed arguments, each validated before anything runs; an agent never runs a shell, and
// the only commands it executes are the argv lists an operation's Commands method names (ip, ethtool, and
// for nic-setup and counters the vendor tools hostnic plans).

// Request is one operation.
type Request struct {
	ID   int             `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Response answers the request with the same ID.
type Response struct {
	ID     int             `json:"id"`
	OK     bool            `json:"ok"`
	Error  string          `json:"error,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Op is the arguments of one operation.
type Op interface {
	Name() string
	Validate() error
	// Commands are the external commands the operation runs on the host, for --dry-run and the log.
	Commands() [][]string
}

// Operation names.
const (
	OpHello         = "hello"
	OpIfaceSetup    = "iface-setup"
	OpEndpointStart = "endpoint-start"
	OpTrafficRun    = "traffic-run"
	OpEndpointStop  = "endpoint-stop"
	OpSwitchStart   = "switch-start"
	OpSwitchInstall = "switch-install"
	OpSwitchStop    = "switch-stop"
	OpDumpStart     = "dump-start"
	OpDumpStop      = "dump-stop"
	OpFetch         = "fetch"
	OpNICSetup      = "nic-setup"
	OpNICUndo       = "nic-undo"
	OpCounters      = "counters"
)

// newOp returns an empty argument value for a name, or nil for an unknown operation.
func newOp(name string) Op {
	switch name {
	case OpHello:
		return &Hello{}
	case OpIfaceSetup:
		return &IfaceSetup{}
	case OpEndpointStart:
		return &EndpointStart{}
	case OpTrafficRun:
		return &TrafficRun{}
	case OpEndpointStop:
		return &EndpointStop{}
	case OpSwitchStart:
		return &SwitchStart{}
	case OpSwitchInstall:
		return &SwitchInstall{}
	case OpSwitchStop:
		return &SwitchStop{}
	case OpDumpStart:
		return &DumpStart{}
	case OpDumpStop:
		return &DumpStop{}
	case OpFetch:
		return &Fetch{}
	case OpNICSetup:
		return &NICSetup{}
	case OpNICUndo:
		return &NICUndo{}
	case OpCounters:
		return &Counters{}
	case OpVerbsServerStart:
		return &VerbsServerStart{}
	case OpVerbsServerStop:
		return &VerbsServerStop{}
	case OpVerbsClientStart:
		return &VerbsClientStart{}
	case OpVerbsClientRun:
		return &VerbsClientRun{}
	}
	return nil
}

// OpNames lists the operations.
var OpNames = []string{OpHello, OpIfaceSetup, OpEndpointStart, OpTrafficRun, OpEndpointStop, OpSwitchStart,
	OpSwitchInstall, OpSwitchStop, OpDumpStart, OpDumpStop, OpFetch, OpNICSetup, OpNICUndo, OpCounters,
	OpVerbsServerStart, OpVerbsServerStop, OpVerbsClientStart, OpVerbsClientRun}

// DecodeRequest reads one request line: a known operation whose arguments have no unknown field and pass
// validation.
func DecodeRequest(line []byte) (Request, Op, error) {
	var r Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, nil, fmt.Errorf("decoding request: %v; expected {\"id\":N,\"op\":NAME,\"args\":{...}}", err)
	}
	op := newOp(r.Op)
	if op == nil {
		return r, nil, fmt.Errorf("unknown operation %q; expected one of %v", r.Op, OpNames)
	}
	if len(r.Args) > 0 && string(r.Args) != "null" {
		dec := json.NewDecoder(bytes.NewReader(r.Args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(op); err != nil {
			return r, nil, fmt.Errorf("%s: decoding arguments: %v", r.Op, err)
		}
	}
	if err := op.Validate(); err != nil {
		return r, nil, fmt.Errorf("%s: %w", r.Op, err)
	}
	return r, op, nil
}

var ifaceRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}$`)

// checkIface accepts a Linux interface name (at most 15 bytes, no slash or space, not starting with -).
func checkIface(what, s string) error {
	if !ifaceRe.MatchString(s) {
		return fmt.Errorf("%s %q is not an interface name; expected 1..15 letters, digits, _ . : @ -, not starting with -", what, s)
	}
	return nil
}

// Hello asks the agent who it is and checks, before anything changes, what the run will need on the host:
// root, the commands it will run, the interfaces named.
type Hello struct {
	Ifaces []string `json:"ifaces,omitempty"`
	// Tools are further commands the run will need on this host (the vendor tools of a NIC setup), looked up on
	// PATH before anything changes.
	Tools []string `json:"tools,omitempty"`
}

var toolRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$`)

func (*Hello) Name() string { return OpHello }
func (o *Hello) Validate() error {
	for i, f := range o.Ifaces {
		if err := checkIface(fmt.Sprintf("ifaces[%d]", i), f); err != nil {
			return err
		}
	}
	for i, t := range o.Tools {
		if !toolRe.MatchString(t) {
			return fmt.Errorf("tools[%d] %q is not a command name; expected letters, digits, _ . + - and no path", i, t)
		}
	}
	return nil
}
func (*Hello) Commands() [][]string { return nil }

// HelloResult is the agent's identity and what it found missing on the host.
type HelloResult struct {
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	UID      int    `json:"uid"`
	Hostname string `json:"hostname"`
	RunDir   string `json:"run_dir"`
	// Problems are what keeps the run from working on this host (not root, a command or interface missing).
	Problems []string `json:"problems,omitempty"`
}

// IfaceSetup brings the data interface up with an MTU, optionally adds addresses, turns the offloads off
// that would hand AF_PACKET partial checksums or frames larger than the MTU, and with Promisc receives frames
// for every MAC (a real NIC drops the software RNIC's and the mirrored copies' destination MACs otherwise). The agent records the previous
// state and restores it when the session ends.
type IfaceSetup struct {
	Iface      string         `json:"iface"`
	MTU        int            `json:"mtu"`
	Addrs      []netip.Prefix `json:"addrs,omitempty"`
	OffloadOff bool           `json:"offload_off"`
	Promisc    bool           `json:"promisc"`
}

func (*IfaceSetup) Name() string { return OpIfaceSetup }
func (o *IfaceSetup) Validate() error {
	if err := checkIface("iface", o.Iface); err != nil {
		return err
	}
	if o.MTU != 0 && (o.MTU < 1280 || o.MTU > 9216) {
		return fmt.Errorf("mtu %d; expected 1280..9216 (or 0 to leave it)", o.MTU)
	}
	for _, a := range o.Addrs {
		if !a.IsValid() {
			return fmt.Errorf("address %v is not valid; expected an address with a prefix length", a)
		}
	}
	return nil
}

// offloads are the features IfaceSetup turns off.
var offloads = []string{"tx", "rx", "tso", "gso", "gro"}

func (o *IfaceSetup) Commands() [][]string {
	var out [][]string
	if o.MTU != 0 {
		out = append(out, []string{"ip", "link", "set", "dev", o.Iface, "mtu", strconv.Itoa(o.MTU)})
	}
	out = append(out, []string{"ip", "link", "set", "dev", o.Iface, "up"})
	if o.Promisc {
		out = append(out, []string{"ip", "link", "set", "dev", o.Iface, "promisc", "on"})
	}
	for _, a := range o.Addrs {
		out = append(out, []string{"ip", "addr", "add", a.String(), "dev", o.Iface})
	}
	if o.OffloadOff {
		c := []string{"ethtool", "-K", o.Iface}
		for _, f := range offloads {
			c = append(c, f, "off")
		}
		out = append(out, c)
	}
	return out
}

// EndpointStart opens a software RNIC on the interface. A responder starts answering at once; a requester
// waits for TrafficRun.
type EndpointStart struct {
	Requester bool   `json:"requester"`
	Iface     string `json:"iface"`
	// Profile is a NIC profile name; ProfileYAML, when set, is the content of the user's profile file.
	Profile     string            `json:"profile"`
	ProfileYAML string            `json:"profile_yaml,omitempty"`
	Spec        live.EndpointSpec `json:"spec"`
}

func (*EndpointStart) Name() string { return OpEndpointStart }
func (o *EndpointStart) Validate() error {
	if err := checkIface("iface", o.Iface); err != nil {
		return err
	}
	if o.Profile == "" && o.ProfileYAML == "" {
		return fmt.Errorf("no NIC profile; expected profile (a name) or profile_yaml")
	}
	if len(o.Spec.QPs) == 0 {
		return fmt.Errorf("no QPs; expected at least one in spec.qps")
	}
	if o.Spec.FrameSize < 2048 || o.Spec.FrameSize > 1<<16 {
		return fmt.Errorf("spec.frame_size %d; expected 2048..65536", o.Spec.FrameSize)
	}
	for i, q := range o.Spec.QPs {
		if q.Requester != o.Requester {
			return fmt.Errorf("spec.qps[%d]: requester %v on a %s endpoint", i, q.Requester, roleName(o.Requester))
		}
		if q.Verb != "write" && q.Verb != "send" && q.Verb != "read" {
			return fmt.Errorf("spec.qps[%d]: verb %q; expected write, send or read", i, q.Verb)
		}
		if !q.LocalIP.IsValid() || !q.PeerIP.IsValid() {
			return fmt.Errorf("spec.qps[%d]: local_ip and peer_ip must be addresses", i)
		}
		if q.MTU < 256 || q.MTU > 4096 {
			return fmt.Errorf("spec.qps[%d]: mtu %d; expected 256..4096", i, q.MTU)
		}
	}
	if o.Requester && (o.Spec.Traffic.MsgsPerConn < 1 || o.Spec.Traffic.MsgSize < 1) {
		return fmt.Errorf("spec.traffic: %d messages of %d bytes; expected at least one message of at least one byte",
			o.Spec.Traffic.MsgsPerConn, o.Spec.Traffic.MsgSize)
	}
	return nil
}
func (*EndpointStart) Commands() [][]string { return nil }

func roleName(req bool) string {
	if req {
		return "requester"
	}
	return "responder"
}

// TrafficRun starts the requester's traffic and answers when every connection finished or LimitMs passed.
type TrafficRun struct {
	LimitMs int64 `json:"limit_ms"`
}

func (*TrafficRun) Name() string { return OpTrafficRun }
func (o *TrafficRun) Validate() error {
	if o.LimitMs < 1 || o.LimitMs > 3_600_000 {
		return fmt.Errorf("limit_ms %d; expected 1..3600000", o.LimitMs)
	}
	return nil
}
func (*TrafficRun) Commands() [][]string { return nil }

// EndpointResult is an endpoint's account: per-connection outcomes (requester), data packets sent, counters.
type EndpointResult struct {
	Results   map[int]lab.ConnResult `json:"results,omitempty"`
	DataStats map[int][2]uint64      `json:"data_stats"`
	Counters  lab.CounterSnapshot    `json:"counters"`
	Unknown   uint64                 `json:"unknown"`
	Error     string                 `json:"error,omitempty"`
}

// EndpointStop stops the endpoint and returns its account.
type EndpointStop struct{}

func (*EndpointStop) Name() string         { return OpEndpointStop }
func (*EndpointStop) Validate() error      { return nil }
func (*EndpointStop) Commands() [][]string { return nil }

// SwitchStart opens the switch's ports and mirror ports and forwards with no events until SwitchInstall.
type SwitchStart struct {
	Ports         [2]string       `json:"ports"`
	Dumpers       []string        `json:"dumpers"`
	Intents       []inject.Intent `json:"intents"`
	TableCapacity int             `json:"table_capacity"`
	DumperWeights []int           `json:"dumper_weights"`
	RewritePort   uint16          `json:"rewrite_port"`
	Seed          uint64          `json:"seed"`
	FrameSize     int             `json:"frame_size"`
}

func (*SwitchStart) Name() string { return OpSwitchStart }
func (o *SwitchStart) Validate() error {
	for i, p := range o.Ports {
		if err := checkIface(fmt.Sprintf("ports[%d]", i), p); err != nil {
			return err
		}
	}
	if o.Ports[0] == o.Ports[1] {
		return fmt.Errorf("ports are both %q; expected two interfaces", o.Ports[0])
	}
	if len(o.Dumpers) < 1 || len(o.Dumpers) > 16 {
		return fmt.Errorf("%d mirror ports; expected 1..16", len(o.Dumpers))
	}
	for i, d := range o.Dumpers {
		if err := checkIface(fmt.Sprintf("dumpers[%d]", i), d); err != nil {
			return err
		}
	}
	if len(o.DumperWeights) != len(o.Dumpers) {
		return fmt.Errorf("%d dumper weights for %d mirror ports; expected one each", len(o.DumperWeights), len(o.Dumpers))
	}
	if o.FrameSize < 2048 || o.FrameSize > 1<<16 {
		return fmt.Errorf("frame_size %d; expected 2048..65536", o.FrameSize)
	}
	return nil
}
func (*SwitchStart) Commands() [][]string { return nil }

// SwitchInstall builds the injector from the connections' runtime metadata and installs it: the start barrier.
type SwitchInstall struct {
	Conns []inject.ConnMeta `json:"conns"`
}

func (*SwitchInstall) Name() string { return OpSwitchInstall }
func (o *SwitchInstall) Validate() error {
	if len(o.Conns) == 0 {
		return fmt.Errorf("no connections; expected at least one in conns")
	}
	for i, c := range o.Conns {
		if c.Index != i {
			return fmt.Errorf("conns[%d] has index %d; expected %d", i, c.Index, i)
		}
		if !c.ReqIP.IsValid() || !c.RespIP.IsValid() {
			return fmt.Errorf("conns[%d]: req_ip and resp_ip must be addresses", i)
		}
	}
	return nil
}
func (*SwitchInstall) Commands() [][]string { return nil }

// InstallResult is the installed table's size.
type InstallResult struct {
	Entries int `json:"entries"`
}

// SwitchStop stops the switch and returns its status and, per mirror sequence number, the ITER and connection
// of each mirrored packet (the trace's annotations).
type SwitchStop struct{}

func (*SwitchStop) Name() string         { return OpSwitchStop }
func (*SwitchStop) Validate() error      { return nil }
func (*SwitchStop) Commands() [][]string { return nil }

// SwitchResult is the switch's final account.
type SwitchResult struct {
	Status live.SwitchStatus `json:"status"`
	Iter   []uint16          `json:"iter"`
	Conn   []int32           `json:"conn"`
	Error  string            `json:"error,omitempty"`
}

// DumpStart starts a dumper on the interface.
type DumpStart struct {
	Iface       string `json:"iface"`
	Workers     int    `json:"workers"`
	SnapLen     int    `json:"snaplen"`
	RewritePort uint16 `json:"rewrite_port"`
	MaxPackets  int    `json:"max_packets"`
	FanoutGroup uint16 `json:"fanout_group"`
}

func (*DumpStart) Name() string { return OpDumpStart }
func (o *DumpStart) Validate() error {
	if err := checkIface("iface", o.Iface); err != nil {
		return err
	}
	if o.Workers < 1 || o.Workers > 64 {
		return fmt.Errorf("workers %d; expected 1..64", o.Workers)
	}
	if o.SnapLen < 64 || o.SnapLen > 65535 {
		return fmt.Errorf("snaplen %d; expected 64..65535", o.SnapLen)
	}
	if o.MaxPackets < 0 {
		return fmt.Errorf("max_packets %d; expected 0 (1 M) or more", o.MaxPackets)
	}
	return nil
}
func (*DumpStart) Commands() [][]string { return nil }

// DumpStop stops the dumper and writes its pcap in the run directory.
type DumpStop struct{}

func (*DumpStop) Name() string         { return OpDumpStop }
func (*DumpStop) Validate() error      { return nil }
func (*DumpStop) Commands() [][]string { return nil }

// DumpResult names the pcap written and the dumper's statistics.
type DumpResult struct {
	File   string         `json:"file"`
	Size   int64          `json:"size"`
	SHA256 string         `json:"sha256"`
	Stats  live.DumpStats `json:"stats"`
}

// Fetch reads part of a file the agent wrote in its run directory.
type Fetch struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	Length int    `json:"length"`
}

// MaxFetch bounds one Fetch.
const MaxFetch = 4 << 20

var fileRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (*Fetch) Name() string { return OpFetch }
func (o *Fetch) Validate() error {
	if !fileRe.MatchString(o.File) {
		return fmt.Errorf("file %q; expected a plain file name in the run directory (letters, digits, _ . -)", o.File)
	}
	if o.Offset < 0 || o.Length < 1 || o.Length > MaxFetch {
		return fmt.Errorf("offset %d length %d; expected offset >= 0 and length 1..%d", o.Offset, o.Length, MaxFetch)
	}
	return nil
}
func (*Fetch) Commands() [][]string { return nil }

// FetchResult is the bytes read; EOF says the file ends there.
type FetchResult struct {
	Data []byte `json:"data"`
	EOF  bool   `json:"eof"`
}

// NICSetup configures the host's RDMA NIC the way hostnic plans it for the vendor (nvidia, intel, rxe): every
// step is run in order and reported; each change's undo is journaled by the agent as soon as the step is done,
// and undone by nic-undo or at the end of the session (or by lumina agent --cleanup after a killed agent).
// NIC.Host names the host in every error.
type NICSetup struct {
	NIC hostnic.Config `json:"nic"`
}

func (*NICSetup) Name() string { return OpNICSetup }
func (o *NICSetup) Validate() error {
	_, err := hostnic.Plan(o.NIC)
	return err
}

// Steps are the hostnic steps the operation runs, in order (nil when the configuration is invalid).
func (o *NICSetup) Steps() []hostnic.Step {
	s, _ := hostnic.Plan(o.NIC)
	return s
}

// Commands are the commands the steps run, and the queries that read the state an undo restores.
func (o *NICSetup) Commands() [][]string {
	var out [][]string
	for _, s := range o.Steps() {
		if s.Op != hostnic.OpRun {
			continue
		}
		if s.Query != nil {
			out = append(out, s.Query.Argv)
		}
		out = append(out, s.Argv)
	}
	return out
}

// NICStep is one hostnic step as the agent ran it: the step on one line (hostnic.Step.String) and what it
// found (the value read before a write, the state queried before a command).
type NICStep struct {
	Step string `json:"step"`
	Note string `json:"note,omitempty"`
}

// NICResult lists the steps nic-setup or nic-undo ran.
type NICResult struct {
	Steps []NICStep `json:"steps"`
}

// NICUndo undoes, in reverse order, every change nic-setup made in this session, and drops them from the
// journal. Undo goes on after a failure and reports every failure.
type NICUndo struct{}

func (*NICUndo) Name() string         { return OpNICUndo }
func (*NICUndo) Validate() error      { return nil }
func (*NICUndo) Commands() [][]string { return nil }

// Counters reads the NIC's counters from their real sources under the vendor's names (hostnic.ReadCounters):
// sysfs hw_counters (and counters on NVIDIA), rdma statistic, ethtool -S. The result is a hostnic.Snapshot,
// whose Values are counters.json's start or finish map for the host.
type Counters struct {
	NIC hostnic.Config `json:"nic"`
}

func (*Counters) Name() string { return OpCounters }
func (o *Counters) Validate() error {
	if o.NIC.IBDevice == "" {
		return fmt.Errorf("nic.ib-device is empty; expected the RDMA device whose counters to read")
	}
	_, err := hostnic.Plan(o.NIC)
	return err
}

// Commands are the two commands ReadCounters runs (the sysfs directories are read, not run).
func (o *Counters) Commands() [][]string {
	port := o.NIC.IBPort
	if port == 0 {
		port = 1
	}
	ifn := o.NIC.IfName
	if o.NIC.Vendor == hostnic.VendorRxe && o.NIC.Parent != "" {
		ifn = o.NIC.Parent
	}
	return [][]string{{"rdma", "statistic", "show", "link", fmt.Sprintf("%s/%d", o.NIC.IBDevice, port)}, {"ethtool", "-S", ifn}}
}

// The verbs traffic generator (lumina-verbs, package verbs, built with -tags verbs and cgo against the host's
// libibverbs) drives a real RNIC. The controller deploys it by hash next to the agent (agent/lumina-verbs-SUM);
// an agent never builds it and runs nothing else under that name: a missing or different binary is an error.
// The generator reports its connections' QPNs and PSNs to a control listener of the requester's agent, which
// hands them to the controller (verbs-client-start); the controller installs the switch with them
// (switch-install) and only then lets the traffic go (verbs-client-run): the agent channel is the one path of
// the metadata, as it is for the software RNICs.
const (
	OpVerbsServerStart = "verbs-server-start"
	OpVerbsServerStop  = "verbs-server-stop"
	OpVerbsClientStart = "verbs-client-start"
	OpVerbsClientRun   = "verbs-client-run"
)

// VerbsPort is the TCP port the responder's generator listens on for the requester's connection setup.
const VerbsPort = 18515

var (
	sumRe   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	ibdevRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// VerbsBinName is the deployed generator's file name, next to the agent.
func VerbsBinName(sum string) string { return "lumina-verbs-" + sum }

// verbsCommon are the arguments both sides share.
type verbsCommon struct {
	SHA256    string `json:"sha256"`
	Device    string `json:"device"`
	GIDIndex  int    `json:"gid_index"`
	TimeoutMs int64  `json:"timeout_ms"`
}

func (o *verbsCommon) validate() error {
	if !sumRe.MatchString(o.SHA256) {
		return fmt.Errorf("sha256 %q; expected the deployed lumina-verbs binary's SHA-256 (64 lowercase hex digits)", o.SHA256)
	}
	if !ibdevRe.MatchString(o.Device) {
		return fmt.Errorf("device %q is not an RDMA device name; expected letters, digits, _ . - (e.g. mlx5_0, irdma0, rxe0)", o.Device)
	}
	if o.GIDIndex < -1 || o.GIDIndex > 255 {
		return fmt.Errorf("gid_index %d; expected -1 (from the address) or 0..255", o.GIDIndex)
	}
	if o.TimeoutMs < 1000 || o.TimeoutMs > 3_600_000 {
		return fmt.Errorf("timeout_ms %d; expected 1000..3600000", o.TimeoutMs)
	}
	return nil
}

func (o *verbsCommon) args(mode string) []string {
	return []string{VerbsBinName(o.SHA256), mode, "--device", o.Device, "--gid-index", strconv.Itoa(o.GIDIndex),
		"--timeout", strconv.FormatInt(o.TimeoutMs, 10) + "ms"}
}

// VerbsServerStart starts the generator's server on the responder, listening on Listen (the responder's data
// address) for the requester's connection setup.
type VerbsServerStart struct {
	verbsCommon
	Listen netip.AddrPort `json:"listen"`
}

func (*VerbsServerStart) Name() string { return OpVerbsServerStart }
func (o *VerbsServerStart) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	if !o.Listen.IsValid() {
		return fmt.Errorf("listen %v; expected the responder's data address and port", o.Listen)
	}
	return nil
}
func (o *VerbsServerStart) Commands() [][]string {
	return [][]string{append(o.args("server"), "--listen", o.Listen.String())}
}

// VerbsServerStop waits (at most LimitMs) for the server to end after the client said done, and returns its
// output.
type VerbsServerStop struct {
	LimitMs int64 `json:"limit_ms"`
}

func (*VerbsServerStop) Name() string { return OpVerbsServerStop }
func (o *VerbsServerStop) Validate() error {
	if o.LimitMs < 1 || o.LimitMs > 3_600_000 {
		return fmt.Errorf("limit_ms %d; expected 1..3600000", o.LimitMs)
	}
	return nil
}
func (*VerbsServerStop) Commands() [][]string { return nil }

// VerbsClientStart starts the generator's client on the requester with the effective scenario (its traffic
// section is the job), connects it to the server, and answers with the connections' runtime metadata once the
// generator reports it to the agent's control listener (127.0.0.1, a free port). The traffic waits for
// verbs-client-run.
type VerbsClientStart struct {
	verbsCommon
	Connect      netip.AddrPort `json:"connect"`
	ScenarioYAML string         `json:"scenario_yaml"`
}

// VerbsJobFile is the scenario the client reads, in the agent's run directory.
const VerbsJobFile = "verbs-job.yaml"

// VerbsControlSocket is the unix socket, in the agent's run directory, on which the client reports its
// connections to the agent (lumina-verbs --control unix:NAME, relative to the run directory it runs in).
const VerbsControlSocket = "verbs-control.sock"

func (*VerbsClientStart) Name() string { return OpVerbsClientStart }
func (o *VerbsClientStart) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	if !o.Connect.IsValid() {
		return fmt.Errorf("connect %v; expected the responder's data address and port", o.Connect)
	}
	if o.ScenarioYAML == "" {
		return fmt.Errorf("scenario_yaml is empty; expected the effective scenario")
	}
	return nil
}
func (o *VerbsClientStart) Commands() [][]string {
	return [][]string{append(o.args("client"), "--connect", o.Connect.String(), "--job", "RUNDIR/"+VerbsJobFile,
		"--control", "unix:"+VerbsControlSocket)}
}

// VerbsClientRun answers the generator's control message with "ready" (the start barrier: the switch is
// installed), waits at most LimitMs for the traffic to end and returns the generator's report.
type VerbsClientRun struct {
	Entries int   `json:"entries"`
	LimitMs int64 `json:"limit_ms"`
}

func (*VerbsClientRun) Name() string { return OpVerbsClientRun }
func (o *VerbsClientRun) Validate() error {
	if o.LimitMs < 1 || o.LimitMs > 3_600_000 {
		return fmt.Errorf("limit_ms %d; expected 1..3600000", o.LimitMs)
	}
	return nil
}
func (*VerbsClientRun) Commands() [][]string { return nil }

// VerbsResult is a generator's end: its JSON output (the client's verbs.Report, the server's bye), its exit
// status and the end of its standard error.
type VerbsResult struct {
	Output json.RawMessage `json:"output,omitempty"`
	Exit   int             `json:"exit"`
	Log    string          `json:"log,omitempty"`
}
