package summary

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lumina-go/lumina/trace"
)

// CheckDumperDrops is the integrity condition, beside the four of seed 001 section 3.6, that no dumper
// reported dropping packets (the live dumper's DUMP.stats.json beside its pcap).
const CheckDumperDrops = "dumpers-dropped-nothing"

// CheckDumpsWhole fails when a dump is cut short in the middle of a packet (its writer was stopped).
const CheckDumpsWhole = "dumps-whole"

// SwitchCounts are the switch's counters the integrity check compares the trace with; trace.CountUnknown for
// a counter that is not available.
type SwitchCounts struct {
	Mirrored uint64
	RxRoCE   uint64
	// Source names where they came from (a counters.json, a switch-result YAML).
	Source string
}

// UnknownCounts is SwitchCounts when no switch counters are available.
var UnknownCounts = SwitchCounts{Mirrored: trace.CountUnknown, RxRoCE: trace.CountUnknown}

// Integrity is the integrity check of Lumina dumps analyzed directly (merged by mirror sequence number).
type Integrity struct {
	// OK is true when every condition that could be checked holds.
	OK bool `json:"ok"`
	// Checks are the conditions: the four of the paper, then the dumpers' own drop reports when present. A
	// condition that needs what was not given (the switch's counters) is skipped, never passed.
	Checks []trace.CheckResult `json:"checks"`
	// Counters names the switch counters used, empty when none were found.
	Counters string `json:"counters,omitempty"`
	// Hint says what the failure most likely means.
	Hint string `json:"hint,omitempty"`
}

// Counted says how many conditions hold, in lumina analyze's words: "3/4 conditions hold, 1 not checked".
func (in *Integrity) Counted() string {
	ok, skipped := 0, 0
	for _, c := range in.Checks {
		switch {
		case c.OK:
			ok++
		case c.Skipped:
			skipped++
		}
	}
	counted := fmt.Sprintf("%d/%d conditions hold", ok, len(in.Checks))
	if skipped > 0 {
		counted += fmt.Sprintf(", %d not checked", skipped)
	}
	return counted
}

// dumperStats is what the integrity check reads of a live dumper's stats file.
type dumperStats struct {
	KernelDrops uint64 `json:"kernel_drops"`
	FreezeQ     uint64 `json:"kernel_freeze_q"`
	Malformed   uint64 `json:"ring_malformed"`
	BufferFull  uint64 `json:"buffer_full_drop"`
	Complete    *bool  `json:"complete"`
}

// StatsPath is where a live dumper writes the stats of the dump at pcapPath.
func StatsPath(pcapPath string) string {
	return strings.TrimSuffix(pcapPath, ".pcap") + ".stats.json"
}

// DumperDrops checks the stats files beside the dumps (those that have one): nil when none has, else the
// condition, failed when a dumper reports a drop or an incomplete dump.
func DumperDrops(paths []string) *trace.CheckResult {
	var problems []string
	seen := 0
	for _, p := range paths {
		b, err := os.ReadFile(StatsPath(p))
		if err != nil {
			continue
		}
		seen++
		var st dumperStats
		if err := json.Unmarshal(b, &st); err != nil {
			problems = append(problems, fmt.Sprintf("%s: unreadable: %v", StatsPath(p), err))
			continue
		}
		if n := st.KernelDrops + st.FreezeQ + st.Malformed + st.BufferFull; n > 0 || (st.Complete != nil && !*st.Complete) {
			msg := fmt.Sprintf("%s reports %d kernel drops, %d ring freezes, %d malformed ring entries, %d buffer-full drops",
				filepath.Base(p), st.KernelDrops, st.FreezeQ, st.Malformed, st.BufferFull)
			if st.Complete != nil && !*st.Complete {
				msg += ", and that its dump is incomplete"
			}
			problems = append(problems, msg)
		}
	}
	if seen == 0 {
		return nil
	}
	r := &trace.CheckResult{Name: CheckDumperDrops, OK: len(problems) == 0}
	if r.OK {
		r.Detail = fmt.Sprintf("%d dumper stats files report no drops", seen)
	} else {
		r.Detail = strings.Join(problems, "; ")
	}
	return r
}

// finishIntegrity turns the checker's verdict into the capture's: unknown counters skip their conditions.
func finishIntegrity(ic *trace.IntegrityChecker, counts SwitchCounts, paths []string, packets int64) *Integrity {
	in := ic.Finish(counts.Mirrored, counts.RxRoCE)
	res := &Integrity{OK: true, Counters: counts.Source}
	for _, c := range in.Checks {
		if (c.Name == trace.CheckCountEqualsMirrored && counts.Mirrored == trace.CountUnknown) ||
			(c.Name == trace.CheckCountEqualsRx && counts.RxRoCE == trace.CountUnknown) {
			c.Skipped = true
			c.Detail = strings.Replace(c.Detail, "cannot compare", "not checked", 1) +
				" (give the switch's counters with --counters, or analyze the results directory)"
		}
		res.Checks = append(res.Checks, c)
		res.OK = res.OK && (c.OK || c.Skipped)
	}
	if d := DumperDrops(paths); d != nil {
		res.Checks = append(res.Checks, *d)
		res.OK = res.OK && d.OK
	}
	if seq := res.Checks[0]; !seq.OK && packets > 0 {
		res.Hint = "mirror sequence numbers are missing: the packets of the missing numbers are not in these files. " +
			"The switch spreads its mirrored copies over its dumpers: give every dumper's file; if they are all here, " +
			"the dumpers lost packets"
		if len(paths) == 1 {
			res.Hint = "mirror sequence numbers are missing from this one file: the other dumper's packets are missing " +
				"(the switch spreads its mirrored copies over its dumpers: give every dumper's file), or the dumper lost them"
		}
	}
	return res
}
