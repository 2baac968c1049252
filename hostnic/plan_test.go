package hostnic

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func lines(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.String()
	}
	return out
}

func TestPlanPerVendor(t *testing.T) {
	ips := []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"nvidia roce parameters", Config{Host: "req", Vendor: "nvidia", IfName: "ens1f0", PCIAddr: "0000:3b:00.0",
			IBDevice: "mlx5_0", IPs: ips, RoCE: RoCEParameters{DCQCNRPEnable: ptr(true), DCQCNNPEnable: ptr(false),
				MinTimeBetweenCNPsUs: ptr(4.0), AdaptiveRetrans: ptr(false), SlowRestart: ptr(true)}}, []string{
			"req: check that ip is installed (addresses): look up ip on PATH",
			"req: check that mlxreg is installed (adaptive retransmission and slow restart): look up mlxreg on PATH",
			"req: check that interface ens1f0 exists: read /sys/class/net/ens1f0/ifindex",
			"req: flush the IPv4 addresses of ens1f0: ip -4 addr flush dev ens1f0 [undo: ip addr add {addr} dev ens1f0 with the values ip -o -4 addr show dev ens1f0 prints before]",
			"req: flush the IPv6 addresses of ens1f0: ip -6 addr flush dev ens1f0 [undo: ip addr add {addr} dev ens1f0 with the values ip -o -6 addr show dev ens1f0 prints before]",
			"req: add address 10.0.0.2/24 to ens1f0: ip addr replace 10.0.0.2/24 dev ens1f0 [undo: ip addr del 10.0.0.2/24 dev ens1f0]",
			"req: check that RDMA device mlx5_0 port 1 exists: read /sys/class/infiniband/mlx5_0/ports/1/state",
			"req: set the minimum time between CNPs of ens1f0 to 4 us: write 4 to /sys/class/net/ens1f0/ecn/roce_np/min_time_between_cnps [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 0: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/0 [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 1: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/1 [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 2: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/2 [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 3: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/3 [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 4: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/4 [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 5: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/5 [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 6: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/6 [undo: write back the value read before]",
			"req: enable the DCQCN reaction point on ens1f0 priority 7: write 1 to /sys/class/net/ens1f0/ecn/roce_rp/enable/7 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 0: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/0 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 1: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/1 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 2: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/2 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 3: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/3 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 4: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/4 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 5: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/5 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 6: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/6 [undo: write back the value read before]",
			"req: disable the DCQCN notification point on ens1f0 priority 7: write 0 to /sys/class/net/ens1f0/ecn/roce_np/enable/7 [undo: write back the value read before]",
			"req: disable adaptive retransmission on 0000:3b:00.0 (mlxreg ROCE_ACCL roce_adp_retrans_en): mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --set roce_adp_retrans_en=0 --yes [undo: mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --set roce_adp_retrans_en={value} --yes with the values mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --get prints before]",
			"req: enable slow restart on 0000:3b:00.0 (mlxreg ROCE_ACCL roce_slow_restart_en): mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --set roce_slow_restart_en=1 --yes [undo: mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --set roce_slow_restart_en={value} --yes with the values mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --get prints before]",
		}},
		{"nvidia qos with a small map", Config{Vendor: "nvidia", IfName: "ens1f0", IBDevice: "mlx5_0", ConfigureQoS: true,
			PrioDSCPMap: map[int][]int{3: {26, 27}}}, []string{
			"check that mlnx_qos is installed (DSCP trust and ETS): look up mlnx_qos on PATH",
			"check that interface ens1f0 exists: read /sys/class/net/ens1f0/ifindex",
			"check that RDMA device mlx5_0 port 1 exists: read /sys/class/infiniband/mlx5_0/ports/1/state",
			"trust DSCP on ens1f0: mlnx_qos -i ens1f0 --trust=dscp [undo: mlnx_qos -i ens1f0 --trust={trust} with the values mlnx_qos -i ens1f0 prints before]",
			"map DSCP 26 to priority 3 on ens1f0: mlnx_qos -i ens1f0 --dscp2prio=set,26,3 [undo: mlnx_qos -i ens1f0 --dscp2prio=set,26,{prio} with the values mlnx_qos -i ens1f0 prints before]",
			"map DSCP 27 to priority 3 on ens1f0: mlnx_qos -i ens1f0 --dscp2prio=set,27,3 [undo: mlnx_qos -i ens1f0 --dscp2prio=set,27,{prio} with the values mlnx_qos -i ens1f0 prints before]",
			"ETS on ens1f0: priority i to class i, weights 12/13%: mlnx_qos -i ens1f0 -p 0,1,2,3,4,5,6,7 -s ets,ets,ets,ets,ets,ets,ets,ets -t 12,13,12,13,12,13,12,13 [undo: mlnx_qos -i ens1f0 -p {prio2tc} -s {tsa} -t {bw} with the values mlnx_qos -i ens1f0 prints before]",
		}},
		{"intel", Config{Vendor: "intel", IfName: "ens785f0", IBDevice: "irdma0", IBPort: 1, MTU: 4200, ConfigureQoS: true,
			PrioDSCPMap: map[int][]int{3: {26, 40}}, RoCE: RoCEParameters{DCQCNEnable: ptr(true)}}, []string{
			"check that ethtool is installed (firmware LLDP agent): look up ethtool on PATH",
			"check that lldptool is installed (DSCP-to-priority map and ETS): look up lldptool on PATH",
			"check that interface ens785f0 exists: read /sys/class/net/ens785f0/ifindex",
			"set the MTU of ens785f0 to 4200: write 4200 to /sys/class/net/ens785f0/mtu [undo: write back the value read before]",
			"check that RDMA device irdma0 port 1 exists: read /sys/class/infiniband/irdma0/ports/1/state",
			"turn the firmware LLDP agent of ens785f0 off (software DCB through lldptool): ethtool --set-priv-flags ens785f0 fw-lldp-agent off [undo: ethtool --set-priv-flags ens785f0 fw-lldp-agent {value} with the values ethtool --show-priv-flags ens785f0 prints before]",
			"ETS on ens785f0: priorities 0-3 and 4-7 to classes 0-3, 25% each: lldptool -T -i ens785f0 -V ETS-CFG willing=no up2tc=0:0,1:1,2:2,3:3,4:0,5:1,6:2,7:3 tsa=0:ets,1:ets,2:ets,3:ets,4:strict,5:strict,6:strict,7:strict tcbw=25,25,25,25,0,0,0,0 [undo: lldptool -T -i ens785f0 -V ETS-CFG willing={willing} up2tc={up2tc} tsa={tsa} tcbw={tcbw} with the values lldptool -t -i ens785f0 -V ETS-CFG -c willing -c up2tc -c tsa -c tcbw prints before]",
			// DSCP 40 is above Intel's 31 and is left out, as the reference does.
			"map DSCP 26 to priority 3 on ens785f0: lldptool -T -i ens785f0 -V APP app=3,5,26 [undo: lldptool -T -i ens785f0 -V APP -d app=3,5,26 unless lldptool -t -i ens785f0 -V APP -c app already lists it before]",
			"check that mkdir is installed (irdma configfs): look up mkdir on PATH",
			"check that rmdir is installed (irdma configfs): look up rmdir on PATH",
			"open the irdma configfs entry of irdma0: mkdir -p /sys/kernel/config/irdma/irdma0 [undo: rmdir /sys/kernel/config/irdma/irdma0]",
			"enable DCQCN on irdma0: write 1 to /sys/kernel/config/irdma/irdma0/roce_dcqcn_enable [undo: write back the value read before]",
			"close the irdma configfs entry of irdma0: rmdir /sys/kernel/config/irdma/irdma0 [undo: mkdir -p /sys/kernel/config/irdma/irdma0]",
		}},
		{"rxe", Config{Host: "h1", Vendor: "rxe", IfName: "eth0", IBDevice: "rxe0", IPs: ips}, []string{
			"h1: check that rdma is installed (creating the rxe device): look up rdma on PATH",
			"h1: check that modprobe is installed (loading rdma_rxe): look up modprobe on PATH",
			"h1: check that ip is installed (addresses): look up ip on PATH",
			"h1: check that interface eth0 exists: read /sys/class/net/eth0/ifindex",
			"h1: flush the IPv4 addresses of eth0: ip -4 addr flush dev eth0 [undo: ip addr add {addr} dev eth0 with the values ip -o -4 addr show dev eth0 prints before]",
			"h1: flush the IPv6 addresses of eth0: ip -6 addr flush dev eth0 [undo: ip addr add {addr} dev eth0 with the values ip -o -6 addr show dev eth0 prints before]",
			"h1: add address 10.0.0.2/24 to eth0: ip addr replace 10.0.0.2/24 dev eth0 [undo: ip addr del 10.0.0.2/24 dev eth0]",
			"h1: load the Soft-RoCE module rdma_rxe: modprobe rdma_rxe [not undone: the module stays loaded: other rxe devices may use it]",
			"h1: create the Soft-RoCE device rxe0 on eth0: rdma link add rxe0 type rxe netdev eth0 [undo: rdma link delete rxe0]",
			"h1: check that RDMA device rxe0 port 1 exists: read /sys/class/infiniband/rxe0/ports/1/state",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := Plan(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := lines(steps)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			again, _ := Plan(tc.cfg)
			if !reflect.DeepEqual(steps, again) {
				t.Error("Plan is not deterministic")
			}
			for _, s := range steps {
				if s.Op == OpRun && len(s.Argv) == 0 {
					t.Errorf("step %q has no argv", s.Desc)
				}
			}
		})
	}
}

// The reference's default DSCP map: 64 mlnx_qos calls on NVIDIA, the 32 DSCPs 0..31 on Intel.
func TestPlanDefaultDSCPMap(t *testing.T) {
	count := func(cfg Config, prefix string) int {
		steps, err := Plan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range steps {
			if strings.HasPrefix(s.Desc, prefix) {
				n++
			}
		}
		return n
	}
	if n := count(Config{Vendor: "nvidia", IfName: "e", IBDevice: "mlx5_0", ConfigureQoS: true}, "map DSCP"); n != 64 {
		t.Errorf("nvidia default map: %d DSCP steps; want 64", n)
	}
	if n := count(Config{Vendor: "intel", IfName: "e", IBDevice: "irdma0", ConfigureQoS: true}, "map DSCP"); n != 32 {
		t.Errorf("intel default map: %d DSCP steps; want 32", n)
	}
	m := DefaultPrioDSCPMap()
	if !reflect.DeepEqual(m[3], []int{31, 30, 29, 28, 27, 26, 25, 24}) {
		t.Errorf("default priority 3 = %v; want the reference's 31..24", m[3])
	}
}

func TestPlanRejects(t *testing.T) {
	good := Config{Vendor: "nvidia", IfName: "ens1f0", IBDevice: "mlx5_0", PCIAddr: "0000:3b:00.0"}
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
		says  string
	}{
		{"unknown vendor", func(c *Config) { c.Vendor = "broadcom" }, "vendor", `"broadcom" is not known; expected nvidia, intel or rxe`},
		{"no vendor", func(c *Config) { c.Vendor = "" }, "vendor", "missing"},
		{"no if-name", func(c *Config) { c.IfName = "" }, "if-name", "missing"},
		{"path in if-name", func(c *Config) { c.IfName = "../../etc" }, "if-name", "is not an interface name"},
		{"long if-name", func(c *Config) { c.IfName = "abcdefghijklmnop" }, "if-name", "1-15 characters"},
		{"no ib-device", func(c *Config) { c.IBDevice = "" }, "ib-device", "missing"},
		{"ib-device with slash", func(c *Config) { c.IBDevice = "mlx5/0" }, "ib-device", "not an RDMA device name"},
		{"bad port", func(c *Config) { c.IBPort = 300 }, "ib-port", "expected 1..255"},
		{"bad pci", func(c *Config) { c.PCIAddr = "3b:00" }, "pci-addr", "not a PCI address"},
		{"no pci for mlxreg", func(c *Config) { c.PCIAddr = ""; c.RoCE.SlowRestart = ptr(true) }, "pci-addr", "mlxreg"},
		{"mtu", func(c *Config) { c.MTU = 10000 }, "mtu", "68..9216"},
		{"cnp interval range", func(c *Config) { c.RoCE.MinTimeBetweenCNPsUs = ptr(5000.0) }, "roce-parameters.min-time-between-cnps", "0..4095"},
		{"cnp interval fraction", func(c *Config) { c.RoCE.MinTimeBetweenCNPsUs = ptr(1.5) }, "roce-parameters.min-time-between-cnps", "whole number"},
		{"intel key on nvidia", func(c *Config) { c.RoCE.DCQCNEnable = ptr(true) }, "roce-parameters.dcqcn-enable", "Intel's setting"},
		{"nvidia key on intel", func(c *Config) { c.Vendor = "intel"; c.RoCE.DCQCNRPEnable = ptr(true) }, "roce-parameters.dcqcn-rp-enable", "NVIDIA setting"},
		{"dcqcn on rxe", func(c *Config) { c.Vendor = "rxe"; c.RoCE.DCQCNEnable = ptr(false) }, "roce-parameters.dcqcn-enable", "no congestion control"},
		{"qos on rxe", func(c *Config) { c.Vendor = "rxe"; c.ConfigureQoS = true }, "qos", "no DSCP trust"},
		{"bad priority", func(c *Config) { c.PrioDSCPMap = map[int][]int{8: {1}} }, "prio-dscp-map", "priority 8 is out of range"},
		{"bad dscp", func(c *Config) { c.PrioDSCPMap = map[int][]int{1: {64}} }, "prio-dscp-map", "DSCP 64 is out of range"},
		{"dscp twice", func(c *Config) { c.PrioDSCPMap = map[int][]int{1: {9}, 2: {9}} }, "prio-dscp-map", "DSCP 9 is mapped to priorities 1 and 2"},
		{"bad ip", func(c *Config) { c.IPs = []netip.Prefix{{}} }, "ip-list[0]", "not a valid address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Host = "responder"
			tc.edit(&c)
			_, err := Plan(c)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Plan error %v; want a ConfigError", err)
			}
			if ce.Field != tc.field || !strings.Contains(ce.Msg, tc.says) || !strings.HasPrefix(err.Error(), "hostnic: responder: ") {
				t.Errorf("error %q; want field %s saying %q, naming the host", err, tc.field, tc.says)
			}
		})
	}
	if _, err := Plan(good); err != nil {
		t.Errorf("the good config fails: %v", err)
	}
}
