// Package inject is the event-injecting switch's logic, independent of what drives it: the translation of a
// scenario's events into intents (Intents) and of intents plus the traffic generators' runtime metadata into
// exact match entries (Lumina paper §3.3, Figure 2), ITER tracking per connection, the actions (drop, ECN mark,
// corrupt, and beyond Lumina: delay, reorder, duplicate, header rewrite; on data, ACK, NAK, CNP and READ-request
// packets), and mirroring with Lumina's metadata to a weighted-round-robin pool of dumpers.
//
// It is pure: Process takes the current time and a frame and says what to do. The simulator's switch and a
// real-time software switch drive the same code.
package inject

import (
	"net/netip"

	"github.com/lumina-go/lumina/roce"
)

// ConnMeta is the runtime metadata a traffic generator reports for one connection before traffic starts. Its
// JSON form is what a generator sends the live switch's control plane.
type ConnMeta struct {
	Index    int        `json:"index"` // 0-based connection index (the scenario's qpn, normalized)
	Verb     string     `json:"verb"`  // write | send | read (a send_read run reports each connection's own verb)
	ReqIP    netip.Addr `json:"req_ip"`
	RespIP   netip.Addr `json:"resp_ip"`
	ReqQPN   uint32     `json:"req_qpn"`
	RespQPN  uint32     `json:"resp_qpn"`
	ReqIPSN  roce.PSN   `json:"req_ipsn"`  // initial PSN of the requester's requests
	RespIPSN roce.PSN   `json:"resp_ipsn"` // initial PSN of the responder's requests (unused by RC data flows)
	// PacketsPerMsg and NumMsgs let events be expressed per message.
	PacketsPerMsg int `json:"packets_per_msg"`
	NumMsgs       int `json:"num_msgs"`
}

// Logic is what a switch runs on every frame: the event injector (*Switch), the simulator's DefaultSwitch or
// the live switch's Learner. Process fills v (forwarded frames, extra delay, mirrored copy and its dumper) and
// may keep no reference to frame after it returns; Flush releases frames it still holds (reorder) when traffic
// ends or goes idle. Port 0 faces the requester, port 1 the responder. A logic that modifies a frame must
// report an action in v.Event (anything but roce.EventNone): the receiving NIC then verifies the ICRC again
// instead of trusting the one its peer computed. Drivers call it from one goroutine at a time.
type Logic interface {
	Process(now int64, inPort int, frame []byte, v *Verdict)
	Flush(now int64) []Held
}

// PacketKind is the kind of packet an intent targets.
type PacketKind uint8

// Packet kinds.
const (
	KindData    PacketKind = iota // WRITE/SEND requests, or READ responses for a read connection
	KindAck                       // positive ACKs from the data receiver
	KindNAK                       // NAKs from the data receiver
	KindCNP                       // CNPs from the data receiver
	KindReadReq                   // READ requests (read connections)
)

// Intent is one resolved event of a scenario: which packet of which connection, in which round, and what to do.
type Intent struct {
	Conn int        // 0-based connection index
	Kind PacketKind // which packets of the connection
	PSN  int        // data / read-req: 0-based offset from the connection's initial PSN
	Nth  int        // ack / nak / cnp: 0-based index among that kind of packet of the connection
	Iter int        // 1-based round (ITER); 0 means any round
	// MsgIter makes Iter count rounds within the packet's message instead of the connection (data intents
	// scoped to a message: the scenario's msg and every-msg): round 1 is the connection round in which the
	// message's first packet first reached the switch, as the reference P4 program counts. It needs the
	// connection's PacketsPerMsg.
	MsgIter bool
	Action  roce.EventType
	// Action parameters.
	DelayNs int64  // roce.EventDelay
	Behind  int    // roce.EventReorder: release after this many later packets in the same direction
	Copies  int    // roce.EventDuplicate: extra copies
	Field   string // roce.EventRewrite: migreq | dscp | ecn | se | pad
	Value   int    // roce.EventRewrite
	// Source is the scenario entry the intent came from (for reports), e.g. "traffic.data-pkt-events[2]".
	Source string
}
