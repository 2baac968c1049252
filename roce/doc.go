// Package roce is the RoCE wire format: Ethernet (with VLAN tags), IPv4 and IPv6, UDP, the RoCEv1 GRH, the
// InfiniBand Base Transport Header and every extended transport header, CNPs, and the invariant CRC; the
// metadata Lumina's switch writes into mirrored copies and its RSS rewrite (mirror.go); and the transport rules
// every stage must agree on: path MTUs, packets per message, the ITER rule (rules.go).
//
// Decoding fills a caller-owned Packet in place and allocates nothing per packet; encoding appends to a
// caller-owned buffer. Field layouts follow the InfiniBand Architecture Specification, volume 1, chapter 9
// (transport headers) and annexes A16 (RoCE) and A17 (RoCEv2).
package roce
