package hostnic

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func counterMap(cs []Counter) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range cs {
		m[c.Name] = c.Value
	}
	return m
}

func TestParseEthtoolS(t *testing.T) {
	for _, tc := range []struct {
		file string
		n    int
		want map[string]uint64
	}{
		{"ethtool-S-mlx5.txt", 51, map[string]uint64{"rx_discards_phy": 0, "tx_packets_phy": 7222595, "rx_bytes_phy": 2027206797,
			"rx_steer_missed_packets": 194, "rx_prio0_buf_discard": 0, "rx_corrected_bits_phy": 17750739}},
		{"ethtool-S-ice.txt", 32, map[string]uint64{"rx_priority_3_xoff.nic": 0, "tx_priority_7_xon.nic": 0}},
		{"ethtool-S-veth.txt", 21, map[string]uint64{"peer_ifindex": 2, "rx_queue_0_drops": 0}},
	} {
		cs, err := ParseEthtoolS(fixture(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		m := counterMap(cs)
		if len(cs) != tc.n || len(m) != tc.n {
			t.Errorf("%s: %d counters (%d names); want %d", tc.file, len(cs), len(m), tc.n)
		}
		for k, v := range tc.want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s: %s = %d (present %v); want %d", tc.file, k, got, ok, v)
			}
		}
		if _, ok := m["NIC statistics"]; ok {
			t.Errorf("%s: the header became a counter", tc.file)
		}
	}
	_, err := ParseEthtoolS([]byte("NIC statistics:\n     rx_packets: 12\n     rx_bytes: 1.5e3\n"))
	if err == nil || err.Error() != `ethtool -S line 3: rx_bytes: "1.5e3" is not a counter value (a non-negative integer)` {
		t.Errorf("malformed value: %v", err)
	}
}

func TestParseRdmaStatistic(t *testing.T) {
	cs, err := ParseRdmaStatistic(fixture(t, "rdma-statistic-rxe.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// Two devices on one line each (the real rxe capture): 17 counters each.
	if len(cs) != 34 {
		t.Errorf("%d counters; want 34", len(cs))
	}
	if cs[0] != (Counter{"sent_pkts", 206}) || cs[6] != (Counter{"rcvd_seq_err", 1}) || cs[17+3] != (Counter{"out_of_seq_request", 1}) {
		t.Errorf("first device's sent_pkts/rcvd_seq_err or second's out_of_seq_request wrong: %v %v %v", cs[0], cs[6], cs[20])
	}
	cs, err = ParseRdmaStatistic(fixture(t, "rdma-statistic-mlx5.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := counterMap(cs)
	if len(cs) != 17 || m["out_of_sequence"] != 6 || m["rx_write_requests"] != 2000 {
		t.Errorf("multi-line layout: %d counters, out_of_sequence %d; want 17 and 6", len(cs), m["out_of_sequence"])
	}
	if _, ok := m["optional-counters"]; ok {
		t.Error("optional-counters was read as a counter")
	}
	for _, bad := range []struct{ in, want string }{
		{"link mlx5_0/1 out_of_sequence x12\n", `rdma statistic line 1: out_of_sequence: "x12" is not a counter value (a non-negative integer)`},
		{"link mlx5_0/1 out_of_sequence 1 packet_seq_err\n", "rdma statistic line 1: counter packet_seq_err has no value"},
		{"link mlx5_0/1\n    np_cnp_sent -1\n", `rdma statistic line 2: np_cnp_sent: "-1" is not a counter value (a non-negative integer)`},
	} {
		if _, err := ParseRdmaStatistic([]byte(bad.in)); err == nil || err.Error() != bad.want {
			t.Errorf("%q: error %v; want %q", bad.in, err, bad.want)
		}
	}
	// Lines of other commands are ignored.
	if cs, err := ParseRdmaStatistic([]byte("0: mlx5_0: node_type ca fw 16.35\nlink mlx5_0/1 np_cnp_sent 3\n")); err != nil || len(cs) != 1 {
		t.Errorf("unknown lines: %v %v", cs, err)
	}
}

func TestQueryParsersOnFixtures(t *testing.T) {
	q, err := ParseMlnxQos(fixture(t, "mlnx_qos-cx.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Trust != "dscp" || q.DSCP2Prio[26] != 3 || q.DSCP2Prio[0] != 0 || q.DSCP2Prio[63] != 7 {
		t.Errorf("trust %q, dscp 26->%d 0->%d 63->%d", q.Trust, q.DSCP2Prio[26], q.DSCP2Prio[0], q.DSCP2Prio[63])
	}
	p2t, tsa, bw, err := q.ETSArgs()
	if err != nil {
		t.Fatal(err)
	}
	if p2t != "0,0,0,3,0,0,6,0" || tsa != "ets,strict,strict,ets,strict,strict,vendor,strict" || bw != "50,0,0,50,0,0,0,0" {
		t.Errorf("ETS args -p %s -s %s -t %s", p2t, tsa, bw)
	}
	v, err := ParseMlxregField(fixture(t, "mlxreg-roce_accl-cx5.txt"), "roce_slow_restart_en")
	if err != nil || v != 1 {
		t.Errorf("roce_slow_restart_en = %d, %v; want 1", v, err)
	}
	v, err = ParseMlxregField(fixture(t, "mlxreg-roce_accl-cx5.txt"), "roce_tx_window_en")
	if err != nil || v != 0 {
		t.Errorf("roce_tx_window_en = %d, %v; want 0", v, err)
	}
	if _, err := ParseMlxregField([]byte("roce_adp_retrans_en | zz\n"), "roce_adp_retrans_en"); err == nil || !strings.Contains(err.Error(), `"zz" is not a number`) {
		t.Errorf("bad mlxreg value: %v", err)
	}
	f, err := ParsePrivFlag(fixture(t, "ethtool-show-priv-flags-ice.txt"), "fw-lldp-agent")
	if err != nil || f != "off" {
		t.Errorf("fw-lldp-agent = %q, %v; want off", f, err)
	}
	fills, err := parseQuery("lldp-ets", fixture(t, "lldptool-ets-cfg.txt"))
	if err != nil || fills[0]["tcbw"] != "100,0,0,0,0,0,0,0" || fills[0]["willing"] != "yes" {
		t.Errorf("lldp-ets: %v %v", fills, err)
	}
	// The APP table: a local entry is there (no undo), a missing one gets its delete; a peer's entry is not
	// ours; selector 1's protocol is printed in hexadecimal. Output without the table is an error, not "absent".
	app := fixture(t, "lldptool-app.txt")
	for _, c := range []struct {
		entry string
		fills int
	}{{"3,5,26", 0}, {"3,1,35078", 0}, {"4,2,3260", 0}, {"5,5,46", 1}, {"3,5,27", 1}, {"2,5,26", 1}} {
		if fills, err := parseQuery("lldp-app:"+c.entry, app); err != nil || len(fills) != c.fills {
			t.Errorf("lldp-app:%s: %v %v; want %d undo", c.entry, fills, err, c.fills)
		}
	}
	if _, err := parseQuery("lldp-app:3,5,26", []byte("Connection refused\n")); err == nil || !strings.Contains(err.Error(), "no APP table") {
		t.Errorf("lldp-app without a table: %v", err)
	}
	addrs, err := ParseIPAddrs(append(fixture(t, "ip-o-4-addr.txt"), fixture(t, "ip-o-6-addr.txt")...))
	if err != nil || len(addrs) != 3 || addrs[0].String() != "10.0.0.2/24" || addrs[2].String() != "fd00::2/64" {
		t.Errorf("ip addrs %v %v", addrs, err)
	}
}

func counterHost(t *testing.T) *fakeHost {
	h := newFakeHost(t)
	h.copyTree("testdata/sysfs-mlx5")
	h.copyTree("testdata/sysfs-irdma")
	h.copyTree("testdata/sysfs-rxe")
	h.file("/sys/class/infiniband/mlx5_0/ports/1/counters/unreadable_VL15_dropped", "0")
	h.outputs["rdma statistic show link mlx5_0/1"] = string(fixture(t, "rdma-statistic-mlx5.txt"))
	h.outputs["ethtool -S ens1f0"] = string(fixture(t, "ethtool-S-mlx5.txt"))
	h.outputs["rdma statistic show link irdma0/1"] = string(fixture(t, "rdma-statistic-irdma.txt"))
	h.outputs["ethtool -S ens785f0"] = string(fixture(t, "ethtool-S-ice.txt"))
	h.outputs["rdma statistic show link rxereq/1"] = strings.SplitAfter(string(fixture(t, "rdma-statistic-rxe.txt")), "\n")[0]
	h.outputs["ethtool -S eth0"] = string(fixture(t, "ethtool-S-veth.txt"))
	return h
}

func TestReadCountersMergesSources(t *testing.T) {
	h := counterHost(t)
	ctx := context.Background()
	s, err := ReadCounters(ctx, h, Config{Host: "requester", Vendor: "nvidia", IfName: "ens1f0", IBDevice: "mlx5_0"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		v   uint64
		src string
	}{
		"out_of_sequence":      {5, SourceHWCounters}, // rdma statistic says 6: hw_counters comes first
		"np_cnp_sent":          {17, SourceHWCounters},
		"port_xmit_packets":    {2100, SourceCounters},
		"rx_discards_phy":      {0, SourceEthtool},
		"tx_packets_phy":       {7222595, SourceEthtool},
		"rx_write_requests":    {2000, SourceHWCounters},
		"rx_prio0_discards":    {0, SourceEthtool},
		"rx_icrc_encapsulated": {1, SourceHWCounters},
	} {
		if s.Values[name] != want.v || s.Source[name] != want.src {
			t.Errorf("%s = %d from %s; want %d from %s", name, s.Values[name], s.Source[name], want.v, want.src)
		}
	}
	if _, ok := s.Values["lifespan"]; ok {
		t.Error("hw_counters/lifespan (a setting) was read as a counter")
	}
	if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0], "unreadable_VL15_dropped") {
		t.Errorf("skipped %v; want the unreadable attribute", s.Skipped)
	}

	s, err = ReadCounters(ctx, h, Config{Vendor: "intel", IfName: "ens785f0", IBDevice: "irdma0"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Values["cnpSent"] != 11 || s.Values["RxECNMrkd"] != 21 || s.Source["rx_priority_3_xoff.nic"] != SourceEthtool || len(s.Values) != 15+32 {
		t.Errorf("intel: cnpSent %d RxECNMrkd %d, %d names", s.Values["cnpSent"], s.Values["RxECNMrkd"], len(s.Values))
	}

	s, err = ReadCounters(ctx, h, Config{Vendor: "rxe", IfName: "eth0", IBDevice: "rxereq"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Values["rcvd_seq_err"] != 1 || s.Values["completer_retry_err"] != 1 || s.Values["sent_pkts"] != 206 || s.Source["sent_pkts"] != SourceHWCounters {
		t.Errorf("rxe: %v", s.Values)
	}
}

// rxe's parent netdev may have no statistics: ethtool then says "no stats available" (exit 94) and only that
// is skipped, with a note; any other ethtool failure is an error naming the source.
func TestReadCountersRxeEthtool(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Host: "requester", Vendor: "rxe", IfName: "eth0", IBDevice: "rxereq"}
	// OSRunner's error for ethtool's outcome, from a real process exiting as ethtool does.
	noStats, err := OSRunner{}.Run(ctx, []string{"sh", "-c", "echo 'no stats available' >&2; exit 94"})
	if err == nil {
		t.Fatalf("the stand-in for ethtool succeeded: %q", noStats)
	}
	h := counterHost(t)
	h.runErrs = map[string]error{"ethtool -S eth0": err}
	s, rerr := ReadCounters(ctx, h, cfg)
	if rerr != nil || s.Values["rcvd_seq_err"] != 1 {
		t.Fatalf("no stats on the parent: %v %v", rerr, s.Values)
	}
	if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0], "ethtool -S eth0: no stats available") {
		t.Errorf("skipped %v; want the parent's missing statistics noted", s.Skipped)
	}
	for _, e := range []struct {
		err  error
		want string
	}{
		{errors.New("exit status 96: Cannot get stats strings information: No such device"), "counters from ethtool-S: ethtool -S eth0: exit status 96: Cannot get stats strings information: No such device"},
		{&exec.Error{Name: "ethtool", Err: exec.ErrNotFound}, "counters from ethtool-S: ethtool -S eth0: tool not installed"},
	} {
		h.runErrs["ethtool -S eth0"] = e.err
		if _, rerr := ReadCounters(ctx, h, cfg); rerr == nil || !strings.Contains(rerr.Error(), e.want) {
			t.Errorf("ethtool failing with %v: %v; want an error containing %q", e.err, rerr, e.want)
		}
	}
	// Another exit status with the same words is not ethtool's no-stats outcome.
	_, err = OSRunner{}.Run(ctx, []string{"sh", "-c", "echo 'no stats available' >&2; exit 1"})
	if ethtoolNoStats(err) {
		t.Errorf("%v taken for ethtool's no-stats outcome (exit 94)", err)
	}
}

func TestReadCountersErrors(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Host: "responder", Vendor: "nvidia", IfName: "ens1f0", IBDevice: "mlx5_0"}
	h := counterHost(t)
	h.file("/sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent", "lots")
	_, err := ReadCounters(ctx, h, cfg)
	if err == nil || err.Error() != `hostnic: responder: counters from sysfs-hw_counters: /sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent: "lots" is not a counter value (a non-negative integer)` {
		t.Errorf("malformed sysfs value: %v", err)
	}
	h = counterHost(t)
	delete(h.tools, "ethtool")
	_, err = ReadCounters(ctx, h, cfg)
	if err == nil || !strings.Contains(err.Error(), "hostnic: responder: counters from ethtool-S: ethtool -S ens1f0: tool not installed") {
		t.Errorf("missing ethtool: %v", err)
	}
	h = counterHost(t)
	_, err = ReadCounters(ctx, h, Config{Host: "responder", Vendor: "nvidia", IfName: "ens1f0", IBDevice: "mlx5_9"})
	if err == nil || !strings.Contains(err.Error(), "does not exist (wrong interface or device name") {
		t.Errorf("missing device: %v", err)
	}
	h = counterHost(t)
	h.outputs["rdma statistic show link mlx5_0/1"] = "link mlx5_0/1 out_of_sequence -\n"
	_, err = ReadCounters(ctx, h, cfg)
	if err == nil || !strings.Contains(err.Error(), `counters from rdma-statistic: rdma statistic line 1: out_of_sequence: "-"`) {
		t.Errorf("malformed rdma statistic: %v", err)
	}
}

// An rxe device seen from a network namespace other than the initial one has a port without hw_counters in
// sysfs: its counters come from rdma statistic under the same names, and the snapshot says why. A device
// whose port does not exist at all is still an error.
func TestReadCountersInANetworkNamespace(t *testing.T) {
	h := counterHost(t)
	h.file("/sys/class/infiniband/rxens/ports/1/state", "4: ACTIVE")
	h.outputs["rdma statistic show link rxens/1"] = strings.Replace(strings.SplitAfter(string(fixture(t, "rdma-statistic-rxe.txt")), "\n")[0], "rxereq", "rxens", 1)
	snap, err := ReadCounters(context.Background(), h, Config{Host: "requester", Vendor: "rxe", IfName: "eth0", IBDevice: "rxens"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Values["rcvd_seq_err"] != 1 || snap.Source["rcvd_seq_err"] != SourceRdmaStat || snap.Values["sent_pkts"] != 206 ||
		len(snap.Skipped) != 1 || !strings.Contains(snap.Skipped[0], "hw_counters: not shown (a non-initial network namespace)") {
		t.Errorf("snapshot %+v", snap)
	}
	h.outputs["rdma statistic show link rxens/1"] = "link rxens/1\n"
	_, err = ReadCounters(context.Background(), h, Config{Host: "requester", Vendor: "rxe", IfName: "eth0", IBDevice: "rxens"})
	if err == nil || !strings.Contains(err.Error(), "no counter of rxens/1 in sysfs or rdma statistic") {
		t.Errorf("no counters anywhere: %v", err)
	}
}
