package hostnic

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// parseQuery turns a query's output into the values that fill a step's undo template: one map per undo
// command. The parsers and the formats they read:
//
//	ip-addrs                 `ip -o -4|-6 addr show dev IF`: {addr} per address (one undo each)
//	mlxreg:FIELD             `mlxreg -d PCI --reg_name ROCE_ACCL --get`: {value} of FIELD, decimal
//	mlnx-trust               `mlnx_qos -i IF`: {trust} from "Priority trust state: X"
//	mlnx-dscp2prio:D         `mlnx_qos -i IF`: {prio} DSCP D maps to in "dscp2prio mapping"
//	mlnx-ets                 `mlnx_qos -i IF`: {prio2tc} {tsa} {bw} from the "tc: N ... tsa: T[, bw: B%]" blocks
//	ethtool-priv-flag:FLAG   `ethtool --show-priv-flags IF`: {value} (on/off) of FLAG
//	lldp-ets                 `lldptool -t -i IF -V ETS-CFG -c willing -c up2tc -c tsa -c tcbw`: key=value lines
func parseQuery(parser string, out []byte) ([]map[string]string, error) {
	name, arg, _ := strings.Cut(parser, ":")
	switch name {
	case "ip-addrs":
		addrs, err := ParseIPAddrs(out)
		if err != nil {
			return nil, err
		}
		fills := make([]map[string]string, len(addrs))
		for i, a := range addrs {
			fills[i] = map[string]string{"addr": a.String()}
		}
		return fills, nil
	case "mlxreg":
		v, err := ParseMlxregField(out, arg)
		if err != nil {
			return nil, err
		}
		return []map[string]string{{"value": strconv.FormatUint(v, 10)}}, nil
	case "mlnx-trust", "mlnx-dscp2prio", "mlnx-ets":
		q, err := ParseMlnxQos(out)
		if err != nil {
			return nil, err
		}
		switch name {
		case "mlnx-trust":
			if q.Trust == "" {
				return nil, fmt.Errorf("mlnx_qos printed no \"Priority trust state\" line")
			}
			return []map[string]string{{"trust": q.Trust}}, nil
		case "mlnx-dscp2prio":
			d, err := strconv.Atoi(arg)
			if err != nil || d < 0 || d > 63 {
				return nil, fmt.Errorf("parser %q: bad DSCP", parser)
			}
			if q.DSCP2Prio[d] < 0 {
				return nil, fmt.Errorf("mlnx_qos printed no priority for DSCP %d, so its mapping could not be restored", d)
			}
			return []map[string]string{{"prio": strconv.Itoa(q.DSCP2Prio[d])}}, nil
		default:
			p2t, tsa, bw, err := q.ETSArgs()
			if err != nil {
				return nil, err
			}
			return []map[string]string{{"prio2tc": p2t, "tsa": tsa, "bw": bw}}, nil
		}
	case "ethtool-priv-flag":
		v, err := ParsePrivFlag(out, arg)
		if err != nil {
			return nil, err
		}
		return []map[string]string{{"value": v}}, nil
	case "lldp-ets":
		kv := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if ok {
				kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		fill := map[string]string{}
		for _, k := range []string{"willing", "up2tc", "tsa", "tcbw"} {
			v, ok := kv[k]
			if !ok {
				return nil, fmt.Errorf("lldptool printed no %s= line", k)
			}
			fill[k] = v
		}
		return []map[string]string{fill}, nil
	case "lldp-app":
		present, err := lldpAppHas(out, arg)
		if err != nil {
			return nil, err
		}
		if present {
			// Configured before the run: the run leaves it as it found it, so no undo.
			return nil, nil
		}
		return []map[string]string{{}}, nil
	}
	return nil, fmt.Errorf("unknown query parser %q", parser)
}

// ParseIPAddrs reads `ip -o addr show` lines ("2: eth0    inet 10.0.0.2/24 brd ... scope global eth0\ ...")
// and returns every address with its prefix length, in order.
func ParseIPAddrs(out []byte) ([]netip.Prefix, error) {
	var addrs []netip.Prefix
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for j := 0; j+1 < len(f); j++ {
			if f[j] != "inet" && f[j] != "inet6" {
				continue
			}
			p, err := netip.ParsePrefix(f[j+1])
			if err != nil {
				return nil, fmt.Errorf("ip addr show line %d: %q is not an address with prefix length", i+1, f[j+1])
			}
			addrs = append(addrs, p)
			break
		}
	}
	return addrs, nil
}

// ParseMlxregField reads `mlxreg --get` output ("field_name | 0x00000001" rows) and returns field's value.
func ParseMlxregField(out []byte, field string) (uint64, error) {
	for i, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "|")
		if !ok || strings.TrimSpace(k) != field {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 0, 64)
		if err != nil {
			return 0, fmt.Errorf("mlxreg line %d: %s value %q is not a number", i+1, field, strings.TrimSpace(v))
		}
		return n, nil
	}
	return 0, fmt.Errorf("mlxreg printed no %s field", field)
}

// MlnxQos is what `mlnx_qos -i IF` prints that a plan changes.
type MlnxQos struct {
	Trust     string  // pcp or dscp
	DSCP2Prio [64]int // -1 = not listed
	// TCs are the traffic classes listed, each with its TSA (ets, strict, vendor), ETS weight and priorities.
	TCs []MlnxTC
}

// MlnxTC is one "tc: N ratelimit: ..., tsa: T, bw: B%" block and its "priority: P" lines.
type MlnxTC struct {
	TC         int
	TSA        string
	BW         int
	Priorities []int
}

// ParseMlnxQos reads `mlnx_qos -i IF` output (MLNX_OFED's tool; see testdata/mlnx_qos-*.txt).
func ParseMlnxQos(out []byte) (MlnxQos, error) {
	var q MlnxQos
	for i := range q.DSCP2Prio {
		q.DSCP2Prio[i] = -1
	}
	inDSCP := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		bad := func(what string) error { return fmt.Errorf("mlnx_qos line %d: %s: %q", n, what, line) }
		switch {
		case strings.HasPrefix(line, "Priority trust state:"):
			q.Trust = strings.TrimSpace(strings.TrimPrefix(line, "Priority trust state:"))
			inDSCP = false
		case strings.HasPrefix(line, "dscp2prio mapping"):
			inDSCP = true
		case inDSCP && strings.HasPrefix(line, "prio:"):
			ps, ds, ok := strings.Cut(strings.TrimPrefix(line, "prio:"), " dscp:")
			prio, err := strconv.Atoi(strings.TrimSpace(ps))
			if !ok || err != nil || prio < 0 || prio > 7 {
				return q, bad("not a prio:P dscp:D,... line")
			}
			for _, d := range strings.Split(strings.TrimSpace(ds), ",") {
				if d == "" {
					continue
				}
				v, err := strconv.Atoi(d)
				if err != nil || v < 0 || v > 63 {
					return q, bad("DSCP " + d + " is not 0..63")
				}
				q.DSCP2Prio[v] = prio
			}
		case strings.HasPrefix(line, "tc:"):
			inDSCP = false
			f := strings.Fields(strings.NewReplacer(",", " ", "%", "").Replace(line))
			tc := MlnxTC{TC: -1}
			for j := 0; j+1 < len(f); j++ {
				switch f[j] {
				case "tc:":
					v, err := strconv.Atoi(f[j+1])
					if err != nil || v < 0 || v > 7 {
						return q, bad("traffic class is not 0..7")
					}
					tc.TC = v
				case "tsa:":
					tc.TSA = f[j+1]
				case "bw:":
					v, err := strconv.Atoi(f[j+1])
					if err != nil || v < 0 || v > 100 {
						return q, bad("bw is not 0..100%")
					}
					tc.BW = v
				}
			}
			if tc.TC < 0 || tc.TSA == "" {
				return q, bad("a tc line without its number or tsa")
			}
			q.TCs = append(q.TCs, tc)
		case strings.HasPrefix(line, "priority:") && len(q.TCs) > 0:
			v, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "priority:")))
			if err != nil || v < 0 || v > 7 {
				return q, bad("priority is not 0..7")
			}
			q.TCs[len(q.TCs)-1].Priorities = append(q.TCs[len(q.TCs)-1].Priorities, v)
		default:
			if line != "" && !strings.HasPrefix(line, "prio:") {
				inDSCP = false
			}
		}
	}
	return q, sc.Err()
}

// ETSArgs renders the ETS state as mlnx_qos -p, -s and -t arguments (8 entries each). Classes mlnx_qos did
// not list carry no priority; they get "strict" and 0% so the ETS weights still sum as before.
func (q MlnxQos) ETSArgs() (prio2tc, tsa, bw string, err error) {
	if len(q.TCs) == 0 {
		return "", "", "", fmt.Errorf("mlnx_qos printed no traffic classes, so ETS could not be restored")
	}
	p2t := make([]string, 8)
	ts := slices.Repeat([]string{"strict"}, 8)
	bws := slices.Repeat([]string{"0"}, 8)
	for _, tc := range q.TCs {
		ts[tc.TC] = tc.TSA
		bws[tc.TC] = strconv.Itoa(tc.BW)
		for _, p := range tc.Priorities {
			p2t[p] = strconv.Itoa(tc.TC)
		}
	}
	for p, v := range p2t {
		if v == "" {
			return "", "", "", fmt.Errorf("mlnx_qos listed no traffic class for priority %d, so ETS could not be restored", p)
		}
	}
	return strings.Join(p2t, ","), strings.Join(ts, ","), strings.Join(bws, ","), nil
}

// ParsePrivFlag reads `ethtool --show-priv-flags IF` ("flag-name : on") and returns flag's value.
func ParsePrivFlag(out []byte, flag string) (string, error) {
	for i, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != flag {
			continue
		}
		v = strings.TrimSpace(v)
		if v != "on" && v != "off" {
			return "", fmt.Errorf("ethtool line %d: %s is %q; expected on or off", i+1, flag, v)
		}
		return v, nil
	}
	return "", fmt.Errorf("ethtool printed no private flag %s (not an ice/E810 interface?)", flag)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lldpAppLine is one locally configured entry of `lldptool -t -i IF -V APP -c app` (openlldp's get_arg_app):
// "I:(PRIO,SEL,PROTO) local hw (set)"; PROTO is hexadecimal (0x8906) for selector 1. Peer entries say "peer".
var lldpAppLine = regexp.MustCompile(`^\d+:\((\d+),(\d+),(0x[0-9a-fA-F]+|\d+)\)\s+local\b`)

// lldpAppHas reports whether the APP table lldptool printed holds the local entry want ("PRIO,SEL,PROTO").
func lldpAppHas(out []byte, want string) (bool, error) {
	header := false
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasSuffix(line, "(prio,sel,proto)") {
			header = true
			continue
		}
		m := lldpAppLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		proto, err := strconv.ParseUint(m[3], 0, 16)
		if err != nil {
			return false, fmt.Errorf("lldptool APP entry %q: protocol %v", line, err)
		}
		if m[1]+","+m[2]+","+strconv.FormatUint(proto, 10) == want {
			found = true
		}
	}
	if !header {
		return false, fmt.Errorf("lldptool printed no APP table (no \"(prio,sel,proto)\" line), so whether %s was configured before is unknown", want)
	}
	return found, nil
}
