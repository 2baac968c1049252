package trace

import (
	"errors"
	"fmt"
	"io"

	"github.com/lumina-go/lumina/roce"
)

// MergeOptions configures a Merger.
type MergeOptions struct {
	// ByMirrorSeq orders packets by the Lumina mirror sequence number in the
	// source MAC (serial-number order in Seq, so it survives wrap-around).
	// Otherwise packets are ordered by timestamp, ties by input order.
	ByMirrorSeq bool
	// Seq is the sequence space; the zero value means Seq48.
	Seq SeqSpace
}

// OrderViolation records an input packet that was not in increasing order in
// its own file, which the merge assumes.
type OrderViolation struct {
	Input int    // index of the input reader
	Index int    // packet index in that input
	Msg   string // what was out of order
}

// maxViolations bounds how many order violations a Merger keeps in detail.
const maxViolations = 100

type mergeInput struct {
	r       Reader
	head    *Packet // current packet, valid until r.Next is called again
	mirror  roce.Mirror
	done    bool
	started bool
	prevSeq uint64
	prevTs  int64
}

// Merger merges several captures into one stream (a k-way merge holding one
// packet per input). It implements Reader: Packet.Index is the index in the
// merged trace; Origin tells where the packet came from.
//
// Each input must be in increasing order on its own (a dumper writes packets
// in arrival order). An input that is not is reported through Violations, not
// treated as an error: the merged stream then keeps each input's order, and
// the integrity check will flag the result.
type Merger struct {
	opts       MergeOptions
	in         []mergeInput
	out        Packet
	index      int
	last       int // input of the last returned packet, -1 before the first
	started    bool
	err        error
	violations []OrderViolation
	nViol      int
}

// Merge merges readers by timestamp (stable in input order).
func Merge(readers ...Reader) *Merger { return NewMerger(MergeOptions{}, readers...) }

// MergeByMirrorSeq merges Lumina dumper files by mirror sequence number in the
// 48-bit space.
func MergeByMirrorSeq(readers ...Reader) *Merger {
	return NewMerger(MergeOptions{ByMirrorSeq: true}, readers...)
}

// NewMerger merges readers as opts says.
func NewMerger(opts MergeOptions, readers ...Reader) *Merger {
	opts.Seq = opts.Seq.norm()
	m := &Merger{opts: opts, in: make([]mergeInput, len(readers)), last: -1}
	for i, r := range readers {
		m.in[i].r = r
	}
	if err := opts.Seq.Validate(); err != nil {
		m.err = fmt.Errorf("merging: %w", err)
	}
	return m
}

// Next returns the next packet of the merged trace, io.EOF at the end.
func (m *Merger) Next() (*Packet, error) {
	if m.err != nil {
		return nil, m.err
	}
	if !m.started {
		m.started = true
		for i := range m.in {
			if err := m.fetch(i); err != nil {
				m.err = err
				return nil, err
			}
		}
	} else if m.last >= 0 {
		if err := m.fetch(m.last); err != nil {
			m.err = err
			return nil, err
		}
	}
	best := -1
	for i := range m.in {
		in := &m.in[i]
		if in.done {
			continue
		}
		if best < 0 || m.before(in, &m.in[best]) {
			best = i
		}
	}
	if best < 0 {
		m.last = -1
		m.err = io.EOF
		return nil, io.EOF
	}
	m.last = best
	m.out = *m.in[best].head
	m.out.Index = m.index
	m.index++
	return &m.out, nil
}

// before reports whether a's head strictly precedes b's; ties keep input order
// because the scan goes in input order.
func (m *Merger) before(a, b *mergeInput) bool {
	if m.opts.ByMirrorSeq {
		return m.opts.Seq.Less(a.mirror.Seq, b.mirror.Seq)
	}
	return a.head.Timestamp < b.head.Timestamp
}

func (m *Merger) fetch(i int) error {
	in := &m.in[i]
	p, err := in.r.Next()
	if errors.Is(err, io.EOF) {
		in.done, in.head = true, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("merging input %d: %w", i, err)
	}
	in.head = p
	if m.opts.ByMirrorSeq {
		mi, ok := roce.DecodeMirror(p.Data)
		if !ok {
			return fmt.Errorf("merging input %d: packet %d (byte offset %d): no Lumina mirror metadata (want Ethernet with IPv4, IPv6 or RoCEv1)", i, p.Index, p.Offset)
		}
		if !m.opts.Seq.Contains(mi.Seq) {
			m.violate(i, p.Index, fmt.Sprintf("mirror seq %d outside the sequence space %d..%d", mi.Seq, m.opts.Seq.Min, m.opts.Seq.Max))
		} else if in.started && !m.opts.Seq.Less(in.prevSeq, mi.Seq) {
			m.violate(i, p.Index, fmt.Sprintf("mirror seq %d does not follow %d", mi.Seq, in.prevSeq))
		}
		in.mirror, in.prevSeq = mi, mi.Seq
	} else if in.started && p.Timestamp < in.prevTs {
		m.violate(i, p.Index, fmt.Sprintf("timestamp %d ns is before %d ns", p.Timestamp, in.prevTs))
	}
	in.prevTs = p.Timestamp
	in.started = true
	return nil
}

func (m *Merger) violate(input, index int, msg string) {
	m.nViol++
	if len(m.violations) < maxViolations {
		m.violations = append(m.violations, OrderViolation{Input: input, Index: index, Msg: msg})
	}
}

// Origin returns the input and the index in that input of the packet last
// returned by Next (-1, -1 if none).
func (m *Merger) Origin() (input, index int) {
	if m.last < 0 {
		return -1, -1
	}
	return m.last, m.in[m.last].head.Index
}

// Mirror returns the Lumina metadata of the packet last returned by Next, when
// merging by mirror sequence number.
func (m *Merger) Mirror() (roce.Mirror, bool) {
	if m.last < 0 || !m.opts.ByMirrorSeq {
		return roce.Mirror{}, false
	}
	return m.in[m.last].mirror, true
}

// Violations returns the first order violations found in the inputs (at most
// 100) and how many there were in all.
func (m *Merger) Violations() ([]OrderViolation, int) { return m.violations, m.nViol }
