package hostnic

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strconv"
	"strings"
)

// notCounters are files in hw_counters that are settings, not counters.
var notCounters = map[string]bool{"lifespan": true}

// ReadCounters reads cfg's NIC counters from every source the vendor has and merges them under the vendor's
// names (the counters.json "start"/"finish" map). Sources, by vendor:
//
//	nvidia: sysfs hw_counters, sysfs counters, rdma statistic, ethtool -S IF
//	intel:  sysfs hw_counters, rdma statistic, ethtool -S IF
//	rxe:    sysfs hw_counters, rdma statistic, ethtool -S PARENT (skipped, and listed in Snapshot.Skipped, only
//	        when ethtool says the parent netdev has no statistics)
//
// A name found in several sources keeps the value of the first in SourceOrder (hw_counters, counters, rdma
// statistic, ethtool). The sysfs counters directory is optional (RoCE devices without port counters have
// none); so is hw_counters when the port exists without it (a non-initial network namespace shows none: the
// counters come from rdma statistic, and Snapshot.Skipped says so); every other source must be readable. An
// unreadable single sysfs attribute (some return EINVAL on RoCE ports) is skipped and listed in
// Snapshot.Skipped.
func ReadCounters(ctx context.Context, r Runner, cfg Config) (Snapshot, error) {
	if err := validate(&cfg); err != nil {
		return Snapshot{}, err
	}
	host := cfg.Host
	if host == "" {
		host = "local host"
	}
	fail := func(src string, err error) (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("hostnic: %s: counters from %s: %w", host, src, err)
	}
	snap := Snapshot{Values: map[string]uint64{}, Source: map[string]string{}}
	merge := func(src string, vals []Counter) {
		for _, c := range vals {
			if _, dup := snap.Values[c.Name]; !dup {
				snap.Values[c.Name] = c.Value
				snap.Source[c.Name] = src
			}
		}
	}
	port := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/", cfg.IBDevice, cfg.IBPort)
	for _, d := range []struct {
		src, dir string
		optional bool
	}{{SourceHWCounters, port + "hw_counters", false}, {SourceCounters, port + "counters", true}} {
		if d.src == SourceCounters && cfg.Vendor != VendorNVIDIA {
			continue
		}
		vals, skipped, err := readSysfsDir(r, d.dir)
		if err != nil {
			if d.optional && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			// In a network namespace other than the initial one the kernel shows the device's port without
			// hw_counters (and counters): the same counters then come from rdma statistic (netlink).
			if errors.Is(err, fs.ErrNotExist) {
				if _, serr := r.ReadFile(port + "state"); serr == nil {
					snap.Skipped = append(snap.Skipped, d.dir+": not shown (a non-initial network namespace); rdma statistic gives its counters")
					continue
				}
			}
			return fail(d.src, err)
		}
		snap.Skipped = append(snap.Skipped, skipped...)
		merge(d.src, vals)
	}
	link := fmt.Sprintf("%s/%d", cfg.IBDevice, cfg.IBPort)
	out, err := r.Run(ctx, []string{"rdma", "statistic", "show", "link", link})
	if err != nil {
		return fail(SourceRdmaStat, explain("rdma statistic show link "+link, err))
	}
	vals, err := ParseRdmaStatistic(out)
	if err != nil {
		return fail(SourceRdmaStat, err)
	}
	merge(SourceRdmaStat, vals)
	if len(snap.Values) == 0 {
		return fail(SourceRdmaStat, fmt.Errorf("no counter of %s in sysfs or rdma statistic", link))
	}
	ifname := cfg.IfName
	if cfg.Vendor == VendorRxe {
		ifname = cfg.Parent
	}
	out, err = r.Run(ctx, []string{"ethtool", "-S", ifname})
	if err != nil {
		if cfg.Vendor == VendorRxe && ethtoolNoStats(err) {
			// rxe's parent netdev may have no driver statistics at all (loopback, some virtual devices): its
			// counters are rxe's own. Any other failure (no ethtool, no such device, ...) is an error.
			snap.Skipped = append(snap.Skipped, "ethtool -S "+ifname+": no stats available (the parent netdev has no statistics)")
			return snap, nil
		}
		return fail(SourceEthtool, explain("ethtool -S "+ifname, err))
	}
	vals, err = ParseEthtoolS(out)
	if err != nil {
		return fail(SourceEthtool, err)
	}
	merge(SourceEthtool, vals)
	return snap, nil
}

// ethtoolNoStats: `ethtool -S` on a netdev whose driver has no statistics prints "no stats available" on
// standard error and exits 94 (ethtool's do_gnicstats; seen with ethtool 6.1 on lo). OSRunner's error carries
// both.
func ethtoolNoStats(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() != 94 {
		return false
	}
	return strings.Contains(err.Error(), "no stats available")
}

// Counter is one named counter value.
type Counter struct {
	Name  string
	Value uint64
}

func readSysfsDir(r Runner, dir string) ([]Counter, []string, error) {
	names, err := r.ReadDir(dir)
	if err != nil {
		return nil, nil, explain(dir, err)
	}
	var out []Counter
	var skipped []string
	for _, n := range names {
		if notCounters[n] {
			continue
		}
		b, err := r.ReadFile(dir + "/" + n)
		if err != nil {
			skipped = append(skipped, dir+"/"+n+": "+err.Error())
			continue
		}
		s := strings.TrimSpace(string(b))
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%s/%s: %q is not a counter value (a non-negative integer)", dir, n, s)
		}
		out = append(out, Counter{n, v})
	}
	return out, skipped, nil
}

// ParseEthtoolS reads `ethtool -S IF` output: a "NIC statistics:" header, then "     name: value" lines.
// Lines that are not "name: value" are ignored; a value that is not a non-negative integer is an error naming
// the line.
func ParseEthtoolS(out []byte) ([]Counter, error) {
	var cs []Counter
	for i, line := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(line)
		k := strings.LastIndex(t, ": ")
		if k <= 0 || strings.HasSuffix(t, "statistics:") {
			continue
		}
		name, val := strings.TrimSpace(t[:k]), strings.TrimSpace(t[k+2:])
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ethtool -S line %d: %s: %q is not a counter value (a non-negative integer)", i+1, name, val)
		}
		cs = append(cs, Counter{name, v})
	}
	return cs, nil
}

// ParseRdmaStatistic reads `rdma statistic show link DEV/PORT` output (iproute2): per port a line "link
// DEV/PORT name value name value ...", possibly continued on indented lines, possibly followed by
// "optional-counters" and their names. Lines not starting with "link" (or continuing one) are ignored.
func ParseRdmaStatistic(out []byte) ([]Counter, error) {
	var cs []Counter
	in := false
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "link" && len(f) >= 2:
			in = true
			f = f[2:]
		case in && (line[0] == ' ' || line[0] == '\t'):
		default:
			in = false
			continue
		}
		for j := 0; j < len(f); j += 2 {
			if f[j] == "optional-counters" {
				break
			}
			if j+1 >= len(f) {
				return nil, fmt.Errorf("rdma statistic line %d: counter %s has no value", i+1, f[j])
			}
			v, err := strconv.ParseUint(f[j+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("rdma statistic line %d: %s: %q is not a counter value (a non-negative integer)", i+1, f[j], f[j+1])
			}
			cs = append(cs, Counter{f[j], v})
		}
	}
	return cs, nil
}
