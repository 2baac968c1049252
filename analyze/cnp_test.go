package analyze

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// Seed 001 §6.4 setting: three requesters (three IPs) write to one responder; a fourth QP shares the first
// requester's IP so that per-destination-IP and per-QP limiters can be told apart.
var (
	qa = mkConn("10.0.0.11", "10.0.0.1", 0x101, 0x201, 100)
	qb = mkConn("10.0.0.12", "10.0.0.1", 0x102, 0x202, 200)
	qc = mkConn("10.0.0.13", "10.0.0.1", 0x103, 0x203, 300)
	qd = mkConn("10.0.0.11", "10.0.0.1", 0x104, 0x204, 400)
)

type mark struct {
	c      tconn
	t      float64
	answer bool
}

func cnpRun(t *testing.T, conns []tconn, marks []mark, nic NICInfo) *Analysis {
	t.Helper()
	b := &builder{t: t}
	next := map[uint32]int{}
	for _, m := range marks {
		b.data(m.c, next[m.c.respQPN], roce.RCWriteMiddle, roce.EventECN, m.t)
		next[m.c.respQPN]++
		if m.answer {
			b.cnpTo(m.c, true, m.t+1)
		}
	}
	opts := Options{IndexBase: 1, Responder: nic}
	for i, c := range conns {
		opts.Conns = append(opts.Conns, c.conn(i, VerbWrite, 0, 0, 1024))
	}
	return b.run(opts)
}

func TestCNPScopeInference(t *testing.T) {
	four := []tconn{qa, qb, qc, qd}
	times := []struct {
		c tconn
		t float64
	}{{qa, 9}, {qd, 10}, {qb, 16}, {qc, 17}, {qa, 30}, {qa, 246}, {qb, 254}, {qc, 259}, {qd, 262}}
	answers := map[string][]bool{
		// marks:  A9    D10    B16    C17    A30    A246  B254  C259  D262
		"port":    {true, false, false, false, false, true, false, false, false}, // cx6dx-like
		"dest-ip": {true, false, true, true, false, true, true, true, false},     // cx4lx-like
		"qp":      {true, true, true, true, false, true, true, true, true},       // e810-like
		"none":    {true, true, true, true, true, true, true, true, true},        // no limiter
	}
	wantCNPs := map[string]int{"port": 2, "dest-ip": 6, "qp": 8, "none": 9}
	for _, known := range []bool{true, false} {
		for scope, ans := range answers {
			var marks []mark
			for i, x := range times {
				marks = append(marks, mark{x.c, x.t, ans[i]})
			}
			nic := NICInfo{}
			if known {
				nic.CNPIntervalNs = 50000
			}
			res := cnpRun(t, four, marks, nic)
			if res.CNP.ScopeInferred != scope || res.CNP.CNPs != wantCNPs[scope] || res.CNP.ECNMarked != 9 {
				t.Errorf("interval known=%v, %s-like NIC: inferred %q with %d CNPs of %d marks (mismatches %v), want %q with %d",
					known, scope, res.CNP.ScopeInferred, res.CNP.CNPs, res.CNP.ECNMarked, res.CNP.Mismatches, scope, wantCNPs[scope])
			}
		}
	}
}

// The paper's Table 3 timestamps (CX6 row): marks at 9/16/17 us and 246/254/259 us, 50 us interval. A
// per-port limiter answers only QP1 each round; the configured expectation matches and the check passes.
func TestCNPTable3PortScope(t *testing.T) {
	three := []tconn{qa, qb, qc}
	marks := []mark{{qa, 9, true}, {qb, 16, false}, {qc, 17, false}, {qa, 246, true}, {qb, 254, false}, {qc, 259, false}}
	nic := NICInfo{CNPScope: ScopePort, CNPIntervalNs: 50000, NPEnabled: true}
	res := cnpRun(t, three, marks, nic)
	if res.CNP.ScopeInferred != ScopePort || res.CNP.Expected == nil || *res.CNP.Expected != 2 || res.CNP.CNPs != 2 ||
		fv(res.CNP.MinIntervalUs) != 237 {
		t.Fatalf("cnp %+v expected %v", res.CNP, res.CNP.Expected)
	}
	for q := 1; q <= 3; q++ {
		wantOK(t, check(t, res, "cnp", q))
	}
	if d := res.CNP.Triggers[1].Due; d.Of(ScopePort) || !d.Of(ScopeDestIP) || !d.Of(ScopeQP) || d.Of(ScopeNone) {
		t.Errorf("QP2's first mark: due %v, want due under dest-ip and qp only", d)
	}
	// The same answers judged against a per-destination-IP configuration fail on QP2 and QP3.
	nic.CNPScope = ScopeDestIP
	res = cnpRun(t, three, marks, nic)
	wantViolations(t, check(t, res, "cnp", 2),
		Violation{2, "CE-marked packet was due a CNP under the dest-ip limiter (interval 50 us) but none was sent"},
		Violation{6, "CE-marked packet was due a CNP under the dest-ip limiter (interval 50 us) but none was sent"})
}

func TestCNPTriggeredByNAK(t *testing.T) {
	b := &builder{t: t}
	b.data(wc, 0, roce.RCWriteFirst, roce.EventDrop, 0)
	b.data(wc, 1, roce.RCWriteLast, 0, 1)
	b.nak(wc, 0, 2)
	b.cnpTo(wc, true, 2.5) // no CE mark before it: the NAK triggered it (cx5/cx6dx)
	b.data(wc, 0, roce.RCWriteFirst, 0, 6)
	b.data(wc, 1, roce.RCWriteLast, 0, 7)
	b.ack(wc, 1, 8)
	res := b.run(gbnOpts(2, 1))
	wantOK(t, check(t, res, "gbn", 1))
	if res.CNP.NAKTriggered != 1 || res.CNP.CNPs != 1 || res.CNP.ECNMarked != 0 || res.CNP.Unsolicited != 0 ||
		res.CNP.ScopeInferred != ScopeNone {
		t.Fatalf("cnp %+v", res.CNP)
	}
}

// The CNP for an out-of-order arrival may reach the switch just before the NAK for the same arrival (the NAK
// waits out its generation delay): it still answers the NAK. A CNP long before a NAK does not.
func TestCNPJustBeforeNAK(t *testing.T) {
	for _, c := range []struct {
		cnpAt            float64
		nakCNPs, unsolic int
	}{{1.6, 1, 0}, {1.9, 1, 0}} {
		b := &builder{t: t}
		b.data(wc, 0, roce.RCWriteFirst, roce.EventDrop, 0)
		b.data(wc, 1, roce.RCWriteLast, 0, 1)
		b.cnpTo(wc, true, c.cnpAt)
		b.nak(wc, 0, 2)
		b.data(wc, 0, roce.RCWriteFirst, 0, 6)
		b.data(wc, 1, roce.RCWriteLast, 0, 7)
		b.ack(wc, 1, 8)
		res := b.run(gbnOpts(2, 1))
		if res.CNP.NAKTriggered != c.nakCNPs || res.CNP.Unsolicited != c.unsolic || res.CNP.ScopeInferred != ScopeNone {
			t.Errorf("CNP at %v us, NAK at 2 us: cnp %+v", c.cnpAt, res.CNP)
		}
	}
	b := &builder{t: t}
	b.cnpTo(wc, true, 0) // 100 us before anything happens: unsolicited
	b.data(wc, 0, roce.RCWriteFirst, roce.EventDrop, 100)
	b.data(wc, 1, roce.RCWriteLast, 0, 101)
	b.nak(wc, 0, 102)
	b.data(wc, 0, roce.RCWriteFirst, 0, 106)
	b.data(wc, 1, roce.RCWriteLast, 0, 107)
	b.ack(wc, 1, 108)
	res := b.run(gbnOpts(2, 1))
	if res.CNP.NAKTriggered != 0 || res.CNP.Unsolicited != 1 {
		t.Errorf("CNP 100 us before the NAK: cnp %+v", res.CNP)
	}
}
