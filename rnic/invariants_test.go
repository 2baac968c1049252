package rnic

import (
	"fmt"
	"testing"
)

// invariantErrors checks the `// Invariant:` comments of the QP's role types (requester.go, responder.go,
// irn.go) and returns the ones that do not hold.
func (q *QP) invariantErrors() []string {
	var bad []string
	check := func(ok bool, f string, a ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(f, a...))
		}
	}
	// requester
	check(0 <= q.head && q.head <= q.txIdx && q.txIdx <= len(q.sq), "head %d <= txIdx %d <= len(sq) %d", q.head, q.txIdx, len(q.sq))
	if q.txIdx < len(q.sq) {
		check(0 <= q.txOff && q.txOff < q.sq[q.txIdx].npkts, "0 <= txOff %d < npkts %d", q.txOff, q.sq[q.txIdx].npkts)
	} else {
		check(q.txOff == 0, "txOff %d past the send queue", q.txOff)
	}
	check(q.sndUna.LessEq(q.sndNxt) && q.sndNxt.LessEq(q.nextAssign), "sndUna %d <= sndNxt %d <= nextAssign %d",
		q.sndUna, q.sndNxt, q.nextAssign)
	check(q.retries >= 0 && q.rnrRetries >= 0, "retries %d, rnrRetries %d", q.retries, q.rnrRetries)
	// responder
	check(q.msgLen >= -1, "msgLen %d", q.msgLen)
	check(0 <= q.rqHead && q.rqHead <= len(q.rq) && len(q.rq)-q.rqHead <= maxRespItems, "rqHead %d, len(rq) %d",
		q.rqHead, len(q.rq))
	check(q.readsN >= 0, "readsN %d", q.readsN)
	// IRN
	check(q.irn || (!q.inRecovery && !q.retxPending), "IRN recovery state on a go-back-N QP")
	check(q.irn == (q.ooo != nil), "irn %v but out-of-order buffer %v", q.irn, q.ooo != nil)
	return bad
}

// checkInvariants fails the test when a QP invariant does not hold after a step.
func checkInvariants(t testing.TB, where string, qs ...*QP) {
	t.Helper()
	for i, q := range qs {
		if q == nil {
			continue
		}
		for _, e := range q.invariantErrors() {
			t.Fatalf("%s: QP %d: invariant broken: %s", where, i, e)
		}
	}
}

// The checker is not vacuous: a QP whose window runs backwards is caught.
func TestInvariantsCatchABrokenQP(t *testing.T) {
	q, err := NewQP(QPConfig{Profile: mustProfile(t, "cx5"), MTU: 1024, SendPSN: 100})
	if err != nil {
		t.Fatal(err)
	}
	if errs := q.invariantErrors(); len(errs) != 0 {
		t.Fatalf("a new QP breaks invariants: %v", errs)
	}
	q.sndUna = 105
	q.txOff = 2
	q.msgLen = -2
	if errs := q.invariantErrors(); len(errs) != 3 {
		t.Errorf("broken QP: %d errors %v, want 3", len(errs), errs)
	}
}
