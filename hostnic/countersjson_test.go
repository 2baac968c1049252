package hostnic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/verdict"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/lumina-go/lumina/hostnic"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
)

// fileRunner is a minimal Runner: sysfs files from a map, command outputs from a map.
type fileRunner struct {
	files   map[string]string
	outputs map[string]string
}

func (r fileRunner) Run(_ context.Context, argv []string) ([]byte, error) {
	out, ok := r.outputs[strings.Join(argv, " ")]
	if !ok {
		return nil, fmt.Errorf("no output for %q", argv)
	}
	return []byte(out), nil
}

func (r fileRunner) ReadFile(p string) ([]byte, error) {
	v, ok := r.files[p]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.ENOENT}
	}
	return []byte(v + "\n"), nil
}

func (r fileRunner) WriteFile(string, []byte) error { return syscall.EROFS }

func (r fileRunner) LookPath(n string) (string, error) { return "/usr/bin/" + n, nil }

func (r fileRunner) ReadDir(dir string) ([]string, error) {
	var names []string
	for p := range r.files {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	if len(names) == 0 {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: syscall.ENOENT}
	}
	sort.Strings(names)
	return names, nil
}

// mlx5Host is an NVIDIA host whose hw_counters hold base+delta for each name, and whose ethtool -S holds
// the physical-port counters (with discards).
func mlx5Host(dev, ifname string, base uint64, delta map[string]uint64) fileRunner {
	r := fileRunner{files: map[string]string{}, outputs: map[string]string{}}
	hw := "/sys/class/infiniband/" + dev + "/ports/1/hw_counters/"
	for _, n := range []string{"out_of_sequence", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err",
		"duplicate_request", "rnr_nak_retry_err", "out_of_buffer", "rx_icrc_encapsulated", "np_ecn_marked_roce_packets",
		"np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "roce_adp_retrans", "roce_slow_restart", "lifespan"} {
		r.files[hw+n] = fmt.Sprint(base + delta[n])
	}
	r.files["/sys/class/infiniband/"+dev+"/ports/1/counters/port_xmit_packets"] = fmt.Sprint(base * 10)
	r.outputs["rdma statistic show link "+dev+"/1"] = "link " + dev + "/1 out_of_sequence 0 rx_write_requests 7\n"
	r.outputs["ethtool -S "+ifname] = fmt.Sprintf("NIC statistics:\n     rx_discards_phy: %d\n     tx_packets_phy: %d\n     rx_prio3_discards: 0\n",
		base+delta["rx_discards_phy"], base*3)
	return r
}

// A start and a finish Snapshot from the real sources, written into counters.json, are what the counter
// analyzer reads: the consistency checks come out as they do for the simulator's own counters.
func TestSnapshotsInCountersJSONFeedTheCounterAnalyzer(t *testing.T) {
	sc, err := scenario.Parse([]byte(`
testbed: sim
requester: {nic: {type: cx5, ip-list: [10.0.0.2/24]}}
responder: {nic: {type: cx5, ip-list: [10.0.0.3/24]}}
traffic: {num-connections: 1, rdma-verb: write, num-msgs-per-qp: 2, mtu: 1024, message-size: 10240}
events:
  - {qpn: 1, psn: 5, type: drop, iter: 1}
`), "shape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = testbed.Run(sc, testbed.Options{OutDir: dir})
	var out *verdict.Outcome
	if err == nil {
		out, err = verdict.Judge(dir, sc)
	}
	if err != nil {
		t.Fatal(err)
	}
	// What the trace implies per host (the analyzer's expected values on the simulator's run).
	want := map[string]map[string]uint64{"requester": {}, "responder": {}}
	for _, c := range out.Doc.Counters {
		if c.Actual == nil || !c.OK {
			t.Fatalf("the simulator's own counters are not consistent: %+v", c)
		}
		want[c.Host][c.Name] = uint64(c.Expected)
	}
	if want["requester"]["packet_seq_err"] != 1 || want["responder"]["out_of_sequence"] != 1 {
		t.Fatalf("unexpected trace: %v", want)
	}

	write := func(reqDelta, respDelta map[string]uint64) *verdict.Outcome {
		t.Helper()
		ctx := context.Background()
		cf := *out.Counters
		for _, h := range []struct {
			role, dev, ifname string
			base              uint64
			delta             map[string]uint64
			into              *resultsdir.HostCounters
		}{{"requester", "mlx5_0", "ens1f0", 100, reqDelta, &cf.Requester}, {"responder", "mlx5_1", "ens2f0", 7, respDelta, &cf.Responder}} {
			cfg := hostnic.Config{Host: h.role, Vendor: "nvidia", IfName: h.ifname, IBDevice: h.dev}
			start, err := hostnic.ReadCounters(ctx, mlx5Host(h.dev, h.ifname, h.base, nil), cfg)
			if err != nil {
				t.Fatal(err)
			}
			finish, err := hostnic.ReadCounters(ctx, mlx5Host(h.dev, h.ifname, h.base, h.delta), cfg)
			if err != nil {
				t.Fatal(err)
			}
			*h.into = resultsdir.HostCounters{NIC: "cx5", Vendor: cfg.Vendor, Start: start.Values, Finish: finish.Values}
		}
		b, err := json.MarshalIndent(cf, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, resultsdir.FileCounters), b, 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := verdict.Reanalyze(dir)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	check := func(o *verdict.Outcome, host, name string) (ok bool, actual int64, note string) {
		for _, c := range o.Doc.Counters {
			if c.Host == host && c.Name == name {
				if c.Actual != nil {
					actual = *c.Actual
				}
				return c.OK, actual, c.Note
			}
		}
		t.Fatalf("no counter check %s/%s", host, name)
		return
	}

	// The real NICs counted what the trace shows: every check passes, including the ethtool discards.
	o := write(want["requester"], want["responder"])
	for _, c := range o.Doc.Counters {
		if !c.OK {
			t.Errorf("check %s/%s failed: %+v", c.Host, c.Name, c)
		}
	}
	if ok, d, _ := check(o, "requester", "packet_seq_err"); !ok || d != 1 {
		t.Errorf("packet_seq_err: ok %v delta %d; want ok and 1 (finish 101 - start 100)", ok, d)
	}
	if ok, d, _ := check(o, "responder", "rx_discards_phy"); !ok || d != 0 {
		t.Errorf("rx_discards_phy (from ethtool -S): ok %v delta %d", ok, d)
	}
	if o.Doc.Verdict != verdict.Pass {
		t.Errorf("verdict %s; want pass", o.Doc.Verdict)
	}

	// A responder that counted two sequence errors: the check fails and says what the trace shows.
	resp := map[string]uint64{}
	for k, v := range want["responder"] {
		resp[k] = v
	}
	resp["out_of_sequence"] = 2
	o = write(want["requester"], resp)
	if ok, d, note := check(o, "responder", "out_of_sequence"); ok || d != 2 || !strings.Contains(note, "the trace shows 1") {
		t.Errorf("out_of_sequence: ok %v delta %d note %q; want a failure saying the trace shows 1", ok, d, note)
	}
	if o.Doc.Verdict != verdict.Fail {
		t.Errorf("verdict %s; want fail", o.Doc.Verdict)
	}
	// A NIC that discarded a packet (ethtool -S rx_discards_phy): the discard check fails, and the receiver-side
	// counts are no longer determined by the trace.
	resp["rx_discards_phy"] = 1
	o = write(want["requester"], resp)
	if ok, _, note := check(o, "responder", "rx_discards_phy"); ok || !strings.Contains(note, "discarded 1 packets") {
		t.Errorf("rx_discards_phy: ok %v note %q; want a failure", ok, note)
	}
	if ok, _, note := check(o, "responder", "out_of_sequence"); !ok || !strings.Contains(note, "not determined by the trace") {
		t.Errorf("out_of_sequence with discards: ok %v note %q", ok, note)
	}
}
