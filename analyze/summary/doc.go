// Package summary is `lumina analyze` for any capture: one streaming pass over pcap/pcapng files (tcpdump, ibdump,
// Wireshark, a switch mirror, a Lumina dump) that counts what the RoCE troubleshooting guide (seeds/004) works out
// by hand with Wireshark filters — opcodes, ECN and DSCP, CNPs and the CE-to-CNP ratio, NAKs by code, per-flow
// packets and PSN ranges — plus ICRC verdicts, retransmissions and PSN gaps, PFC pauses, VLANs and Lumina mirror
// metadata, and renders it as a text summary with health verdicts or as JSON (the contract of
// spec/scenario-and-cli.md).
//
// Stats is the accumulator: Add decodes each packet once into a reused roce.Packet and allocates nothing in the
// steady state; memory grows only with the number of flows. Analyze opens and merges files and feeds Stats.
//
// Source (what `lumina analyze` reads, summary and checkers in one pass) spreads the work over the cores: one
// goroutine reads and merges the files into batches, decoders decode the frames and verify their ICRCs batch by
// batch, and the caller counts every packet in the stream's order (pipeline.go). A fixed number of batches
// circulate, so memory stays flat in the capture's size; Options.Workers = 1 does everything in line, and both
// give the same report whatever the number of cores.
package summary
