package scenario

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/lumina-go/lumina/roce"
)

// maxFileSize bounds what Load reads; scenarios are small text files.
const maxFileSize = 16 << 20

// Load reads and validates the scenario file at path.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("reading scenario %s: %d bytes is too large; expected at most %d", path, len(data), maxFileSize)
	}
	return Parse(data, path)
}

// Parse validates a scenario held in memory; name is used in error messages and as Scenario.Path.
// The error, if any, is an Errors listing every problem found.
func Parse(data []byte, name string) (*Scenario, error) {
	d := &decoder{file: name, anchors: map[string]ast.Node{}}
	if off, ok := binaryAt(data); ok {
		// Never echo binary bytes back: say where the text stops being text.
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		d.errAt(line, 1, "", "byte offset %d is 0x%02x, not text: this is not a YAML scenario file", off, data[off])
		return nil, d.errs
	}
	s := d.parse(data)
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	s.Path = name
	s.IgnoredKeys = d.ignoredStrings()
	return s, nil
}

// binaryAt returns the offset of the first byte that makes data not a text file: invalid UTF-8, or a control
// character other than tab, newline and carriage return.
func binaryAt(data []byte) (int, bool) {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if (r == utf8.RuneError && n == 1) || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return i, true
		}
		i += n
	}
	return 0, false
}

// Top-level keys.
var (
	topKeys = []string{"testbed", "seed", "index-base", "rewrite-udp-dst-port", "requester", "responder",
		"traffic", "network", "events", "expect", "workload",
		// reference format, hardware only (requester-mirror/responder-mirror snap-len is used)
		"local-workspace", "result-path", "aggregate-pcap-filename", "num-repeats", "switch",
		"requester-mirror", "responder-mirror"}
	referenceOnlyTopKeys = []string{"local-workspace", "result-path", "aggregate-pcap-filename", "num-repeats",
		"switch", "requester-mirror", "responder-mirror"}
	switchKeys = []string{"sde-path", "workspace", "control-ip", "username", "ssh-key-filepath", "port-speed",
		"fec-type", "listen-port", "local-switch-config-path"}
	mirrorKeys        = []string{"username", "control-ip", "workspace", "ssh-key-filepath", "pkt-dump-conf", "nic"}
	pktDumpKeys       = []string{"dump-filename", "snap-len", "num-pkts"}
	mirrorNICKeys     = []string{"if-name", "pci-addr", "switch-port", "rte-port-id", "type"}
	hostKeys          = []string{"nic", "roce-parameters", "workspace", "control-ip", "username", "ssh-key-filepath"}
	nicKeys           = []string{"type", "ip-list", "prio-dscp-map", "ets", "if-name", "pci-addr", "ib-device", "ib-port", "switch-port"}
	roceKeys          = []string{"dcqcn-rp-enable", "dcqcn-np-enable", "min-time-between-cnps", "adaptive-retrans", "slow-restart", "dcqcn-enable"}
	etsKeys           = []string{"dscp-to-tc", "traffic-classes"}
	tcKeys            = []string{"tc", "weight", "strict"}
	networkKeys       = []string{"link-gbps", "propagation-ns", "switch-latency-ns", "dumpers", "dumper-weights", "snap-len", "event-table-capacity", "run-timeout-ms", "switch-clock-start-ns"}
	trafficKeys       = []string{"num-connections", "num-qps", "rdma-verb", "num-msgs-per-qp", "mtu", "message-size", "multi-gid", "barrier-sync", "tx-depth", "min-retransmit-timeout", "max-retransmit-retry", "rnr-retry", "dscp-list", "data-pkt-events", "listen-port", "initial-psn"}
	testbeds          = []string{"sim", "netns", "rxe-vm", "remote"}
	referenceNICNames = map[string]string{"cx4": "cx4lx", "cx5": "cx5", "cx6": "cx6dx", "e810": "e810"}
	profileNames      = []string{"collie-f", "cx4lx", "cx5", "cx6dx", "cx6vpi-200g", "e810", "ideal", "irn", "p2100g", "rxe"}
)

// deferred holds what can only be checked once the whole file is read (the index base, the traffic shape).
type deferred struct {
	events    []val // entries of traffic.data-pkt-events then events
	expects   []val
	indexBase *val
	snapLens  []val // network.snap-len and the mirrors' pkt-dump-conf.snap-len
	numConns  *val
	barrier   *val
}

func defaultScenario() *Scenario {
	return &Scenario{
		Format:            FormatLuminaGo,
		Testbed:           "sim",
		Seed:              DefaultSeed,
		IndexBase:         1,
		RewriteUDPDstPort: DefaultRewriteUDPDstPort,
		Requester: Host{
			NIC:            NIC{Type: DefaultNICType, IPList: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}},
			RoCEParameters: RoCEParameters{DCQCNRPEnable: true, DCQCNNPEnable: true},
		},
		Responder: Host{
			NIC:            NIC{Type: DefaultNICType, IPList: []netip.Prefix{netip.MustParsePrefix("10.0.0.3/24")}},
			RoCEParameters: RoCEParameters{DCQCNRPEnable: true, DCQCNNPEnable: true},
		},
		Traffic: Traffic{
			NumConnections:       DefaultNumConnections,
			Verb:                 VerbWrite,
			NumMsgsPerQP:         DefaultNumMsgsPerQP,
			MTU:                  DefaultMTU,
			MessageSize:          DefaultMessageSize,
			TxDepth:              DefaultTxDepth,
			MinRetransmitTimeout: DefaultMinRetransmitTO,
			MaxRetransmitRetry:   DefaultMaxRetransmitRetry,
			RNRRetry:             DefaultRNRRetry,
			DSCPList:             []int{},
		},
		Network: Network{
			PropagationNs:      DefaultPropagationNs,
			SwitchLatencyNs:    DefaultSwitchLatencyNs,
			Dumpers:            DefaultDumpers,
			DumperWeights:      []int{1, 1},
			SnapLen:            DefaultSnapLen,
			EventTableCapacity: DefaultEventTableCapacity,
			RunTimeoutMs:       DefaultRunTimeoutMs,
		},
		Events: []Event{},
		Expect: []Expectation{},
	}
}

func (d *decoder) parse(data []byte) *Scenario {
	s := defaultScenario()
	root, ok := d.root(data)
	if !ok {
		return s
	}
	fields, _ := d.fields(root)
	var df deferred
	var wl *val // the workload section, if any
	hostVals := [2]val{root, root}
	netVal := root
	for _, f := range fields {
		if slices.Contains(referenceOnlyTopKeys, f.key) {
			s.Format = FormatLumina
		}
		switch f.key {
		case "testbed":
			if t, ok := d.oneOf(f.v, testbeds...); ok {
				s.Testbed = t
			}
		case "seed":
			if n, ok := seedOf(f.v); ok {
				s.Seed = n
			} else {
				d.errv(f.v, "%s is not a valid seed; expected an integer in 0..18446744073709551615", show(f.v.n))
			}
		case "index-base":
			v := f.v
			df.indexBase = &v
		case "rewrite-udp-dst-port":
			if p, ok := d.intIn(f.v, 1, 65535); ok {
				if p == 4791 {
					d.errv(f.v, "4791 is the RoCEv2 port itself; expected another UDP port (default %d)", DefaultRewriteUDPDstPort)
				} else {
					s.RewriteUDPDstPort = p
				}
			}
		case "requester":
			d.host(f.v, &s.Requester, &d.remote.Requester)
			hostVals[0] = f.v
		case "responder":
			d.host(f.v, &s.Responder, &d.remote.Responder)
			hostVals[1] = f.v
		case "traffic":
			d.traffic(f.v, &s.Traffic, &df)
		case "network":
			d.network(f.v, &s.Network, &df)
			netVal = f.v
		case "events":
			its, _ := d.items(f.v)
			df.events = append(df.events, its...)
		case "expect":
			its, _ := d.items(f.v)
			df.expects = append(df.expects, its...)
		case "workload":
			s.Workload = d.workload(f.v)
			fv := f.v
			wl = &fv
		case "local-workspace", "result-path", "aggregate-pcap-filename", "num-repeats":
			d.ignore(f)
		case "switch":
			d.switchSection(f.v)
		case "requester-mirror", "responder-mirror":
			d.mirror(f.v, f.key, &df)
		default:
			d.unknown(f, topKeys)
		}
	}
	// A round trip longer than the retransmission timeout makes every timeout spurious, and the checkers, which
	// see each ACK at the switch, cannot tell when the requester got it: no verdict would be right.
	if t := s.Traffic.MinRetransmitTimeout; t > 0 && s.Workload == nil && !d.anyFailed("network.link-gbps",
		"network.propagation-ns", "network.switch-latency-ns", "traffic.min-retransmit-timeout", "traffic.mtu") {
		timeoutNs := int64(4096) << t
		rtt := 2 * (2*s.Network.PropagationNs + s.Network.SwitchLatencyNs)
		if g := s.Network.LinkGbps; g > 0 {
			// A data packet and its ACK, each stored and forwarded by the switch: four MTU serializations.
			rtt += int64(4 * float64(s.Traffic.MTU+100) * 8 / g)
		}
		if 2*rtt > timeoutNs {
			d.errv(netVal, "link-gbps %g, propagation-ns %d and switch-latency-ns %d make a round trip of %.3f ms, more than half the retransmission timeout %.3f ms (min-retransmit-timeout %d); expected a round trip below half the timeout",
				s.Network.LinkGbps, s.Network.PropagationNs, s.Network.SwitchLatencyNs, float64(rtt)/1e6, float64(timeoutNs)/1e6, t)
		}
	}
	// Two hosts with one address: every packet would go to one of them.
	for _, a := range s.Requester.NIC.IPList {
		for _, b := range s.Responder.NIC.IPList {
			if a.Addr() == b.Addr() {
				at := hostVals[1]
				if at.n == root.n {
					at = hostVals[0]
				}
				d.errv(at, "requester and responder both have the address %s; expected distinct addresses (ip-list)", a.Addr())
			}
		}
	}
	// The data-pkt-events of traffic come first whatever the key order, as the documentation says.
	slices.SortStableFunc(df.events, func(a, b val) int {
		return boolRank(!strings.HasPrefix(a.path, "traffic.")) - boolRank(!strings.HasPrefix(b.path, "traffic."))
	})
	if wl != nil {
		// The micro-architecture model has no event injector and runs only on the simulated testbed.
		if len(df.events) > 0 {
			d.errv(*wl, "a workload cannot be combined with events; expected either a workload section or traffic with events")
		}
		if s.Testbed != "sim" {
			d.errv(*wl, "a workload runs on the simulated testbed only; expected testbed: sim (it is %s)", s.Testbed)
		}
	}
	d.finish(s, &df)
	return s
}

// root parses the file and returns its one document's top-level mapping; a syntax error, no document, a
// second document or a top level that is not a mapping is reported, and ok is false.
func (d *decoder) root(data []byte) (root val, ok bool) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		d.syntaxError(err)
		return val{}, false
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		d.errAt(1, 1, "", "the file is empty; expected a scenario mapping (testbed, requester, responder, traffic, ...)")
		return val{}, false
	}
	if len(docs) > 1 {
		l, c := nodePos(docs[1].Body)
		d.errAt(l, c, "", "a second YAML document; expected exactly one scenario per file")
		return val{}, false
	}
	d.collectAnchors(docs[0], 0)
	root = d.mkval(docs[0].Body, "", 1, 1)
	if _, ok := root.n.(*ast.MappingNode); !ok {
		d.errv(root, "%s is not a mapping; expected a scenario mapping (testbed, requester, responder, traffic, ...)", show(root.n))
		return val{}, false
	}
	return root, true
}

// seedOf reads a seed: an integer in 0..2^64-1.
func seedOf(v val) (uint64, bool) {
	if x, ok := v.n.(*ast.IntegerNode); ok {
		switch n := x.Value.(type) {
		case int64:
			if n >= 0 {
				return uint64(n), true
			}
		case uint64:
			return n, true
		}
	}
	return 0, false
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d *decoder) mirror(v val, role string, df *deferred) {
	h := RemoteHost{Role: role}
	defer func() {
		// requester-mirror is dumper 0 whatever the key order.
		if role == "requester-mirror" {
			d.remote.Dumpers = append([]RemoteHost{h}, d.remote.Dumpers...)
		} else {
			d.remote.Dumpers = append(d.remote.Dumpers, h)
		}
	}()
	fields, _ := d.fields(v)
	for _, f := range fields {
		switch f.key {
		case "pkt-dump-conf":
			sub, _ := d.fields(f.v)
			for _, g := range sub {
				switch g.key {
				case "snap-len":
					df.snapLens = append(df.snapLens, g.v)
				case "dump-filename", "num-pkts":
					d.ignore(g)
				case "max-packets":
					d.remoteKey(g, &h, false)
				default:
					d.unknown(g, append(slices.Clone(pktDumpKeys), "max-packets"))
				}
			}
		case "nic":
			nf, _ := d.fields(f.v)
			for _, g := range nf {
				switch {
				case g.key == "if-name" || g.key == "pci-addr" || g.key == "switch-port":
					d.remoteKey(g, &h, true)
				case slices.Contains(mirrorNICKeys, g.key):
					d.ignore(g)
				default:
					d.unknown(g, mirrorNICKeys)
				}
			}
		default:
			if slices.Contains(remoteHostKeys, f.key) {
				d.remoteKey(f, &h, false)
			} else if slices.Contains(mirrorKeys, f.key) {
				d.ignore(f)
			} else {
				d.unknown(f, append(slices.Clone(mirrorKeys), remoteOnlyKeys[:3]...))
			}
		}
	}
}

func (d *decoder) host(v val, h *Host, rh *RemoteHost) {
	fields, _ := d.fields(v)
	for _, f := range fields {
		switch {
		case f.key == "nic":
			d.nic(f.v, &h.NIC, rh)
		case f.key == "roce-parameters":
			d.roce(f.v, &h.RoCEParameters)
		case f.key != "max-packets" && d.remoteKey(f, rh, false):
		default:
			d.unknown(f, append(slices.Clone(hostKeys), remoteOnlyKeys[:3]...))
		}
	}
}

func (d *decoder) nic(v val, n *NIC, rh *RemoteHost) {
	fields, _ := d.fields(v)
	for _, f := range fields {
		switch {
		case f.key == "type":
			if t, ok := d.nicType(f.v); ok {
				n.Type = t
			}
		case f.key == "ip-list":
			if l, ok := d.ipList(f.v); ok {
				n.IPList = l
			}
		case f.key == "prio-dscp-map":
			if m, ok := d.prioDSCP(f.v); ok {
				n.PrioDSCPMap = m
			}
		case f.key == "ets":
			if e, ok := d.ets(f.v); ok {
				n.ETS = e
			}
		case d.remoteKey(f, rh, true):
		default:
			d.unknown(f, nicKeys)
		}
	}
}

func (d *decoder) nicType(v val) (string, bool) {
	expected := "a profile name (CX4, CX5, CX6, E810, " + strings.Join(profileNames, ", ") + ") or a profile file ending .yaml or .yml"
	s, ok := d.str(v, expected)
	if !ok {
		return "", false
	}
	ls := strings.ToLower(s)
	if p, ok := referenceNICNames[ls]; ok {
		return p, true
	}
	if slices.Contains(profileNames, ls) {
		return ls, true
	}
	if strings.HasSuffix(ls, ".yaml") || strings.HasSuffix(ls, ".yml") {
		return s, true
	}
	d.errv(v, "%q is not a known NIC profile; expected %s", s, expected)
	return "", false
}

func (d *decoder) ipList(v val) ([]netip.Prefix, bool) {
	items, ok := d.items(v)
	if !ok {
		return nil, false
	}
	if len(items) == 0 {
		d.errv(v, "the list is empty; expected at least one IPv4 address with prefix length such as 10.0.0.2/24")
		return nil, false
	}
	out := make([]netip.Prefix, 0, len(items))
	good := true
	for _, it := range items {
		s, ok := d.str(it, "an IPv4 address with prefix length such as 10.0.0.2/24")
		if !ok {
			good = false
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			d.errv(it, "%q is not an IPv4 prefix; expected an IPv4 address with prefix length such as 10.0.0.2/24", s)
			good = false
			continue
		}
		if slices.Contains(out, p) {
			d.errv(it, "%s is listed twice; expected distinct addresses", p)
			good = false
			continue
		}
		out = append(out, p)
	}
	return out, good
}

// prioDSCP reads the reference's prio-dscp-map: priority -> "07,06,05" (or a list of DSCP values).
func (d *decoder) prioDSCP(v val) (map[int][]int, bool) {
	fields, ok := d.fields(v)
	if !ok {
		return nil, false
	}
	out := map[int][]int{}
	seen := map[int]string{}
	good := true
	for _, f := range fields {
		prio, err := strconv.Atoi(f.key)
		if err != nil || prio < 0 || prio > 7 {
			d.errAt(f.kline, f.kcol, f.v.path, "%q is not a priority; expected an integer in 0..7", f.key)
			good = false
			continue
		}
		var dscps []int
		if s, isStr := f.v.n.(*ast.StringNode); isStr {
			for i, part := range strings.Split(s.Value, ",") {
				x, err := strconv.Atoi(strings.TrimSpace(part))
				if err != nil || x < 0 || x > 63 {
					d.errv(f.v, "item %d %q is not a DSCP value; expected comma-separated integers in 0..63", i, part)
					good = false
					continue
				}
				dscps = append(dscps, x)
			}
		} else {
			its, ok := d.items(f.v)
			if !ok {
				good = false
				continue
			}
			for _, it := range its {
				if x, ok := d.intIn(it, 0, 63); ok {
					dscps = append(dscps, x)
				} else {
					good = false
				}
			}
		}
		for _, x := range dscps {
			if p, dup := seen[x]; dup {
				d.errv(f.v, "DSCP %d is already mapped by priority %s; expected each DSCP value under one priority", x, p)
				good = false
			}
			seen[x] = f.key
		}
		out[prio] = dscps
	}
	return out, good
}

func (d *decoder) ets(v val) (*ETS, bool) {
	fields, ok := d.fields(v)
	if !ok {
		return nil, false
	}
	e := &ETS{DSCPToTC: map[int]int{}}
	good := true
	var classesVal *val
	var mapVals []val
	for _, f := range fields {
		switch f.key {
		case "dscp-to-tc":
			sub, ok := d.fields(f.v)
			good = good && ok
			for _, g := range sub {
				dscp, err := strconv.Atoi(g.key)
				if err != nil || dscp < 0 || dscp > 63 {
					d.errAt(g.kline, g.kcol, g.v.path, "%q is not a DSCP value; expected an integer in 0..63", g.key)
					good = false
					continue
				}
				tc, ok := d.intIn(g.v, 0, 7)
				if !ok {
					good = false
					continue
				}
				e.DSCPToTC[dscp] = tc
				mapVals = append(mapVals, g.v)
			}
		case "traffic-classes":
			fv := f.v
			classesVal = &fv
			its, ok := d.items(f.v)
			good = good && ok
			for _, it := range its {
				c, ok := d.trafficClass(it, e.Classes)
				if ok {
					e.Classes = append(e.Classes, c)
				} else {
					good = false
				}
			}
		default:
			d.unknown(f, etsKeys)
			good = false
		}
	}
	if good && len(e.Classes) == 0 {
		if classesVal != nil {
			d.errv(*classesVal, "the list is empty; expected at least one {tc, weight} or {tc, strict: true} class")
		} else {
			d.errv(v, "traffic-classes is missing; expected a list of {tc, weight} or {tc, strict: true} classes")
		}
		return nil, false
	}
	for _, mv := range mapVals {
		tc, _ := intOf(mv.n)
		if !slices.ContainsFunc(e.Classes, func(c TrafficClass) bool { return c.TC == int(tc) }) {
			d.errv(mv, "traffic class %d is not declared; expected a tc listed in traffic-classes", tc)
			good = false
		}
	}
	return e, good
}

func (d *decoder) trafficClass(v val, prev []TrafficClass) (TrafficClass, bool) {
	fields, ok := d.fields(v)
	if !ok {
		return TrafficClass{}, false
	}
	var c TrafficClass
	hasTC, hasWeight, good := false, false, true
	for _, f := range fields {
		switch f.key {
		case "tc":
			x, ok := d.intIn(f.v, 0, 7)
			good = good && ok
			if ok && slices.ContainsFunc(prev, func(p TrafficClass) bool { return p.TC == x }) {
				d.errv(f.v, "tc %d is declared twice; expected each traffic class once", x)
				good = false
			}
			c.TC, hasTC = x, ok
		case "weight":
			x, ok := d.intIn(f.v, 1, 100)
			good = good && ok
			c.Weight, hasWeight = x, true
		case "strict":
			b, ok := d.boolean(f.v)
			good = good && ok
			c.Strict = b
		default:
			d.unknown(f, tcKeys)
			good = false
		}
	}
	if !good {
		return c, false
	}
	switch {
	case !hasTC:
		d.errv(v, "tc is missing; expected a traffic class number in 0..7")
	case hasWeight && c.Strict:
		d.errv(v, "both weight and strict: true; expected one of them")
	case !hasWeight && !c.Strict:
		d.errv(v, "neither weight nor strict: true; expected one of them")
	default:
		return c, true
	}
	return c, false
}

func (d *decoder) roce(v val, r *RoCEParameters) {
	fields, _ := d.fields(v)
	for _, f := range fields {
		switch f.key {
		case "dcqcn-rp-enable":
			if b, ok := d.boolean(f.v); ok {
				r.DCQCNRPEnable = b
			}
		case "dcqcn-np-enable":
			if b, ok := d.boolean(f.v); ok {
				r.DCQCNNPEnable = b
			}
		case "min-time-between-cnps":
			if x, ok := d.floatIn(f.v, 0, 1e9); ok {
				r.MinTimeBetweenCNPsUs = &x
			}
		case "adaptive-retrans":
			if b, ok := d.boolean(f.v); ok {
				r.AdaptiveRetrans = b
			}
		case "slow-restart":
			if b, ok := d.boolean(f.v); ok {
				r.SlowRestart = b
			}
		case "dcqcn-enable":
			if b, ok := d.boolean(f.v); ok {
				r.DCQCNEnable = &b
			}
		default:
			d.unknown(f, roceKeys)
		}
	}
}

func (d *decoder) traffic(v val, t *Traffic, df *deferred) {
	fields, _ := d.fields(v)
	for _, f := range fields {
		switch f.key {
		case "num-connections", "num-qps":
			if df.numConns != nil {
				d.errAt(f.kline, f.kcol, f.v.path, "the number of connections is already given at line %d; expected one of num-connections or num-qps", df.numConns.line)
				continue
			}
			fv := f.v
			df.numConns = &fv
		case "rdma-verb":
			if verb, ok := d.oneOf(f.v, VerbWrite, VerbSend, VerbRead, VerbSendRead); ok {
				t.Verb = verb
			}
		case "num-msgs-per-qp":
			if x, ok := d.intIn(f.v, 1, 1<<20); ok {
				t.NumMsgsPerQP = x
			}
		case "mtu":
			x, isInt := intOf(f.v.n)
			switch {
			case !isInt:
				d.errv(f.v, "%s is not a valid path MTU; expected one of 256, 512, 1024, 2048, 4096", show(f.v.n))
			case !roce.ValidMTU(int(x)):
				d.errv(f.v, "%d is not a valid path MTU; expected one of 256, 512, 1024, 2048, 4096", x)
			default:
				t.MTU = int(x)
			}
		case "message-size":
			if x, ok := d.intIn(f.v, 1, 1<<31-1); ok {
				t.MessageSize = x
			}
		case "multi-gid":
			if b, ok := d.boolean(f.v); ok {
				t.MultiGID = b
			}
		case "barrier-sync":
			if b, ok := d.boolean(f.v); ok {
				t.BarrierSync = b
				fv := f.v
				df.barrier = &fv
			}
		case "tx-depth":
			if x, ok := d.intIn(f.v, 1, 4096); ok {
				t.TxDepth = x
			}
		case "min-retransmit-timeout":
			if x, ok := d.intIn(f.v, 0, 31); ok {
				t.MinRetransmitTimeout = x
			}
		case "max-retransmit-retry":
			if x, ok := d.intIn(f.v, 0, 7); ok {
				t.MaxRetransmitRetry = x
			}
		case "rnr-retry":
			if x, ok := d.intIn(f.v, 0, 7); ok {
				t.RNRRetry = x
			}
		case "dscp-list":
			its, _ := d.items(f.v)
			list := []int{}
			for _, it := range its {
				if x, ok := d.intIn(it, 0, 63); ok {
					list = append(list, x)
				}
			}
			t.DSCPList = list
		case "initial-psn":
			if x, ok := d.intIn(f.v, 0, 1<<24-1); ok {
				t.InitialPSN = &x
			}
		case "data-pkt-events":
			its, _ := d.items(f.v)
			df.events = append(df.events, its...)
		case "listen-port":
			d.ignore(f)
		default:
			d.unknown(f, trafficKeys)
		}
	}
}

// maxConnections is the most connections a scenario may ask for (issue 17: 65,536, in time and memory linear
// in the number; the reference tops out near 511). It bounds expansion of `qpn: all` and the simulator's state.
const maxConnections = 65536

// minSnapLen is the shortest mirrored copy that keeps every header the analyzers read (Ethernet, two VLAN
// tags, IPv6, UDP, BTH, RETH, ImmDt: 102 bytes), rounded to the reference's default, 128.
const minSnapLen = 128

// numConnections applies num-connections once the verb is known ("a,b" only for send_read).
func (d *decoder) numConnections(v val, t *Traffic) {
	if s, ok := v.n.(*ast.StringNode); ok && t.Verb == VerbSendRead {
		a, b, found := strings.Cut(s.Value, ",")
		na, errA := strconv.Atoi(strings.TrimSpace(a))
		nb, errB := strconv.Atoi(strings.TrimSpace(b))
		if !found || errA != nil || errB != nil || na < 0 || nb < 0 || na+nb < 1 || na+nb > maxConnections {
			d.errv(v, "%q is not a send,read pair; expected \"SENDS,READS\" such as \"2,2\" with 1..%d QPs in total", s.Value, maxConnections)
			return
		}
		t.NumSendQPs, t.NumReadQPs, t.NumConnections = na, nb, na+nb
		return
	}
	if t.Verb == VerbSendRead {
		d.errv(v, "%s is not a send,read pair; expected \"SENDS,READS\" such as \"2,2\" for rdma-verb send_read", show(v.n))
		return
	}
	if x, ok := d.intIn(v, 1, maxConnections); ok {
		t.NumConnections = x
	}
}

func (d *decoder) network(v val, n *Network, df *deferred) {
	fields, _ := d.fields(v)
	var dumpers, weights *val
	for _, f := range fields {
		switch f.key {
		case "link-gbps":
			if x, ok := d.floatIn(f.v, 0, 100000); ok {
				n.LinkGbps = x
			}
		case "propagation-ns":
			if x, ok := d.intIn(f.v, 0, 1e9); ok {
				n.PropagationNs = int64(x)
			}
		case "switch-latency-ns":
			if x, ok := d.intIn(f.v, 0, 1e9); ok {
				n.SwitchLatencyNs = int64(x)
			}
		case "dumpers":
			if x, ok := d.intIn(f.v, 1, 64); ok {
				fv := f.v
				dumpers = &fv
				n.Dumpers = x
				n.DumperWeights = slices.Repeat([]int{1}, x)
			}
		case "dumper-weights":
			its, ok := d.items(f.v)
			if !ok {
				continue
			}
			if len(its) == 0 || len(its) > 64 {
				d.errv(f.v, "%d weights; expected 1..64 positive integers, one per dumper", len(its))
				continue
			}
			w := make([]int, 0, len(its))
			for _, it := range its {
				if x, ok := d.intIn(it, 1, 1000); ok {
					w = append(w, x)
				}
			}
			if len(w) == len(its) {
				fv := f.v
				weights = &fv
				n.DumperWeights = w
			}
		case "snap-len":
			df.snapLens = append(df.snapLens, f.v)
		case "event-table-capacity":
			if x, ok := d.intIn(f.v, 1, 1<<16); ok {
				n.EventTableCapacity = x
			}
		case "run-timeout-ms":
			if x, ok := d.intIn(f.v, 1, 86400000); ok {
				n.RunTimeoutMs = int64(x)
			}
		case "switch-clock-start-ns":
			if x, ok := d.intIn(f.v, 0, 1<<48-1); ok {
				n.SwitchClockStartNs = int64(x)
			}
		default:
			d.unknown(f, networkKeys)
		}
	}
	if weights != nil {
		if dumpers != nil && n.Dumpers != len(n.DumperWeights) {
			d.errv(*weights, "%d weights for %d dumpers; expected one weight per dumper", len(n.DumperWeights), n.Dumpers)
		}
		n.Dumpers = len(n.DumperWeights)
	}
}

// finish applies what depends on the whole file: index base, connections, snap length, events, expectations.
func (d *decoder) finish(s *Scenario, df *deferred) {
	if s.Format == FormatLumina {
		s.IndexBase = 0
	}
	if df.indexBase != nil {
		if x, ok := d.intIn(*df.indexBase, 0, 1); ok {
			s.IndexBase = x
		}
	}
	if df.numConns != nil {
		d.numConnections(*df.numConns, &s.Traffic)
	} else if s.Traffic.Verb == VerbSendRead {
		s.Traffic.NumSendQPs, s.Traffic.NumReadQPs, s.Traffic.NumConnections = 1, 1, 2
	}
	t := &s.Traffic
	if t.BarrierSync && t.TxDepth != 1 && df.barrier != nil {
		d.errv(*df.barrier, "barrier-sync needs tx-depth 1 (it is %d); expected tx-depth: 1 or barrier-sync: false", t.TxDepth)
	}
	var first *val
	for i := range df.snapLens {
		v := df.snapLens[i]
		if n, isInt := intOf(v.n); isInt && n >= 0 && n < minSnapLen {
			d.errv(v, "snap length %d is too short; expected %d..65535: a shorter copy loses the transport headers (RETH, AETH) the analyzers need", n, minSnapLen)
			continue
		}
		x, ok := d.intIn(v, minSnapLen, 65535)
		if !ok {
			continue
		}
		if first != nil && x != s.Network.SnapLen {
			d.errv(v, "snap length %d differs from %d given at line %d; expected one snap length for all dumpers", x, s.Network.SnapLen, first.line)
			continue
		}
		first = &df.snapLens[i]
		s.Network.SnapLen = x
	}
	d.remoteFinish(s)
	// Events and expectations name connections, messages and packets: checked against a traffic section that
	// was rejected, they would only repeat its error.
	if !d.anyFailed("traffic.num-connections", "traffic.num-qps", "traffic.rdma-verb", "traffic.num-msgs-per-qp",
		"traffic.mtu", "traffic.message-size", "index-base") {
		d.events(s, df.events)
		for _, v := range df.expects {
			if e, ok := d.expectation(v, s); ok {
				s.Expect = append(s.Expect, e)
			}
		}
	}
	slices.SortStableFunc(d.errs, func(a, b *Error) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
}
