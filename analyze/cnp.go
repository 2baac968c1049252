package analyze

import (
	"math"
	"net/netip"
)

// Limiter scopes and the inference's other answers.
const (
	ScopePort    = "port"
	ScopeDestIP  = "dest-ip"
	ScopeQP      = "qp"
	ScopeNone    = "none"
	ScopeUnknown = "unknown"
)

var scopes = [3]string{ScopeQP, ScopeDestIP, ScopePort}

// CNPResult is the CNP analyzer's summary.
type CNPResult struct {
	ECNMarked     int      `json:"ecn_marked"` // CE-marked data packets delivered to a notification point
	CNPs          int      `json:"cnps"`
	Expected      *int     `json:"expected"` // under the NIC's configured scope and interval; null if unknown
	ScopeInferred string   `json:"scope_inferred"`
	MinIntervalUs *float64 `json:"min_interval_us"`
	// NAKTriggered counts CNPs that answered a NAK with no CE mark before them.
	NAKTriggered int `json:"nak_triggered"`
	// Unsolicited counts CNPs with neither a CE mark nor a NAK to answer.
	Unsolicited int `json:"unsolicited"`
	// Mismatches counts, per hypothesis, the triggers whose observed answer differs from its prediction.
	Mismatches map[string]int `json:"mismatches"`
	// IntervalUs is the interval each hypothesis was evaluated with (configured, or inferred from the trace).
	IntervalUs map[string]*float64 `json:"interval_us"`
	// Triggers lists the first maxTriggersListed triggers; TriggersOmitted counts the rest (which still count
	// in ecn_marked, nak_triggered and unsolicited).
	Triggers        []CNPTrigger `json:"triggers"`
	TriggersOmitted int          `json:"triggers_omitted,omitempty"`
	// Truncated is set when the trace had more than maxCNPRecords triggers or CNPs: the scope inference,
	// mismatches, expected, min_interval_us and the cnp check then judge the part of the trace up to that many
	// (ecn_marked, cnps, nak_triggered and unsolicited stay exact).
	Truncated bool `json:"truncated,omitempty"`
}

// Memory bounds of the CNP analyzer: it must see every trigger and CNP to infer a limiter's scope and
// interval, so it keeps compact records (32 bytes) of up to maxCNPRecords of each; a longer trace is judged
// on its first part. The result lists at most maxTriggersListed triggers.
const (
	maxCNPRecords     = 1 << 18
	maxTriggersListed = 10000
)

// CNPTrigger is one CE-marked data packet or NAK and whether a CNP was due for it under each scope.
type CNPTrigger struct {
	Packet   int      `json:"packet"`
	QP       int      `json:"qp"`
	Kind     string   `json:"kind"` // ce | nak
	TimeUs   float64  `json:"time_us"`
	Answered bool     `json:"answered"`
	Due      ScopeDue `json:"due"` // per scope
}

// ScopeDue says under which limiter scopes a trigger was due a CNP. Its JSON is the object a map from scope
// name to due would give ({"dest-ip": .., "port": .., "qp": ..}, the names in order), without a map per
// trigger to build and to encode.
type ScopeDue struct {
	DestIP bool `json:"dest-ip"`
	Port   bool `json:"port"`
	QP     bool `json:"qp"`
}

// Of is the trigger's due under scope (ScopeQP, ScopeDestIP or ScopePort; false for any other).
func (d ScopeDue) Of(scope string) bool {
	switch scope {
	case ScopeDestIP:
		return d.DestIP
	case ScopePort:
		return d.Port
	case ScopeQP:
		return d.QP
	}
	return false
}

const (
	trigCE uint8 = iota
	trigNAK
)

type cnpTrig struct {
	kind     uint8
	answered bool
	conn     int32 // index into analyzer.conns
	t        int64
	idx      int
	np       int32 // notification point (port) id
	ip       int32 // data sender IP id
}

type cnpObs struct {
	t      int64
	idx    int // trace packet index
	np, ip int32
	conn   int32 // -1 unattributed
}

type cnpState struct {
	trigs   []cnpTrig
	cnps    []cnpObs
	nakCNPs int
	unsol   int
	ids     map[netip.Addr]int
	// Exact counts, also past the records' cap.
	ceMarks, nCNPs, nTrigs int
	// full is set once either record list reached maxCNPRecords: nothing more is recorded except the CNPs
	// that answer a recorded trigger.
	full bool
	// byConn and at are cnpsByConn's, made on its first call.
	byConn, at []int32
}

func (c *cnpState) init() { c.ids = make(map[netip.Addr]int) }

func (c *cnpState) id(ip netip.Addr) int {
	if v, ok := c.ids[ip]; ok {
		return v
	}
	c.ids[ip] = len(c.ids)
	return len(c.ids) - 1
}

// npOf names the notification point of a connection (its data receiver) and the data sender's IP. With the
// run's connections the NP is the receiving host (one port); learned connections only know IPs, so each
// receiver IP counts as its own port.
func (cs *connState) npOf(c *cnpState) (np, ip int32) {
	recv, send := cs.c.RespIP, cs.c.ReqIP
	if cs.c.Verb == VerbRead {
		recv, send = send, recv
	}
	if r := cs.a.role(recv); r != roleUnknown {
		return int32(-1 - r), int32(c.id(send))
	}
	return int32(c.id(recv)), int32(c.id(send))
}

// room says whether one more trigger or CNP may be recorded.
func (c *cnpState) room() bool {
	if !c.full && len(c.trigs) < maxCNPRecords && len(c.cnps) < maxCNPRecords {
		return true
	}
	c.full = true
	return false
}

// trigger records a CE-marked delivery or a NAK. The connection remembers its latest unanswered one of each
// kind (index + 1 into trigs; -1 when it was not recorded).
func (c *cnpState) trigger(cs *connState, kind uint8, pi pktInfo) {
	c.nTrigs++
	pend := -1
	if c.room() {
		np, ip := cs.npOf(c)
		c.trigs = append(c.trigs, cnpTrig{conn: int32(cs.c.Index), kind: kind, t: pi.t, idx: pi.idx, np: np, ip: ip})
		pend = len(c.trigs)
	}
	if kind == trigCE {
		c.ceMarks++
		cs.cePend = pend
		cs.events = true
	} else {
		cs.nakPend = pend
		if cs.earlyCNP >= 0 && pi.t-cs.earlyCNP <= earlyCNPWindowNs {
			// The CNP for this out-of-order arrival left just before the NAK: it answers the NAK.
			if pend > 0 {
				c.trigs[pend-1].answered = true
			}
			cs.nakPend = 0
			cs.earlyCNP = -1
			c.nakCNPs++
			c.unsol--
		}
	}
}

// earlyCNPWindowNs bounds how long before a NAK a CNP for the same out-of-order arrival can have left: the
// slowest published NAK generation that is not a firmware path (E810 ~10 us, CX4 Lx tail drops ~13 us).
const earlyCNPWindowNs = 20_000

// onCNP attributes a CNP to the latest unanswered CE mark of its connection, else to its latest unanswered NAK.
func (c *cnpState) onCNP(cs *connState, pi pktInfo) {
	c.nCNPs++
	rec := c.room()
	if cs == nil {
		if rec {
			c.cnps = append(c.cnps, cnpObs{t: pi.t, idx: pi.idx, conn: -1})
		}
		c.unsol++
		return
	}
	// Once full, a CNP that answers a recorded trigger is still recorded, so the judged part stays consistent.
	if !rec && len(c.cnps) < maxCNPRecords+maxCNPRecords/16 {
		rec = cs.cePend > 0 && c.pending(cs.cePend) || cs.cePend == 0 && cs.nakPend > 0 && c.pending(cs.nakPend)
	}
	if rec {
		np, ip := cs.npOf(c)
		c.cnps = append(c.cnps, cnpObs{t: pi.t, idx: pi.idx, np: np, ip: ip, conn: int32(cs.c.Index)})
	}
	switch {
	case c.pending(cs.cePend):
		c.answer(cs.cePend)
		cs.cePend = 0
	case c.pending(cs.nakPend):
		c.answer(cs.nakPend)
		cs.nakPend = 0
		c.nakCNPs++
	default:
		c.unsol++
		cs.earlyCNP = pi.t
	}
}

// pending tells whether a connection's remembered trigger (see trigger) still waits for its CNP.
func (c *cnpState) pending(p int) bool { return p < 0 || p > 0 && !c.trigs[p-1].answered }

func (c *cnpState) answer(p int) {
	if p > 0 {
		c.trigs[p-1].answered = true
	}
}

type scopeKey struct {
	np, ip, conn int32
}

func keyOf(scope string, np, ip, conn int32) scopeKey {
	switch scope {
	case ScopePort:
		return scopeKey{np: np, ip: -1, conn: -1}
	case ScopeDestIP:
		return scopeKey{np: np, ip: ip, conn: -1}
	}
	return scopeKey{np: -1, ip: -1, conn: conn}
}

// minGap is the smallest time between two CNPs of the same key under a scope; -1 if no key had two.
func (c *cnpState) minGap(scope string) int64 {
	last := c.lastTimes(scope)
	var best int64 = -1
	for _, o := range c.cnps {
		if o.conn < 0 {
			continue
		}
		p := last.at(o.np, o.ip, o.conn)
		if t := *p; t != noTime && (best < 0 || o.t-t < best) {
			best = o.t - t
		}
		*p = o.t
	}
	return best
}

// predict says which triggers a limiter of the given scope and interval answers (interval < 0: infinite).
func (c *cnpState) predict(scope string, intervalNs int64, withNAK bool, out []bool) {
	last := c.lastTimes(scope)
	for i, tr := range c.trigs {
		out[i] = false
		if tr.kind == trigNAK && !withNAK {
			continue
		}
		p := last.at(tr.np, tr.ip, tr.conn)
		if t := *p; t == noTime || intervalNs >= 0 && tr.t-t >= intervalNs {
			out[i] = true
			*p = tr.t
		}
	}
}

// noTime marks a key of a scopeTimes that has no time yet.
const noTime = math.MinInt64

// scopeTimes is a time per key of one limiter scope (keyOf): in a table indexed by the key's parts (the
// connection, the notification point, the notification point and IP ids, all small), or in a map for a key
// outside the table. There is no table when it would pass maxScopeTable entries or be mostly empty (many
// more keys than records).
type scopeTimes struct {
	scope string
	ids   int // IP ids there are (cnpState.ids): notification points are -2 .. ids-1, sender IPs 0 .. ids-1
	table []int64
	other map[scopeKey]*int64
}

const maxScopeTable = 1 << 20

func (c *cnpState) lastTimes(scope string) *scopeTimes {
	st := &scopeTimes{scope: scope, ids: len(c.ids)}
	var n int
	switch scope {
	case ScopePort:
		n = st.ids + 2
	case ScopeDestIP:
		n = (st.ids + 2) * st.ids
	default:
		for _, tr := range c.trigs {
			n = max(n, int(tr.conn)+1)
		}
		for _, o := range c.cnps {
			n = max(n, int(o.conn)+1)
		}
	}
	if n > maxScopeTable || n > 4*(len(c.trigs)+len(c.cnps))+1024 {
		n = 0 // a table mostly empty (many IPs, few records): the map only
	}
	st.table = make([]int64, n)
	for i := range st.table {
		st.table[i] = noTime
	}
	return st
}

// at is where the time of the key of (np, ip, conn) is kept.
func (st *scopeTimes) at(np, ip, conn int32) *int64 {
	i := -1
	switch st.scope {
	case ScopePort:
		if np >= -2 && int(np) < st.ids {
			i = int(np) + 2
		}
	case ScopeDestIP:
		if np >= -2 && int(np) < st.ids && ip >= 0 && int(ip) < st.ids {
			i = (int(np)+2)*st.ids + int(ip)
		}
	default:
		i = int(conn)
	}
	if i >= 0 && i < len(st.table) {
		return &st.table[i]
	}
	k := keyOf(st.scope, np, ip, conn)
	if p := st.other[k]; p != nil {
		return p
	}
	if st.other == nil {
		st.other = map[scopeKey]*int64{}
	}
	p := new(int64)
	*p = noTime
	st.other[k] = p
	return p
}

// result infers the scope: "none" when every trigger was answered; otherwise the one hypothesis that explains
// the observed answers (with the configured interval, or the smallest gap seen in that scope); "unknown" when
// none or several do.
func (c *cnpState) result(a *analyzer) CNPResult {
	res := CNPResult{CNPs: c.nCNPs, NAKTriggered: c.nakCNPs, Unsolicited: c.unsol, ScopeInferred: ScopeUnknown,
		Mismatches: map[string]int{}, IntervalUs: map[string]*float64{}, Triggers: []CNPTrigger{},
		ECNMarked: c.ceMarks}
	res.Truncated = c.full
	withNAK := c.nakCNPs > 0 || a.opts.Responder.NAKTriggersCNP || a.opts.Requester.NAKTriggersCNP
	judged := func(i int) bool { return c.trigs[i].kind == trigCE || withNAK }
	nJudged := 0
	for i := range c.trigs {
		if judged(i) {
			nJudged++
		}
	}
	// Each hypothesis (a limiter scope and interval) says which triggers get a CNP; its CNPs are matched to the
	// observed ones in time order, per connection. The trace cannot say which of several close marks a CNP
	// answers, but it does say whether a hypothesis explains every CNP and every silence.
	preds := map[string][]bool{}
	answers := map[string][]bool{}
	best, bestN, exact := "", math.MaxInt, 0
	for _, s := range scopes {
		iv := a.configuredInterval()
		if iv < 0 {
			iv = c.minGap(s)
		}
		if iv >= 0 {
			res.IntervalUs[s] = fptr(us(iv))
		} else {
			res.IntervalUs[s] = nil
		}
		p := make([]bool, len(c.trigs))
		c.predict(s, iv, withNAK, p)
		preds[s] = p
		ans, missed, extra := c.match(p)
		answers[s] = ans
		n := len(missed) + len(extra)
		res.Mismatches[s] = n
		if n == 0 {
			exact++
		}
		if n < bestN {
			best, bestN = s, n
		} else if n == bestN {
			best = ""
		}
	}
	all := make([]bool, len(c.trigs))
	for i := range all {
		all[i] = judged(i)
	}
	allAns, allMissed, allExtra := c.match(all)
	switch {
	case nJudged == 0:
	case len(allMissed) == 0 && len(allExtra) == 0:
		res.ScopeInferred = ScopeNone
	case exact == 1 || exact == 0 && best != "" && bestN*10 <= nJudged:
		res.ScopeInferred = best
	}
	switch {
	case res.ScopeInferred == ScopeNone:
		c.setAnswered(allAns)
	case res.ScopeInferred != ScopeUnknown:
		c.setAnswered(answers[res.ScopeInferred])
	}
	gapScope := res.ScopeInferred
	if gapScope != ScopePort && gapScope != ScopeDestIP {
		gapScope = ScopeQP
	}
	if g := c.minGap(gapScope); g >= 0 {
		res.MinIntervalUs = fptr(us(g))
	}
	c.expected(a, &res)
	c.listTriggers(a, &res, preds)
	res.TriggersOmitted = c.nTrigs - len(res.Triggers)
	return res
}

// expected adds what the configured limiter predicts, per connection's notification point, and checks the
// observed CNPs against it.
func (c *cnpState) expected(a *analyzer, res *CNPResult) {
	exp, haveExp := 0, false
	due := make([]bool, len(c.trigs))
	for i, tr := range c.trigs {
		nic := a.npNIC(a.conns[tr.conn])
		if nic.CNPScope == "" {
			continue
		}
		haveExp = true
		due[i] = false
		if nic.NPEnabled && (tr.kind == trigCE || nic.NAKTriggersCNP) {
			due[i] = a.configuredDue(i, nic)
		}
		if due[i] {
			exp++
		}
	}
	if haveExp {
		res.Expected = &exp
		ans, missed, extra := c.match(due)
		if res.ScopeInferred == ScopeUnknown {
			c.setAnswered(ans)
		}
		a.cnpChecks(missed, extra)
	}
}

// listTriggers lists the first maxTriggersListed triggers with what each hypothesis predicted for them.
func (c *cnpState) listTriggers(a *analyzer, res *CNPResult, preds map[string][]bool) {
	res.Triggers = make([]CNPTrigger, 0, min(len(c.trigs), maxTriggersListed))
	for i, tr := range c.trigs {
		if i == maxTriggersListed {
			break
		}
		kind := "ce"
		if tr.kind == trigNAK {
			kind = "nak"
		}
		d := ScopeDue{DestIP: preds[ScopeDestIP][i], Port: preds[ScopePort][i], QP: preds[ScopeQP][i]}
		res.Triggers = append(res.Triggers, CNPTrigger{Packet: tr.idx, QP: a.conns[tr.conn].qp(), Kind: kind,
			TimeUs: us(tr.t), Answered: tr.answered, Due: d})
	}
}

// configuredInterval is the NICs' configured CNP interval (when an interval or a scope is configured); -1 if
// unknown.
func (a *analyzer) configuredInterval() int64 {
	for _, n := range [2]NICInfo{a.opts.Responder, a.opts.Requester} {
		if n.CNPScope != "" || n.CNPIntervalNs > 0 {
			return n.CNPIntervalNs
		}
	}
	return -1
}

// npNIC is the NIC that acts as notification point for a connection: its data receiver.
func (a *analyzer) npNIC(cs *connState) NICInfo {
	if cs.c.Verb == VerbRead {
		return a.opts.Requester
	}
	return a.opts.Responder
}

// configuredDue replays the configured limiter up to trigger i. It is called for every trigger in order, so
// it keeps its state across calls in a.cnpDue.
func (a *analyzer) configuredDue(i int, nic NICInfo) bool {
	if a.cnpDueLast == nil {
		a.cnpDueLast = map[scopeKey]int64{}
	}
	tr := a.cnp.trigs[i]
	k := keyOf(nic.CNPScope, tr.np, tr.ip, tr.conn)
	t, ok := a.cnpDueLast[k]
	if ok && tr.t-t < nic.CNPIntervalNs {
		return false
	}
	a.cnpDueLast[k] = tr.t
	return true
}

// cnpChecks turns the configured limiter's prediction, matched against the observed CNPs, into per-connection
// "cnp" checks: a trigger that was due a CNP and got none, and a CNP that answers no trigger the limiter allows.
func (a *analyzer) cnpChecks(missed, extra []int) {
	for _, cs := range a.conns {
		if a.npNIC(cs).CNPScope != "" && cs.events && cs.viol["cnp"] == nil {
			cs.setViol("cnp", &Check{Analyzer: "cnp", QP: cs.qp(), Violations: []Violation{}})
		}
	}
	for _, i := range missed {
		tr := a.cnp.trigs[i]
		cs := a.conns[tr.conn]
		nic := a.npNIC(cs)
		what := "CE-marked packet"
		if tr.kind == trigNAK {
			what = "NAK"
		}
		if cs.viol["cnp"] == nil {
			cs.setViol("cnp", &Check{Analyzer: "cnp", QP: cs.qp(), Violations: []Violation{}})
		}
		cs.violate("cnp", tr.idx, "%s was due a CNP under the %s limiter (interval %g us) but none was sent",
			what, nic.CNPScope, us(nic.CNPIntervalNs))
	}
	for _, j := range extra {
		o := a.cnp.cnps[j]
		if o.conn < 0 || int(o.conn) >= len(a.conns) {
			continue
		}
		cs := a.conns[o.conn]
		nic := a.npNIC(cs)
		if nic.CNPScope == "" {
			continue
		}
		if cs.viol["cnp"] == nil {
			cs.setViol("cnp", &Check{Analyzer: "cnp", QP: cs.qp(), Violations: []Violation{}})
		}
		switch {
		case !nic.NPEnabled:
			cs.violate("cnp", o.idx, "CNP sent although the notification point is disabled")
		default:
			cs.violate("cnp", o.idx, "CNP answers no CE mark or NAK that the %s limiter (interval %g us) allows: it should have been suppressed",
				nic.CNPScope, us(nic.CNPIntervalNs))
		}
	}
}

// cnpLatencyNs bounds the time from a trigger at the switch to its CNP at the switch; NAK-triggered CNPs may
// also precede their NAK by up to earlyCNPWindowNs (the NAK waits out its generation delay).
const cnpLatencyNs = 20_000

// match pairs the triggers marked due with the observed CNPs, per connection and in time order: a due trigger
// takes the first unused CNP of its connection within cnpLatencyNs after it (NAKs: from earlyCNPWindowNs
// before). It returns which triggers got a CNP, the due triggers that did not, and the CNPs left over.
func (c *cnpState) match(due []bool) (answered []bool, missed, extra []int) {
	answered = make([]bool, len(c.trigs))
	used := make([]bool, len(c.cnps))
	byConn, at := c.cnpsByConn()
	next := make([]int32, len(at)) // per connection: position in byConn of the first CNP not yet passed
	copy(next, at)
	for i, tr := range c.trigs {
		if !due[i] {
			continue
		}
		conn := int(tr.conn)
		from := tr.t
		if tr.kind == trigNAK {
			from -= earlyCNPWindowNs
		}
		k, end := int32(0), int32(0) // a connection with no CNP: nothing answers
		if conn+1 < len(at) {
			k, end = next[conn], at[conn+1]
		}
		for k < end && c.cnps[byConn[k]].t < from {
			k++ // earlier CNPs answer nothing due: they stay unused (extra)
		}
		if k < end && c.cnps[byConn[k]].t-tr.t <= cnpLatencyNs {
			used[byConn[k]] = true
			answered[i] = true
			k++
		} else {
			missed = append(missed, i)
		}
		if conn+1 < len(at) {
			next[conn] = k
		}
	}
	for j, o := range c.cnps {
		if !used[j] && o.conn >= 0 {
			extra = append(extra, j)
		}
	}
	return answered, missed, extra
}

// cnpsByConn returns the indices of the attributed CNPs grouped by connection, each group in time (record)
// order: connection i's are byConn[at[i]:at[i+1]]. It is made once, on the first call (after the trace).
func (c *cnpState) cnpsByConn() (byConn, at []int32) {
	if c.at != nil {
		return c.byConn, c.at
	}
	n := 0
	for _, o := range c.cnps {
		n = max(n, int(o.conn)+1)
	}
	at = make([]int32, n+1)
	for _, o := range c.cnps {
		if o.conn >= 0 {
			at[o.conn+1]++
		}
	}
	for i := 1; i <= n; i++ {
		at[i] += at[i-1]
	}
	byConn = make([]int32, at[n])
	fill := make([]int32, n)
	copy(fill, at)
	for j, o := range c.cnps {
		if o.conn >= 0 {
			byConn[fill[o.conn]] = int32(j)
			fill[o.conn]++
		}
	}
	c.byConn, c.at = byConn, at
	return byConn, at
}

// setAnswered records which triggers a CNP answered (for the triggers list of the result).
func (c *cnpState) setAnswered(ans []bool) {
	for i := range c.trigs {
		c.trigs[i].answered = ans[i]
	}
}
