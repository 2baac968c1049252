package scenario

import (
	"strings"
	"testing"
)

// TestErrorMessages pins the exact text, position and key path of each kind of error.
func TestErrorMessages(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"unknown key", "traffic:\n  mtuu: 1024\n", []string{
			"x.yaml:2:3: traffic.mtuu: unknown key; expected one of num-connections, num-qps, rdma-verb, num-msgs-per-qp, mtu, message-size, multi-gid, barrier-sync, tx-depth, min-retransmit-timeout, max-retransmit-retry, rnr-retry, dscp-list, data-pkt-events, listen-port, initial-psn"}},
		{"unknown hardware subkey", "switch:\n  sde: /x\n", []string{
			"x.yaml:2:3: switch.sde: unknown key; expected one of sde-path, workspace, control-ip, username, ssh-key-filepath, port-speed, fec-type, listen-port, local-switch-config-path, ssh-port, known-hosts, jump"}},
		{"bad mtu", "traffic:\n  num-connections: 2\n  mtu: 1000\n", []string{
			"x.yaml:3:8: traffic.mtu: 1000 is not a valid path MTU; expected one of 256, 512, 1024, 2048, 4096"}},
		{"wrong type string for int", "traffic:\n  mtu: fast\n", []string{
			`x.yaml:2:8: traffic.mtu: "fast" is not a valid path MTU; expected one of 256, 512, 1024, 2048, 4096`}},
		{"wrong type for bool", "traffic:\n  multi-gid: yes\n", []string{
			`x.yaml:2:14: traffic.multi-gid: "yes" is not a boolean; expected true or false`}},
		{"wrong type mapping for list", "traffic:\n  dscp-list: {a: 1}\n", []string{
			"x.yaml:2:14: traffic.dscp-list: a mapping is not a list; expected a list"}},
		{"out of range int", "traffic:\n  max-retransmit-retry: 8\n", []string{
			"x.yaml:2:25: traffic.max-retransmit-retry: 8 is out of range; expected an integer in 0..7"}},
		{"qpn out of range base 1", "traffic:\n  num-connections: 2\n  data-pkt-events:\n    - {qpn: 3, psn: 1, type: drop}\n", []string{
			"x.yaml:4:13: traffic.data-pkt-events[0].qpn: 3 is outside 1..2 (index-base 1)"}},
		{"qpn out of range base 0", "local-workspace: /x\ntraffic:\n  num-qps: 2\n  data-pkt-events:\n    - {qpn: 2, psn: 0, type: drop}\n", []string{
			"x.yaml:5:13: traffic.data-pkt-events[0].qpn: 2 is outside 0..1 (index-base 0)"}},
		{"psn out of range base 1", "traffic:\n  message-size: 10240\n  data-pkt-events:\n    - {qpn: 1, psn: 0, type: drop}\n", []string{
			"x.yaml:4:21: traffic.data-pkt-events[0].psn: 0 is outside 1..10 (index-base 1)"}},
		{"psn out of range base 0", "index-base: 0\ntraffic:\n  message-size: 10240\n  data-pkt-events:\n    - {qpn: 0, psn: 10, type: drop}\n", []string{
			"x.yaml:5:21: traffic.data-pkt-events[0].psn: 10 is outside 0..9 (index-base 0)"}},
		{"psn within a message", "traffic:\n  num-msgs-per-qp: 3\nevents:\n  - {qpn: 1, psn: 11, msg: 2, type: drop}\n", []string{
			"x.yaml:4:19: events[0].psn: 11 is outside 1..10 (index-base 1)"}},
		{"msg out of range", "traffic:\n  num-msgs-per-qp: 3\nevents:\n  - {qpn: 1, psn: 1, msg: 4, type: drop}\n", []string{
			"x.yaml:4:27: events[0].msg: 4 is outside 1..3 (index-base 1)"}},
		{"qpn range out of range", "traffic:\n  num-qps: 4\nevents:\n  - {qpn: 2-6, psn: 1, type: drop}\n", []string{
			"x.yaml:4:11: events[0].qpn: 6 is outside 1..4 (index-base 1)"}},
		{"qpn listed twice", "traffic:\n  num-qps: 4\nevents:\n  - {qpn: [1, 1-2], psn: 1, type: drop}\n", []string{
			"x.yaml:4:15: events[0].qpn[1]: connection 1 is named twice; expected each connection once"}},
		{"missing event keys", "traffic:\n  data-pkt-events:\n    - {psn: 1, type: drop}\n    - {qpn: 1, type: drop}\n    - {qpn: 1, psn: 1}\n", []string{
			`x.yaml:3:7: traffic.data-pkt-events[0]: qpn is missing; expected a connection number in 1..1 (index-base 1), a list, a range "A-B" or all`,
			"x.yaml:4:7: traffic.data-pkt-events[1]: psn is missing; expected a packet number in 1..10 (index-base 1) or all",
			"x.yaml:5:7: traffic.data-pkt-events[2]: type is missing; expected one of drop, ecn, corrupt, bit-error, delay, reorder, duplicate, rewrite"}},
		{"type-specific keys", "events:\n  - {qpn: 1, psn: 1, type: drop, delay-us: 5}\n  - {qpn: 1, psn: 2, type: delay}\n  - {qpn: 1, psn: 3, type: reorder, behind: 2.5}\n  - {qpn: 1, psn: 4, type: rewrite, field: ttl, value: 1}\n", []string{
			"x.yaml:2:34: events[0].delay-us: only valid with type delay; this event has type drop",
			"x.yaml:3:5: events[1]: delay-us is missing; expected the delay in microseconds (> 0) for type delay",
			"x.yaml:4:45: events[2].behind: 2.5 is not an integer; expected an integer in 1..1024",
			`x.yaml:5:44: events[3].field: "ttl" is not valid; expected one of migreq, dscp, ecn, se, pad`}},
		{"nth vs psn", "events:\n  - {qpn: 1, psn: 1, packet: ack, type: drop}\n", []string{
			"x.yaml:2:5: events[0]: nth is missing; expected the n-th ack packet of the connection (index-base 1)",
			"x.yaml:2:14: events[0].psn: not valid with packet ack; expected nth: the n-th ack packet of the connection"}},
		{"read request not at a message start", "traffic:\n  rdma-verb: read\n  data-pkt-events:\n    - {qpn: 1, psn: 2, packet: read-req, type: drop}\n", []string{
			"x.yaml:4:21: traffic.data-pkt-events[0].psn: 2 is not the first packet of a message; expected a READ request PSN 1, 11, ... (every 10 packets)"}},
		{"read request on a write", "events:\n  - {qpn: 1, psn: 1, packet: read-req, type: drop}\n", []string{
			"x.yaml:2:22: events[0].packet: read-req needs rdma-verb read or send_read (it is write); expected packet data, ack, nak or cnp"}},
		{"duplicate event", "events:\n  - {qpn: 1, psn: 1, type: drop}\n  - {qpn: 1, psn: 1, type: drop}\n", []string{
			"x.yaml:3:5: events[1]: qpn 1: the same event is already given at line 2; expected each event once"}},
		{"bad selector", "expect:\n  - path: traffic[qp=1.goodput\n    max: 3\n  - {path: \"a..b\", min: 1}\n", []string{
			"x.yaml:2:18: expect[0].path: bad selector at offset 7: '[' is not closed; expected a selector such as traffic[qp=1].goodput_gbps (keys joined by '.', list filters [*], [N] or [key=value,...])",
			`x.yaml:4:15: expect[1].path: bad selector at offset 2: "" is not a key name; expected a selector such as traffic[qp=1].goodput_gbps (keys joined by '.', list filters [*], [N] or [key=value,...])`}},
		{"bad expectations", "expect:\n  - {path: a, min: 1, max: 2}\n  - {check: gbn, qp: 9}\n  - {integrity: fine}\n  - {path: a, between: [3, 1]}\n  - {path: a, approx: {value: 1}}\n", []string{
			"x.yaml:2:5: expect[0]: 2 operators; expected exactly one of equals, not-equals, min, max, between, count, approx",
			"x.yaml:3:22: expect[1].qp: 9 is outside 1..1 (index-base 1)",
			`x.yaml:4:17: expect[2].integrity: "fine" is not valid; expected one of ok, invalid`,
			"x.yaml:5:24: expect[3].between: [3, 1] is reversed; expected [LOW, HIGH] with LOW <= HIGH",
			"x.yaml:6:23: expect[4].approx: value and tolerance are both needed; expected {value: V, tolerance: T} (T absolute, or \"P%\" relative to V)"}},
		{"yaml syntax", "traffic: [1,\n", []string{"x.yaml:1:10: invalid YAML: sequence end token ']' not found"}},
		{"duplicate key", "seed: 1\nseed: 2\n", []string{`x.yaml:2:1: invalid YAML: mapping key "seed" already defined at [1:1]`}},
		{"empty file", "", []string{"x.yaml:1:1: the file is empty; expected a scenario mapping (testbed, requester, responder, traffic, ...)"}},
		{"not a mapping", "- 1\n", []string{"x.yaml:1:1: a list is not a mapping; expected a scenario mapping (testbed, requester, responder, traffic, ...)"}},
		{"nic type and ip", "requester:\n  nic:\n    type: cx7\n    ip-list: [10.0.0.300/24]\n", []string{
			`x.yaml:3:11: requester.nic.type: "cx7" is not a known NIC profile; expected a profile name (CX4, CX5, CX6, E810, collie-f, cx4lx, cx5, cx6dx, cx6vpi-200g, e810, ideal, irn, p2100g, rxe) or a profile file ending .yaml or .yml`,
			`x.yaml:4:15: requester.nic.ip-list[0]: "10.0.0.300/24" is not an IPv4 prefix; expected an IPv4 address with prefix length such as 10.0.0.2/24`}},
		{"barrier needs tx-depth 1", "traffic:\n  barrier-sync: true\n  tx-depth: 4\n", []string{
			"x.yaml:2:17: traffic.barrier-sync: barrier-sync needs tx-depth 1 (it is 4); expected tx-depth: 1 or barrier-sync: false"}},
		{"both aliases", "traffic:\n  num-qps: 1\n  num-connections: 2\n", []string{
			"x.yaml:3:3: traffic.num-connections: the number of connections is already given at line 2; expected one of num-connections or num-qps"}},
		{"send_read needs a pair", "traffic:\n  rdma-verb: send_read\n  num-qps: 4\n", []string{
			`x.yaml:3:12: traffic.num-qps: 4 is not a send,read pair; expected "SENDS,READS" such as "2,2" for rdma-verb send_read`}},
		{"snap lengths disagree", "requester-mirror:\n  pkt-dump-conf: {snap-len: 128}\nnetwork: {snap-len: 256}\n", []string{
			"x.yaml:3:21: network.snap-len: snap length 256 differs from 128 given at line 2; expected one snap length for all dumpers"}},
		{"alias without anchor", "traffic: *nope\n", []string{
			"x.yaml:1:10: traffic: *nope is an alias with no anchor to resolve; expected an alias to an anchor defined with &NAME"}},
		{"alias name with a newline", "traffic: *\"a\\n0\"\n", []string{
			`x.yaml:1:10: traffic: "*a\n0" is an alias with no anchor to resolve; expected an alias to an anchor defined with &NAME`}},
		{"too many events", "traffic: {num-qps: 100}\nnetwork: {event-table-capacity: 150}\nevents:\n  - {qpn: all, psn: 1, type: drop}\n  - {qpn: all, psn: 2, type: drop}\n", []string{
			"x.yaml:5:5: events[1]: the events expand to more than 150 entries; expected at most network.event-table-capacity (150)"}},
		{"merge key", "traffic: &t\n  mtu: 4096\nrequester:\n  <<: *t\n", []string{
			"x.yaml:4:3: requester: << is not a plain key; expected a scalar key (merge keys are not supported)"}},
		{"ets", "requester:\n  nic:\n    ets:\n      dscp-to-tc: {26: 2}\n      traffic-classes:\n        - {tc: 1, weight: 50, strict: true}\n        - {tc: 2}\n", []string{
			"x.yaml:4:24: requester.nic.ets.dscp-to-tc.26: traffic class 2 is not declared; expected a tc listed in traffic-classes",
			"x.yaml:6:11: requester.nic.ets.traffic-classes[0]: both weight and strict: true; expected one of them",
			"x.yaml:7:11: requester.nic.ets.traffic-classes[1]: neither weight nor strict: true; expected one of them"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "x.yaml")
			if err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(c.want) {
				t.Fatalf("%d errors:\n%s\nwant %d:\n%s", len(got), err, len(c.want), strings.Join(c.want, "\n"))
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("error %d\n got %s\nwant %s", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	src := "testbed: lab\ntraffic:\n  mtu: 9000\n  tx-depth: 0\nnetwork:\n  dumpers: 0\nbogus: 1\n"
	_, err := Parse([]byte(src), "x.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	wantPrefixes := []string{"x.yaml:1:10: testbed:", "x.yaml:3:8: traffic.mtu:", "x.yaml:4:13: traffic.tx-depth:", "x.yaml:6:12: network.dumpers:", "x.yaml:7:1: bogus:"}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("%d errors, want %d:\n%s", len(lines), len(wantPrefixes), err)
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("error %d = %q; want prefix %q", i, lines[i], p)
		}
	}
}
