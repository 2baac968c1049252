package rnic

import "math"

// rp is a QP's DCQCN reaction point (NVIDIA's variant, collie-sim-anchor §2.3): a CNP cuts the rate at most once
// per rate-reduce monitor period; the rate then recovers in stages driven by a timer (time-reset) and a byte
// counter (byte-reset): fast recovery toward the target, then additive, then hyper increase.
type rp struct {
	enabled bool
	prm     *DCQCNParams
	line    float64 // bits per second
	rate    float64 // current rate Rc
	target  float64 // target rate Rt
	alpha   float64
	// alphaAt is when alpha was last brought up to date (it decays by g every alpha period without a CNP).
	alphaAt    Time
	lastCut    Time
	cut        bool // at least one cut happened (lastCut valid)
	limiting   bool // below line rate: timer and byte counter run
	timerStage int
	byteStage  int
	bytes      int64
}

func newRP(prof *Profile, enabled bool) rp {
	r := rp{enabled: enabled, prm: &prof.DCQCN, line: prof.LineRateBps()}
	r.rate, r.target, r.alpha = r.line, r.line, prof.DCQCN.InitialAlpha
	return r
}

// onCNP reacts to a CNP; it returns whether the CNP was handled (false: RP disabled, the CNP is ignored) and
// whether the increase timer must be (re)armed at now + time-reset.
func (r *rp) onCNP(now Time) (handled, armTimer bool) {
	if !r.enabled {
		return false, false
	}
	r.decayAlpha(now)
	g := r.prm.G
	r.alpha = g*r.alpha + (1 - g)
	if r.cut && now-r.lastCut < r.prm.RateReduceMonitorPeriodNs {
		return true, false // one cut per monitor period; the CNP still counts as handled
	}
	r.cut, r.lastCut = true, now
	r.target = r.rate
	if !r.limiting && r.prm.RateOnFirstCNPMbps > 0 {
		r.rate = r.prm.RateOnFirstCNPMbps * 1e6
	} else {
		keep := math.Max(1-r.alpha/2, r.prm.MinDecFac)
		r.rate *= keep
	}
	r.rate = math.Max(r.rate, r.prm.MinRateMbps*1e6)
	r.limiting = true
	r.timerStage, r.byteStage, r.bytes = 0, 0, 0
	return true, true
}

// decayAlpha applies the alpha periods without CNP since alphaAt.
func (r *rp) decayAlpha(now Time) {
	if now <= r.alphaAt {
		return
	}
	k := (now - r.alphaAt) / r.prm.AlphaPeriodNs
	if k > 0 {
		r.alpha *= math.Pow(r.prm.G, float64(k))
		r.alphaAt += k * r.prm.AlphaPeriodNs
	}
}

// onTimer is the time-reset expiry: one increase step; it reports whether the timer should run again.
func (r *rp) onTimer() bool {
	if !r.enabled || !r.limiting {
		return false
	}
	r.timerStage++
	r.increase()
	return r.limiting
}

// onBytes counts transmitted bytes toward the byte-reset stage counter.
func (r *rp) onBytes(n int) {
	if !r.enabled || !r.limiting {
		return
	}
	r.bytes += int64(n)
	for r.bytes >= r.prm.ByteReset && r.limiting {
		r.bytes -= r.prm.ByteReset
		r.byteStage++
		r.increase()
	}
}

// increase is one DCQCN rate-increase step.
func (r *rp) increase() {
	f := r.prm.Threshold
	lo, hi := min(r.timerStage, r.byteStage), max(r.timerStage, r.byteStage)
	switch {
	case hi < f: // fast recovery: halfway back to the target
	case lo > f: // hyper increase
		r.target += float64(lo-f) * r.prm.HAIRateMbps * 1e6
	default: // additive increase
		r.target += r.prm.AIRateMbps * 1e6
	}
	r.target = math.Min(r.target, r.line)
	r.rate = math.Min((r.rate+r.target)/2, r.line)
	if r.rate >= r.line*(1-1e-9) {
		r.rate, r.target, r.limiting = r.line, r.line, false
	}
}

// rateBps is the current sending rate.
func (r *rp) rateBps() float64 {
	if !r.enabled {
		return r.line
	}
	return r.rate
}

// OnCNP is the reaction point: a CNP for this QP arrived.
func (q *QP) OnCNP(now Time, out *Output) {
	handled, arm := q.rp.onCNP(now)
	if !handled {
		q.inc(CtrRPCNPIgnored)
		return
	}
	q.inc(CtrRPCNPHandled)
	q.stats.CNPsHandled++
	if arm {
		out.Timers = append(out.Timers, TimerReq{Kind: TimerDCQCN, At: now + q.prof.DCQCN.TimeResetNs})
	}
}
