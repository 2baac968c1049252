package analyze

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// wantPairs asserts the learned connections (by first request) and that go-back-N passes every one.
func wantPairs(t *testing.T, res *Analysis, conns []tconn) {
	t.Helper()
	if len(res.Connections) != len(conns) {
		t.Fatalf("learned %d connections, want %d: %+v", len(res.Connections), len(conns), res.Connections)
	}
	for i, c := range res.Connections {
		w := conns[i]
		if c.ReqIP != w.reqIP || c.RespIP != w.respIP || c.RespQPN != w.respQPN || c.ReqQPN != w.reqQPN ||
			c.ReqIPSN != w.ipsn {
			t.Errorf("connection %d: learned %s qp %#x > %s qp %#x from PSN %d, want qp %#x > qp %#x from PSN %d",
				i, c.ReqIP, c.ReqQPN, c.RespIP, c.RespQPN, c.ReqIPSN, w.reqQPN, w.respQPN, w.ipsn)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	judged := map[int]bool{}
	for _, c := range res.Checks {
		if c.Analyzer != "gbn" || !c.OK || c.ViolationCount != 0 || judged[c.QP] {
			t.Fatalf("check %s qp %d: ok %v, %d violation(s) %+v", c.Analyzer, c.QP, c.OK, c.ViolationCount, c.Violations)
		}
		judged[c.QP] = true
	}
	if len(judged) != len(conns) {
		t.Fatalf("%d connection(s) judged, want %d", len(judged), len(conns))
	}
}

// Several QPs between the same two hosts, interleaved, with CNPs to the requesters before any ACK (what bench/
// gencap writes): a CNP carries no PSN, so it must not tie a requester QP to the first unpaired connection
// between the hosts (it did: the ACKs of one QP were then judged against another's PSNs, "ACK goes backwards").
func TestLearnPairsByPSNNotByFirstCNP(t *testing.T) {
	conns := []tconn{
		mkConn("10.0.0.1", "10.0.0.2", 0x208, 0xd08, 12572765),
		mkConn("10.0.0.1", "10.0.0.2", 0x20c, 0xd0c, 14834480),
		mkConn("10.0.0.1", "10.0.0.2", 0x200, 0xd00, 499741),
	}
	b := &builder{t: t, plain: true}
	tUs := 0.0
	step := func() float64 { tUs++; return tUs }
	for rel := range 6 {
		for _, c := range conns {
			b.data(c, rel, writeOp(rel, 6), 0, step())
		}
		if rel == 1 {
			// CNPs to the last and the middle requester QP, before any ACK names a requester QP.
			b.cnpTo(conns[2], true, step())
			b.cnpTo(conns[1], true, step())
		}
		if rel == 3 {
			b.ack(conns[2], 3, step())
			b.ack(conns[0], 3, step())
			b.ack(conns[1], 3, step())
		}
	}
	for _, i := range []int{2, 1, 0} {
		b.ack(conns[i], 5, step())
	}
	res := b.run(Options{})
	wantPairs(t, res, conns)
	// The two CNPs came while three connections were unpaired: neither can be attributed.
	if res.CNP.CNPs != 2 || res.CNP.Unsolicited != 2 {
		t.Fatalf("CNPs %d unsolicited %d, want 2 and 2", res.CNP.CNPs, res.CNP.Unsolicited)
	}
}

// With one unpaired connection between the hosts, a CNP is attributed to it (it answers its CE mark) without
// pairing it: its ACKs still do.
func TestLearnCNPWithOneCandidate(t *testing.T) {
	c := mkConn("10.0.0.1", "10.0.0.2", 0x200, 0xd00, 77)
	b := &builder{t: t, plain: true}
	b.data(c, 0, roce.RCWriteFirst, roce.EventECN, 1)
	b.cnpTo(c, true, 2)
	b.data(c, 1, roce.RCWriteLast, 0, 3)
	b.ack(c, 1, 4)
	res := b.run(Options{})
	wantPairs(t, res, []tconn{c})
	if res.CNP.CNPs != 1 || res.CNP.Unsolicited != 0 {
		t.Fatalf("CNPs %d unsolicited %d, want 1 and 0", res.CNP.CNPs, res.CNP.Unsolicited)
	}
}

// An ACK whose PSN lies in the range of two unpaired connections pairs the one seen first: connections that
// share their PSNs (a scenario's initial-psn is every QP's) answer in about the order they started, and the
// one that started later has sent less beyond the PSN, so "the nearest last request" would take it wrongly.
func TestLearnPairsTheFirstSeen(t *testing.T) {
	first := mkConn("10.0.0.1", "10.0.0.2", 0x300, 0xe00, 1000)
	second := mkConn("10.0.0.1", "10.0.0.2", 0x301, 0xe01, 1000)
	b := &builder{t: t, plain: true}
	for rel := range 8 {
		b.data(first, rel, writeOp(rel, 8), 0, float64(2*rel))
		if rel < 6 {
			b.data(second, rel, writeOp(rel, 6), 0, float64(2*rel+1))
		}
	}
	// PSN 1003 is rel 3 of both; the first connection's ACK comes first, while the second has sent less
	// beyond it.
	b.ack(first, 3, 20)
	b.ack(second, 3, 21)
	b.ack(first, 7, 22)
	b.ack(second, 5, 23)
	wantPairs(t, b.run(Options{}), []tconn{first, second})
}

// Many connections between two hosts whose ACKs come in the reverse order of their requests, with random
// initial PSNs (ranges apart), one near the top of the PSN space whose messages wrap across it and across pairing buckets:
// each pairs with its own requester QP (the pairing index finds them by PSN, without a scan of the unpaired).
func TestLearnPairsReversedACKs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var conns []tconn
	// Initial PSNs whose ranges (5 PSNs each, an ACK one below) do not overlap: ACKs that fit two connections
	// equally are TestLearnPairsTheFirstSeen's case, and in reverse order the first seen is the wrong one.
	used := map[roce.PSN]bool{}
	for i := range 3000 {
		ipsn := roce.PSN(rng.Uint32() & roce.PSNMask)
		if i == 1500 {
			ipsn = roce.PSNMask - 2
		}
		for clash := true; clash; {
			clash = false
			for d := roce.PSN(0); d < 12; d++ {
				if used[(ipsn+d-6)&roce.PSNMask] {
					clash, ipsn = true, roce.PSN(rng.Uint32()&roce.PSNMask)
					break
				}
			}
		}
		used[ipsn] = true
		conns = append(conns, mkConn("10.0.0.1", "10.0.0.2", uint32(0x10000+i), uint32(0x20000+i), ipsn))
	}
	b := &builder{t: t, plain: true}
	tUs := 0.0
	for _, c := range conns {
		for rel := range 5 {
			tUs++
			b.data(c, rel, writeOp(rel, 5), 0, tUs)
		}
	}
	for i := len(conns) - 1; i >= 0; i-- {
		tUs++
		b.ack(conns[i], 4, tUs)
	}
	wantPairs(t, b.run(Options{}), conns)
}

// BenchmarkLearnReversedACKs learns n one-packet connections between two hosts whose ACKs come in the reverse
// order of their requests: the worst case of a scan of the unpaired connections (quadratic), linear with the
// pairing index.
func BenchmarkLearnReversedACKs(b *testing.B) {
	for _, n := range []int{10000, 40000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			bl := &builder{t: b, plain: true}
			conns := make([]tconn, n)
			for i := range conns {
				conns[i] = mkConn("10.0.0.1", "10.0.0.2", uint32(0x10000+i), uint32(0x20000+i),
					roce.PSN(rng.Uint32()&roce.PSNMask))
				bl.data(conns[i], 0, roce.RCWriteOnly, 0, float64(i))
			}
			for i := n - 1; i >= 0; i-- {
				bl.ack(conns[i], 0, float64(2*n-i))
			}
			b.ResetTimer()
			for b.Loop() {
				res, err := Analyze(&sliceReader{frames: bl.frames}, Options{})
				if err != nil || len(res.Connections) != n || res.Connections[0].ReqQPN != 0x10000 {
					b.Fatalf("learned %d connections (err %v)", len(res.Connections), err)
				}
			}
		})
	}
}
