package inject

// Recorder runs an injector and remembers, by mirror sequence number, each mirrored packet's connection, ITER
// and event: what the reconstructed trace's annotations need and the mirror metadata does not carry. The
// simulator, the netns testbed and the remote testbed's switch agent run their switch through one.
type Recorder struct {
	*Switch
	Iter  []uint16 // Iter[seq-1]: the packet's retransmission round (saturated at 65535)
	Conn  []int32  // Conn[seq-1]: its connection, -1 for packets of none
	Event []uint8  // Event[seq-1]: the event applied to it (roce.EventType)
	// Latest, when set, keeps the last mirrored packet's record only (and Iter, Conn, Event stay empty):
	// Annotation answers for that packet alone. For a caller that takes each packet's annotation as it is
	// mirrored (the simulator writing its trace as it runs), so that memory does not grow with the run.
	Latest bool
	last   struct {
		seq  uint64
		conn int32
		iter uint16
	}
}

// Process runs the injector on the frame and records the mirrored copy's metadata.
func (r *Recorder) Process(now int64, inPort int, frame []byte, v *Verdict) {
	r.Switch.Process(now, inPort, frame, v)
	if v.Seq == 0 {
		return
	}
	if r.Latest {
		r.last.seq, r.last.conn, r.last.iter = v.Seq, int32(v.Conn), uint16(min(v.Iter, 0xffff))
		return
	}
	for uint64(len(r.Iter)) < v.Seq {
		r.Iter = append(r.Iter, 0)
		r.Conn = append(r.Conn, -1)
		r.Event = append(r.Event, 0)
	}
	r.Iter[v.Seq-1] = uint16(min(v.Iter, 0xffff))
	r.Conn[v.Seq-1] = int32(v.Conn)
	r.Event[v.Seq-1] = uint8(v.Event)
}

// Annotation is the recorded connection and ITER of the mirrored copy with sequence number seq; ok is false
// for a sequence number the recorder never saw (or when Iter and Conn disagree, as a recorder rebuilt from a
// remote agent's answer might).
func (r *Recorder) Annotation(seq uint64) (conn, iter int, ok bool) {
	if r.Latest {
		if seq == 0 || seq != r.last.seq {
			return 0, 0, false
		}
		return int(r.last.conn), int(r.last.iter), true
	}
	if seq == 0 || seq > uint64(len(r.Iter)) || len(r.Conn) != len(r.Iter) {
		return 0, 0, false
	}
	return int(r.Conn[seq-1]), int(r.Iter[seq-1]), true
}
