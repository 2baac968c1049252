// Package tracetest is test support for the packages that read captures (export, wireshark): a Lumina trace
// rewritten as another capture would be, with the rewrite each test needs. Only tests import it.
package tracetest

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// Format is the kind of file Rewrite writes.
type Format int

const (
	// Pcap: nanosecond timestamps, no comments (what tcpdump on a host writes).
	Pcap Format = iota
	// Pcapng: one Ethernet interface, each packet's comment kept (as the trace is).
	Pcapng
)

// Rewrite copies the capture src into dst, each packet passed through edit first: its Data a copy that edit
// may change in place, its Comment replaceable; i counts the packets from 0. edit returns false to stop: the
// packets before that one are the copy.
func Rewrite(t testing.TB, src, dst string, format Format, edit func(i int, p *trace.Packet) bool) {
	t.Helper()
	in, err := trace.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var write func(p *trace.Packet) error
	var closeW func() error
	switch format {
	case Pcapng:
		w, err := trace.NewPcapngWriter(f, trace.PcapngWriterOptions{Interfaces: []trace.InterfaceSpec{{LinkType: trace.LinkTypeEthernet, SnapLen: 65535}}})
		if err != nil {
			t.Fatal(err)
		}
		write = func(p *trace.Packet) error { return w.WritePacket(0, p.Timestamp, p.Data, p.OrigLen, p.Comment) }
		closeW = w.Close
	default:
		w, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true})
		if err != nil {
			t.Fatal(err)
		}
		write = func(p *trace.Packet) error { return w.WritePacket(p.Timestamp, p.Data, p.OrigLen) }
		closeW = w.Close
	}
	for i := 0; ; i++ {
		p, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: packet %d: %v", src, i, err)
		}
		p.Data = append([]byte(nil), p.Data...)
		if !edit(i, p) {
			break
		}
		if err := write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := closeW(); err != nil {
		t.Fatal(err)
	}
}

// Plain makes a mirrored IPv4 RoCE frame what tcpdump on a host captures: ordinary MAC addresses
// (02:00:00:00:00:01 to 02:00:00:00:00:02 for every frame) and a real TTL (64) in place of the event, the IPv4
// header checksum made right again. It returns the frame decoded and whether it was rewritten (not an IPv4
// RoCE frame: left as it is).
func Plain(d []byte, origLen int) (pkt roce.Packet, ok bool) {
	if !pkt.Decode(d, origLen) || pkt.IPv6 {
		return pkt, false
	}
	copy(d[0:12], []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2})
	l3 := pkt.L3Offset
	d[l3+8] = 64
	d[l3+10], d[l3+11] = 0, 0
	binary.BigEndian.PutUint16(d[l3+10:], roce.IPv4Checksum(d[l3:l3+pkt.IPHdrLen]))
	return pkt, true
}
