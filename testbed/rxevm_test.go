package testbed

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/scenario"
)

func rxeScenario(t *testing.T, body string) *scenario.Scenario {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte("testbed: rxe-vm\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

const rxeWrite = `traffic:
  num-connections: 2
  rdma-verb: write
  num-msgs-per-qp: 3
  mtu: 1024
  message-size: 4096
  min-retransmit-timeout: 18
  data-pkt-events:
    - {qpn: 1, psn: 5, type: drop, iter: 1}
`

func TestPlanRxeJobPicksTool(t *testing.T) {
	sc := rxeScenario(t, rxeWrite)
	j, err := planRxeJob(sc, false, "")
	if err != nil || j.tool != "perftest" || j.perftest != "ib_write_bw" {
		t.Fatalf("without the generator: %+v, %v; want perftest ib_write_bw", j, err)
	}
	if j, err = planRxeJob(sc, true, ""); err != nil || j.tool != "verbs" {
		t.Fatalf("with the generator: %+v, %v; want verbs", j, err)
	}
	if _, err = planRxeJob(sc, false, "verbs"); !errors.Is(err, ErrInput) {
		t.Fatalf("verbs asked for but not built: %v; want a bad-input error", err)
	}
	env := j.env(sc)
	for _, want := range []string{"TOOL=verbs\n", "QPS=2\n", "MSGS=3\n", "SIZE=4096\n", "MTU=1024\n",
		"REQ_IPS=\"10.0.0.2/24\"\n", "RESP_IPS=\"10.0.0.3/24\"\n", "DUMPERS=2\n", "REWRITE_PORT=9741\n", "VETH_MTU=1500\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("job.env lacks %q:\n%s", want, env)
		}
	}
	j, _ = planRxeJob(sc, false, "perftest")
	if env := j.env(sc); !strings.Contains(env, `PERFTEST_ARGS="-u 18 -t 1"`) {
		t.Errorf("perftest job.env should carry the timeout exponent and tx depth:\n%s", env)
	}
}

func TestPlanRxeJobRejects(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"read with perftest": {strings.Replace(rxeWrite, "rdma-verb: write", "rdma-verb: read", 1), "needs the verbs generator"},
		"ack event":          {rxeWrite + "    - {qpn: 1, packet: ack, nth: 1, type: drop}\n", "only data events apply"},
	} {
		sc := rxeScenario(t, tc.body)
		_, err := planRxeJob(sc, false, "perftest")
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a bad-input error containing %q", name, err, tc.want)
		}
	}
	sc := rxeScenario(t, strings.Replace(strings.Replace(rxeWrite, "mtu: 1024", "mtu: 4096", 1), "message-size: 4096", "message-size: 16384", 1))
	if j, err := planRxeJob(sc, false, ""); err != nil || j.vethMTU < 4096+100 {
		t.Errorf("mtu 4096: %+v, %v; want a veth MTU that fits 4096-byte payloads and the headers", j, err)
	}
}

func TestPerftestConnsJoinsLearnedWithOutput(t *testing.T) {
	sc := rxeScenario(t, rxeWrite)
	dir := t.TempDir()
	// perftest prints both local addresses before the remote ones with -q 2: pairs come in order.
	out := " local address: LID 0000 QPN 0x0011 PSN 0x1c1bc6 RKey 0x0002af VAddr 0x0055694ec00800\n" +
		" remote address: LID 0000 QPN 0x0021 PSN 0xbe59b RKey 0x000243 VAddr 0x0055e998763800\n" +
		" local address: LID 0000 QPN 0x0012 PSN 0x000010 RKey 0x0002af VAddr 0x0055694ec00800\n" +
		" remote address: LID 0000 QPN 0x0022 PSN 0x5 RKey 0x000243 VAddr 0x0055e998763800\n"
	if err := os.WriteFile(filepath.Join(dir, "perftest-client.txt"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	// The switch learned QP 0x22 first: it is connection 1 in the scenario's numbering.
	learned := []inject.ConnMeta{
		{Index: 0, Verb: "write", ReqIP: a, RespIP: b, RespQPN: 0x22, ReqIPSN: 0x10},
		{Index: 1, Verb: "write", ReqIP: a, RespIP: b, RespQPN: 0x21, ReqIPSN: 0x1c1bc6},
	}
	cs, err := perftestConns(sc, dir, learned)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].QP != 1 || cs[0].RequesterQPN != 0x12 || cs[0].ResponderQPN != 0x22 ||
		cs[1].RequesterQPN != 0x11 || cs[1].RequesterIPSN != 0x1c1bc6 || cs[0].PacketsPerMsg != 4 || cs[0].NumMsgs != 3 {
		t.Fatalf("connections %+v", cs)
	}
	learned[0].ReqIPSN = 0x11
	if _, err := perftestConns(sc, dir, learned); err == nil || !strings.Contains(err.Error(), "differs from the first PSN") {
		t.Errorf("PSN mismatch: %v; want an error naming it", err)
	}
	if _, err := perftestConns(sc, dir, learned[:1]); err == nil || !strings.Contains(err.Error(), "learned 1 connections") {
		t.Errorf("missing connection: %v", err)
	}
}

func TestRxeCountersParse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("counters-start.txt", "rxereq rcvd_seq_err 0\nrxeresp out_of_seq_request 2\n")
	write("counters-finish.txt", "rxereq rcvd_seq_err 1\nrxeresp out_of_seq_request 3\n")
	var st rxeSwitchStatus
	st.Ports[0].RxRoCE, st.Ports[1].RxRoCE, st.Mirrored = 10, 5, 15
	cf, err := rxeCounters(dir, st)
	if err != nil {
		t.Fatal(err)
	}
	if cf.Requester.Finish["rcvd_seq_err"] != 1 || cf.Responder.Start["out_of_seq_request"] != 2 ||
		cf.Switch.RxRoCE != 15 || cf.Switch.Mirrored != 15 || len(cf.Switch.Ports) != 2 || cf.Requester.Vendor != "rxe" {
		t.Fatalf("counters %+v", cf)
	}
	write("counters-finish.txt", "rxereq rcvd_seq_err x\n")
	if _, err := rxeCounters(dir, st); err == nil || !strings.Contains(err.Error(), "counters-finish.txt:1") {
		t.Errorf("bad value: %v; want file:line", err)
	}
}

func TestVerbsResults(t *testing.T) {
	sc := rxeScenario(t, rxeWrite)
	rep := VerbsReport{Conns: []VerbsConn{
		{Index: 1, Verb: "write", ReqIP: "10.0.0.2", RespIP: "10.0.0.3", ReqQPN: 0x11, RespQPN: 0x12, Status: "ok", MCTUs: []float64{5}},
		{Index: 0, Verb: "write", ReqIP: "10.0.0.2", RespIP: "10.0.0.3", ReqQPN: 0x13, RespQPN: 0x14, Status: "ok"},
	}}
	cs, tr, err := verbsResults(sc, rep)
	if err != nil {
		t.Fatal(err)
	}
	if cs[0].QP != 1 || cs[0].RequesterQPN != 0x13 || tr[1].MCTUs[0] != 5 || tr[0].MCTUs == nil {
		t.Fatalf("conns %+v traffic %+v", cs, tr)
	}
	rep.Conns[0].ReqIP = "ten"
	if _, _, err := verbsResults(sc, rep); err == nil {
		t.Error("a bad address must be an error")
	}
}
