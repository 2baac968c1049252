// Package verbs is Lumina's RDMA traffic generator: RC connections between a client (the requester) and a
// server (the responder) through libibverbs, set up over TCP, reported to the switch's control plane before
// any traffic (the start barrier), then WRITE, SEND or READ messages with per-message completion times.
//
// The planning, the client-server exchange, the posting discipline (tx-depth, barrier) and the report are
// pure Go and build everywhere; the libibverbs binding and the two endpoints need cgo and the build tag
// `verbs` (go build -tags verbs ./verbs/cmd/lumina-verbs), so the default build stays pure Go.
package verbs
