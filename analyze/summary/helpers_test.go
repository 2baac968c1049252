package summary

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

var (
	hostA = netip.MustParseAddr("10.0.0.2")
	hostB = netip.MustParseAddr("10.0.0.3")
)

// frameSpec describes a synthetic RoCEv2 packet from A to B unless from/to say otherwise.
type frameSpec struct {
	op       roce.Opcode
	psn      uint32
	qp       uint32
	tos      uint8
	syndrome uint8
	payload  int
	from, to netip.Addr
	vlan     uint16 // 0: untagged
}

// frame encodes a frame with the roce codec (a correct ICRC).
func frame(t testing.TB, s frameSpec) []byte {
	t.Helper()
	if !s.from.IsValid() {
		s.from, s.to = hostA, hostB
	}
	p := roce.Packet{Version: roce.RoCEv2, SrcIP: s.from, DstIP: s.to, TOS: s.tos, TTL: 64, UDPSrc: 49152,
		IPv6: s.from.Is6()}
	p.EthSrc = [6]byte{0x02, 0, 0, 0, 0, 1}
	p.EthDst = [6]byte{0x02, 0, 0, 0, 0, 2}
	if s.vlan != 0 {
		p.NumVLANs = 1
		p.VLANs[0] = roce.VLAN{TPID: roce.EtherTypeVLAN, TCI: 3<<13 | s.vlan}
	}
	p.BTH = roce.BTH{Opcode: s.op, PKey: 0xffff, DestQP: s.qp, PSN: roce.PSN(s.psn)}
	p.AETH = roce.AETH{Syndrome: s.syndrome}
	p.PayloadLen = s.payload
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("encoding %v: %v", s.op, err)
	}
	return b
}

// writePcap writes frames with timestamps ts (ns) to a new pcap file in dir.
func writePcap(t testing.TB, dir, name string, frames [][]byte, ts []int64) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames {
		if err := w.WritePacket(ts[i], fr, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// statsOf feeds frames to a fresh Stats and returns its report.
func statsOf(t testing.TB, frames ...[]byte) *Report {
	t.Helper()
	s := NewStats(Options{})
	for i, f := range frames {
		s.AddFrame(f, len(f), int64(i+1)*1000)
	}
	return s.Report()
}

func findFlow(r *Report, src, dst netip.Addr, qp uint32) *Flow {
	for i := range r.Flows {
		f := &r.Flows[i]
		if f.Src == src.String() && f.Dst == dst.String() && f.DestQP == qp {
			return f
		}
	}
	return nil
}
