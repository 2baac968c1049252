package hostnic

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The reference's QoS settings (lumina/orchestrator/host.py config_mlnx_traffic_classes and
// config_intel_traffic_classes): priorities 0..7 to classes 0..7 with ETS weights 12/13% on NVIDIA, to
// classes 0..3 (25% each, 4..7 strict) on Intel, whose NICs take DSCP 0..31 only.
const (
	nvidiaPrioToTC = "0,1,2,3,4,5,6,7"
	nvidiaTSA      = "ets,ets,ets,ets,ets,ets,ets,ets"
	nvidiaBW       = "12,13,12,13,12,13,12,13"
	intelUp2TC     = "0:0,1:1,2:2,3:3,4:0,5:1,6:2,7:3"
	intelTSA       = "0:ets,1:ets,2:ets,3:ets,4:strict,5:strict,6:strict,7:strict"
	intelTCBW      = "25,25,25,25,0,0,0,0"
	intelMaxDSCP   = 31
	// maxMinTimeBetweenCNPsUs is the largest min_time_between_cnps mlx5 takes (microseconds; assumption from
	// NVIDIA's DCQCN parameter documentation: a 12-bit field).
	maxMinTimeBetweenCNPsUs = 4095
)

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,63}$`)
	pciRE  = regexp.MustCompile(`^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)
)

// ConfigError is a Config value Plan rejects: the field (as the scenario spells it) and what was expected.
type ConfigError struct {
	Host, Field, Msg string
}

func (e *ConfigError) Error() string {
	if e.Host != "" {
		return "hostnic: " + e.Host + ": " + e.Field + ": " + e.Msg
	}
	return "hostnic: " + e.Field + ": " + e.Msg
}

// DefaultPrioDSCPMap is the reference's DEFAULT_PRIO2DSCP_MAP: priority p carries DSCP 8p+7 down to 8p.
func DefaultPrioDSCPMap() map[int][]int {
	m := make(map[int][]int, 8)
	for p := range 8 {
		for d := 8*p + 7; d >= 8*p; d-- {
			m[p] = append(m[p], d)
		}
	}
	return m
}

// Plan returns the steps that configure cfg's NIC, in order. It is pure: the same Config gives the same steps.
func Plan(cfg Config) ([]Step, error) {
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	p := &planner{cfg: cfg}
	switch cfg.Vendor {
	case VendorNVIDIA:
		p.nvidia()
	case VendorIntel:
		p.intel()
	case VendorRxe:
		p.rxe()
	}
	return p.steps, nil
}

func validate(c *Config) error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Host: c.Host, Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	switch c.Vendor {
	case VendorNVIDIA, VendorIntel, VendorRxe:
	case "":
		return bad("vendor", "missing; expected nvidia, intel or rxe")
	default:
		return bad("vendor", "%q is not known; expected nvidia, intel or rxe", c.Vendor)
	}
	if c.IfName == "" {
		return bad("if-name", "missing; expected the NIC's Ethernet interface name (e.g. ens1f0)")
	}
	if len(c.IfName) > 15 || !nameRE.MatchString(c.IfName) {
		return bad("if-name", "%q is not an interface name; expected 1-15 characters of letters, digits, _ . : @ -", c.IfName)
	}
	if c.Vendor == VendorRxe {
		if c.Parent == "" {
			c.Parent = c.IfName
		}
		if len(c.Parent) > 15 || !nameRE.MatchString(c.Parent) {
			return bad("parent", "%q is not an interface name; expected 1-15 characters of letters, digits, _ . : @ -", c.Parent)
		}
		if c.IBDevice == "" {
			c.IBDevice = "rxe0"
		}
	}
	if c.IBDevice == "" {
		return bad("ib-device", "missing; expected the RDMA device name (e.g. mlx5_0 or irdma0)")
	}
	if !nameRE.MatchString(c.IBDevice) || strings.Contains(c.IBDevice, "..") {
		return bad("ib-device", "%q is not an RDMA device name; expected letters, digits, _ . -", c.IBDevice)
	}
	if c.IBPort == 0 {
		c.IBPort = 1
	}
	if c.IBPort < 1 || c.IBPort > 255 {
		return bad("ib-port", "%d is out of range; expected 1..255", c.IBPort)
	}
	if c.PCIAddr != "" && !pciRE.MatchString(c.PCIAddr) {
		return bad("pci-addr", "%q is not a PCI address; expected DDDD:BB:SS.F such as 0000:3b:00.0", c.PCIAddr)
	}
	if c.MTU != 0 && (c.MTU < 68 || c.MTU > 9216) {
		return bad("mtu", "%d is out of range; expected 68..9216 bytes (0 leaves the MTU alone)", c.MTU)
	}
	for i, ip := range c.IPs {
		if !ip.IsValid() {
			return bad(fmt.Sprintf("ip-list[%d]", i), "not a valid address with prefix length; expected e.g. 10.0.0.2/24")
		}
	}
	if c.PrioDSCPMap != nil {
		seen := map[int]int{}
		for _, prio := range slices.Sorted(maps.Keys(c.PrioDSCPMap)) {
			if prio < 0 || prio > 7 {
				return bad("prio-dscp-map", "priority %d is out of range; expected 0..7", prio)
			}
			for _, d := range c.PrioDSCPMap[prio] {
				if d < 0 || d > 63 {
					return bad("prio-dscp-map", "priority %d: DSCP %d is out of range; expected 0..63", prio, d)
				}
				if q, dup := seen[d]; dup {
					return bad("prio-dscp-map", "DSCP %d is mapped to priorities %d and %d; expected one priority per DSCP", d, q, prio)
				}
				seen[d] = prio
			}
		}
	}
	r := c.RoCE
	switch c.Vendor {
	case VendorNVIDIA:
		if r.DCQCNEnable != nil {
			return bad("roce-parameters.dcqcn-enable", "is Intel's setting; expected dcqcn-rp-enable and dcqcn-np-enable on an NVIDIA NIC")
		}
		if v := r.MinTimeBetweenCNPsUs; v != nil && (*v < 0 || *v > maxMinTimeBetweenCNPsUs || *v != math.Trunc(*v)) {
			return bad("roce-parameters.min-time-between-cnps", "%v is out of range; expected a whole number of microseconds 0..%d", *v, maxMinTimeBetweenCNPsUs)
		}
		if (r.AdaptiveRetrans != nil || r.SlowRestart != nil) && c.PCIAddr == "" {
			return bad("pci-addr", "missing; expected the NIC's PCI address (mlxreg sets adaptive-retrans and slow-restart through it)")
		}
	case VendorIntel:
		for _, f := range []struct {
			name string
			set  bool
		}{{"dcqcn-rp-enable", r.DCQCNRPEnable != nil}, {"dcqcn-np-enable", r.DCQCNNPEnable != nil},
			{"min-time-between-cnps", r.MinTimeBetweenCNPsUs != nil}, {"adaptive-retrans", r.AdaptiveRetrans != nil},
			{"slow-restart", r.SlowRestart != nil}} {
			if f.set {
				return bad("roce-parameters."+f.name, "is an NVIDIA setting; expected only dcqcn-enable on an Intel NIC")
			}
		}
	case VendorRxe:
		for _, f := range []struct {
			name string
			set  bool
		}{{"dcqcn-rp-enable", r.DCQCNRPEnable != nil}, {"dcqcn-np-enable", r.DCQCNNPEnable != nil},
			{"min-time-between-cnps", r.MinTimeBetweenCNPsUs != nil}, {"adaptive-retrans", r.AdaptiveRetrans != nil},
			{"slow-restart", r.SlowRestart != nil}, {"dcqcn-enable", r.DCQCNEnable != nil}} {
			if f.set {
				return bad("roce-parameters."+f.name, "Soft-RoCE (rxe) has no congestion control or adaptive retransmission; expected it unset")
			}
		}
		if c.ConfigureQoS {
			return bad("qos", "Soft-RoCE (rxe) has no DSCP trust or ETS of its own; expected QoS configuration off")
		}
	}
	return nil
}

type planner struct {
	cfg   Config
	steps []Step
}

func (p *planner) add(s Step) {
	s.Host = p.cfg.Host
	p.steps = append(p.steps, s)
}

func (p *planner) tool(name, why string) {
	p.add(Step{Desc: "check that " + name + " is installed (" + why + ")", Op: OpLookPath, Argv: []string{name}})
}

func (p *planner) write(desc, path, value string) {
	p.add(Step{Desc: desc, Op: OpWrite, Path: path, Value: value})
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// netdev checks the interface and sets its MTU and addresses (the reference's config_ip_address: flush both
// families, then `ip addr replace` each address of ip-list).
func (p *planner) netdev(ifname string) {
	p.add(Step{Desc: "check that interface " + ifname + " exists", Op: OpCheck, Path: "/sys/class/net/" + ifname + "/ifindex"})
	if p.cfg.MTU != 0 {
		p.write(fmt.Sprintf("set the MTU of %s to %d", ifname, p.cfg.MTU), "/sys/class/net/"+ifname+"/mtu", strconv.Itoa(p.cfg.MTU))
	}
	if len(p.cfg.IPs) == 0 {
		return
	}
	for _, fam := range []string{"-4", "-6"} {
		p.add(Step{Desc: "flush the IPv" + fam[1:] + " addresses of " + ifname, Op: OpRun,
			Argv:     []string{"ip", fam, "addr", "flush", "dev", ifname},
			Query:    &Query{Argv: []string{"ip", "-o", fam, "addr", "show", "dev", ifname}, Parser: "ip-addrs"},
			UndoArgv: []string{"ip", "addr", "add", "{addr}", "dev", ifname}})
	}
	for _, ip := range p.cfg.IPs {
		p.add(Step{Desc: "add address " + ip.String() + " to " + ifname, Op: OpRun,
			Argv: []string{"ip", "addr", "replace", ip.String(), "dev", ifname},
			Undo: &Step{Desc: "remove address " + ip.String() + " from " + ifname, Op: OpRun,
				Argv: []string{"ip", "addr", "del", ip.String(), "dev", ifname}}})
	}
}

func (p *planner) ibPortCheck() {
	c := p.cfg
	p.add(Step{Desc: fmt.Sprintf("check that RDMA device %s port %d exists", c.IBDevice, c.IBPort), Op: OpCheck,
		Path: fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/state", c.IBDevice, c.IBPort)})
}

// prioDSCP returns the (priority, DSCP) pairs to map in order: priorities ascending, DSCPs as listed.
func (p *planner) prioDSCP(maxDSCP int) [][2]int {
	m := p.cfg.PrioDSCPMap
	if m == nil {
		m = DefaultPrioDSCPMap()
	}
	var out [][2]int
	for _, prio := range slices.Sorted(maps.Keys(m)) {
		for _, d := range m[prio] {
			if d <= maxDSCP {
				out = append(out, [2]int{prio, d})
			}
		}
	}
	return out
}

func (p *planner) nvidia() {
	c := p.cfg
	r := c.RoCE
	if len(c.IPs) > 0 {
		p.tool("ip", "addresses")
	}
	if c.ConfigureQoS {
		p.tool("mlnx_qos", "DSCP trust and ETS")
	}
	if r.AdaptiveRetrans != nil || r.SlowRestart != nil {
		p.tool("mlxreg", "adaptive retransmission and slow restart")
	}
	p.netdev(c.IfName)
	p.ibPortCheck()
	if c.ConfigureQoS {
		show := []string{"mlnx_qos", "-i", c.IfName}
		p.add(Step{Desc: "trust DSCP on " + c.IfName, Op: OpRun, Argv: []string{"mlnx_qos", "-i", c.IfName, "--trust=dscp"},
			Query: &Query{Argv: show, Parser: "mlnx-trust"}, UndoArgv: []string{"mlnx_qos", "-i", c.IfName, "--trust={trust}"}})
		for _, pd := range p.prioDSCP(63) {
			p.add(Step{Desc: fmt.Sprintf("map DSCP %d to priority %d on %s", pd[1], pd[0], c.IfName), Op: OpRun,
				Argv:     []string{"mlnx_qos", "-i", c.IfName, fmt.Sprintf("--dscp2prio=set,%d,%d", pd[1], pd[0])},
				Query:    &Query{Argv: show, Parser: "mlnx-dscp2prio:" + strconv.Itoa(pd[1])},
				UndoArgv: []string{"mlnx_qos", "-i", c.IfName, fmt.Sprintf("--dscp2prio=set,%d,{prio}", pd[1])}})
		}
		p.add(Step{Desc: "ETS on " + c.IfName + ": priority i to class i, weights 12/13%", Op: OpRun,
			Argv:     []string{"mlnx_qos", "-i", c.IfName, "-p", nvidiaPrioToTC, "-s", nvidiaTSA, "-t", nvidiaBW},
			Query:    &Query{Argv: show, Parser: "mlnx-ets"},
			UndoArgv: []string{"mlnx_qos", "-i", c.IfName, "-p", "{prio2tc}", "-s", "{tsa}", "-t", "{bw}"}})
	}
	ecn := "/sys/class/net/" + c.IfName + "/ecn/"
	if v := r.MinTimeBetweenCNPsUs; v != nil {
		p.write(fmt.Sprintf("set the minimum time between CNPs of %s to %d us", c.IfName, int(*v)),
			ecn+"roce_np/min_time_between_cnps", strconv.Itoa(int(*v)))
	}
	for _, side := range []struct {
		name string
		v    *bool
		what string
	}{{"roce_rp", r.DCQCNRPEnable, "DCQCN reaction point"}, {"roce_np", r.DCQCNNPEnable, "DCQCN notification point"}} {
		if side.v == nil {
			continue
		}
		verb := "disable"
		if *side.v {
			verb = "enable"
		}
		for prio := range 8 {
			p.write(fmt.Sprintf("%s the %s on %s priority %d", verb, side.what, c.IfName, prio),
				fmt.Sprintf("%s%s/enable/%d", ecn, side.name, prio), b01(*side.v))
		}
	}
	for _, f := range []struct {
		field string
		v     *bool
		what  string
	}{{"roce_adp_retrans_en", r.AdaptiveRetrans, "adaptive retransmission"}, {"roce_slow_restart_en", r.SlowRestart, "slow restart"}} {
		if f.v == nil {
			continue
		}
		verb := "disable"
		if *f.v {
			verb = "enable"
		}
		p.add(Step{Desc: fmt.Sprintf("%s %s on %s (mlxreg ROCE_ACCL %s)", verb, f.what, c.PCIAddr, f.field), Op: OpRun,
			Argv:     []string{"mlxreg", "-d", c.PCIAddr, "--reg_name", "ROCE_ACCL", "--set", f.field + "=" + b01(*f.v), "--yes"},
			Query:    &Query{Argv: []string{"mlxreg", "-d", c.PCIAddr, "--reg_name", "ROCE_ACCL", "--get"}, Parser: "mlxreg:" + f.field},
			UndoArgv: []string{"mlxreg", "-d", c.PCIAddr, "--reg_name", "ROCE_ACCL", "--set", f.field + "={value}", "--yes"}})
	}
}

func (p *planner) intel() {
	c := p.cfg
	if len(c.IPs) > 0 {
		p.tool("ip", "addresses")
	}
	if c.ConfigureQoS {
		p.tool("ethtool", "firmware LLDP agent")
		p.tool("lldptool", "DSCP-to-priority map and ETS")
	}
	p.netdev(c.IfName)
	p.ibPortCheck()
	if c.ConfigureQoS {
		p.add(Step{Desc: "turn the firmware LLDP agent of " + c.IfName + " off (software DCB through lldptool)", Op: OpRun,
			Argv:     []string{"ethtool", "--set-priv-flags", c.IfName, "fw-lldp-agent", "off"},
			Query:    &Query{Argv: []string{"ethtool", "--show-priv-flags", c.IfName}, Parser: "ethtool-priv-flag:fw-lldp-agent"},
			UndoArgv: []string{"ethtool", "--set-priv-flags", c.IfName, "fw-lldp-agent", "{value}"}})
		p.add(Step{Desc: "ETS on " + c.IfName + ": priorities 0-3 and 4-7 to classes 0-3, 25% each", Op: OpRun,
			Argv:     []string{"lldptool", "-T", "-i", c.IfName, "-V", "ETS-CFG", "willing=no", "up2tc=" + intelUp2TC, "tsa=" + intelTSA, "tcbw=" + intelTCBW},
			Query:    &Query{Argv: []string{"lldptool", "-t", "-i", c.IfName, "-V", "ETS-CFG", "-c", "willing", "-c", "up2tc", "-c", "tsa", "-c", "tcbw"}, Parser: "lldp-ets"},
			UndoArgv: []string{"lldptool", "-T", "-i", c.IfName, "-V", "ETS-CFG", "willing={willing}", "up2tc={up2tc}", "tsa={tsa}", "tcbw={tcbw}"}})
		// The APP table is read before each entry is added: the undo deletes an entry only if this run added it,
		// so a host configured beforehand keeps its own mappings.
		for _, pd := range p.prioDSCP(intelMaxDSCP) {
			app := fmt.Sprintf("app=%d,5,%d", pd[0], pd[1])
			p.add(Step{Desc: fmt.Sprintf("map DSCP %d to priority %d on %s", pd[1], pd[0], c.IfName), Op: OpRun,
				Argv:     []string{"lldptool", "-T", "-i", c.IfName, "-V", "APP", app},
				Query:    &Query{Argv: []string{"lldptool", "-t", "-i", c.IfName, "-V", "APP", "-c", "app"}, Parser: fmt.Sprintf("lldp-app:%d,5,%d", pd[0], pd[1])},
				UndoArgv: []string{"lldptool", "-T", "-i", c.IfName, "-V", "APP", "-d", app}})
		}
	}
	if v := c.RoCE.DCQCNEnable; v != nil {
		dir := "/sys/kernel/config/irdma/" + c.IBDevice
		p.tool("mkdir", "irdma configfs")
		p.tool("rmdir", "irdma configfs")
		p.add(Step{Desc: "open the irdma configfs entry of " + c.IBDevice, Op: OpRun, Argv: []string{"mkdir", "-p", dir},
			Undo: &Step{Desc: "close the irdma configfs entry of " + c.IBDevice, Op: OpRun, Argv: []string{"rmdir", dir}}})
		verb := "disable"
		if *v {
			verb = "enable"
		}
		p.write(verb+" DCQCN on "+c.IBDevice, dir+"/roce_dcqcn_enable", b01(*v))
		p.add(Step{Desc: "close the irdma configfs entry of " + c.IBDevice, Op: OpRun, Argv: []string{"rmdir", dir},
			Undo: &Step{Desc: "open the irdma configfs entry of " + c.IBDevice, Op: OpRun, Argv: []string{"mkdir", "-p", dir}}})
	}
}

func (p *planner) rxe() {
	c := p.cfg
	p.tool("rdma", "creating the rxe device")
	p.tool("modprobe", "loading rdma_rxe")
	if len(c.IPs) > 0 {
		p.tool("ip", "addresses")
	}
	p.netdev(c.Parent)
	p.add(Step{Desc: "load the Soft-RoCE module rdma_rxe", Op: OpRun, Argv: []string{"modprobe", "rdma_rxe"},
		NoUndo: "the module stays loaded: other rxe devices may use it"})
	p.add(Step{Desc: fmt.Sprintf("create the Soft-RoCE device %s on %s", c.IBDevice, c.Parent), Op: OpRun,
		Argv: []string{"rdma", "link", "add", c.IBDevice, "type", "rxe", "netdev", c.Parent},
		Undo: &Step{Desc: "delete the Soft-RoCE device " + c.IBDevice, Op: OpRun, Argv: []string{"rdma", "link", "delete", c.IBDevice}}})
	p.ibPortCheck()
}
