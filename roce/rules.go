package roce

// Rules of the transport that more than one package applies: the injector, the transport state machines, the
// simulator and the analyzers must agree on them, so they are written here once.

// mtus are the InfiniBand path MTUs (IBTA vol. 1 §9.6.1: 256, 512, 1024, 2048 or 4096 bytes).
var mtus = [...]int{256, 512, 1024, 2048, 4096}

// ValidMTU reports whether mtu is an InfiniBand path MTU: 256, 512, 1024, 2048 or 4096 bytes.
func ValidMTU(mtu int) bool {
	for _, m := range mtus {
		if m == mtu {
			return true
		}
	}
	return false
}

// MTUs returns the path MTUs in increasing order (a new slice the caller owns).
func MTUs() []int { return append([]int(nil), mtus[:]...) }

// PacketsPerMessage is the number of packets a message of size bytes takes at path MTU mtu: ceil(size / mtu),
// at least 1 (a zero-length message is one packet). An mtu of 0 or less counts every message as one packet.
func PacketsPerMessage(size, mtu int) int {
	if mtu <= 0 || size <= 0 {
		return 1
	}
	return (size + mtu - 1) / mtu
}

// NextIter is the ITER rule of the scenario contract: a connection's data direction starts in round 1, and the
// round goes up by one each time a data packet arrives whose PSN is not after the previous data packet's
// (serial arithmetic modulo 2^24), so every retransmission starts a new round. It returns the round of a packet
// with PSN psn that follows one with PSN last, seen in round iter.
func NextIter(iter int, last, psn PSN) int {
	if psn.LessEq(last) {
		return iter + 1
	}
	return iter
}
