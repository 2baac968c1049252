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
		judged(w, it.Integrity, it.Analysis)
		fmt.Fprintf(w, "verdict    %s\n", strings.ToUpper(it.Verdict))
	}
	fmt.Fprintf(w, "\n%s\n", strings.ToUpper(d.Verdict))
}
