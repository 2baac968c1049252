package summary

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

func write(t *testing.T, psn uint32) []byte {
	return frame(t, frameSpec{op: roce.RCWriteMiddle, psn: psn, qp: 0x11, tos: 2, payload: 1024})
}

func TestRetransmissionsAndGaps(t *testing.T) {
	// 100 101 [102,103 lost] 104 105 | go-back-N from 102: 102 103 104 105 | 106 [107 lost] 108
	var frames [][]byte
	for _, psn := range []uint32{100, 101, 104, 105, 102, 103, 104, 105, 106, 108} {
		frames = append(frames, write(t, psn))
	}
	r := statsOf(t, frames...)
	if r.Retransmitted != 4 || r.Gaps != 2 || r.MissingPSNs != 3 {
		t.Errorf("retransmitted %d, gaps %d, missing %d; want 4, 2, 3", r.Retransmitted, r.Gaps, r.MissingPSNs)
	}
	f := findFlow(r, hostA, hostB, 0x11)
	if f == nil || f.Retransmitted != 4 || f.Gaps != 2 || f.MissingPSNs != 3 || f.FirstPSN != 100 || f.LastPSN != 108 {
		t.Fatalf("flow %+v", f)
	}
	if f.Packets != 10 || f.Bytes != int64(10*len(frames[0])) || f.Data != 10 {
		t.Errorf("flow packets %d bytes %d data %d", f.Packets, f.Bytes, f.Data)
	}
	if h := healthOf(r, "loss-recovery"); h == nil || h.Verdict != VerdictWarn {
		t.Errorf("loss-recovery health %+v, want warn", h)
	}
}

func TestPSNWrapIsNotARetransmission(t *testing.T) {
	r := statsOf(t, write(t, 0xfffffe), write(t, 0xffffff), write(t, 0), write(t, 1), write(t, 0xffffff))
	if r.Retransmitted != 1 || r.Gaps != 0 {
		t.Errorf("across the 24-bit wrap: retransmitted %d gaps %d, want 1 (the last) and 0", r.Retransmitted, r.Gaps)
	}
}

func TestReadRequestsAndResponses(t *testing.T) {
	// A -> B: READ request at 10 (its three responses use 10..12), then WRITE at 13: no gap.
	// B -> A: responses 10 11 12, then 11 again (re-issued read), then 14 (13 skipped: a gap).
	frames := [][]byte{
		frame(t, frameSpec{op: roce.RCReadRequest, psn: 10, qp: 7}),
		frame(t, frameSpec{op: roce.RCWriteOnly, psn: 13, qp: 7, payload: 8}),
		frame(t, frameSpec{op: roce.RCReadResponseFirst, psn: 10, qp: 9, from: hostB, to: hostA, payload: 64}),
		frame(t, frameSpec{op: roce.RCReadResponseMiddle, psn: 11, qp: 9, from: hostB, to: hostA, payload: 64}),
		frame(t, frameSpec{op: roce.RCReadResponseLast, psn: 12, qp: 9, from: hostB, to: hostA, payload: 64}),
		frame(t, frameSpec{op: roce.RCReadResponseMiddle, psn: 11, qp: 9, from: hostB, to: hostA, payload: 64}),
		frame(t, frameSpec{op: roce.RCReadResponseOnly, psn: 14, qp: 9, from: hostB, to: hostA, payload: 64}),
	}
	r := statsOf(t, frames...)
	req, resp := findFlow(r, hostA, hostB, 7), findFlow(r, hostB, hostA, 9)
	if req == nil || req.Gaps != 0 || req.Retransmitted != 0 || req.FirstPSN != 10 || req.LastPSN != 13 {
		t.Errorf("request flow %+v: want no gap after a READ request", req)
	}
	if resp == nil || resp.Retransmitted != 1 || resp.Gaps != 1 || resp.MissingPSNs != 1 {
		t.Errorf("response flow %+v: want 1 retransmission, 1 gap of 1", resp)
	}
	if resp != nil && (resp.RespFirstPSN == nil || *resp.RespFirstPSN != 10 || *resp.RespLastPSN != 14) {
		t.Errorf("response PSN range %v..%v, want 10..14", resp.RespFirstPSN, resp.RespLastPSN)
	}
	if r.DataPackets != 6 {
		t.Errorf("data packets %d, want 6 (WRITE + 5 READ responses)", r.DataPackets)
	}
}

func TestACKsNAKsCNPsECN(t *testing.T) {
	frames := [][]byte{
		write(t, 1),
		frame(t, frameSpec{op: roce.RCWriteMiddle, psn: 2, qp: 0x11, tos: 3, payload: 1024}), // CE
		frame(t, frameSpec{op: roce.RCWriteMiddle, psn: 3, qp: 0x11, tos: 3, payload: 1024}), // CE
		frame(t, frameSpec{op: roce.RCWriteMiddle, psn: 4, qp: 0x11, tos: 1, payload: 1024}), // ECT(1)
		frame(t, frameSpec{op: roce.RCWriteMiddle, psn: 5, qp: 0x11, tos: 0, payload: 1024}), // not-ECT
		frame(t, frameSpec{op: roce.RCAcknowledge, psn: 3, qp: 0x22, from: hostB, to: hostA, syndrome: 0x1f}),
		frame(t, frameSpec{op: roce.RCAcknowledge, psn: 3, qp: 0x22, from: hostB, to: hostA, syndrome: 0x60}),
		frame(t, frameSpec{op: roce.RCAcknowledge, psn: 3, qp: 0x22, from: hostB, to: hostA, syndrome: 0x62}),
		frame(t, frameSpec{op: roce.RCAcknowledge, psn: 3, qp: 0x22, from: hostB, to: hostA, syndrome: 0x2e}),
		frame(t, frameSpec{op: roce.CNP, qp: 0x22, from: hostB, to: hostA, tos: 0xc2}),
	}
	r := statsOf(t, frames...)
	if r.ECN != (ECNCounts{NotECT: 5, ECT0: 2, ECT1: 1, CE: 2}) { // ACKs not-ECT, the CNP ECT(0)
		t.Errorf("ECN %+v", r.ECN)
	}
	if r.ACKs != 4 || r.RNRNAKs != 1 || r.CNPs != 1 {
		t.Errorf("acks %d rnr %d cnps %d, want 4, 1, 1", r.ACKs, r.RNRNAKs, r.CNPs)
	}
	if r.NAKs["psn-sequence-error"] != 1 || r.NAKs["remote-access-error"] != 1 || r.NAKs["invalid-request"] != 0 {
		t.Errorf("NAKs %v", r.NAKs)
	}
	for _, name := range []string{"psn-sequence-error", "invalid-request", "remote-access-error",
		"remote-operational-error", "invalid-rd-request"} {
		if _, ok := r.NAKs[name]; !ok {
			t.Errorf("NAK code %s absent from the map (scripts expect every defined code)", name)
		}
	}
	if r.CEPerCNP == nil || *r.CEPerCNP != 2 {
		t.Errorf("CE per CNP %v, want 2", r.CEPerCNP)
	}
	if r.DSCP.Get(48) != 1 || r.DSCP.Get(0) != 9 {
		t.Errorf("DSCP %+v", r.DSCP)
	}
	back := findFlow(r, hostB, hostA, 0x22)
	if back == nil || back.CNPs != 1 || back.NAKs != 2 || back.RNRNAKs != 1 || back.ACKs != 4 ||
		back.FirstPSN != 3 || back.Retransmitted != 0 {
		t.Errorf("reverse flow %+v", back)
	}
	// 2 CE of 10 RoCE packets = 20%: a problem by the guide's table; 1 CNP per 5 data packets: high.
	if h := healthOf(r, "ce-rate"); h == nil || h.Verdict != VerdictProblem || h.Value != 0.2 {
		t.Errorf("ce-rate %+v", h)
	}
	if h := healthOf(r, "cnp-rate"); h == nil || h.Verdict != VerdictProblem {
		t.Errorf("cnp-rate %+v", h)
	}
}

func TestHealthThresholds(t *testing.T) {
	cases := []struct {
		ce, total int
		want      Verdict
	}{{4, 100, VerdictOK}, {5, 100, VerdictWarn}, {15, 100, VerdictWarn}, {16, 100, VerdictProblem}}
	for _, c := range cases {
		s := NewStats(Options{})
		for i := 0; i < c.total; i++ {
			tos := uint8(2)
			if i < c.ce {
				tos = 3
			}
			f := frame(t, frameSpec{op: roce.RCWriteMiddle, psn: uint32(i), qp: 1, tos: tos, payload: 16})
			s.AddFrame(f, len(f), 0)
		}
		if h := healthOf(s.Report(), "ce-rate"); h == nil || h.Verdict != c.want {
			t.Errorf("%d CE of %d: %+v, want %s", c.ce, c.total, h, c.want)
		}
	}
}

// pfcFrame builds an 802.1Qbb PFC frame pausing priority 3 (quanta q) and resuming priority 4.
func pfcFrame(q uint16) []byte {
	b := make([]byte, 60)
	copy(b, []byte{0x01, 0x80, 0xc2, 0, 0, 0x01})
	binary.BigEndian.PutUint16(b[12:], EtherTypeMACControl)
	binary.BigEndian.PutUint16(b[14:], macCtlPFC)
	binary.BigEndian.PutUint16(b[16:], 1<<3|1<<4)
	binary.BigEndian.PutUint16(b[18+2*3:], q)
	return b
}

func TestPFCAndVLAN(t *testing.T) {
	pause := make([]byte, 60)
	binary.BigEndian.PutUint16(pause[12:], EtherTypeMACControl)
	binary.BigEndian.PutUint16(pause[14:], macCtlPause)
	frames := [][]byte{pfcFrame(0xffff), pfcFrame(0), pause,
		frame(t, frameSpec{op: roce.RCSendOnly, psn: 1, qp: 5, vlan: 100, payload: 4}),
		frame(t, frameSpec{op: roce.RCSendOnly, psn: 2, qp: 5, vlan: 100, payload: 4}),
		frame(t, frameSpec{op: roce.RCSendOnly, psn: 3, qp: 5, payload: 4}),
	}
	r := statsOf(t, frames...)
	if r.PFC.PFCFrames != 2 || r.PFC.PauseFrames != 1 {
		t.Errorf("PFC %+v, want 2 PFC and 1 PAUSE", r.PFC)
	}
	want := []PFCPriority{{Priority: 3, Pause: 1, Resume: 1}, {Priority: 4, Resume: 2}}
	if !slices.Equal(r.PFC.Priorities, want) {
		t.Errorf("priorities %+v, want %+v", r.PFC.Priorities, want)
	}
	if r.VLANs.Get(100) != 2 || len(r.VLANs) != 1 || r.Untagged != 4 {
		t.Errorf("VLANs %+v untagged %d", r.VLANs, r.Untagged)
	}
	if r.OtherEtherTypes["0x8808"] != 3 || r.NotRoCE["other ethertype"] != 3 {
		t.Errorf("ethertypes %v not RoCE %v", r.OtherEtherTypes, r.NotRoCE)
	}
	if h := healthOf(r, "pfc"); h == nil || h.Verdict != VerdictProblem {
		t.Errorf("3 pause frames in 6: %+v, want problem (frequent)", h)
	}
	if f := findFlow(r, hostA, hostB, 5); f == nil || f.Gaps != 0 || f.Packets != 3 {
		t.Errorf("VLAN-tagged and untagged packets of one QP: flow %+v", f)
	}
}

func TestIPv6AndRoCEv1(t *testing.T) {
	a6, b6 := netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::3")
	v6 := frame(t, frameSpec{op: roce.RCSendOnly, psn: 1, qp: 5, from: a6, to: b6, payload: 4})
	p := roce.Packet{Version: roce.RoCEv1, SrcIP: a6, DstIP: b6, TTL: 1}
	p.BTH = roce.BTH{Opcode: roce.RCSendOnly, DestQP: 6, PSN: 1, PKey: 0xffff}
	v1, err := p.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := statsOf(t, v6, v1)
	if r.RoCEv2IPv6 != 1 || r.RoCEv1 != 1 || r.RoCEv2 != 1 || r.ICRC.Good != 2 {
		t.Errorf("v2 over IPv6 %d, v1 %d, v2 %d, ICRC good %d", r.RoCEv2IPv6, r.RoCEv1, r.RoCEv2, r.ICRC.Good)
	}
	if f := findFlow(r, a6, b6, 6); f == nil || f.Version != "RoCEv1" {
		t.Errorf("RoCEv1 flow %+v", f)
	}
}

func TestBadAndTruncatedICRC(t *testing.T) {
	good := write(t, 1)
	bad := write(t, 2)
	bad[60] ^= 0x01 // a payload bit
	cut := write(t, 3)
	s := NewStats(Options{})
	s.AddFrame(good, len(good), 1)
	s.AddFrame(bad, len(bad), 2)
	s.AddFrame(cut[:128], len(cut), 3)
	r := s.Report()
	if r.ICRC.Good != 1 || r.ICRC.Bad != 1 || r.ICRC.NotCheckable != 1 {
		t.Errorf("ICRC %+v, want 1/1/1", r.ICRC)
	}
	if got, want := r.ICRCLine(), "ICRC: 1 good, 1 BAD (50.0%), 1 not checkable (truncated)"; got != want {
		t.Errorf("ICRC line %q, want %q", got, want)
	}
	if r.Bytes != int64(len(good)+len(bad)+len(cut)) || r.CapBytes != int64(len(good)+len(bad)+128) {
		t.Errorf("bytes %d captured %d", r.Bytes, r.CapBytes)
	}
}

// TestJSONFieldNames checks the names of spec/scenario-and-cli.md (`lumina analyze --json`) exactly.
func TestJSONFieldNames(t *testing.T) {
	frames := [][]byte{write(t, 1), frame(t, frameSpec{op: roce.CNP, qp: 0x22, from: hostB, to: hostA, tos: 0xc2})}
	var buf bytes.Buffer
	if err := statsOf(t, frames...).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	for _, k := range []string{"packets", "roce_packets", "icrc", "opcodes", "ecn", "dscp", "cnps", "naks",
		"rnr_naks", "flows"} {
		if _, ok := m[k]; !ok {
			t.Errorf("top-level field %q missing", k)
		}
	}
	icrc := m["icrc"].(map[string]any)
	for _, k := range []string{"good", "bad"} {
		if _, ok := icrc[k]; !ok {
			t.Errorf("icrc.%s missing", k)
		}
	}
	ops := m["opcodes"].([]any)
	if len(ops) != 2 {
		t.Fatalf("opcodes %v", ops)
	}
	for _, k := range []string{"opcode", "name", "count"} {
		if _, ok := ops[0].(map[string]any)[k]; !ok {
			t.Errorf("opcodes[].%s missing", k)
		}
	}
	if ops[0].(map[string]any)["opcode"].(float64) != 7 || ops[1].(map[string]any)["name"] != "CNP" {
		t.Errorf("opcodes not sorted by opcode: %v", ops)
	}
	ecn := m["ecn"].(map[string]any)
	for _, k := range []string{"not_ect", "ect0", "ect1", "ce"} {
		if _, ok := ecn[k]; !ok {
			t.Errorf("ecn.%s missing", k)
		}
	}
	if d := m["dscp"].(map[string]any); d["0"] != 1.0 || d["48"] != 1.0 {
		t.Errorf("dscp %v, want {\"0\":1,\"48\":1}", d)
	}
	if _, ok := m["naks"].(map[string]any)["psn-sequence-error"]; !ok {
		t.Errorf("naks %v lacks psn-sequence-error", m["naks"])
	}
	flows := m["flows"].([]any)
	for _, k := range []string{"src", "dst", "dest_qp", "packets", "bytes", "first_psn", "last_psn", "retransmitted"} {
		if _, ok := flows[0].(map[string]any)[k]; !ok {
			t.Errorf("flows[].%s missing", k)
		}
	}
	if flows[0].(map[string]any)["src"] != "10.0.0.2" || flows[1].(map[string]any)["src"] != "10.0.0.3" {
		t.Errorf("flows not sorted by source: %v", flows)
	}
	// Round trip: the JSON decodes back into a Report with the same counts.
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.DSCP.Get(48) != 1 || back.CNPs != 1 {
		t.Errorf("round trip: %v, %+v", err, back.DSCP)
	}
}

func TestDeterministicOutput(t *testing.T) {
	var frames [][]byte
	for i := 0; i < 50; i++ {
		frames = append(frames, frame(t, frameSpec{op: roce.RCSendOnly, psn: uint32(i), qp: uint32(i % 7),
			tos: uint8(i%4) | uint8(i%5)<<2, payload: 8}))
	}
	var first []byte
	for run := 0; run < 5; run++ {
		var buf bytes.Buffer
		r := statsOf(t, frames...)
		if err := r.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = buf.Bytes()
		} else if !bytes.Equal(first, buf.Bytes()) {
			t.Fatal("output differs between runs over the same input")
		}
	}
}

func TestMergeInTimeOrder(t *testing.T) {
	dir := t.TempDir()
	// Two capture points of one flow: odd PSNs in one file, even in the other, interleaved in time.
	var fa, fb [][]byte
	var ta, tb []int64
	for psn := uint32(0); psn < 10; psn++ {
		if psn%2 == 0 {
			fa, ta = append(fa, write(t, psn)), append(ta, int64(psn)*1000+1e9)
		} else {
			fb, tb = append(fb, write(t, psn)), append(tb, int64(psn)*1000+1e9)
		}
	}
	a := writePcap(t, dir, "a.pcap", fa, ta)
	b := writePcap(t, dir, "b.pcap", fb, tb)
	r, err := Analyze([]string{a, b}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Order != "time" || r.Packets != 10 || r.Retransmitted != 0 || r.Gaps != 0 {
		t.Errorf("order %s packets %d retx %d gaps %d: want a time merge without retransmission or gap", r.Order,
			r.Packets, r.Retransmitted, r.Gaps)
	}
	if len(r.Files) != 2 || r.Files[0].Packets != 5 || r.Files[1].Packets != 5 {
		t.Errorf("files %+v", r.Files)
	}
	if r.DurationS != 9e-6 {
		t.Errorf("duration %v, want 9 us", r.DurationS)
	}
	// Each file alone: every other PSN is missing.
	ra, err := Analyze([]string{a}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ra.Gaps != 4 || ra.Order != "file" {
		t.Errorf("one file: gaps %d order %s, want 4, file", ra.Gaps, ra.Order)
	}
}

func TestMergeInMirrorOrder(t *testing.T) {
	dir := t.TempDir()
	// Lumina dumps: the mirror sequence gives the true order (PSN 0..5, PSN 3 dropped by the switch and then
	// retransmitted) while the dumpers' timestamps disagree with it.
	psns := []uint32{0, 1, 2, 3, 4, 3, 4, 5}
	events := []roce.EventType{0, 0, 0, roce.EventDrop, 0, 0, 0, 0}
	var fa, fb [][]byte
	var ta, tb []int64
	for i, psn := range psns {
		f := write(t, psn)
		if err := roce.EncodeMirror(f, roce.Mirror{Event: events[i], Seq: uint64(i + 1), TimestampNs: uint64(i)}); err != nil {
			t.Fatal(err)
		}
		ts := int64(len(psns)-i) * 1000 // reversed: time order would be wrong
		if i%2 == 0 {
			fa, ta = append(fa, f), append(ta, ts+1e9)
		} else {
			fb, tb = append(fb, f), append(tb, ts+1e9)
		}
	}
	// Each dumper's own file must be in increasing time for a time merge; here only the sequence is ordered.
	a := writePcap(t, dir, "dump0.pcap", fa, ta)
	b := writePcap(t, dir, "dump1.pcap", fb, tb)
	for _, path := range []string{a, b} {
		if tagged, err := IsMirrorTagged(path); err != nil || !tagged {
			t.Fatalf("%s: tagged=%v err=%v", path, tagged, err)
		}
	}
	r, err := Analyze([]string{a, b}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Order != "mirror-seq" || r.Mirror == nil {
		t.Fatalf("order %s mirror %+v: want auto-detected mirror-seq", r.Order, r.Mirror)
	}
	if r.Retransmitted != 2 || r.Gaps != 0 {
		t.Errorf("retransmitted %d gaps %d, want 2 (PSN 3 and 4 again) and 0", r.Retransmitted, r.Gaps)
	}
	m := r.Mirror
	if m.Events["drop"] != 1 || m.Events["none"] != 7 || m.FirstSeq != 1 || m.LastSeq != 8 || m.SeqGaps != 0 {
		t.Errorf("mirror summary %+v", m)
	}
	// Forcing time order reads the same packets in the wrong order.
	rt, err := Analyze([]string{a, b}, Options{Order: OrderTime})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Order != "time" || rt.Mirror != nil || rt.Retransmitted == 2 {
		t.Errorf("forced time order: order %s retransmitted %d", rt.Order, rt.Retransmitted)
	}
	// A real capture is not tagged.
	if tagged, err := IsMirrorTagged(filepath.Join(realDir, "oferby-proxy_roce.pcap")); err != nil || tagged {
		t.Errorf("oferby capture detected as Lumina-tagged (%v)", err)
	}
}

func TestAbsurdLengthAndPartialReport(t *testing.T) {
	dir := t.TempDir()
	good := write(t, 1)
	path := writePcap(t, dir, "x.pcap", [][]byte{good, good}, []int64{1e9, 2e9})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Second record: captured length 2^31.
	off := 24 + 16 + len(good)
	binary.LittleEndian.PutUint32(b[off+8:], 1<<31)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Analyze([]string{path}, Options{})
	var fe *trace.FormatError
	if !errors.As(err, &fe) || fe.Offset != int64(off) || !strings.Contains(err.Error(), "x.pcap") {
		t.Fatalf("err %v, want a FormatError at byte offset %d naming the file", err, off)
	}
	if r == nil || r.Packets != 1 || r.ICRC.Good != 1 {
		t.Errorf("partial report %+v, want the one packet before the bad record", r)
	}
}

func TestParseOrder(t *testing.T) {
	for s, want := range map[string]Order{"": OrderAuto, "auto": OrderAuto, "time": OrderTime, "mirror": OrderMirror,
		"mirror-seq": OrderMirror} {
		if got, err := ParseOrder(s); err != nil || got != want {
			t.Errorf("ParseOrder(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseOrder("seq"); err == nil || !strings.Contains(err.Error(), "want auto, time or mirror-seq") {
		t.Errorf("ParseOrder(seq): %v", err)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	frames := [][]byte{
		write(t, 1),
		frame(t, frameSpec{op: roce.RCAcknowledge, psn: 1, qp: 0x22, from: hostB, to: hostA, syndrome: 0x60}),
		frame(t, frameSpec{op: roce.CNP, qp: 0x22, from: hostB, to: hostA, tos: 0xc2}),
		frame(t, frameSpec{op: roce.RCWriteFirst, psn: 2, qp: 0x11, payload: 1024, vlan: 7}),
		pfcFrame(10),
	}
	s := NewStats(Options{})
	s.SetMirrorTagged(true)
	pk := trace.Packet{LinkType: trace.LinkTypeEthernet}
	for _, f := range frames { // warm up: flows and EtherTypes created
		pk.Data, pk.OrigLen = f, len(f)
		s.Add(&pk)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		f := frames[i%len(frames)]
		pk.Data, pk.OrigLen, pk.Timestamp = f, len(f), int64(i)
		s.Add(&pk)
		i++
	})
	if allocs != 0 {
		t.Errorf("Add allocates %.2f times per packet, want 0", allocs)
	}
}

// The checkers reading a summary.Source use its decoding (analyze.Predecoded) instead of decoding again; their
// result must be the same as with their own decoding.
func TestSourceDecodedMatchesOwnDecoding(t *testing.T) {
	path := "../../testdata/real-captures/magnate3_cx_rocev1_plus_v2_mixed.pcap"
	src, err := Open([]string{path}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var own roce.Packet
	n := 0
	for {
		p, err := src.Next()
		if err != nil {
			break
		}
		got, ok := src.Decoded()
		if !ok {
			t.Fatalf("packet %d: not decoded", p.Index)
		}
		want := own.Decode(p.Data, p.OrigLen)
		if (got.Version != roce.NotRoCE) != want || got.BTH != own.BTH || got.SrcIP != own.SrcIP || got.PayloadLen != own.PayloadLen {
			t.Fatalf("packet %d: shared decoding differs from a fresh one", p.Index)
		}
		n++
	}
	if n != 624 {
		t.Fatalf("%d packets, want 624", n)
	}
	src2, err := Open([]string{path}, Options{Port: 9741})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if _, err := src2.Next(); err != nil {
		t.Fatal(err)
	}
	if _, ok := src2.Decoded(); ok {
		t.Error("a decoding on another UDP port must not be offered to analyzers that expect 4791")
	}
}
