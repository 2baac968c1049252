package trace

import (
	"fmt"
	"strings"

	"github.com/lumina-go/lumina/roce"
)

// Names of the four integrity checks (seed 001, section 3.6), in report order.
const (
	CheckConsecutiveSeq      = "consecutive-mirror-seq"
	CheckTimestampsIncrease  = "timestamps-increasing"
	CheckCountEqualsMirrored = "count-equals-mirrored"
	CheckCountEqualsRx       = "count-equals-rx"
)

// CountUnknown passed to Finish means the switch counter is not available;
// the check it feeds then fails with a detail saying so, since completeness
// cannot be shown.
const CountUnknown = ^uint64(0)

// CheckResult is the verdict of one integrity condition.
type CheckResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Skipped marks a condition that could not be checked (what it needs was not given); OK is false then.
	Skipped bool `json:"skipped,omitempty"`
}

// Integrity is the verdict on a reconstructed trace: OK only if every check is.
type Integrity struct {
	OK     bool          `json:"ok"`
	Checks []CheckResult `json:"checks"`
}

// IntegrityOptions configures an IntegrityChecker.
type IntegrityOptions struct {
	Seq           SeqSpace // mirror sequence space; zero means Seq48
	TimestampBits uint     // width of the mirror timestamp; 0 means 48, 64 means no wrap
	ToleranceNs   uint64   // how far a timestamp may fall behind the latest one; default 0
}

// IntegrityChecker runs the integrity check incrementally over a merged trace:
// Add each packet's mirror metadata in trace order, then Finish.
type IntegrityChecker struct {
	opts IntegrityOptions
	mask uint64 // timestamp mask
	n    uint64

	// consecutive-mirror-seq
	firstSeq, prevSeq uint64
	gaps, missing     uint64
	dups, backs, outs uint64
	seqProblem        string

	// timestamps-increasing
	refTs           uint64 // latest timestamp not behind its predecessors
	refIdx          int
	wraps           uint64
	decreases       uint64
	tolerated       uint64
	tsProblem       string
	haveTs, haveSeq bool
}

// NewIntegrityChecker returns a checker; an invalid sequence space or
// timestamp width falls back to the defaults (48 bits).
func NewIntegrityChecker(opts IntegrityOptions) *IntegrityChecker {
	opts.Seq = opts.Seq.norm()
	if opts.Seq.Validate() != nil {
		opts.Seq = Seq48
	}
	if opts.TimestampBits == 0 || opts.TimestampBits > 64 {
		opts.TimestampBits = 48
	}
	mask := ^uint64(0)
	if opts.TimestampBits < 64 {
		mask = 1<<opts.TimestampBits - 1
	}
	return &IntegrityChecker{opts: opts, mask: mask}
}

// Add feeds the packet at index in the merged trace.
func (c *IntegrityChecker) Add(index int, m roce.Mirror) {
	c.n++
	c.addSeq(index, m.Seq)
	c.addTs(index, m.TimestampNs&c.mask)
}

func (c *IntegrityChecker) addSeq(index int, seq uint64) {
	sp := c.opts.Seq
	if !sp.Contains(seq) {
		c.outs++
		if c.seqProblem == "" {
			c.seqProblem = fmt.Sprintf("seq %d at trace packet %d is outside the sequence space %d..%d", seq, index, sp.Min, sp.Max)
		}
		return
	}
	if !c.haveSeq {
		c.haveSeq, c.firstSeq, c.prevSeq = true, seq, seq
		return
	}
	prev := c.prevSeq
	switch d := sp.Diff(prev, seq); {
	case d == 1:
	case d > 1:
		c.gaps++
		c.missing += uint64(d - 1)
		if c.seqProblem == "" {
			c.seqProblem = fmt.Sprintf("seq %d follows %d at trace packet %d", seq, prev, index)
		}
	case d == 0:
		c.dups++
		if c.seqProblem == "" {
			c.seqProblem = fmt.Sprintf("seq %d repeats at trace packet %d", seq, index)
		}
	default:
		c.backs++
		if c.seqProblem == "" {
			c.seqProblem = fmt.Sprintf("seq %d follows %d at trace packet %d, going backwards", seq, prev, index)
		}
	}
	c.prevSeq = seq
}

func (c *IntegrityChecker) addTs(index int, ts uint64) {
	if !c.haveTs {
		c.haveTs, c.refTs, c.refIdx = true, ts, index
		return
	}
	fwd := (ts - c.refTs) & c.mask
	if fwd <= c.mask/2 {
		if ts < c.refTs {
			c.wraps++
		}
		c.refTs, c.refIdx = ts, index
		return
	}
	behind := (c.refTs - ts) & c.mask
	if behind <= c.opts.ToleranceNs {
		c.tolerated++
		return
	}
	c.decreases++
	if c.tsProblem == "" {
		c.tsProblem = fmt.Sprintf("timestamp %d ns at trace packet %d is %d ns before %d ns at trace packet %d", ts, index, behind, c.refTs, c.refIdx)
	}
}

// Finish returns the four checks. switchMirrored is the number of copies the
// switch mirrored and switchRoCERx the number of RoCE packets its ports
// received; pass CountUnknown for a counter that is not available.
func (c *IntegrityChecker) Finish(switchMirrored, switchRoCERx uint64) Integrity {
	checks := []CheckResult{c.seqCheck(), c.tsCheck(),
		c.countCheck(CheckCountEqualsMirrored, switchMirrored, "switch mirrored %d", "switch mirrored-packet counter unknown"),
		c.countCheck(CheckCountEqualsRx, switchRoCERx, "switch ports received %d RoCE packets", "switch RoCE RX counters unknown"),
	}
	ok := true
	for _, ch := range checks {
		ok = ok && ch.OK
	}
	return Integrity{OK: ok, Checks: checks}
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func (c *IntegrityChecker) seqCheck() CheckResult {
	r := CheckResult{Name: CheckConsecutiveSeq}
	if c.seqProblem == "" {
		r.OK = true
		if c.n == 0 {
			r.Detail = "no packets"
		} else {
			r.Detail = fmt.Sprintf("%s, seq %d to %d consecutive", plural(c.n, "packet", "packets"), c.firstSeq, c.prevSeq)
		}
		return r
	}
	parts := []string{plural(c.gaps, "gap", "gaps") + ", " + plural(c.missing, "packet missing", "packets missing")}
	if c.dups > 0 {
		parts = append(parts, plural(c.dups, "duplicate", "duplicates"))
	}
	if c.backs > 0 {
		parts = append(parts, plural(c.backs, "backward step", "backward steps"))
	}
	if c.outs > 0 {
		parts = append(parts, plural(c.outs, "seq out of range", "seqs out of range"))
	}
	r.Detail = c.seqProblem + "; " + strings.Join(parts, ", ")
	return r
}

func (c *IntegrityChecker) tsCheck() CheckResult {
	r := CheckResult{Name: CheckTimestampsIncrease}
	extra := ""
	if c.wraps > 0 {
		extra += ", " + plural(c.wraps, "wrap-around", "wrap-arounds")
	}
	if c.tolerated > 0 {
		extra += fmt.Sprintf(", %s within the %d ns tolerance", plural(c.tolerated, "step back", "steps back"), c.opts.ToleranceNs)
	}
	if c.tsProblem == "" {
		r.OK = true
		if c.n == 0 {
			r.Detail = "no packets"
		} else {
			r.Detail = fmt.Sprintf("%s, timestamps non-decreasing (tolerance %d ns)%s", plural(c.n, "packet", "packets"), c.opts.ToleranceNs, extra)
		}
		return r
	}
	r.Detail = fmt.Sprintf("%s; %s%s", c.tsProblem, plural(c.decreases, "decrease", "decreases"), extra)
	return r
}

func (c *IntegrityChecker) countCheck(name string, want uint64, what, unknown string) CheckResult {
	r := CheckResult{Name: name}
	have := plural(c.n, "packet", "packets")
	switch {
	case want == CountUnknown:
		r.Detail = fmt.Sprintf("trace has %s; cannot compare: %s", have, unknown)
	case c.n == want:
		r.OK = true
		r.Detail = fmt.Sprintf("trace has %s, "+what, have, want)
	case c.n < want:
		r.Detail = fmt.Sprintf("trace has %s, "+what+" (%d missing)", have, want, want-c.n)
	default:
		r.Detail = fmt.Sprintf("trace has %s, "+what+" (%d extra)", have, want, c.n-want)
	}
	return r
}
