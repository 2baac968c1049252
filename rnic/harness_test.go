package rnic

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// pair is a tiny deterministic driver for tests: two QPs joined by a fixed-delay wire that may drop packets,
// timers kept per QP and kind, everything in virtual time. It plays the role netsim plays in the product.
type pair struct {
	t      *testing.T
	now    Time
	qp     [2]*QP
	ctr    [2]*Counters
	delay  Time
	timers [2][numTimerKinds]struct {
		at    Time
		armed bool
	}
	wire  []flight
	out   Output
	drop  func(from int, p *Pkt) bool // nil: lossless
	comps [2][]Completion
	sent  [2][]sentPkt
	// recovery events per QP (NAK/RNR received, timeout, read re-issue) for the "no resend without a reason"
	// property: the i-th packet sent belongs to epoch epochOf[i].
	epoch [2]int
	steps int
	// backlog holds work requests for QP 0 posted one at a time, each when the previous completes (tx-depth 1,
	// as Lumina's traffic generator runs its timeout experiments).
	backlog []WorkRequest
}

type flight struct {
	at   Time
	to   int
	pkt  Pkt
	seqn int
}

type sentPkt struct {
	at    Time
	pkt   Pkt
	epoch int
}

// pairConfig makes a pair with the same profile at both ends; mod adjusts each QP's config.
func newPair(t *testing.T, prof *Profile, seed uint64, mod func(i int, c *QPConfig)) *pair {
	t.Helper()
	h := &pair{t: t, delay: 1000}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	psn := [2]roce.PSN{roce.PSN(rng.Uint32() & roce.PSNMask), roce.PSN(rng.Uint32() & roce.PSNMask)}
	qpn := [2]uint32{rng.Uint32() & roce.PSNMask, rng.Uint32() & roce.PSNMask}
	for i := 0; i < 2; i++ {
		h.ctr[i] = NewCounters(prof)
		c := QPConfig{Profile: prof, Counters: h.ctr[i], LocalQPN: qpn[i], RemoteQPN: qpn[1-i],
			SendPSN: psn[i], RecvPSN: psn[1-i], MTU: 1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
			MinRNRTimer: 1, MigReq: prof.MigReq, RNG: rand.New(rand.NewPCG(seed+uint64(i), 7))}
		if mod != nil {
			mod(i, &c)
		}
		q, err := NewQP(c)
		if err != nil {
			t.Fatalf("NewQP: %v", err)
		}
		h.qp[i] = q
	}
	return h
}

// apply consumes the Output of a step of QP i.
func (h *pair) apply(i int) {
	for _, tr := range h.out.Timers {
		tm := &h.timers[i][tr.Kind]
		if tr.Cancel {
			tm.armed = false
		} else {
			tm.at, tm.armed = tr.At, true
		}
	}
	checkInvariants(h.t, fmt.Sprintf("t=%d", h.now), h.qp[0], h.qp[1])
	h.comps[i] = append(h.comps[i], h.out.Completions...)
	done := i == 0 && len(h.out.Completions) > 0
	if h.out.Timeout || h.out.ReadReissue {
		h.epoch[i]++
	}
	h.out.Reset()
	if done && len(h.backlog) > 0 && h.qp[0].State() == QPStateRTS {
		wr := h.backlog[0]
		h.backlog = h.backlog[1:]
		h.post(0, wr)
	}
}

// serial posts wrs on QP 0 with one outstanding at a time.
func (h *pair) serial(wrs ...WorkRequest) {
	h.backlog = append(h.backlog, wrs[1:]...)
	h.post(0, wrs[0])
}

func (h *pair) post(i int, wr WorkRequest) {
	h.t.Helper()
	if err := h.qp[i].PostSend(h.now, wr, &h.out); err != nil {
		h.t.Fatalf("PostSend: %v", err)
	}
	h.apply(i)
}

// transmit drains both QPs' transmit queues onto the wire.
func (h *pair) transmit() {
	for i := 0; i < 2; i++ {
		var p Pkt
		for h.qp[i].NextPacket(h.now, &p) {
			h.sent[i] = append(h.sent[i], sentPkt{at: h.now, pkt: p, epoch: h.epoch[i]})
			if h.drop != nil && h.drop(i, &p) {
				continue
			}
			h.wire = append(h.wire, flight{at: h.now + h.delay, to: 1 - i, pkt: p, seqn: len(h.wire)})
		}
	}
	checkInvariants(h.t, fmt.Sprintf("t=%d after transmitting", h.now), h.qp[0], h.qp[1])
}

// run advances virtual time until nothing is left to do or until limit; it returns false on a step overflow
// (a livelock).
func (h *pair) run(limit Time) bool {
	for {
		h.steps++
		if h.steps > 2_000_000 {
			return false
		}
		h.transmit()
		next, kind, who, fi := Time(-1), TimerKind(0), -1, -1
		for k, f := range h.wire {
			if next < 0 || f.at < next {
				next, fi, who = f.at, k, -1
			}
		}
		for i := 0; i < 2; i++ {
			for k := TimerKind(0); k < numTimerKinds; k++ {
				if tm := h.timers[i][k]; tm.armed && (next < 0 || tm.at < next) {
					next, kind, who, fi = tm.at, k, i, -1
				}
			}
		}
		if next < 0 || next > limit {
			return true
		}
		if next > h.now {
			h.now = next
		}
		if fi >= 0 {
			f := h.wire[fi]
			h.wire = append(h.wire[:fi], h.wire[fi+1:]...)
			if f.pkt.Opcode.IsAck() && f.pkt.AETH.Type() != roce.AckTypeACK {
				h.epoch[f.to]++
			}
			h.qp[f.to].Receive(h.now, &f.pkt, &h.out)
			h.apply(f.to)
			continue
		}
		h.timers[who][kind].armed = false
		h.qp[who].OnTimer(h.now, kind, &h.out)
		h.apply(who)
	}
}

// sends returns the times at which QP i transmitted data/request packets with PSN psn.
func (h *pair) sends(i int, psn roce.PSN) []Time {
	var ts []Time
	for _, s := range h.sent[i] {
		if s.pkt.PSN == psn && s.pkt.Opcode.IsRequest() {
			ts = append(ts, s.at)
		}
	}
	return ts
}

// checkNoSpuriousResend asserts that within one recovery epoch no request PSN is sent twice.
func (h *pair) checkNoSpuriousResend(i int) {
	h.t.Helper()
	seen := map[[2]int]bool{}
	for _, s := range h.sent[i] {
		if !s.pkt.Opcode.IsRequest() {
			continue
		}
		k := [2]int{s.epoch, int(s.pkt.PSN)}
		if seen[k] {
			h.t.Fatalf("qp %d sent PSN %d twice in recovery epoch %d without a NAK, timeout or re-issue", i, s.pkt.PSN, s.epoch)
		}
		seen[k] = true
	}
}

func mustProfile(t testing.TB, name string) *Profile {
	t.Helper()
	p, err := LoadProfile(name)
	if err != nil {
		t.Fatalf("LoadProfile(%s): %v", name, err)
	}
	return p
}
