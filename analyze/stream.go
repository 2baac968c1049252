package analyze

import "github.com/lumina-go/lumina/trace"

// Stream is Analyze fed one packet at a time, by a caller that has the packets as they come (lumina run
// analyzes the simulator's trace while it is written) rather than a trace.Reader to pull from. Fed the packets
// Analyze would read, in the same order, its Finish gives the same Analysis.
//
// A run's counters, traffic log and link rate are known only at its end, so NewStream takes the options
// without them and Finish takes them. The checkers use one thing of the counters while they read packets: the
// NICs' discard counters (a NAK for a loss inside the receiving NIC). NewStream's options say whether they
// moved; Finish reports whether the final counters agree, and when they do not, the analysis is not the one
// Analyze would give and the trace must be analyzed again.
type Stream struct {
	a *analyzer
}

// NewStream starts an analysis with opts; opts.Traffic and opts.LinkGbps are ignored (Finish gives them), and
// of opts.Counters only the discard counters' movement counts until Finish.
func NewStream(opts Options) *Stream {
	opts.Traffic, opts.LinkGbps = nil, 0
	return &Stream{a: newAnalyzer(opts)}
}

// Packet analyzes the trace's next packet; the packet is not kept after the call.
func (s *Stream) Packet(p *trace.Packet) { s.a.packet(p) }

// Finish ends the analysis with the run's final counters, traffic log and link rate (the other fields of late
// are ignored). ok is false when the final counters say a NIC discarded packets differently from what
// NewStream's options said: the result is then not Analyze's and is not returned.
func (s *Stream) Finish(late Options) (an *Analysis, ok bool) {
	if hostDiscards(late) != s.a.discards {
		return nil, false
	}
	s.a.opts.Counters, s.a.opts.Traffic, s.a.opts.LinkGbps = late.Counters, late.Traffic, late.LinkGbps
	return s.a.finish(), true
}
