package testbed

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realScenario is dryScenario with real RNICs: ConnectX-5 on both ends (nic.ib-device and nic.pci-addr).
func realScenario(t *testing.T, dir string) string {
	s := dryScenario(t, dir)
	s = strings.Replace(s, "if-name: ens1f0, switch-port: enp1s0}", "if-name: ens1f0, ib-device: mlx5_0, pci-addr: 0000:3b:00.0, switch-port: enp1s0}", 1)
	s = strings.Replace(s, "if-name: ens1f0, switch-port: enp2s0}", "if-name: ens1f0, ib-device: mlx5_1, pci-addr: 0000:3b:00.1, switch-port: enp2s0}", 1)
	return s
}

func fakeVerbs(t *testing.T, dir string) string {
	p := filepath.Join(dir, "lumina-verbs")
	os.WriteFile(p, []byte("#!/bin/false\n"), 0o755)
	return p
}

// A dry run on real RNICs shows, host by host, every hostnic step of the vendor's setup with its undo, the
// counter sources, the verbs generator's deployment and command lines, and the order of the run.
func TestRemoteDryRunRealNIC(t *testing.T) {
	dir := t.TempDir()
	sc := load(t, realScenario(t, dir))
	var b bytes.Buffer
	err := DryRun(sc, Options{OutDir: filepath.Join(dir, "r"), Remote: RemoteOptions{AgentBinary: os.Args[0], VerbsBinary: fakeVerbs(t, dir)}}, &b)
	if err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, w := range []string{
		"deploy (when missing or different): mkdir -p .cache/lumina/agent && cat > .cache/lumina/agent/lumina-verbs-",
		"op hello ifaces=[ens1f0] tools=[ip mlnx_qos mlxreg] (checks root, ip, ethtool, the NIC setup's tools",
		"op nic-setup vendor=nvidia if-name=ens1f0 ib-device=mlx5_0/1 ip-list=[10.0.0.2/24 10.0.0.12/24] mtu=1500\n" +
			"    step requester (lab@192.0.2.11:22): check that ip is installed (addresses): look up ip on PATH\n",
		"    step requester (lab@192.0.2.11:22): trust DSCP on ens1f0: mlnx_qos -i ens1f0 --trust=dscp [undo: mlnx_qos -i ens1f0 --trust={trust} with the values mlnx_qos -i ens1f0 prints before]\n",
		"    step responder (lab@192.0.2.12:22): disable slow restart on 0000:3b:00.1 (mlxreg ROCE_ACCL roce_slow_restart_en): mlxreg -d 0000:3b:00.1 --reg_name ROCE_ACCL --set roce_slow_restart_en=0 --yes",
		"    step requester (lab@192.0.2.11:22): add address 10.0.0.2/24 to ens1f0: ip addr replace 10.0.0.2/24 dev ens1f0 [undo: ip addr del 10.0.0.2/24 dev ens1f0]\n",
		"op counters ib-device=mlx5_1/1 (start and finish snapshots)\n    read /sys/class/infiniband/mlx5_1/ports/1/hw_counters/* and counters/*\n" +
			"    exec rdma statistic show link mlx5_1/1\n    exec ethtool -S ens1f0\n  op verbs-server-start device=mlx5_1 listen=10.0.0.3:18515\n",
		" server --device mlx5_1 --gid-index -1 --timeout 40000ms --listen 10.0.0.3:18515\n",
		" client --device mlx5_0 --gid-index -1 --timeout 40000ms --connect 10.0.0.3:18515 --job RUNDIR/verbs-job.yaml --control unix:verbs-control.sock\n",
		"  op verbs-client-run limit_ms=40000 (answers the generator ready: the start barrier)\n  op counters ib-device=mlx5_0/1",
		"  op switch-install conns=0\n    (the connections are the QPNs and PSNs verbs-client-start returns)\n",
		"  op nic-undo\n    the undo of every nic-setup step that changed state, in reverse order\n",
		"nic-setup (responder, requester), counters (start), verbs-server-start, verbs-client-start",
	} {
		if !strings.Contains(s, w) {
			t.Errorf("dry run lacks %q", w)
		}
	}
	// The requester's and responder's software RNIC operations are gone: the traffic is the generator's.
	for _, no := range []string{"op endpoint-start", "op traffic-run", "op iface-setup iface=ens1f0"} {
		if strings.Contains(s, no) {
			t.Errorf("dry run of real RNICs has %q", no)
		}
	}
	if t.Failed() {
		t.Log(s)
	}
}

// Real RNICs need the generator's binary, both ends real, and a real NIC type.
func TestRemoteRealNICValidation(t *testing.T) {
	dir := t.TempDir()
	base := realScenario(t, dir)
	t.Setenv(EnvVerbsBinary, "")
	err := DryRun(load(t, base), Options{OutDir: filepath.Join(dir, "r"), Remote: RemoteOptions{AgentBinary: os.Args[0]}}, &bytes.Buffer{})
	if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "--verbs-binary PATH or LUMINA_VERBS_BINARY=PATH") ||
		!strings.Contains(err.Error(), "never built there") {
		t.Errorf("no generator: %v", err)
	}
	vb := fakeVerbs(t, dir)
	for _, c := range []struct{ old, new, want string }{
		{"ib-device: mlx5_1, ", "", `requester.nic.ib-device "mlx5_0" and responder.nic.ib-device "": expected both`},
		{"type: cx5, ip-list: [10.0.0.3/24]", "type: p2100g, ip-list: [10.0.0.3/24]", "is a simulated NIC"},
	} {
		if !strings.Contains(base, c.old) {
			t.Fatalf("scenario lacks %q", c.old)
		}
		err := DryRun(load(t, strings.Replace(base, c.old, c.new, 1)), Options{OutDir: filepath.Join(dir, "r"),
			Remote: RemoteOptions{AgentBinary: os.Args[0], VerbsBinary: vb}}, &bytes.Buffer{})
		if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q: error %v; want bad input containing %q", c.old, c.new, err, c.want)
		}
	}
}
