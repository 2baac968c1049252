package trace

import (
	"encoding/json"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// run feeds (seq, ts) pairs in trace order and finishes with the counters.
func run(opts IntegrityOptions, seqs, ts []uint64, mirrored, rx uint64) Integrity {
	c := NewIntegrityChecker(opts)
	for i := range seqs {
		c.Add(i, roce.Mirror{Seq: seqs[i], TimestampNs: ts[i]})
	}
	return c.Finish(mirrored, rx)
}

func span(from, n uint64) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = from + uint64(i)
	}
	return s
}

func check(t *testing.T, res Integrity, i int, name string, ok bool, detail string) {
	t.Helper()
	if len(res.Checks) != 4 {
		t.Fatalf("%d checks, want 4", len(res.Checks))
	}
	c := res.Checks[i]
	if c.Name != name || c.OK != ok || c.Detail != detail {
		t.Errorf("check %d:\n got  %s ok=%v %q\n want %s ok=%v %q", i, c.Name, c.OK, c.Detail, name, ok, detail)
	}
}

func TestIntegrityAllGood(t *testing.T) {
	res := run(IntegrityOptions{}, span(1, 5), span(100, 5), 5, 5)
	if !res.OK {
		t.Errorf("complete trace judged invalid: %+v", res)
	}
	check(t, res, 0, "consecutive-mirror-seq", true, "5 packets, seq 1 to 5 consecutive")
	check(t, res, 1, "timestamps-increasing", true, "5 packets, timestamps non-decreasing (tolerance 0 ns)")
	check(t, res, 2, "count-equals-mirrored", true, "trace has 5 packets, switch mirrored 5")
	check(t, res, 3, "count-equals-rx", true, "trace has 5 packets, switch ports received 5 RoCE packets")
	b, _ := json.Marshal(res)
	if string(b[:len(`{"ok":true,"checks":[{"name":"consecutive-mirror-seq","ok":true,"detail":`)]) != `{"ok":true,"checks":[{"name":"consecutive-mirror-seq","ok":true,"detail":` {
		t.Errorf("JSON shape: %s", b)
	}
}

func TestIntegritySeqGaps(t *testing.T) {
	// 1..1039, then 1041 (1 missing), 1042..1050, 1053 (2 missing), 1054, 1058 (3 missing).
	seqs := append(span(1, 1039), 1041)
	seqs = append(seqs, span(1042, 9)...)
	seqs = append(seqs, 1053, 1054, 1058)
	res := run(IntegrityOptions{}, seqs, span(0, uint64(len(seqs))), uint64(len(seqs)), 1058)
	if res.OK {
		t.Error("trace with gaps judged valid")
	}
	check(t, res, 0, "consecutive-mirror-seq", false, "seq 1041 follows 1039 at trace packet 1039; 3 gaps, 6 packets missing")
	check(t, res, 2, "count-equals-mirrored", true, "trace has 1052 packets, switch mirrored 1052")
	check(t, res, 3, "count-equals-rx", false, "trace has 1052 packets, switch ports received 1058 RoCE packets (6 missing)")
}

func TestIntegritySeqOtherFaults(t *testing.T) {
	res := run(IntegrityOptions{}, []uint64{1, 2, 2, 3, 1, 2}, span(0, 6), 6, 6)
	check(t, res, 0, "consecutive-mirror-seq", false, "seq 2 repeats at trace packet 2; 0 gaps, 0 packets missing, 1 duplicate, 1 backward step")
	res = run(IntegrityOptions{Seq: SeqLumina31}, []uint64{1, 0, 2}, span(0, 3), 3, 3)
	check(t, res, 0, "consecutive-mirror-seq", false, "seq 0 at trace packet 1 is outside the sequence space 1..2147483647; 0 gaps, 0 packets missing, 1 seq out of range")
	res = run(IntegrityOptions{}, []uint64{5, 7}, span(0, 2), 2, 2)
	check(t, res, 0, "consecutive-mirror-seq", false, "seq 7 follows 5 at trace packet 1; 1 gap, 1 packet missing")
}

func TestIntegritySeqWrap(t *testing.T) {
	res := run(IntegrityOptions{Seq: SeqLumina31}, []uint64{0x7ffffffe, 0x7fffffff, 1, 2}, span(0, 4), 4, 4)
	check(t, res, 0, "consecutive-mirror-seq", true, "4 packets, seq 2147483646 to 2 consecutive")
	top := uint64(1<<48 - 1)
	res = run(IntegrityOptions{}, []uint64{top - 1, top, 0, 1}, span(0, 4), 4, 4)
	check(t, res, 0, "consecutive-mirror-seq", true, "4 packets, seq 281474976710654 to 1 consecutive")
	// In the 31-bit space 0x7fffffff -> 0 is not a step: 0 is outside.
	res = run(IntegrityOptions{}, []uint64{0x7fffffff, 1}, span(0, 2), 2, 2)
	check(t, res, 0, "consecutive-mirror-seq", false, "seq 1 follows 2147483647 at trace packet 1, going backwards; 0 gaps, 0 packets missing, 1 backward step")
}

func TestIntegrityTimestamps(t *testing.T) {
	res := run(IntegrityOptions{}, span(1, 5), []uint64{100, 120, 100, 130, 90}, 5, 5)
	check(t, res, 1, "timestamps-increasing", false, "timestamp 100 ns at trace packet 2 is 20 ns before 120 ns at trace packet 1; 2 decreases")
	if res.OK {
		t.Error("decreasing timestamps judged valid")
	}
	// With a 25 ns tolerance the first step back passes; the drop to 90 does not.
	res = run(IntegrityOptions{ToleranceNs: 25}, span(1, 5), []uint64{100, 120, 100, 130, 90}, 5, 5)
	check(t, res, 1, "timestamps-increasing", false, "timestamp 90 ns at trace packet 4 is 40 ns before 130 ns at trace packet 3; 1 decrease, 1 step back within the 25 ns tolerance")
	// The tolerance is inclusive: exactly 20 ns back passes a 20 ns tolerance.
	res = run(IntegrityOptions{ToleranceNs: 20}, span(1, 3), []uint64{100, 120, 100}, 3, 3)
	check(t, res, 1, "timestamps-increasing", true, "3 packets, timestamps non-decreasing (tolerance 20 ns), 1 step back within the 20 ns tolerance")
	// Steps back are measured from the latest timestamp, so a slow drift is caught.
	res = run(IntegrityOptions{ToleranceNs: 10}, span(1, 4), []uint64{100, 92, 84, 76}, 4, 4)
	check(t, res, 1, "timestamps-increasing", false, "timestamp 84 ns at trace packet 2 is 16 ns before 100 ns at trace packet 0; 2 decreases, 1 step back within the 10 ns tolerance")
	// The 48-bit ns clock wraps (every ~78 hours): a wrap is not a decrease.
	top := uint64(1<<48 - 1)
	res = run(IntegrityOptions{}, span(1, 3), []uint64{top - 5, top, 3}, 3, 3)
	check(t, res, 1, "timestamps-increasing", true, "3 packets, timestamps non-decreasing (tolerance 0 ns), 1 wrap-around")
	// With 64-bit timestamps the same values are a decrease.
	res = run(IntegrityOptions{TimestampBits: 64}, span(1, 3), []uint64{top - 5, top, 3}, 3, 3)
	check(t, res, 1, "timestamps-increasing", false, "timestamp 3 ns at trace packet 2 is 281474976710652 ns before 281474976710655 ns at trace packet 1; 1 decrease")
}

func TestIntegrityCounts(t *testing.T) {
	res := run(IntegrityOptions{}, span(1, 3), span(0, 3), 2, CountUnknown)
	check(t, res, 2, "count-equals-mirrored", false, "trace has 3 packets, switch mirrored 2 (1 extra)")
	check(t, res, 3, "count-equals-rx", false, "trace has 3 packets; cannot compare: switch RoCE RX counters unknown")
	res = run(IntegrityOptions{}, nil, nil, 0, 0)
	if !res.OK {
		t.Errorf("empty trace with zero counters: %+v", res)
	}
	check(t, res, 0, "consecutive-mirror-seq", true, "no packets")
	check(t, res, 2, "count-equals-mirrored", true, "trace has 0 packets, switch mirrored 0")
}
