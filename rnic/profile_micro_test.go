package rnic

import (
	"strings"
	"testing"
)

// TestMicroSection: the shipped micro profiles load, the others have no micro section, and bad micro values
// are reported at their key and line.
func TestMicroSection(t *testing.T) {
	for _, n := range []string{"cx6vpi-200g", "p2100g"} {
		p := mustProfile(t, n)
		if p.Micro == nil || p.Micro.Tx.Units < 1 || p.Micro.Rx.WQECacheSize < 1 {
			t.Errorf("%s: micro section %+v", n, p.Micro)
		}
	}
	if p := mustProfile(t, "cx5"); p.Micro != nil {
		t.Errorf("cx5 has a micro section; the existing profiles must stay as they were")
	}
	base, err := profileFS.ReadFile("profiles/cx6vpi-200g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	line := func(key string) int {
		for i, l := range strings.Split(string(base), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), key+":") {
				return i + 1
			}
		}
		t.Fatalf("no %s in the profile", key)
		return 0
	}
	lineOf := func(text string) int { // the line that starts with text (line() finds a key at any depth)
		for i, l := range strings.Split(string(base), "\n") {
			if strings.HasPrefix(l, text) {
				return i + 1
			}
		}
		t.Fatalf("no line %q in the profile", text)
		return 0
	}
	for _, c := range []struct {
		from, to string
		want     string
		line     int
	}{
		{"    xoff-bytes: 32768", "    xoff-bytes: 9999999", "micro.rx.xoff-bytes", line("xoff-bytes")},
		{"    units: 8", "    units: 0", "micro.tx.units: 0: want > 0", line("units")},
		{"  max-mpps-per-qp: 24", "  max-mpps-per-qp: -3", "micro.max-mpps-per-qp: -3: want >= 0", line("max-mpps-per-qp")},
		{"    read-latency-ns: 700", "    read-latency-ns: -5", "micro.pcie.read-latency-ns: -5: want >= 0", line("read-latency-ns")},
		{"    pause-priority: 3", "    pause-priority: 9", "micro.rx.pause-priority: 9: want 0..7", line("pause-priority")},
		{"    prefetch-min: 8", "    prefetch-min: 99", "micro.rx.prefetch-min: 99 is above prefetch-max", line("prefetch-min")},
		{"    units: 8", "    unit: 8", "unknown field", line("units")},
		{"    demand-fetch-slots: 16", "    demand-fetch-slots: -1", "micro.rx.demand-fetch-slots: -1: want >= 0", line("demand-fetch-slots")},
		{"    burst-wqes: 16", "    burst-wqes: -4", "micro.tx.burst-wqes: -4: want >= 0", line("burst-wqes")},
		{"    cold-miss-fetch: 1", "    cold-miss-fetch: -1", "micro.rx.cold-miss-fetch: -1: want >= 0", line("cold-miss-fetch")},
		{"    prefetch-grow: 2", "    prefetch-grow: -2", "micro.rx.prefetch-grow: -2: want >= 0", line("prefetch-grow")},
		{"    fetch-engines: 8", "    fetch-engines: -1", "micro.rx.fetch-engines: -1: want >= 0", line("fetch-engines")},
		{"    evict-wqe-ns: 20", "    evict-wqe-ns: -2", "micro.rx.evict-wqe-ns: -2: want >= 0", line("evict-wqe-ns")},
		{"    gpu-same-switch-write-gbps: 120", "    gpu-same-switch-write-gbps: -1",
			"micro.host.gpu-same-switch-write-gbps: -1: want >= 0", line("gpu-same-switch-write-gbps")},
		{"    gpu-cross-switch-write-gbps: 800", "    gpu-cross-switch-write-gbps: -2",
			"micro.host.gpu-cross-switch-write-gbps: -2: want >= 0", line("gpu-cross-switch-write-gbps")},
		{"    read-resp-first-ns: 2", "    read-resp-first-ns: -1", "micro.rx.read-resp-first-ns: -1: want >= 0", line("read-resp-first-ns")},
		{"    read-resp-sge-ns: 1", "    read-resp-sge-ns: -4", "micro.rx.read-resp-sge-ns: -4: want >= 0", line("read-resp-sge-ns")},
		{"    read-resp-span-bytes: 8192", "    read-resp-span-bytes: -1", "micro.rx.read-resp-span-bytes: -1: want >= 0", line("read-resp-span-bytes")},
		{"    write-tlp-bytes: 24", "    write-tlp-bytes: -1", "micro.pcie.write-tlp-bytes: -1: want >= 0", line("write-tlp-bytes")},
		{"    ordered-short-bytes: 1024", "    ordered-short-bytes: -1", "micro.pcie.ordered-short-bytes: -1: want >= 0", line("ordered-short-bytes")},
		{"    ordered-min-sge: 3", "    ordered-min-sge: -3", "micro.pcie.ordered-min-sge: -3: want >= 0", line("ordered-min-sge")},
		{"    ordered-long-bytes: 65536", "    ordered-long-bytes: -1", "micro.pcie.ordered-long-bytes: -1: want >= 0", line("ordered-long-bytes")},
		{"    ordered-long-bytes: 65536", "    ordered-long-bytes: 1024", "micro.pcie.ordered-long-bytes: 1024: want more than pcie.ordered-short-bytes (1024)", line("ordered-long-bytes")},
		{"    rx-read-queue-batch: 17", "    rx-read-queue-batch: -1", "micro.pcie.rx-read-queue-batch: -1: want >= 0", line("rx-read-queue-batch")},
		{"    prefetch-long-depth: 1024", "    prefetch-long-depth: -1", "micro.rx.prefetch-long-depth: -1: want >= 0", line("prefetch-long-depth")},
		{"    path-tlp-bytes: 24", "    path-tlp-bytes: -24", "micro.host.path-tlp-bytes: -24: want >= 0", line("path-tlp-bytes")},
		{"    gpu-same-switch-write-tlp-ns: 50", "    gpu-same-switch-write-tlp-ns: -5",
			"micro.host.gpu-same-switch-write-tlp-ns: -5: want >= 0", line("gpu-same-switch-write-tlp-ns")},
		{"    lookup-wait: [rc-write]", "    lookup-wait: [rc-write, ud-write]",
			`micro.tx.lookup-wait: entry 1, "ud-write": want one of rc-write, rc-send, rc-read, uc-write, uc-send, ud-send`, line("lookup-wait")},
		{"    large-batch-depth: 256", "    large-batch-depth: -1", "micro.rx.large-batch-depth: -1: want >= 0", line("large-batch-depth")},
		{"    cqe-bytes: 64", "    cqe-bytes: -8", "micro.rx.cqe-bytes: -8: want >= 0", line("cqe-bytes")},
		{"    max-mpps: 215", "    max-mpps: -1", "micro.rx.max-mpps: -1: want >= 0", lineOf("    max-mpps: 215")},
		{"    wqe-cache-qp-types: [ud, rc]", "    wqe-cache-qp-types: [ud, xrc]",
			`micro.rx.wqe-cache-qp-types: entry 1, "xrc": want one of rc, uc, ud`, line("wqe-cache-qp-types")},
		{"    rc-wqe-cache-max-mtu: 1024", "    rc-wqe-cache-max-mtu: -1", "micro.rx.rc-wqe-cache-max-mtu: -1: want >= 0", line("rc-wqe-cache-max-mtu")},
		{"    rc-wqe-cache-bytes: 16384", "    rc-wqe-cache-bytes: -1", "micro.rx.rc-wqe-cache-bytes: -1: want >= 0", line("rc-wqe-cache-bytes")},
		{"    wqe-bytes: 16", "    wqe-bytes: 0", "micro.rx.rc-wqe-cache-bytes: 16384 needs rx.wqe-bytes > 0", line("rc-wqe-cache-bytes")},
	} {
		data := strings.Replace(string(base), c.from, c.to, 1)
		if data == string(base) {
			t.Fatalf("%q not found in the profile", c.from)
		}
		_, err := ParseProfile("x.yaml", []byte(data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.to, err, c.want)
			continue
		}
		if pe, ok := err.(*ProfileError); !ok || pe.Line != c.line {
			t.Errorf("%s: error %v, want a ProfileError at line %d", c.to, err, c.line)
		}
	}
	// Fields only p2100g sets.
	h, err := profileFS.ReadFile("profiles/p2100g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"staging-min-mtu", "miss-fetch-bytes", "buffer-cell-bytes", "read-resp-qpc-max-mtu", "prefetch-depth-div"} {
		lines := strings.Split(string(h), "\n")
		at := 0
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), key+":") {
				at = i
				lines[i] = strings.SplitN(l, ":", 2)[0] + ": -1"
				break
			}
		}
		if at == 0 {
			t.Fatalf("no %s in p2100g.yaml", key)
		}
		_, err := ParseProfile("x.yaml", []byte(strings.Join(lines, "\n")))
		if err == nil || !strings.Contains(err.Error(), key+": -1: want >= 0") {
			t.Errorf("%s: -1: error %v, want it to name the key", key, err)
			continue
		}
		if pe, ok := err.(*ProfileError); !ok || pe.Line != at+1 {
			t.Errorf("%s: -1: error %v, want a ProfileError at line %d", key, err, at+1)
		}
	}
}
