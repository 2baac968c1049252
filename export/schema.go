package export

// The tables' rows. Their parquet tags are the schema documented in docs/export.md: a change of a column's name,
// type or meaning is a new SchemaVersion. Optional columns are null where the value is unknown or does not apply
// (a non-RoCE frame has no PSN, a plain capture has no event).

// SchemaVersion is the version of the tables' schema, written into every file's key-value metadata under
// MetaSchemaVersion.
const SchemaVersion = 1

// Key-value metadata keys written into every file.
const (
	MetaSchemaVersion = "lumina.schema_version"
	MetaTable         = "lumina.table"
	MetaLumina        = "lumina.version"
	MetaSource        = "lumina.source"   // the exported results directory or capture, as given
	MetaMetadata      = "lumina.metadata" // mirror | comment | none: where events came from
	MetaIndexBase     = "lumina.index_base"
	MetaWarnings      = "lumina.warnings" // lumina analyze's warnings on the captures, one a line; absent: none
)

// File names in the output directory, one per table.
const (
	FilePackets         = "packets.parquet"
	FileRetransmissions = "retransmissions.parquet"
	FileConnections     = "connections.parquet"
	FileCounters        = "counters.parquet"
	FileTraffic         = "traffic.parquet"
)

// Files lists the output files in the order they are written.
var Files = []string{FilePackets, FileRetransmissions, FileConnections, FileCounters, FileTraffic}

// Directions of a packet within its connection.
const (
	DirToResponder = "to-responder" // requester -> responder: requests (SEND, WRITE, READ request)
	DirToRequester = "to-requester" // responder -> requester: ACK, NAK, READ response (and CNPs to the requester)
)

// PacketRow is one frame of the trace, RoCE or not.
type PacketRow struct {
	Index       int64   `parquet:"index,delta"`             // 0-based position in the trace
	TimeNs      int64   `parquet:"time_ns,delta"`           // capture timestamp, ns since the epoch
	Conn        *int32  `parquet:"conn,optional"`           // connection number with the index base; null: none known
	Direction   *string `parquet:"direction,optional,dict"` // to-responder | to-requester
	RoCE        bool    `parquet:"roce"`                    // the frame decoded as RoCE
	SrcIP       *string `parquet:"src_ip,optional,dict"`
	DstIP       *string `parquet:"dst_ip,optional,dict"`
	UDPSrcPort  *int32  `parquet:"udp_src_port,optional"`
	DestQP      *int64  `parquet:"dest_qp,optional"`
	PSN         *int64  `parquet:"psn,optional"`
	Opcode      *int32  `parquet:"opcode,optional"`
	OpcodeName  *string `parquet:"opcode_name,optional,dict"`
	AckType     *string `parquet:"ack_type,optional,dict"` // ACK | NAK | RNR NAK | reserved (packets with an AETH)
	AckSyndrome *int32  `parquet:"ack_syndrome,optional"`
	MSN         *int64  `parquet:"msn,optional"`
	ECN         *int32  `parquet:"ecn,optional"` // 0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE
	DSCP        *int32  `parquet:"dscp,optional"`
	BECN        *bool   `parquet:"becn,optional"`
	FrameLen    int32   `parquet:"frame_len"`               // bytes on the wire
	CapturedLen int32   `parquet:"captured_len"`            // bytes in the capture
	PayloadLen  *int32  `parquet:"payload_len,optional"`    // RDMA payload the headers declare
	ICRC        *string `parquet:"icrc,optional,dict"`      // good | bad | not-checkable
	Event       *string `parquet:"event,optional,dict"`     // Lumina's event: none | drop | ecn | corrupt | ...
	MirrorSeq   *int64  `parquet:"mirror_seq,optional"`     // the switch's mirror sequence number
	SwitchTsNs  *int64  `parquet:"switch_ts_ns,optional"`   // the switch's 48-bit ingress timestamp
	Iter        *int32  `parquet:"iter,optional"`           // round of the packet's PSN (the scenario's ITER)
	Comment     *string `parquet:"comment,optional,snappy"` // the pcapng comment when it holds more than the columns
	CommentQP   *int32  `parquet:"comment_qp,optional"`     // the comment's qp= as written (conn is the analyzer's)
}

// RetransmissionRow is one lost data packet and its recovery (analyze.Retransmission).
type RetransmissionRow struct {
	Conn             int32    `parquet:"conn"`
	PSN              int64    `parquet:"psn"` // from the connection's initial PSN, with the index base
	PSNAbs           int64    `parquet:"psn_abs"`
	Msg              int32    `parquet:"msg"`
	Position         int32    `parquet:"position"`
	Iter             int32    `parquet:"iter"`
	Event            string   `parquet:"event,dict"`
	Packet           int64    `parquet:"packet"`
	RetxPacket       *int64   `parquet:"retx_packet,optional"`
	Trigger          *string  `parquet:"trigger,optional,dict"`
	NACKGenerationUs *float64 `parquet:"nack_generation_us,optional"`
	NACKReactionUs   *float64 `parquet:"nack_reaction_us,optional"`
	LatencyUs        *float64 `parquet:"latency_us,optional"`
	NextDeliveredUs  *float64 `parquet:"next_delivered_us,optional"`
}

// ConnectionRow is one connection (QP pair).
type ConnectionRow struct {
	Conn          int32  `parquet:"conn"`
	Verb          string `parquet:"verb,dict"`
	RequesterIP   string `parquet:"requester_ip"`
	ResponderIP   string `parquet:"responder_ip"`
	RequesterQPN  int64  `parquet:"requester_qpn"`
	ResponderQPN  int64  `parquet:"responder_qpn"`
	RequesterIPSN int64  `parquet:"requester_ipsn"`
	PacketsPerMsg int32  `parquet:"packets_per_msg"` // 0: unknown
	NumMsgs       int32  `parquet:"num_msgs"`        // 0: unknown
	MTU           int32  `parquet:"mtu"`             // 0: unknown
	Packets       int64  `parquet:"packets"`         // rows of the packet table with this conn
}

// CounterRow is one NIC counter of one host.
type CounterRow struct {
	Host     string  `parquet:"host,dict"` // requester | responder
	Name     string  `parquet:"name"`
	Start    *int64  `parquet:"start,optional"`
	Finish   *int64  `parquet:"finish,optional"`
	Delta    *int64  `parquet:"delta,optional"`    // finish - start
	Expected *int64  `parquet:"expected,optional"` // what the trace implies (the counter check), null: not checked
	OK       *bool   `parquet:"ok,optional"`
	Note     *string `parquet:"note,optional"`
}

// TrafficRow is one connection's completion times and goodput.
type TrafficRow struct {
	Conn            int32     `parquet:"conn"`
	Source          string    `parquet:"source,dict"` // generator | trace
	Status          *string   `parquet:"status,optional,dict"`
	GoodputGbps     float64   `parquet:"goodput_gbps"`
	Messages        int32     `parquet:"messages"`
	MCTUs           []float64 `parquet:"mct_us,list"`
	DataPackets     *int64    `parquet:"data_packets,optional"`
	Retransmissions *int64    `parquet:"retransmissions,optional"`
}
