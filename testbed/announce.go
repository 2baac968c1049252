package testbed

import (
	"fmt"
	"io"

	"github.com/lumina-go/lumina/scenario"
)

// Thresholds of announce.
const (
	// largeDataPackets is where a run says what it is about to do before it starts: setting up the
	// connections and simulating take long enough that silence looks like a hang.
	largeDataPackets = 1_000_000
	largeConnections = 1000
	// bigDumpBytes is where a run warns about the disk space its dumps and trace will take.
	bigDumpBytes = 1 << 30
)

// EstimateDumpBytes is about how many bytes a run writes for its dumps and reconstructed trace, without
// retransmissions: every data packet kept up to the snap length, once in a dump (16 bytes of pcap record
// header) and once in the trace (about 60 bytes of pcapng block and comment), and about one acknowledgement (or
// READ request) per message. Measured on a 384000-packet WRITE run: 128 MB estimated, 137 MB written.
func EstimateDumpBytes(sc *scenario.Scenario) (dataPackets, bytes int64) {
	t := sc.Traffic
	conns := int64(max(t.NumConnections, 1))
	dataPackets = conns * int64(t.PacketsPerConnection())
	msgs := conns * int64(max(t.NumMsgsPerQP, 1))
	snap := int64(sc.Network.SnapLen)
	if snap <= 0 {
		snap = 65535
	}
	frame := min(snap, int64(t.MTU)+78) // Ethernet, IPv4, UDP, BTH, RETH, ICRC around a full payload
	resp := min(snap, 62)               // an ACK
	return dataPackets, dataPackets*(2*frame+76) + msgs*(2*resp+76)
}

// announce tells, before anything runs, what a large run is about to do, and warns when it will write
// gigabytes.
func announce(w io.Writer, sc *scenario.Scenario, dir string) {
	if w == nil || sc.Workload != nil {
		return
	}
	pkts, bytes := EstimateDumpBytes(sc)
	t := sc.Traffic
	if pkts >= largeDataPackets || t.NumConnections >= largeConnections {
		fmt.Fprintf(w, "lumina: preparing %d connection(s) x %d message(s) x %d packet(s) = %d data packets on testbed %s...\n",
			t.NumConnections, t.NumMsgsPerQP, t.PacketsPerMessage(), pkts, orSim(sc.Testbed))
	}
	if bytes >= bigDumpBytes {
		fmt.Fprintf(w, "lumina: warning: this run will write about %.1f GB of dumps and trace to %s (%d data packets, snap-len %d); lower num-msgs-per-qp or snap-len, or press Ctrl-C now\n",
			float64(bytes)/1e9, dir, pkts, sc.Network.SnapLen)
	}
}

func orSim(tb string) string {
	if tb == "" {
		return "sim"
	}
	return tb
}
