// Package analyze runs Lumina's built-in analyzers over a trace in one streaming pass: the retransmission
// logic checkers (go-back-N for Write/Send and for Read, IRN's selective repeat) written as state machines of
// the specification in docs/spec/nic-behaviors.md §1, the retransmission latency breakdown, the CNP analyzer
// (limiter scope and interval inference), the NIC counter cross-check and the traffic analyzer.
//
// The input is a trace.Reader: a simulated run's trace.pcapng, a Lumina-tagged dump from real hardware, or a
// plain capture. Connections come from Options.Conns or, when nil, are learned from the trace (the two
// directions of each QP pair are paired by PSN: a response pairs, of the unpaired connections between its
// hosts whose requests its PSN fits, the one seen first; never a CNP, which has no PSN; the initial PSN is the first data PSN seen).
//
// Delivery: with mirror metadata (Lumina's TTL/MAC encoding, or a "event=..." pcapng comment) a packet with
// event drop or corrupt was not delivered. A plain capture has no such knowledge, so every captured packet is
// assumed delivered; losses are then inferred from retransmissions (the PSN a go-back-N round restarts from,
// every PSN IRN resends, the PSN a READ is re-issued from).
//
// A plain capture is also judged leniently where it cannot know better: data PSNs it skips with nothing
// retransmitted are counted as capture gaps (assumed sent and delivered), an ACK that runs ahead of the captured
// data is not a violation (a host capture's order across directions is not the wire's), and completeness is not
// required unless the connection's packet total is given (the capture may have stopped mid-flight).
//
// Everything is linear in the number of packets: per-connection state is kept in slices indexed by the PSN's
// distance from the connection's initial PSN, never by rescanning the trace.
package analyze
