package analyze

import (
	"encoding/json"
	"io"
	"runtime"
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// streamReader generates a long mirrored trace on the fly, one message per connection at a time, so that
// the test itself holds no trace: 1000-packet WRITE messages on 4 connections, an ACK per message, and every
// lossEvery-th message loses its packet 500 (dropped at the switch, NAKed, go-back-N from it). With ce set,
// every data packet is CE-marked and answered by a CNP.
type streamReader struct {
	t         testing.TB
	conns     []tconn
	msgs      int // messages per connection
	lossEvery int
	ce        bool
	// probe is called with the number of packets returned so far, before each packet.
	probe func(n int)

	b      builder
	pool   [][]byte // the frames' bytes, reused from block to block so the generator's own heap stays flat
	m      int      // next message
	next   int      // next frame of b.frames
	n      int
	tm     float64
	p      trace.Packet
	losses int
}

const streamMsgLen = 1000

func newStreamReader(t testing.TB, msgs, lossEvery int) *streamReader {
	s := &streamReader{t: t, msgs: msgs, lossEvery: lossEvery, b: builder{t: t}}
	for i := 0; i < 4; i++ {
		s.conns = append(s.conns, mkConn("10.0.0.2", "10.0.0.3", uint32(0x100+i), uint32(0x200+i), roce.PSN(1<<24-3000+i*7)))
	}
	return s
}

// fill builds message s.m of every connection.
func (s *streamReader) fill() {
	b := &s.b
	b.frames = b.frames[:0]
	for _, c := range s.conns {
		base := s.m * streamMsgLen
		lossy := s.lossEvery > 0 && s.m%s.lossEvery == s.lossEvery-1
		ev := roce.EventNone
		if s.ce {
			ev = roce.EventECN
		}
		for i := 0; i < streamMsgLen; i++ {
			e := ev
			if lossy && i == 500 {
				e = roce.EventDrop
				s.losses++
			}
			b.data(c, base+i, writeOp(i, streamMsgLen), e, s.tm)
			s.tm += 0.1
			if s.ce && e != roce.EventDrop {
				b.cnpTo(c, true, s.tm)
			}
		}
		if lossy {
			s.tm++
			b.nak(c, base+500, s.tm)
			for i := 500; i < streamMsgLen; i++ {
				s.tm += 0.1
				b.data(c, base+i, writeOp(i, streamMsgLen), 0, s.tm)
			}
		}
		s.tm++
		b.ack(c, base+streamMsgLen-1, s.tm)
	}
	for i := range b.frames {
		if i == len(s.pool) {
			s.pool = append(s.pool, make([]byte, 0, 1200))
		}
		s.pool[i] = append(s.pool[i][:0], b.frames[i].data...)
		b.frames[i].data = s.pool[i]
	}
	s.m++
	s.next = 0
}

func (s *streamReader) Next() (*trace.Packet, error) {
	if s.next == len(s.b.frames) {
		if s.m == s.msgs {
			return nil, io.EOF
		}
		s.fill()
	}
	if s.probe != nil {
		s.probe(s.n)
	}
	f := s.b.frames[s.next]
	s.next++
	s.p = trace.Packet{Data: f.data, CapLen: len(f.data), OrigLen: len(f.data), Timestamp: f.ts,
		LinkType: trace.LinkTypeEthernet, Index: s.n}
	s.n++
	return &s.p, nil
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The analyzers' retained heap is flat in the trace's length: after 200k and after 2M packets (4 connections,
// 1000-packet messages, a go-back-N loss every 5 messages) it differs by less than 1 MiB, where the per-PSN
// state alone used to take ~30 bytes per packet (~54 MB more). What may still grow is output: 2000
// per-message completion times and 400 loss records (~100 KB).
func TestMemoryFlatInTraceLength(t *testing.T) {
	const msgs = 500 // per connection: 4*500*1000 data packets + retransmissions and ACKs ~ 2.2M packets
	s := newStreamReader(t, msgs, 5)
	var at200k, at2M uint64
	s.probe = func(n int) {
		switch n {
		case 200_000:
			at200k = heapAfterGC()
		case 2_000_000:
			at2M = heapAfterGC()
		}
	}
	res, err := Analyze(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if at200k == 0 || at2M == 0 {
		t.Fatalf("trace too short: %d packets", s.n)
	}
	if !res.OK() || len(res.Retransmissions) != s.losses || s.losses != 4*msgs/5 {
		t.Fatalf("analysis: ok=%v, %d retransmissions, %d losses: %+v", res.OK(), len(res.Retransmissions), s.losses, res.Checks)
	}
	for _, tq := range res.Traffic {
		if len(tq.MCTUs) != msgs {
			t.Fatalf("qp %d: %d completed messages, want %d", tq.QP, len(tq.MCTUs), msgs)
		}
	}
	grew := int64(at2M) - int64(at200k)
	t.Logf("retained heap: %d bytes at 200k packets, %d at 2M (%+d)", at200k, at2M, grew)
	if grew > 1<<20 {
		t.Fatalf("retained heap grew by %d bytes from 200k to 2M packets; want < 1 MiB", grew)
	}
}

// analyzeWindow analyzes frames with the given per-PSN window slack and cap.
func analyzeWindow(t *testing.T, frames []frame, opts Options, slack, maxWin int64) (*Analysis, *analyzer) {
	t.Helper()
	a := newAnalyzer(opts)
	a.slack, a.maxWin = slack, maxWin
	res, err := a.run(&sliceReader{frames: frames})
	if err != nil {
		t.Fatal(err)
	}
	return res, a
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Releasing per-PSN state changes nothing: a tiny window (slack 8, cap 64) that releases nearly everything
// gives byte-identical results to a window that never releases, on the benchmark trace (go-back-N losses and
// NAKs) and on a plain capture of it (inferred losses, which read the PSN's transmission history).
func TestWindowReleaseKeepsResults(t *testing.T) {
	for _, plain := range []bool{false, true} {
		frames := benchTrace(t)
		if plain {
			for i := range frames {
				frames[i].data[22] = 64 // IPv4 TTL: no Lumina metadata
			}
		}
		opts := Options{}
		big, _ := analyzeWindow(t, frames, opts, 1<<40, 1<<40)
		small, a := analyzeWindow(t, frames, opts, 8, 64)
		if got, want := mustJSON(t, small), mustJSON(t, big); got != want {
			t.Fatalf("plain=%v: results differ with a small window", plain)
		}
		for _, cs := range a.conns {
			if cs.win.base < 10000 || len(cs.win.slots) > 256 {
				t.Fatalf("plain=%v: conn %d window base %d, %d slots: nothing released", plain, cs.c.Index, cs.win.base, len(cs.win.slots))
			}
		}
		if !plain && (!big.OK() || len(big.Retransmissions) != len(frames)/18) {
			t.Fatalf("benchmark trace: ok=%v, %d retransmissions", big.OK(), len(big.Retransmissions))
		}
	}
}

// A very late duplicate of a released PSN is taken as a retransmission of an acknowledged PSN: the same
// go-back-N verdict as with the full history, its payload not counted twice, no loss opened; a late duplicate
// that is dropped opens a loss record for the right message that stays unretransmitted.
func TestLateDuplicateBelowWindow(t *testing.T) {
	c := mkConn("10.0.0.2", "10.0.0.3", 0x100, 0x200, 100)
	b := &builder{t: t}
	tm := 0.0
	for m := 0; m < 20; m++ {
		for i := 0; i < 10; i++ {
			b.data(c, m*10+i, writeOp(i, 10), 0, tm)
			tm += 0.1
		}
		b.ack(c, m*10+9, tm)
		tm++
	}
	dup := b.data(c, 13, roce.RCWriteMiddle, 0, tm)                 // message 2, long acknowledged
	drop := b.data(c, 25, roce.RCWriteMiddle, roce.EventDrop, tm+1) // message 3
	opts := Options{Conns: []Conn{c.conn(0, VerbWrite, 10, 20, 1024)}, IndexBase: 1}
	big, _ := analyzeWindow(t, b.frames, opts, 1<<40, 1<<40)
	small, a := analyzeWindow(t, b.frames, opts, 8, 64)
	if a.conns[0].held(13) || a.conns[0].held(25) {
		t.Fatalf("window base %d still holds the duplicates", a.conns[0].win.base)
	}
	gs, gb := check(t, small, gbn, 1), check(t, big, gbn, 1)
	if mustJSON(t, gs) != mustJSON(t, gb) || gs.ViolationCount != 2 || gs.Violations[0].Packet != dup {
		t.Fatalf("gbn check with released history %+v, with full history %+v", gs, gb)
	}
	if small.Traffic[0].GoodputGbps != big.Traffic[0].GoodputGbps || small.Traffic[0].GoodputGbps <= 0 {
		t.Fatalf("goodput %v with released history, %v with full", small.Traffic[0].GoodputGbps, big.Traffic[0].GoodputGbps)
	}
	if len(small.Retransmissions) != 1 {
		t.Fatalf("retransmissions %+v", small.Retransmissions)
	}
	r := small.Retransmissions[0]
	if r.Packet != drop || r.Msg != 3 || r.Position != 6 || r.RetxPacket != nil ||
		mustJSON(t, r) != mustJSON(t, big.Retransmissions[0]) {
		t.Fatalf("late dropped duplicate: %+v, full history %+v", r, big.Retransmissions[0])
	}
}

// Past maxCNPRecords triggers the CNP analyzer stops recording, and says so, but its counts stay exact and
// the listed triggers stay capped.
func TestCNPRecordsCapped(t *testing.T) {
	s := newStreamReader(t, 75, 0) // 4*75*1000 = 300k CE-marked packets, each answered by a CNP
	s.ce = true
	a := newAnalyzer(Options{})
	res, err := a.run(s)
	if err != nil {
		t.Fatal(err)
	}
	c := res.CNP
	if c.ECNMarked != 300_000 || c.CNPs != 300_000 || c.Unsolicited != 0 || !c.Truncated {
		t.Fatalf("ecn_marked %d, cnps %d, unsolicited %d, truncated %v", c.ECNMarked, c.CNPs, c.Unsolicited, c.Truncated)
	}
	if len(a.cnp.trigs) != maxCNPRecords || len(a.cnp.cnps) > maxCNPRecords+maxCNPRecords/16 {
		t.Fatalf("%d trigger and %d CNP records kept", len(a.cnp.trigs), len(a.cnp.cnps))
	}
	if len(c.Triggers) != maxTriggersListed || c.TriggersOmitted != 300_000-maxTriggersListed {
		t.Fatalf("%d triggers listed, %d omitted", len(c.Triggers), c.TriggersOmitted)
	}
	if c.ScopeInferred != ScopeNone || c.Mismatches[ScopeQP] != 0 {
		t.Fatalf("scope %s, mismatches %v", c.ScopeInferred, c.Mismatches)
	}
}

// A slot the window hands out for a new rel is all zero, whether its memory is fresh, was cleared ahead by
// grow, or held a released rel's state before the window moved down (release no longer clears that memory:
// grow clears it just before use); the cleared-ahead mark stays within the capacity.
func TestWindowNewSlotsZero(t *testing.T) {
	a := newAnalyzer(Options{})
	a.slack, a.maxWin = 8, 1<<20
	cs := newConnState(a, Conn{}, true)
	var next int64
	for round := 0; round < 50; round++ {
		for i := 0; i < 37+round*11; i++ {
			if !cs.ensure(next) {
				t.Fatalf("rel %d refused", next)
			}
			s := cs.slot(next)
			if *s != (psnSlot{}) {
				t.Fatalf("round %d: new rel %d (window base %d, %d of %d slots) holds %+v", round, next, cs.win.base,
					len(cs.win.slots), cap(cs.win.slots), *s)
			}
			*s = psnSlot{firstTx: 1, lastTx: 2, lastIdx: 3, msgOf: 4, lost: 5, flags: 6} // stale state if reused
			next++
			if w := &cs.win; w.warm > cap(w.slots) {
				t.Fatalf("cleared ahead up to %d, past the capacity %d", w.warm, cap(w.slots))
			}
		}
		// Acknowledge all but the last few: the next growth past the capacity releases and moves down.
		cs.gbn.una, cs.irn.una = next-3, next-3
	}
	if cs.win.base < 1000 {
		t.Fatalf("window base %d after %d rels: nothing released", cs.win.base, next)
	}
}
