package micro

import (
	"testing"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
)

// TestReadResponseFirstPacket: on cx6vpi-200g a READ response's later packets cost the shared processor
// rx.read-resp-ns each and its first one rx.read-resp-first-ns, so collie #3's trigger (8 QPs of 4 MB READs at
// MTU 1 KB) pauses while the same with 4 KB messages (four packets each) and a bidirectional mix of small and
// large READs at MTU 2 KB do not; charged read-resp-ns for every packet (read-resp-first-ns 0) both pause.
func TestReadResponseFirstPacket(t *testing.T) {
	p, err := rnic.LoadProfile("cx6vpi-200g")
	if err != nil {
		t.Fatal(err)
	}
	if f, l := p.Micro.Rx.ReadRespFirstNs, p.Micro.Rx.ReadRespNs; f <= 0 || f >= l {
		t.Fatalf("cx6vpi-200g: rx.read-resp-first-ns %d, read-resp-ns %d: this test is about a cheaper first packet", f, l)
	}
	every := func(p *rnic.Profile) { p.Micro.Rx.ReadRespFirstNs = 0 }
	var trig trigger
	for _, tr := range collieTriggers {
		if tr.id == 3 {
			trig = tr
		}
	}
	if s := summarize(runMicro(t, trig.profile, trig.w, nil)); !s.isPause() {
		t.Errorf("#3: pause %.4f, want > 0.001", s.pause)
	}
	short := trig.w
	short.MsgSizes = []int{4 * kb}
	mix := wl("rc", "read", 77, 2048, 37, 2, 59, 7, 16*kb, []int{1088, 64, 3392, 64960, 80928, 14912, 416}, DirBi, MemLocal)
	for _, c := range []struct {
		name string
		w    scenario.Workload
	}{
		{"#3 with 4 KB messages", short},
		{"bidirectional READ of small and large messages at MTU 2 KB", mix},
	} {
		s := summarize(runMicro(t, "cx6vpi-200g", c.w, nil))
		t.Logf("%s: pause %.4f, %.1f Gb/s %.1f Mpps", c.name, s.pause, s.gbps, s.mpps)
		if s.isPause() || s.isLow() {
			t.Errorf("%s: pause %.4f, %.1f Gb/s: want no anomaly", c.name, s.pause, s.gbps)
		}
		if s := summarize(runMicro(t, "cx6vpi-200g", c.w, every)); !s.isPause() {
			t.Errorf("%s with read-resp-ns for every packet: pause %.4f, want > 0.001", c.name, s.pause)
		}
	}
}

// TestReadTagsSmallGathers: each SGE of a message is a DMA read of its own holding a PCIe read tag until its
// completion, so small messages gathered from 4 SGEs need many tags for the packet rate: with cx6vpi-200g's
// 512 (PCIe 4.0 10-bit tags) one direction of 256 B RC WRITEs reaches line rate, with 128 the tags stop it
// below 80% of both limits (an anomaly Collie does not report).
func TestReadTagsSmallGathers(t *testing.T) {
	w := wl("rc", "write", 8, 1024, 16, 4, 128, 1, 64*kb, []int{256}, DirUni, MemLocal)
	if s := summarize(runMicro(t, "cx6vpi-200g", w, nil)); s.isPause() || s.isLow() {
		t.Errorf("256 B writes of 4 SGEs: pause %.4f, %.1f Gb/s %.1f Mpps: want no anomaly", s.pause, s.gbps, s.mpps)
	}
	few := func(p *rnic.Profile) { p.Micro.PCIe.MaxOutstandingReads = 128 }
	if s := summarize(runMicro(t, "cx6vpi-200g", w, few)); !s.isLow() {
		t.Errorf("the same with 128 read tags: pause %.4f, %.1f Gb/s %.1f Mpps: want low throughput", s.pause, s.gbps, s.mpps)
	}
}

// TestOrderedShortBytes: on collie-f (relaxed ordering off) a message of at most pcie.ordered-short-bytes is a
// short request whatever the MTU, so collie A.1 #9's bidirectional mix of small and >= 64 KB messages pauses at
// MTU 256 too, where its 544 B messages take three packets; counting only one-packet messages as short it ran
// clean, and with relaxed ordering (cx6vpi-200g) it stays clean; a message of more than 1 KB received in one
// packet is a long request.
func TestOrderedShortBytes(t *testing.T) {
	w := wl("rc", "write", 9, 256, 88, 4, 148, 9, 3492*kb, []int{91328, 544, 19616}, DirBi, MemLocal)
	if s := summarize(runMicro(t, "collie-f", w, nil)); !s.isPause() {
		t.Errorf("collie-f: pause %.4f, %.1f Gb/s: want pause", s.pause, s.gbps)
	}
	onePacket := func(p *rnic.Profile) { p.Micro.PCIe.OrderedShortBytes, p.Micro.PCIe.OrderedMinSGE = 0, 0 }
	if s := summarize(runMicro(t, "collie-f", w, onePacket)); s.isPause() || s.isLow() {
		t.Errorf("collie-f with one-packet short requests: pause %.4f, %.1f Gb/s: want no anomaly", s.pause, s.gbps)
	}
	if s := summarize(runMicro(t, "cx6vpi-200g", w, nil)); s.isPause() || s.isLow() {
		t.Errorf("cx6vpi-200g: pause %.4f, %.1f Gb/s: want no anomaly", s.pause, s.gbps)
	}
	// Bidirectional READs of 3.3-71 KB at MTU 4K: the 3.3 and 3.9 KB responses arrive in one packet each but
	// are long requests; counted short, they paused (on the model the narrowing was made on, 256-byte context
	// reads and every kind's unit waiting for its lookups: with cache.qpc-bytes 64 and tx.lookup-wait
	// [rc-write] they drain either way).
	long := wl("rc", "read", 14, 4096, 13, 1, 55, 91, 140*kb, []int{16160, 14304, 71 * kb, 3328, 3968}, DirBi, MemLocal)
	if s := summarize(runMicro(t, "collie-f", long, nil)); s.isPause() || s.isLow() {
		t.Errorf("collie-f, READs of 3.3-71 KB: pause %.4f, %.1f Gb/s: want no anomaly", s.pause, s.gbps)
	}
	wholeContexts := func(p *rnic.Profile) { p.Micro.Cache.QPCBytes, p.Micro.Tx.LookupWait = 256, nil }
	if s := summarize(runMicro(t, "collie-f", long, wholeContexts)); s.isPause() || s.isLow() {
		t.Errorf("collie-f, READs of 3.3-71 KB, as narrowed: pause %.4f, %.1f Gb/s: want no anomaly", s.pause, s.gbps)
	}
	if s := summarize(runMicro(t, "collie-f", long, func(p *rnic.Profile) { onePacket(p); wholeContexts(p) })); !s.isPause() {
		t.Errorf("collie-f, READs of 3.3-71 KB, one-packet short requests: pause %.4f, %.1f Gb/s: want pause", s.pause, s.gbps)
	}
}

// TestOrderedLongBytes: on collie-f the long requests whose queued reads hold short writes back are messages
// of at least pcie.ordered-long-bytes (64 KB, collie A.1 #9's ">= 64KB"). Bidirectional RC WRITE of 64 B and
// 58 KB messages runs clean; with every message of more than 1 KB long it paused (0.05), where Collie reports
// nothing without a request of 64 KB. #9's trigger, [128 B, 64 KB, 1 KB], pauses either way.
func TestOrderedLongBytes(t *testing.T) {
	w := wl("rc", "write", 742, 1024, 11, 4, 166, 6, 740*kb, []int{64, 64, 59648}, DirBi, MemLocal)
	anyLong := func(p *rnic.Profile) { p.Micro.PCIe.OrderedLongBytes = 0 }
	if s := summarize(runMicro(t, "collie-f", w, nil)); s.isPause() || s.isLow() {
		t.Errorf("collie-f, 64 B and 58 KB messages: pause %.4f, %.1f Gb/s: want no anomaly", s.pause, s.gbps)
	}
	if s := summarize(runMicro(t, "collie-f", w, anyLong)); !s.isPause() {
		t.Errorf("the same with every message of more than 1 KB long: pause %.4f, want > 0.001", s.pause)
	}
	trigger := wl("rc", "write", 8, 4096, 8, 3, 128, 1, 4096*kb, []int{128, 64 * kb, kb}, DirBi, MemLocal)
	for _, f := range []func(*rnic.Profile){nil, anyLong} {
		if s := summarize(runMicro(t, "collie-f", trigger, f)); !s.isPause() {
			t.Errorf("#9's trigger (any long %v): pause %.4f, want > 0.001", f != nil, s.pause)
		}
	}
}

// TestOrderedMinSGE: on collie-f short writes wait behind long reads only where the WQEs gather at least
// pcie.ordered-min-sge (3) SGEs, table 2's condition for collie A.1 #9. Bidirectional UC WRITE of a 102 KB
// message among small ones with one SGE runs clean; without the gate it paused (0.18); with 3 SGEs it pauses.
func TestOrderedMinSGE(t *testing.T) {
	w := wl("uc", "write", 30, 2048, 1, 1, 378, 5, 40*kb, []int{32, 104480, 416, 1120, 32}, DirBi, MemLocal)
	ungated := func(p *rnic.Profile) { p.Micro.PCIe.OrderedMinSGE = 0 }
	if s := summarize(runMicro(t, "collie-f", w, nil)); s.isPause() || s.isLow() {
		t.Errorf("collie-f, one SGE: pause %.4f, %.1f Gb/s: want no anomaly", s.pause, s.gbps)
	}
	if s := summarize(runMicro(t, "collie-f", w, ungated)); !s.isPause() {
		t.Errorf("collie-f, one SGE, without the gate: pause %.4f, want > 0.001", s.pause)
	}
	w.SGE = 3
	if s := summarize(runMicro(t, "collie-f", w, nil)); !s.isPause() {
		t.Errorf("collie-f, three SGEs: pause %.4f, want > 0.001", s.pause)
	}
}

// TestOrderedLongReads: on collie-f a short write waits only behind the queued payload reads of long messages
// (pcie.ordered-long-reads), which collie A.1 #9's mix of <= 1 KB and >= 64 KB requests brings. Bidirectional
// UD SEND of 128-byte messages over 298 QPs, whose payload reads keep the read tags taken, stays clean; with
// every queued read holding the short writes back it paused. #9's trigger pauses either way
// (TestCollieAnomalies).
func TestOrderedLongReads(t *testing.T) {
	w := wl("ud", "send", 298, 512, 16, 2, 748, 501, 12*kb, []int{128}, DirBi, MemLocal)
	on := summarize(runMicro(t, "collie-f", w, nil))
	off := summarize(runMicro(t, "collie-f", w, func(p *rnic.Profile) { p.Micro.PCIe.OrderedLongReads, p.Micro.PCIe.OrderedMinSGE = false, 0 }))
	t.Logf("bidirectional UD of 128 B: pause %.4f %.1f Mpps; behind every read: pause %.4f", on.pause, on.mpps, off.pause)
	if on.isPause() || on.isLow() {
		t.Errorf("collie-f, bidirectional UD of 128 B: pause %.4f, %.1f Mpps of %.1f: want no anomaly", on.pause, on.mpps, on.limP)
	}
	if !off.isPause() {
		t.Errorf("the same with short writes behind every queued read: pause %.4f, want > 0.001", off.pause)
	}
}
