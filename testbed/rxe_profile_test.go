package testbed

import (
	"math"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/verdict"

	"github.com/lumina-go/lumina/scenario"
)

// The rxe profile on the simulator reproduces what real Soft-RoCE did in our rxe-vm runs (kernel 7.3.4; the
// runs and their figures are in docs/nic-setup.md): the same packets on the wire, the same counter changes under
// rxe's own names, the same triggers, and its timer. Each case is the rxe-vm scenario with testbed sim and
// type rxe.
func TestRxeProfileReproducesMeasuredRxe(t *testing.T) {
	const hosts = `
testbed: sim
requester: {nic: {type: rxe, ip-list: [10.0.0.2/24]}}
responder: {nic: {type: rxe, ip-list: [10.0.0.3/24]}}
`
	type delta map[string]uint64
	cases := []struct {
		name, traffic, events string
		packets               int // measured on rxe-vm: packets in the trace
		req, resp             delta
		check                 func(t *testing.T, o *verdict.Outcome)
	}{
		{"write drop: one NAK, go back N", // measured: rxe-vm write-drop
			"{num-connections: 1, rdma-verb: write, num-msgs-per-qp: 20, mtu: 1024, message-size: 10240, min-retransmit-timeout: 18}",
			"[{qpn: 1, psn: 5, type: drop, iter: 1}]", 227,
			delta{"sent_pkts": 206, "rcvd_pkts": 21, "rcvd_seq_err": 1}, delta{"sent_pkts": 21, "rcvd_pkts": 205, "out_of_seq_request": 1},
			func(t *testing.T, o *verdict.Outcome) {
				r := o.Doc.Retransmissions
				if len(r) != 1 || r[0].Trigger == nil || *r[0].Trigger != "nack" {
					t.Errorf("retransmissions %+v; want one, triggered by a NAK", r)
				}
				if o.Doc.CNP.CNPs != 0 {
					t.Errorf("%d CNPs with the NAK; rxe sends none", o.Doc.CNP.CNPs)
				}
			}},
		{"tail drop: timeout after 4.096 us x 2^14, whole message resent, every duplicate ACKed", // measured: tail14
			"{num-connections: 1, rdma-verb: write, num-msgs-per-qp: 1, mtu: 1024, message-size: 10240, min-retransmit-timeout: 14}",
			"[{qpn: 1, psn: 10, type: drop, iter: 1}]", 30,
			delta{"sent_pkts": 20, "rcvd_pkts": 10}, delta{"sent_pkts": 10, "rcvd_pkts": 19, "duplicate_request": 9},
			func(t *testing.T, o *verdict.Outcome) {
				to := o.Doc.Timeouts
				if len(to) != 1 || to[0].Timeouts != 1 || len(to[0].TimeoutIntervalsUs) != 1 {
					t.Fatalf("timeouts %+v; want one", to)
				}
				// rxe: nsecs_to_jiffies(4096 << 14) = 67.1 ms (measured 66.7 ms under TCG).
				if got := to[0].TimeoutIntervalsUs[0]; math.Abs(got-4.096*(1<<14)) > 0.01*4.096*(1<<14) {
					t.Errorf("timeout %.1f us; want 4.096 us x 2^14 = 67108.9 us", got)
				}
			}},
		{"ECN marks: no CNP at all", // measured: ecn
			"{num-connections: 1, rdma-verb: write, num-msgs-per-qp: 5, mtu: 1024, message-size: 10240, min-retransmit-timeout: 18}",
			"[{qpn: 1, psn: 3, type: ecn, iter: 1}, {qpn: 1, psn: 13, type: ecn, iter: 1}, {qpn: 1, psn: 14, type: ecn, iter: 1}]", 55,
			delta{"sent_pkts": 50, "rcvd_pkts": 5}, delta{"sent_pkts": 5, "rcvd_pkts": 50},
			func(t *testing.T, o *verdict.Outcome) {
				c := o.Doc.CNP
				if c.ECNMarked != 3 || c.CNPs != 0 || c.Expected == nil || *c.Expected != 0 {
					t.Errorf("cnp %+v; want 3 CE marks, 0 CNPs, 0 expected", c)
				}
			}},
		{"READ drop: no re-issue until the timer", // measured: read-drop
			"{num-connections: 1, rdma-verb: read, num-msgs-per-qp: 5, mtu: 1024, message-size: 10240, min-retransmit-timeout: 18}",
			"[{qpn: 1, psn: 5, type: drop, iter: 1}]", 62,
			delta{"sent_pkts": 6, "rcvd_pkts": 55}, delta{"sent_pkts": 56, "rcvd_pkts": 6, "duplicate_request": 1},
			func(t *testing.T, o *verdict.Outcome) {
				r := o.Doc.Retransmissions
				if len(r) != 1 || r[0].NACKGenerationUs == nil {
					t.Fatalf("retransmissions %+v; want one re-issue", r)
				}
				// measured 1105 ms under TCG for 4.096 us x 2^18 = 1073.7 ms: the gap is not acted on.
				if g := *r[0].NACKGenerationUs; g < 4.096*(1<<18)*0.99 {
					t.Errorf("READ re-issued %.0f us after the loss; rxe waits for its %.0f us timer", g, 4.096*(1<<18))
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte(hosts+"traffic: "+tc.traffic+"\nevents: "+tc.events+"\n"), "rxe.yaml")
			if err != nil {
				t.Fatal(err)
			}
			o, err := runJudged(sc, Options{OutDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if o.Doc.Verdict != verdict.Pass {
				t.Errorf("verdict %s; want pass (checks and counters consistent)", o.Doc.Verdict)
			}
			if o.Doc.Packets != tc.packets {
				t.Errorf("%d packets in the trace; rxe-vm had %d", o.Doc.Packets, tc.packets)
			}
			for _, h := range []struct {
				name string
				hc   resultsdir.HostCounters
				want delta
			}{{"requester", o.Counters.Requester, tc.req}, {"responder", o.Counters.Responder, tc.resp}} {
				if h.hc.Vendor != "rxe" {
					t.Errorf("%s vendor %q; want rxe", h.name, h.hc.Vendor)
				}
				for name, f := range h.hc.Finish {
					if d := f - h.hc.Start[name]; d != h.want[name] {
						t.Errorf("%s %s changed by %d; rxe-vm: %d", h.name, name, d, h.want[name])
					}
				}
			}
			// The counter analyzer checks rxe's own names against the trace.
			checked := map[string]bool{}
			for _, c := range o.Doc.Counters {
				if c.Actual != nil && c.OK {
					checked[c.Host+"/"+c.Name] = true
				}
			}
			for _, k := range []string{"requester/rcvd_seq_err", "responder/out_of_seq_request", "responder/duplicate_request"} {
				if !checked[k] {
					t.Errorf("counter %s was not checked against the trace: %+v", k, o.Doc.Counters)
				}
			}
			tc.check(t, o)
		})
	}
}
