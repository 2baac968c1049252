// Package live runs Lumina for real on Linux: a real-time event-injecting switch that forwards between two
// interfaces through AF_PACKET rings and drives the same inject logic as the simulator, a dumper that captures
// mirrored copies with kernel fan-out, a control plane for the generators' runtime metadata (with a learning
// mode for foreign traffic), software RNIC endpoints that drive the pure rnic QPs over raw sockets, and a netns
// testbed that wires all of them together in network namespaces.
//
// The protocol logic stays pure (inject, rnic, roce); this package owns the clocks, sockets and goroutines.
package live
