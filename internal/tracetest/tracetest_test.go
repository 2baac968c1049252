package tracetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// Plain rewrites an IPv4 RoCE frame's MACs and TTL with a valid header checksum, and Rewrite writes every packet
// through it, timestamps and lengths kept.
func TestRewritePlain(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "real-captures", "hexvec_cx4lx_cnp_from_scapy_test.pcap")
	dst := filepath.Join(t.TempDir(), "plain.pcap")
	n, rewritten := 0, 0
	Rewrite(t, src, dst, Pcap, func(i int, p *trace.Packet) bool {
		if i != n {
			t.Errorf("packet %d counted as %d", n, i)
		}
		n++
		if _, ok := Plain(p.Data, p.OrigLen); ok {
			rewritten++
		}
		return true
	})
	if rewritten == 0 {
		t.Fatalf("no IPv4 RoCE frame among %d packets of %s: the test reads nothing", n, src)
	}
	in, err := trace.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := trace.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for i := 0; i < n; i++ {
		a, errA := in.Next()
		b, errB := out.Next()
		if errA != nil || errB != nil {
			t.Fatalf("packet %d: %v %v", i, errA, errB)
		}
		if a.Timestamp != b.Timestamp || a.OrigLen != b.OrigLen || len(a.Data) != len(b.Data) || b.Comment != "" {
			t.Errorf("packet %d: timestamp, length or comment changed", i)
		}
		var pkt roce.Packet
		if !pkt.Decode(b.Data, b.OrigLen) || pkt.IPv6 {
			continue
		}
		l3 := b.Data[pkt.L3Offset:]
		sum, stored := roce.IPv4Checksum(l3[:pkt.IPHdrLen]), uint16(l3[10])<<8|uint16(l3[11])
		if b.Data[0] != 2 || b.Data[5] != 1 || b.Data[11] != 2 || l3[8] != 64 || sum != stored {
			t.Errorf("packet %d: MACs % x, TTL %d, header checksum %#x (computed %#x); want 02:..:01, 02:..:02, 64, a right checksum", i, b.Data[:12], l3[8], stored, sum)
		}
	}
}

// A pcapng copy keeps the comments edit leaves and stops where edit says.
func TestRewritePcapngStops(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "real-captures", "magnate3_cx_nvmeof_rdma_discover.pcap")
	dst := filepath.Join(t.TempDir(), "first.pcapng")
	Rewrite(t, src, dst, Pcapng, func(i int, p *trace.Packet) bool {
		p.Comment = "n=" + string(rune('a'+i))
		return i < 2
	})
	out, err := trace.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var got []string
	for {
		p, err := out.Next()
		if err != nil {
			break
		}
		got = append(got, p.Comment)
	}
	if len(got) != 2 || got[0] != "n=a" || got[1] != "n=b" {
		t.Errorf("comments %q; want the first two packets, n=a and n=b", got)
	}
}

// fatalTB records a Fatal and stops the goroutine as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A capture that does not read on (a record longer than any packet) is an error, not its end: Rewrite fails
// the test rather than copying what came before as if it were the whole capture.
func TestRewriteFailsOnABadCapture(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "real-captures", "hexvec_cx4lx_cnp_from_scapy_test.pcap")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// The first record's captured length (after the 24-byte file header and two timestamp words).
	b[24+8], b[24+9], b[24+10], b[24+11] = 0xf0, 0xff, 0xff, 0x7f
	cut := filepath.Join(t.TempDir(), "bad.pcap")
	if err := os.WriteFile(cut, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Rewrite(tb, cut, filepath.Join(t.TempDir(), "out.pcap"), Pcap, func(int, *trace.Packet) bool { return true })
	}()
	<-done
	if !strings.Contains(tb.msg, "reading "+cut) {
		t.Errorf("Rewrite of a bad capture: fatal %q; want the read error named", tb.msg)
	}
}
