package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/lumina-go/lumina/refdir"
)

// Reference prints the analysis of a reference Lumina results directory: per repetition, the integrity
// conditions, the checks, the retransmissions with the reference's latency breakdown (next delivered packet
// delay, NACK generation and reaction, total) and the counter checks.
func Reference(w io.Writer, d *refdir.Document) {
	fmt.Fprintf(w, "reference  %s  (configuration %s, %d repetition(s))\n", d.Dir, d.Config, len(d.Iterations))
	for _, it := range d.Iterations {
		fmt.Fprintf(w, "\nrepetition %s  (%s)\n", it.Iteration, strings.Join(it.Pcaps, ", "))
		ok := 0
		for _, c := range it.Integrity.Checks {
			if c.OK {
				ok++
			}
		}
		if it.Integrity.OK {
			fmt.Fprintf(w, "integrity  ok (%d/%d checks)\n", ok, len(it.Integrity.Checks))
		} else {
			fmt.Fprintf(w, "integrity  INVALID TEST (%d/%d checks pass): nothing was analyzed\n", ok, len(it.Integrity.Checks))
		}
		integrityConditions(w, it.Integrity.Checks)
		if it.Analysis != nil && it.Integrity.OK {
			a := it.Analysis
			fmt.Fprintf(w, "trace      %d packets (%d RoCE)\n", a.Packets, a.RoCEPackets)
			checks(w, a.Checks, 5)
			skipped(w, a.Skipped)
			retransmissions(w, a.Retransmissions, 20)
			cnp(w, &a.CNP)
			counters(w, a.Counters)
		}
		fmt.Fprintf(w, "verdict    %s\n", strings.ToUpper(it.Verdict))
	}
	fmt.Fprintf(w, "\n%s\n", strings.ToUpper(d.Verdict))
}
