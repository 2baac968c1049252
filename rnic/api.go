// Package rnic models an RDMA NIC's transport as pure state machines: RC requester and responder with go-back-N
// (and IRN's selective repeat), IB timeouts and retries, RNR, ACK coalescing, DCQCN notification and reaction
// points, NVIDIA adaptive retransmission; NIC profiles as data; counters with the vendors' names.
//
// Nothing here reads a clock, sleeps, starts a goroutine or touches a socket: every method takes the current
// time and returns what to do. The simulator (netsim) drives it in virtual time; a real-time software RNIC can
// drive the same code from a socket; the analyzers reuse its rules.
package rnic

import "github.com/lumina-go/lumina/roce"

// Time is a point in time in nanoseconds (virtual time in the simulator).
type Time = int64

// Verb is the operation of a work request.
type Verb uint8

// Verbs.
const (
	VerbSend Verb = iota
	VerbSendImm
	VerbWrite
	VerbWriteImm
	VerbRead
)

// VerbOf maps a traffic generator's verb name (send, read, write) to the Verb a connection's work requests use;
// anything else is a WRITE.
func VerbOf(name string) Verb {
	switch name {
	case "send":
		return VerbSend
	case "read":
		return VerbRead
	}
	return VerbWrite
}

// WorkRequest is a message posted to a QP's send queue.
type WorkRequest struct {
	ID         uint64 // caller's identifier, returned in the completion
	Verb       Verb
	Length     int // bytes
	Imm        uint32
	RemoteAddr uint64
	RKey       uint32
}

// Status is a work completion status (ibv_wc_status names).
type Status uint8

// Completion statuses.
const (
	StatusSuccess     Status = iota // IBV_WC_SUCCESS
	StatusRetryExc                  // IBV_WC_RETRY_EXC_ERR: retry_cnt exhausted
	StatusRNRRetryExc               // IBV_WC_RNR_RETRY_EXC_ERR
	StatusFlushErr                  // IBV_WC_WR_FLUSH_ERR: flushed because the QP is in the error state
	StatusRemoteErr                 // a NAK other than a sequence error
)

// Connection statuses a traffic generator reports per connection (traffic.json's "status"): ok, or why the
// connection stopped. The simulator, the software RNIC and the verbs generator share these names.
const (
	ConnOK            = "ok"
	ConnRetryExceeded = "retry-exceeded"
	ConnRNRExceeded   = "rnr-retry-exceeded"
	ConnFlushed       = "flushed"
	ConnRemoteError   = "remote-error"
	ConnIncomplete    = "incomplete"
)

// ConnStatus names a failed completion's status as a connection status.
func (s Status) ConnStatus() string {
	switch s {
	case StatusSuccess:
		return ConnOK
	case StatusRetryExc:
		return ConnRetryExceeded
	case StatusRNRRetryExc:
		return ConnRNRExceeded
	case StatusFlushErr:
		return ConnFlushed
	}
	return ConnRemoteError
}

// Completion is a work completion.
type Completion struct {
	WRID   uint64
	Status Status
	Time   Time
	Bytes  int
	// Recv marks a receive-side completion (a SEND or WRITE with immediate delivered by the responder); Imm is
	// its immediate data. Requester completions leave both zero.
	Recv bool
	Imm  uint32
	Msg  int // 0-based index of the message on this QP (requester: WR order; responder: arrival order)
}

// Pkt is a transport packet as the state machines see it: the BTH and extended-header fields, without the
// Ethernet/IP/UDP envelope (the NIC model adds it with the roce codec) and without payload bytes.
type Pkt struct {
	Opcode     roce.Opcode
	DestQP     uint32
	PSN        roce.PSN
	AckReq     bool
	SE         bool
	MigReq     bool
	BECN       bool // CNPs carry BECN
	AETH       roce.AETH
	RETH       roce.RETH
	Imm        uint32
	PayloadLen int
	// SACK is IRN's selective-acknowledgement PSN carried by its NAKs (see the IRN encoding in the package doc
	// of the implementation); valid when HasSACK.
	SACK    roce.PSN
	HasSACK bool

	// Receive-side facts set by the NIC model, not transmitted.
	CE      bool // arrived with ECN = CE
	BadICRC bool // arrived with a bad ICRC (the QP must ignore it; the NIC counts it)

	// Transmit-side facts for the NIC model and for logs, not transmitted.
	Retransmission bool
	Msg            int // 0-based index of the message (work request) the packet belongs to; -1 for control packets
}

// TimerKind names the timers a QP arms.
type TimerKind uint8

// Timers.
const (
	TimerRetransmit  TimerKind = iota // local ACK timeout (or IRN RTO)
	TimerRNR                          // RNR NAK back-off
	TimerAckCoalesce                  // responder's delayed ACK
	TimerDCQCN                        // DCQCN reaction point: rate-increase timer (rpg_time_reset)
	numTimerKinds
)

// TimerReq asks the driver to call OnTimer(kind) at At, replacing any earlier request of the same kind for this
// QP. Cancel drops a pending one.
type TimerReq struct {
	Kind   TimerKind
	At     Time
	Cancel bool
}

// Output collects what a QP step asks its driver to do. The driver resets it (Reset) before each step.
type Output struct {
	Timers      []TimerReq
	Completions []Completion
	// Wake tells the driver that the QP has packets to transmit (call NextPacket).
	Wake bool
	// NAKSent / OutOfSequence let the NIC model apply NAK-triggered CNPs and processing delays.
	NAKSent bool
	// NAKTail: the NAK's gap lies within the profile's nak-generation-tail-packets last packets of the message
	// (the NIC model then applies timing.nak-generation-tail-ns instead of nak-generation-ns).
	NAKTail bool
	// ReadReissue: the requester found a gap in READ responses and queued a re-issued READ request (the NIC model
	// applies timing.read-nak-generation-ns and, on cx4lx, the noisy-neighbor slow path).
	ReadReissue bool
	// Timeout: a local ACK timeout (or IRN RTO) fired and queued retransmissions.
	Timeout bool
}

// Reset empties the output, keeping its storage.
func (o *Output) Reset() {
	o.Timers = o.Timers[:0]
	o.Completions = o.Completions[:0]
	o.Wake = false
	o.NAKSent = false
	o.NAKTail = false
	o.ReadReissue = false
	o.Timeout = false
}
