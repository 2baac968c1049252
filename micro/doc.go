// Package micro is the NIC micro-architecture model that `workload:` runs and the anomaly search use.
//
// RunWorkload is the model for Collie-style workloads, coarser than the packet simulator (package netsim): no
// frames on a wire format, but every resource a request crosses inside the NIC, from the profile's micro
// section (rnic.MicroArch) — doorbells and WQE reads over PCIe, processing units with QP-context and
// translation caches whose misses are PCIe reads, payload DMA bounded by read tags and bandwidth, a shared
// packet processor (receive, ACK generation, transmit), the receive-WQE cache with prefetch, the RX buffer with
// PFC XOFF/XON toward a lossless switch, PCIe ordering, host topology and loopback. Anomalies emerge from load
// on these resources; no rule looks at the workload.
//
// It runs on the discrete-event core it shares with netsim (internal/des), in picoseconds, deterministic from
// the seed.
package micro
