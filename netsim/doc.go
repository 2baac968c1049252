// Package netsim is the deterministic simulated testbed: a discrete-event engine in virtual nanoseconds, two
// hosts whose simulated RNICs run the pure transport state machines of package rnic, the links between them, the
// switch that runs the event injector (package inject) and mirrors every frame to dumpers, and Lumina's traffic
// generator.
//
// Everything is a function of Config: virtual time is an int64 count of nanoseconds, events are totally ordered by
// (time, insertion sequence), and every random choice comes from a per-component PCG stream whose seed is derived
// from the scenario seed and the component's name. There is no wall clock, no goroutine and no package-level
// mutable state, so independent Run calls may execute in parallel and the same Config gives byte-identical frames.
//
// Every frame on the simulated wire is a real RoCEv2 frame built with package roce (Ethernet, IPv4 with DSCP and
// ECN, UDP, BTH and extended headers, zero payload of the right length, valid ICRC).
//
// The NIC model applies what the QP logic leaves out, all from the profile (rnic.Profile, fields marked netsim):
//
//   - receive: port counters; discards while the receive pipeline is stalled; ICRC check (bad: counted and
//     dropped); CE marks to the notification point (CNPs under the profile's limiter scope and interval); the
//     MigReq=0 path-migration slow path (cx5); receive processing delay, kept in order per QP; NAKs reach the
//     requester after the NAK reaction delay (uniform in the profile's range).
//   - transmit: ACKs and NAKs leave after their generation delay (the tail variant when the QP reports the gap
//     at a message's tail), ahead of data; a READ re-request after a response gap leaves after the read NAK
//     generation delay and, on cx4lx, after the shared slow path whose backlog crossing a threshold stalls the
//     receive pipeline (the noisy neighbor); data enters a finite transmit pipeline that retransmissions join at
//     the tail, chosen by strict priority then ETS (start-time fair queueing by weight; on cards whose ETS is
//     not work-conserving each class in use is capped at its share), each QP paced at its DCQCN rate.
//
// The coarser model for Collie-style workloads, which has no frames on a wire format, is package micro.
//
// The profile's delays are the NIC's own; measured at the switch, as the paper did, they add the testbed's
// round trip (switch pipeline, serialization and propagation: about 0.6 us at 100 Gb/s).
package netsim
