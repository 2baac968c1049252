package analyze

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// irnTrace: PSNs 1001..1006; 1002 is dropped; every later arrival is NAKed with cumulative 1002 and its own
// SACK; only 1002 is resent.
func irnTrace(b *builder, resendSACKed bool) {
	b.data(wc, 0, roce.RCWriteFirst, 0, 0)
	b.data(wc, 1, roce.RCWriteMiddle, roce.EventDrop, 1)
	b.data(wc, 2, roce.RCWriteMiddle, 0, 2)
	b.sack(wc, 1, 2, 3) // packet 3
	b.data(wc, 3, roce.RCWriteLast, 0, 4)
	b.sack(wc, 1, 3, 5)
	b.data(wc, 1, roce.RCWriteMiddle, 0, 6) // the lost packet, alone
	if resendSACKed {
		b.data(wc, 2, roce.RCWriteMiddle, 0, 7) // packet 7: selectively acknowledged before
	}
	b.ack(wc, 3, 8)
}

func TestIRNCorrectTracePassesIRNNotGBN(t *testing.T) {
	b := &builder{t: t}
	irnTrace(b, false)
	res := b.run(gbnOpts(4, 1))
	wantOK(t, check(t, res, "irn", 1))
	for _, c := range res.Checks {
		if c.Analyzer == "gbn" {
			t.Fatalf("an IRN trace was also judged by go-back-N: %+v", c)
		}
	}
	if len(res.Retransmissions) != 1 || sv(res.Retransmissions[0].Trigger) != "nack" ||
		fv(res.Retransmissions[0].NACKGenerationUs) != 1 || fv(res.Retransmissions[0].NACKReactionUs) != 3 {
		t.Fatalf("retransmissions %+v", res.Retransmissions)
	}
}

func TestIRNFaults(t *testing.T) {
	t.Run("retransmits a SACKed packet", func(t *testing.T) {
		b := &builder{t: t}
		irnTrace(b, true)
		res := b.run(gbnOpts(4, 1))
		wantViolations(t, check(t, res, "irn", 1),
			Violation{7, "retransmitted PSN 1003, which the receiver had selectively acknowledged"})
	})
	t.Run("second out-of-order arrival not NAKed", func(t *testing.T) {
		b := &builder{t: t}
		b.data(wc, 0, roce.RCWriteFirst, 0, 0)
		b.data(wc, 1, roce.RCWriteMiddle, roce.EventDrop, 1)
		b.data(wc, 2, roce.RCWriteMiddle, 0, 2)
		b.sack(wc, 1, 2, 3)
		b.data(wc, 3, roce.RCWriteLast, 0, 4) // packet 4: IRN must NAK it too (go-back-N would not)
		b.data(wc, 1, roce.RCWriteMiddle, 0, 6)
		b.ack(wc, 3, 8)
		res := b.run(gbnOpts(4, 1))
		wantViolations(t, check(t, res, "irn", 1),
			Violation{4, "out-of-order arrival of PSN 1004 was never NAKed: IRN NAKs every out-of-order arrival (expected PSN 1002)"})
	})
	t.Run("NAK with the wrong cumulative PSN and SACK", func(t *testing.T) {
		b := &builder{t: t}
		b.data(wc, 0, roce.RCWriteFirst, 0, 0)
		b.data(wc, 1, roce.RCWriteMiddle, roce.EventDrop, 1)
		b.data(wc, 2, roce.RCWriteMiddle, 0, 2)
		b.sack(wc, 0, 3, 3) // packet 3
		b.data(wc, 3, roce.RCWriteLast, 0, 4)
		b.data(wc, 1, roce.RCWriteMiddle, 0, 60) // a timeout retransmission (the NAK was wrong)
		b.ack(wc, 3, 61)
		res := b.run(gbnOpts(4, 1))
		wantViolations(t, check(t, res, "irn", 1),
			Violation{3, "NAK selectively acknowledges PSN 1004 but the out-of-order arrival it answers (packet 2) was PSN 1003"},
			Violation{3, "NAK carries cumulative PSN 1001 but the expected PSN was 1002 when PSN 1003 arrived (packet 2)"},
			Violation{4, "out-of-order arrival of PSN 1004 was never NAKed: IRN NAKs every out-of-order arrival (expected PSN 1002)"})
	})
}

var rc = mkConn("10.0.0.2", "10.0.0.3", 0x31, 0x42, 5000)

func readOpts(ppm, msgs int) Options {
	return Options{IndexBase: 1, Conns: []Conn{rc.conn(0, VerbRead, ppm, msgs, 1024)}}
}

// readMsg requests 4 KB at rel and sends its 4 responses, dropping those in drop.
func (b *builder) readMsg(c tconn, rel int, drop map[int]bool, tUs float64) float64 {
	b.readReq(c, rel, 4096, 0, tUs)
	for i := 0; i < 4; i++ {
		tUs++
		ev := roce.EventNone
		if drop[rel+i] {
			ev = roce.EventDrop
		}
		b.readResp(c, rel+i, readOp(i, 4), ev, tUs)
	}
	return tUs + 1
}

func TestReadCleanAndReissue(t *testing.T) {
	b := &builder{t: t}
	tm := b.readMsg(rc, 0, map[int]bool{1: true}, 0)  // response 5001 dropped; 5002 at 3 us is out of order
	b.readReq(rc, 1, 3072, 0, 5)                      // re-issue from the first missing PSN to the end: NACK gen 2 us
	b.readResp(rc, 1, roce.RCReadResponseFirst, 0, 7) // reaction 2 us
	b.readResp(rc, 2, roce.RCReadResponseMiddle, 0, 8)
	b.readResp(rc, 3, roce.RCReadResponseLast, 0, 9)
	b.readMsg(rc, 4, nil, tm+10)
	res := b.run(readOpts(4, 2))
	wantOK(t, check(t, res, "gbn-read", 1))
	if len(res.Retransmissions) != 1 {
		t.Fatalf("retransmissions %+v", res.Retransmissions)
	}
	r := res.Retransmissions[0]
	if r.PSNAbs != 5001 || r.Msg != 1 || r.Position != 2 || sv(r.Trigger) != "read-reissue" ||
		fv(r.NACKGenerationUs) != 2 || fv(r.NACKReactionUs) != 2 || fv(r.LatencyUs) != 5 {
		t.Fatalf("read loss %+v trigger %s gen %v react %v", r, sv(r.Trigger), fv(r.NACKGenerationUs), fv(r.NACKReactionUs))
	}
}

func TestReadFaults(t *testing.T) {
	t.Run("re-issue from the wrong PSN", func(t *testing.T) {
		b := &builder{t: t}
		b.readMsg(rc, 0, map[int]bool{1: true}, 0)
		b.readReq(rc, 2, 2048, 0, 5) // packet 5: skips the missing 5001
		b.readResp(rc, 2, roce.RCReadResponseFirst, 0, 7)
		b.readResp(rc, 3, roce.RCReadResponseLast, 0, 8)
		res := b.run(readOpts(4, 1))
		wantViolations(t, check(t, res, "gbn-read", 1),
			Violation{5, "re-issued READ from PSN 5002 but the first missing response PSN is 5001"},
			Violation{7, "incomplete: READ responses arrived in order only up to PSN 5000; expected every response up to PSN 5003"})
	})
	t.Run("responder resends from the wrong PSN", func(t *testing.T) {
		b := &builder{t: t}
		b.readMsg(rc, 0, map[int]bool{1: true}, 0)
		b.readReq(rc, 1, 3072, 0, 5)
		b.readResp(rc, 2, roce.RCReadResponseMiddle, 0, 7) // packet 6: the request asked for 5001 first
		b.readResp(rc, 3, roce.RCReadResponseLast, 0, 8)
		res := b.run(readOpts(4, 1))
		c := check(t, res, "gbn-read", 1)
		if c.OK || c.Violations[0] != (Violation{6, "READ response PSN 5002 answers no delivered READ request"}) {
			t.Fatalf("violations %+v", c.Violations)
		}
	})
}
