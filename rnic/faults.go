package rnic

import (
	"fmt"
	"strings"

	"github.com/lumina-go/lumina/roce"
)

// Fault injection, test-only: a profile for a NIC we have not seen may carry a known bug to check the
// checkers. Each fault is a deliberate departure from nic-behaviors.md that a Profile names in its faults list;
// the QP logic consults a bit set computed once at NewQP, so an unnamed fault costs one test of a zero mask and
// changes nothing. The analyzers must report every one of them (testbed/faults_test.go proves they do).
const (
	// FaultDoubleNAK: the go-back-N responder sends a second NAK for the same sequence error, at the next
	// out-of-order arrival after the first NAK.
	FaultDoubleNAK = "double-nak"
	// FaultNAKWrongPSN: the go-back-N responder's NAK carries the expected PSN + 1.
	FaultNAKWrongPSN = "nak-wrong-psn"
	// FaultRetxWrongPSN: on a sequence-error NAK the go-back-N requester resends from the NAK's PSN + 1.
	FaultRetxWrongPSN = "retx-wrong-psn"
	// FaultNoNAK: the go-back-N responder never NAKs a sequence error; loss is recovered only by timeout.
	FaultNoNAK = "no-nak"
	// FaultIRNRetxSacked: in each IRN recovery the sender also retransmits the first selectively acknowledged
	// packet its loss scan meets.
	FaultIRNRetxSacked = "irn-retx-sacked"
	// FaultReadReissueWrongPSN: on a gap in READ responses the requester re-issues the READ from the first
	// missing PSN + 1.
	FaultReadReissueWrongPSN = "read-reissue-wrong-psn"
)

// faultNames lists the known faults in bit order.
var faultNames = [...]string{FaultDoubleNAK, FaultNAKWrongPSN, FaultRetxWrongPSN, FaultNoNAK, FaultIRNRetxSacked,
	FaultReadReissueWrongPSN}

// FaultNames returns the fault names a profile's faults list accepts.
func FaultNames() []string { return append([]string(nil), faultNames[:]...) }

// faultSet is a bit set of faults (bit i = faultNames[i]).
type faultSet uint8

const (
	fDoubleNAK faultSet = 1 << iota
	fNAKWrongPSN
	fRetxWrongPSN
	fNoNAK
	fIRNRetxSacked
	fReadReissueWrongPSN
)

func (s faultSet) has(f faultSet) bool { return s&f != 0 }

// faultBit returns the bit of a fault name; false for an unknown name.
func faultBit(name string) (faultSet, bool) {
	for i, n := range faultNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// faultsOf returns the profile's faults as a bit set (unknown names were rejected when the profile loaded).
func faultsOf(p *Profile) faultSet {
	var s faultSet
	for _, n := range p.Faults {
		b, _ := faultBit(n)
		s |= b
	}
	return s
}

// validateFaults rejects unknown fault names, positioned at the list entry.
func (p *Profile) validateFaults() *ProfileError {
	for i, n := range p.Faults {
		if _, ok := faultBit(n); !ok {
			return verr(fmt.Sprintf("faults[%d]", i), "%q: want one of %s (test-only fault injection)", n,
				strings.Join(faultNames[:], ", "))
		}
	}
	return nil
}

// HasFault reports whether the profile carries the named injected fault.
func (p *Profile) HasFault(name string) bool {
	for _, f := range p.Faults {
		if f == name {
			return true
		}
	}
	return false
}

// faultState is the per-QP memory some faults need (zero and unused unless a fault is named).
type faultState struct {
	set       faultSet
	nakDouble bool // double-nak: the second NAK of the current sequence error was sent
	sackRetx  bool // irn-retx-sacked: a SACKed packet was retransmitted in the current recovery
}

// shift returns psn + 1 when fault f is in the set (the off-by-one faults), else psn.
func (s faultSet) shift(f faultSet, psn roce.PSN) roce.PSN {
	if s&f != 0 {
		return psn.Add(1)
	}
	return psn
}

// faultSecondNAK is double-nak: an out-of-order arrival while the sequence error's NAK is outstanding gets a
// second NAK (once per sequence error); a correct responder discards it silently.
func (q *QP) faultSecondNAK(out *Output) {
	if !q.flt.set.has(fDoubleNAK) || q.flt.nakDouble {
		return
	}
	q.flt.nakDouble = true
	q.stats.NAKsSent++
	q.pushItem(respItem{kind: itemNAK, psn: q.ePSN, syndrome: roce.SyndromePSNSeqErr, msn: q.msn})
	out.NAKSent = true
}
