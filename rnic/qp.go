package rnic

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/lumina-go/lumina/roce"
)

// QPConfig is what a QP needs at creation (the ibv_modify_qp attributes plus the NIC it lives on).
type QPConfig struct {
	Profile  *Profile
	Counters *Counters // NIC-wide counters this QP increments (may be nil)

	LocalQPN, RemoteQPN uint32
	SendPSN             roce.PSN // initial PSN of the requests this QP sends
	RecvPSN             roce.PSN // initial PSN of the requests this QP expects (the peer's SendPSN)

	MTU         int
	Timeout     uint8 // IB exponent: 4.096 us * 2^Timeout, 0 = infinite
	RetryCnt    uint8 // 0..7, 7 is not infinite (except on a profile with timeout.retry-cnt-7-infinite: rxe)
	RNRRetry    uint8 // 0..7, 7 = infinite
	MinRNRTimer uint8 // code the responder puts in its RNR NAKs
	MaxRdAtomic int   // outstanding READ requests (default 16 if 0)

	AdaptiveRetrans bool
	SlowRestart     bool
	// DCQCNRP enables the reaction point (rate limiting on CNPs); when false CNPs are counted as ignored.
	DCQCNRP bool
	// MigReq is the value this NIC puts in BTH.MigReq (the profile's, unless the driver overrides it).
	MigReq bool
	// RNG is the only randomness allowed (math/rand/v2, seeded by the driver); nil uses fixed midpoints.
	RNG *rand.Rand
}

// QPState is the QP's state; only the states a running RC QP can be in are modeled.
type QPState uint8

// QP states.
const (
	QPStateRTS   QPState = iota // ready to send
	QPStateError                // after retry exhaustion or a fatal NAK: everything is flushed
)

func (s QPState) String() string {
	if s == QPStateError {
		return "error"
	}
	return "rts"
}

// QPStats are per-QP event counts (the NIC-wide vendor counters are in Counters).
type QPStats struct {
	TxPackets, TxRetransmits, TxBytes uint64
	RxPackets                         uint64
	NAKsSent, NAKsReceived            uint64
	RNRNAKsSent, RNRNAKsReceived      uint64
	Timeouts, ReadReissues            uint64
	Duplicates, OutOfSequence         uint64
	Completed, Failed                 uint64 // requester work requests
	Delivered                         uint64 // responder messages
	CNPsHandled                       uint64
}

// QP is one RC queue pair: requester and responder state machines, pure (see the package doc). Each role keeps
// its state in its own type, with the invariants a test helper checks after every step (invariants_test.go).
type QP struct {
	cfg   QPConfig
	prof  *Profile
	ctr   *Counters
	state QPState
	irn   bool
	stats QPStats
	rng   *rand.Rand

	requester // requester.go; IRN's selective repeat in irn.go
	responder // responder.go; IRN's out-of-order buffer in irn.go
	irnState

	rp  rp
	flt faultState // test-only injected faults (faults.go)
}

// NewQP validates cfg and returns a QP in the RTS state.
func NewQP(cfg QPConfig) (*QP, error) {
	if cfg.Profile == nil {
		return nil, errors.New("qp config: missing profile")
	}
	if !roce.ValidMTU(cfg.MTU) {
		return nil, fmt.Errorf("qp config: mtu %d: want 256, 512, 1024, 2048 or 4096", cfg.MTU)
	}
	if cfg.Timeout > 31 {
		return nil, fmt.Errorf("qp config: timeout %d: want 0..31", cfg.Timeout)
	}
	if cfg.RetryCnt > 7 || cfg.RNRRetry > 7 {
		return nil, fmt.Errorf("qp config: retry_cnt %d, rnr_retry %d: want 0..7", cfg.RetryCnt, cfg.RNRRetry)
	}
	if cfg.MinRNRTimer > 31 {
		return nil, fmt.Errorf("qp config: min_rnr_timer %d: want 0..31", cfg.MinRNRTimer)
	}
	if cfg.LocalQPN > roce.PSNMask || cfg.RemoteQPN > roce.PSNMask {
		return nil, fmt.Errorf("qp config: qpn %#x/%#x: want 24-bit values", cfg.LocalQPN, cfg.RemoteQPN)
	}
	if cfg.MaxRdAtomic < 0 {
		return nil, fmt.Errorf("qp config: max_rd_atomic %d: want >= 0", cfg.MaxRdAtomic)
	}
	if cfg.MaxRdAtomic == 0 {
		cfg.MaxRdAtomic = 16
	}
	if cfg.AdaptiveRetrans && !cfg.Profile.Timeout.AdaptiveSupported {
		return nil, fmt.Errorf("qp config: adaptive retransmission requested but profile %s does not support it", cfg.Profile.Name)
	}
	cfg.SendPSN &= roce.PSNMask
	cfg.RecvPSN &= roce.PSNMask
	q := &QP{cfg: cfg, prof: cfg.Profile, ctr: cfg.Counters, rng: cfg.RNG, irn: cfg.Profile.Transport == TransportIRN}
	q.nextAssign, q.sndUna, q.sndNxt = cfg.SendPSN, cfg.SendPSN, cfg.SendPSN
	q.ePSN = cfg.RecvPSN
	q.msgLen = -1
	q.rp = newRP(cfg.Profile, cfg.DCQCNRP)
	q.flt.set = faultsOf(cfg.Profile)
	q.drawFirstTimeout()
	if q.irn {
		n := 1
		for n < 2*cfg.Profile.IRN.BDPPackets+2 {
			n <<= 1
		}
		q.ooo = make([]oooSlot, n)
	}
	return q, nil
}

// State returns the QP's state.
func (q *QP) State() QPState { return q.state }

// Stats returns the QP's event counts.
func (q *QP) Stats() QPStats { return q.stats }

// RateBps is the DCQCN reaction point's current rate (line rate when the RP is disabled); the driver paces the
// QP's packets at it.
func (q *QP) RateBps() float64 { return q.rp.rateBps() }

// ExpectedPSN is the responder's next expected PSN (for drivers and tests).
func (q *QP) ExpectedPSN() roce.PSN { return q.ePSN }

// OldestUnacked returns the requester's oldest unacknowledged PSN.
func (q *QP) OldestUnacked() roce.PSN { return q.sndUna }

func (q *QP) inc(id CounterID) { q.ctr.Inc(id, 1) }

// ---- transmission ----

// HasWork reports whether NextPacket would return a packet now.
func (q *QP) HasWork() bool {
	if q.state == QPStateError {
		return false
	}
	return q.rqHead < len(q.rq) || q.canSendData()
}

// NextPacket fills p with the next packet to transmit: responses, ACKs and NAKs first, then (re)transmissions.
// It returns false when nothing is due now.
func (q *QP) NextPacket(now Time, p *Pkt) bool {
	if q.state == QPStateError {
		return false
	}
	if q.rqHead < len(q.rq) {
		q.nextResponse(p)
		q.stats.TxPackets++
		return true
	}
	if !q.canSendData() {
		return false
	}
	if q.irn && q.retxPending {
		q.irnRetransmit(now, p)
	} else {
		q.nextData(now, p)
	}
	q.stats.TxPackets++
	q.stats.TxBytes += uint64(p.PayloadLen)
	if p.Retransmission {
		q.stats.TxRetransmits++
	}
	q.rp.onBytes(p.PayloadLen)
	return true
}

// ---- receive ----

// Receive processes any packet addressed to this QP (requests, responses, ACK/NAKs, CNPs).
func (q *QP) Receive(now Time, p *Pkt, out *Output) {
	if p == nil || p.BadICRC || q.state == QPStateError {
		return
	}
	q.stats.RxPackets++
	op := p.Opcode
	switch {
	case op == roce.CNP:
		q.OnCNP(now, out)
	case !op.Valid() || op.Transport() != roce.RC:
		return
	case op.IsRequest():
		if q.irn {
			q.irnRespond(now, p, out)
		} else {
			q.respond(now, p, out)
		}
		if q.rqHead < len(q.rq) {
			out.Wake = true
		}
	case op.IsAck():
		q.onAck(now, p, out)
	case op.IsReadResponse():
		q.onReadResponse(now, p, out)
	}
}

// ---- timers ----

// OnTimer handles the expiry of a timer the QP asked for.
func (q *QP) OnTimer(now Time, k TimerKind, out *Output) {
	if q.state == QPStateError {
		return
	}
	switch k {
	case TimerRetransmit:
		q.timerArmed = false
		q.onRetransmitTimer(now, out)
	case TimerRNR:
		if q.rnrWait {
			q.rnrWait = false
			out.Wake = true
		}
	case TimerDCQCN:
		if q.rp.onTimer() {
			out.Timers = append(out.Timers, TimerReq{Kind: TimerDCQCN, At: now + q.prof.DCQCN.TimeResetNs})
		}
	}
	q.syncTimer(now, out)
}
