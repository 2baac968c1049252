package trace

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// mirrored returns a packet whose frame carries the given mirror metadata.
func mirrored(t *testing.T, seq, ts uint64) Packet {
	t.Helper()
	f := frame(false, 4)
	if err := roce.EncodeMirror(f, roce.Mirror{Seq: seq, TimestampNs: ts}); err != nil {
		t.Fatal(err)
	}
	return Packet{Data: f, CapLen: len(f), OrigLen: len(f), Timestamp: int64(ts)}
}

func dump(t *testing.T, seqs ...uint64) *sliceReader {
	r := &sliceReader{}
	for _, s := range seqs {
		r.pkts = append(r.pkts, mirrored(t, s, (s*10)&roce.MirrorMax))
	}
	return r
}

type got struct {
	seq          uint64
	input, index int
	trace        int
}

func drain(t *testing.T, m *Merger) ([]got, error) {
	var out []got
	for {
		p, err := m.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		mi, ok := m.Mirror()
		dm, _ := roce.DecodeMirror(p.Data)
		if ok && mi != dm {
			t.Fatalf("roce.Mirror() %+v disagrees with the packet's %+v", mi, dm)
		}
		in, idx := m.Origin()
		out = append(out, got{seq: dm.Seq, input: in, index: idx, trace: p.Index})
	}
}

func seqsOf(g []got) []uint64 {
	s := make([]uint64, len(g))
	for i := range g {
		s[i] = g[i].seq
	}
	return s
}

func eq(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMergeByMirrorSeq(t *testing.T) {
	m := MergeByMirrorSeq(dump(t, 1, 3, 4, 7), dump(t, 2, 5, 6), dump(t))
	out, err := drain(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if s := seqsOf(out); !eq(s, []uint64{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("merged seqs %v", s)
	}
	// Origins: seq 5 is the second packet of input 1; trace indexes count up.
	if out[4].input != 1 || out[4].index != 1 || out[6].input != 0 || out[6].index != 3 {
		t.Errorf("origins %+v", out)
	}
	for i, g := range out {
		if g.trace != i {
			t.Errorf("trace index %d at position %d", g.trace, i)
		}
	}
	if _, n := m.Violations(); n != 0 {
		t.Errorf("%d violations on ordered inputs", n)
	}
	if _, err := m.Next(); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}
}

func TestMergeWrapAround(t *testing.T) {
	top := uint64(1<<48 - 1)
	m := MergeByMirrorSeq(dump(t, top-2, top, 1), dump(t, top-1, 0, 2))
	out, err := drain(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if s := seqsOf(out); !eq(s, []uint64{top - 2, top - 1, top, 0, 1, 2}) {
		t.Errorf("48-bit wrap: merged %v", s)
	}
	// The reference's 31-bit register wraps 0x7fffffff -> 1 (0 is never used).
	m = NewMerger(MergeOptions{ByMirrorSeq: true, Seq: SeqLumina31},
		dump(t, 0x7ffffffe, 1), dump(t, 0x7fffffff, 2))
	out, err = drain(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if s := seqsOf(out); !eq(s, []uint64{0x7ffffffe, 0x7fffffff, 1, 2}) {
		t.Errorf("31-bit wrap: merged %v", s)
	}
	if _, n := m.Violations(); n != 0 {
		t.Errorf("31-bit wrap flagged as violation")
	}
}

func TestMergeReportsUnorderedInput(t *testing.T) {
	m := MergeByMirrorSeq(dump(t, 1, 5, 3), dump(t, 2, 4))
	out, err := drain(t, m)
	if err != nil || len(out) != 5 {
		t.Fatalf("%d packets, %v", len(out), err)
	}
	v, n := m.Violations()
	if n != 1 || v[0].Input != 0 || v[0].Index != 2 || v[0].Msg != "mirror seq 3 does not follow 5" {
		t.Errorf("violations %d %+v", n, v)
	}
	m = NewMerger(MergeOptions{ByMirrorSeq: true, Seq: SeqLumina31}, dump(t, 0, 1))
	drain(t, m)
	if v, n := m.Violations(); n != 1 || !strings.Contains(v[0].Msg, "mirror seq 0 outside the sequence space 1..2147483647") {
		t.Errorf("seq 0 in the 31-bit space: %d %+v", n, v)
	}
}

func TestMergeByTimestamp(t *testing.T) {
	mk := func(tag byte, ts ...int64) *sliceReader {
		r := &sliceReader{}
		for _, x := range ts {
			r.pkts = append(r.pkts, Packet{Data: []byte{tag}, Timestamp: x})
		}
		return r
	}
	m := Merge(mk('a', 1, 5, 5, 9), mk('b', 0, 5, 10), mk('c', 5))
	var tags []byte
	var ts []int64
	for {
		p, err := m.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, p.Data[0])
		ts = append(ts, p.Timestamp)
	}
	// Ties at 5 keep file order: a, a, b, c.
	if string(tags) != "baaabcab" || ts[0] != 0 || ts[7] != 10 {
		t.Errorf("order %s %v", tags, ts)
	}
	if _, ok := m.Mirror(); ok {
		t.Error("roce.Mirror() available when merging by timestamp")
	}
	m = Merge(mk('a', 3, 2))
	drain(t, m)
	if v, n := m.Violations(); n != 1 || v[0].Msg != "timestamp 2 ns is before 3 ns" {
		t.Errorf("timestamp violation %d %+v", n, v)
	}
}

func TestMergeErrors(t *testing.T) {
	r := &sliceReader{pkts: []Packet{{Data: []byte{1, 2, 3}, Index: 0, Offset: 24}}}
	_, err := MergeByMirrorSeq(dump(t, 1), r).Next()
	if err == nil || !strings.Contains(err.Error(), "merging input 1: packet 0 (byte offset 24): no Lumina mirror metadata") {
		t.Errorf("non-mirror packet: %v", err)
	}
	// An input's format error surfaces with the input number and the file's offset.
	bad := newPcapBuilder(false, false, 0, 1).record(0, 0, []byte{1}, 1).buf.Bytes()
	bad[24+8] = 0xff // captured length 255 in a 1-byte record... followed by 254 bytes it does not have
	bad = append(bad, make([]byte, 300)...)
	bad[24+9] = 0x10 // ...make it 4351: the file ends inside it: not an error but the end
	f, _ := NewReader(bytes.NewReader(bad), "dump1.pcap")
	if _, err := Merge(f).Next(); err != io.EOF || f.Truncated() == nil {
		t.Fatalf("cut input through merge: %v, truncation %+v", err, f.Truncated())
	}
	bad[24+9], bad[24+10] = 0, 0x10 // captured length 1 MiB: above the maximum, a format error
	f, _ = NewReader(bytes.NewReader(bad), "dump1.pcap")
	_, err = Merge(f).Next()
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Offset != 24 || !strings.HasPrefix(err.Error(), "merging input 0: dump1.pcap: byte offset 24") {
		t.Errorf("format error through merge: %v", err)
	}
	if _, err := NewMerger(MergeOptions{ByMirrorSeq: true, Seq: SeqSpace{Min: 5, Max: 5}}).Next(); err == nil {
		t.Error("empty sequence space accepted")
	}
}

// TestMergeFiles runs the real pipeline: dumpers write pcaps, the merger reads
// them back, the result goes to a pcapng trace and reads back in seq order.
func TestMergeFiles(t *testing.T) {
	var bufs [3]bytes.Buffer
	var ws [3]*PcapWriter
	for i := range ws {
		ws[i], _ = NewPcapWriter(&bufs[i], PcapWriterOptions{Nanosecond: true, SnapLen: 128})
	}
	const n = 1000
	for s := uint64(1); s <= n; s++ {
		p := mirrored(t, s, 1_000_000+s*100)
		if err := ws[(s*7)%3].WritePacket(p.Timestamp, p.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	var readers []Reader
	for i := range ws {
		ws[i].Close()
		f, err := NewReader(&bufs[i], "dump.pcap")
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, f)
	}
	m := MergeByMirrorSeq(readers...)
	var trace bytes.Buffer
	tw, _ := NewPcapngWriter(&trace, PcapngWriterOptions{Interfaces: []InterfaceSpec{{}}})
	chk := NewIntegrityChecker(IntegrityOptions{})
	for {
		p, err := m.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		mi, _ := m.Mirror()
		chk.Add(p.Index, mi)
		if err := tw.WritePacket(0, int64(mi.TimestampNs), p.Data, p.OrigLen, "seq"); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	if res := chk.Finish(n, n); !res.OK {
		t.Errorf("integrity of a complete merge: %+v", res)
	}
	f, err := NewReader(&trace, "trace.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := readAll(t, f)
	if err != nil || len(pkts) != n {
		t.Fatalf("%d packets, %v", len(pkts), err)
	}
	for i, p := range pkts {
		if mi, ok := roce.DecodeMirror(p.Data); !ok || mi.Seq != uint64(i+1) || p.Timestamp != int64(1_000_000+(i+1)*100) {
			t.Fatalf("trace packet %d: %+v", i, mi)
		}
	}
}
