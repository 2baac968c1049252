package hostnic

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// nvidiaHost is a fake NVIDIA host: interface ens1f0 (mlx5_0), DCQCN on everywhere, CNP interval 0.
func nvidiaHost(t *testing.T) *fakeHost {
	h := newFakeHost(t)
	h.file("/sys/class/net/ens1f0/ifindex", "3")
	h.file("/sys/class/net/ens1f0/mtu", "1500")
	h.file("/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE")
	h.file("/sys/class/net/ens1f0/ecn/roce_np/min_time_between_cnps", "0")
	for p := range 8 {
		h.file("/sys/class/net/ens1f0/ecn/roce_rp/enable/"+string(rune('0'+p)), "1")
		h.file("/sys/class/net/ens1f0/ecn/roce_np/enable/"+string(rune('0'+p)), "1")
	}
	return h
}

func nvidiaConfig() Config {
	return Config{Host: "requester", Vendor: "nvidia", IfName: "ens1f0", PCIAddr: "0000:3b:00.0", IBDevice: "mlx5_0",
		MTU: 4200, IPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24"), netip.MustParsePrefix("10.0.1.2/24")},
		ConfigureQoS: true, PrioDSCPMap: map[int][]int{3: {26}, 5: {46, 5}},
		RoCE: RoCEParameters{DCQCNRPEnable: ptr(false), DCQCNNPEnable: ptr(true), MinTimeBetweenCNPsUs: ptr(50.0),
			AdaptiveRetrans: ptr(false), SlowRestart: ptr(true)}}
}

func mustPlan(t *testing.T, cfg Config) []Step {
	t.Helper()
	steps, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

func TestApplyUndoNVIDIA(t *testing.T) {
	h := nvidiaHost(t)
	before := h.state()
	var reports []StepReport
	undo, err := Apply(context.Background(), h, mustPlan(t, nvidiaConfig()), func(r StepReport) { reports = append(reports, r) })
	if err != nil {
		t.Fatal(err)
	}
	// Every value changed as asked.
	for path, want := range map[string]string{
		"/sys/class/net/ens1f0/mtu":                               "4200",
		"/sys/class/net/ens1f0/ecn/roce_np/min_time_between_cnps": "50",
		"/sys/class/net/ens1f0/ecn/roce_rp/enable/0":              "0",
		"/sys/class/net/ens1f0/ecn/roce_rp/enable/7":              "0",
		"/sys/class/net/ens1f0/ecn/roce_np/enable/4":              "1",
	} {
		b, _ := h.ReadFile(path)
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s = %q after Apply; want %q", path, got, want)
		}
	}
	if h.mlxreg["roce_adp_retrans_en"] != 0 || h.mlxreg["roce_slow_restart_en"] != 1 {
		t.Errorf("mlxreg after Apply: %v; want adaptive 0, slow restart 1", h.mlxreg)
	}
	if h.trust != "dscp" || h.dscp[26] != 3 || h.dscp[46] != 5 || h.dscp[5] != 5 || h.ets[2] != "12,13,12,13,12,13,12,13" {
		t.Errorf("QoS after Apply: trust %s dscp26->%d dscp46->%d dscp5->%d ets %v", h.trust, h.dscp[26], h.dscp[46], h.dscp[5], h.ets)
	}
	if strings.Join(h.addrs["-4"], " ") != "10.0.0.2/24 10.0.1.2/24" || len(h.addrs["-6"]) != 0 {
		t.Errorf("addresses after Apply: %v", h.addrs)
	}
	// The report says what each write replaced.
	var sawWas bool
	for _, r := range reports {
		if r.Err != nil {
			t.Errorf("report of step %d carries error %v", r.Index, r.Err)
		}
		if strings.HasSuffix(r.Step.Path, "roce_rp/enable/0") && r.Note == "was 1" {
			sawWas = true
		}
	}
	if !sawWas || len(reports) != len(mustPlan(t, nvidiaConfig())) {
		t.Errorf("reports: %d (want one per step), roce_rp/enable/0 noted as \"was 1\": %v", len(reports), sawWas)
	}
	if err := Undo(context.Background(), h, undo, nil); err != nil {
		t.Fatal(err)
	}
	if after := h.state(); after != before {
		t.Errorf("Undo did not restore the host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestApplyFailureMidwayUndoesWhatWasDone(t *testing.T) {
	h := nvidiaHost(t)
	h.denied["/sys/class/net/ens1f0/ecn/roce_np/enable/3"] = true
	before := h.state()
	steps := mustPlan(t, nvidiaConfig())
	undo, err := Apply(context.Background(), h, steps, nil)
	var se *StepError
	if !errors.As(err, &se) {
		t.Fatalf("Apply error %v; want a StepError", err)
	}
	if steps[se.Index].Path != "/sys/class/net/ens1f0/ecn/roce_np/enable/3" {
		t.Errorf("failed at step %d %q; want the denied write", se.Index, steps[se.Index].Desc)
	}
	msg := err.Error()
	for _, want := range []string{"hostnic: requester: step ", "(enable the DCQCN notification point on ens1f0 priority 3)", "permission denied", "EACCES"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	// Nothing after the failing step ran: slow restart is untouched.
	if h.mlxreg["roce_slow_restart_en"] != 0 {
		t.Error("steps after the failure ran")
	}
	if len(undo) == 0 {
		t.Fatal("no undo for the steps done before the failure")
	}
	if err := Undo(context.Background(), h, undo, nil); err != nil {
		t.Fatal(err)
	}
	if after := h.state(); after != before {
		t.Errorf("Undo after a failure did not restore the host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestApplyMissingToolIsNamed(t *testing.T) {
	h := nvidiaHost(t)
	delete(h.tools, "mlxreg")
	before := h.state()
	undo, err := Apply(context.Background(), h, mustPlan(t, nvidiaConfig()), nil)
	want := "hostnic: requester: step 3 (check that mlxreg is installed (adaptive retransmission and slow restart)): mlxreg: tool not installed (not found on PATH)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v; want it to start %q", err, want)
	}
	if !errors.Is(err, exec.ErrNotFound) {
		t.Error("the error does not wrap exec.ErrNotFound")
	}
	if len(undo) != 0 || h.state() != before {
		t.Error("a missing tool was found only after the host was changed")
	}
}

func TestApplyCommandFailureAndBadQuery(t *testing.T) {
	h := nvidiaHost(t)
	h.failOn = "mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --set roce_slow_restart_en=1 --yes"
	before := h.state()
	undo, err := Apply(context.Background(), h, mustPlan(t, nvidiaConfig()), nil)
	if err == nil || !strings.Contains(err.Error(), "(enable slow restart on 0000:3b:00.0 (mlxreg ROCE_ACCL roce_slow_restart_en)): mlxreg -d 0000:3b:00.0") ||
		!strings.Contains(err.Error(), "Operation not supported") {
		t.Fatalf("error %v; want the step, the command and its stderr", err)
	}
	if err := Undo(context.Background(), h, undo, nil); err != nil {
		t.Fatal(err)
	}
	if h.state() != before {
		t.Error("not restored after a failing command")
	}

	// A query whose output cannot be read stops the step before it changes anything.
	h2 := nvidiaHost(t)
	h2.outputs["mlxreg -d 0000:3b:00.0 --reg_name ROCE_ACCL --get"] = "Sending access register...\n"
	_, err = Apply(context.Background(), h2, mustPlan(t, nvidiaConfig()), nil)
	if err == nil || !strings.Contains(err.Error(), "mlxreg printed no roce_adp_retrans_en field") {
		t.Fatalf("error %v; want the unreadable query named", err)
	}
	if h2.mlxreg["roce_adp_retrans_en"] != 1 {
		t.Error("the step ran although its undo could not be known")
	}
}

func TestApplyUndoIntel(t *testing.T) {
	h := newFakeHost(t)
	h.file("/sys/class/net/ens785f0/ifindex", "4")
	h.file("/sys/class/infiniband/irdma0/ports/1/state", "4: ACTIVE")
	h.file("/sys/kernel/config/irdma/.keep", "")
	cfg := Config{Host: "responder", Vendor: "intel", IfName: "ens785f0", IBDevice: "irdma0", ConfigureQoS: true,
		PrioDSCPMap: map[int][]int{3: {26, 27}}, RoCE: RoCEParameters{DCQCNEnable: ptr(true)}}
	h.lldpETS["tsa"], h.lldpETS["tcbw"] = "0:ets,1:strict,2:strict,3:strict,4:strict,5:strict,6:strict,7:strict", "100,0,0,0,0,0,0,0"
	before := h.state()
	undo, err := Apply(context.Background(), h, mustPlan(t, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.dcqcn != "1" || h.privFlag != "off" || !h.lldpApp["app=3,5,26"] || h.lldpETS["tcbw"] != "25,25,25,25,0,0,0,0" {
		t.Errorf("after Apply: dcqcn %s priv %s apps %v ets %v", h.dcqcn, h.privFlag, h.lldpApp, h.lldpETS)
	}
	if strings.Contains(h.state(), "/sys/kernel/config/irdma/irdma0") {
		t.Error("the configfs entry stays open after Apply (the reference removes it)")
	}
	if err := Undo(context.Background(), h, undo, nil); err != nil {
		t.Fatal(err)
	}
	if after := h.state(); after != before {
		t.Errorf("Undo did not restore the host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// A DSCP mapping the host had before the run survives Apply and Undo; one the run added is removed.
func TestApplyUndoIntelKeepsPreexistingAPP(t *testing.T) {
	h := newFakeHost(t)
	h.file("/sys/class/net/ens785f0/ifindex", "4")
	h.file("/sys/class/infiniband/irdma0/ports/1/state", "4: ACTIVE")
	cfg := Config{Host: "responder", Vendor: "intel", IfName: "ens785f0", IBDevice: "irdma0", ConfigureQoS: true,
		PrioDSCPMap: map[int][]int{3: {26, 27}}}
	h.lldpApp["app=3,5,26"] = true // configured by the host's owner
	h.lldpApp["app=1,5,10"] = true // not in the plan
	undo, err := Apply(context.Background(), h, mustPlan(t, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.lldpApp["app=3,5,26"] || !h.lldpApp["app=3,5,27"] {
		t.Fatalf("after Apply: apps %v; want 3,5,26 and 3,5,27", h.lldpApp)
	}
	for _, u := range undo {
		if strings.Contains(strings.Join(u.Argv, " "), "app=3,5,26") {
			t.Errorf("undo step %q deletes a mapping the run did not add", u.Argv)
		}
	}
	if err := Undo(context.Background(), h, undo, nil); err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(h.lldpApp); strings.Join(got, " ") != "app=1,5,10 app=3,5,26" {
		t.Errorf("after Undo: apps %v; want the host's own app=1,5,10 and app=3,5,26 only (app=3,5,27 removed)", got)
	}
}

func TestApplyUndoRxe(t *testing.T) {
	h := newFakeHost(t)
	h.file("/sys/class/net/eth0/ifindex", "2")
	h.file("/sys/class/infiniband/.keep", "")
	cfg := Config{Host: "requester", Vendor: "rxe", IfName: "eth0", IBDevice: "rxe0", IPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}}
	before := h.state()
	undo, err := Apply(context.Background(), h, mustPlan(t, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.links["rxe0"] != "eth0" || !h.modules["rdma_rxe"] {
		t.Fatalf("after Apply: links %v modules %v", h.links, h.modules)
	}
	if err := Undo(context.Background(), h, undo, nil); err != nil {
		t.Fatal(err)
	}
	if after := h.state(); after != before {
		t.Errorf("Undo did not restore the host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !h.modules["rdma_rxe"] {
		t.Error("the module was unloaded; the plan says it stays")
	}
}

func TestUndoGoesOnAfterAFailure(t *testing.T) {
	h := nvidiaHost(t)
	before := h.state()
	undo, err := Apply(context.Background(), h, mustPlan(t, nvidiaConfig()), nil)
	if err != nil {
		t.Fatal(err)
	}
	// One restore fails; every other one still runs and the failure is reported.
	h.denied["/sys/class/net/ens1f0/mtu"] = true
	err = Undo(context.Background(), h, undo, nil)
	if err == nil || !strings.Contains(err.Error(), "restore /sys/class/net/ens1f0/mtu to 1500") {
		t.Fatalf("Undo error %v; want the failed restore named", err)
	}
	delete(h.denied, "/sys/class/net/ens1f0/mtu")
	h.file("/sys/class/net/ens1f0/mtu", "1500")
	if h.state() != before {
		t.Error("Undo stopped at the first failure")
	}
}

// An ETS setting lldpad never stored reads back empty: the undo cannot set "nothing", so it leaves that key
// out and restores the others.
func TestUndoLeavesOutUnconfiguredLLDPKeys(t *testing.T) {
	h := newFakeHost(t)
	h.file("/sys/class/net/ens785f0/ifindex", "4")
	h.file("/sys/class/infiniband/irdma0/ports/1/state", "4: ACTIVE")
	cfg := Config{Vendor: "intel", IfName: "ens785f0", IBDevice: "irdma0", ConfigureQoS: true, PrioDSCPMap: map[int][]int{}}
	undo, err := Apply(context.Background(), h, mustPlan(t, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ets []string
	for _, u := range undo {
		if strings.Contains(strings.Join(u.Argv, " "), "ETS-CFG") {
			ets = u.Argv
		}
	}
	want := "lldptool -T -i ens785f0 -V ETS-CFG willing=yes up2tc=0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0"
	if strings.Join(ets, " ") != want {
		t.Errorf("ETS undo %q; want %q", strings.Join(ets, " "), want)
	}
}
