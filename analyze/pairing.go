package analyze

import (
	"net/netip"

	"github.com/lumina-go/lumina/roce"
)

// Learning-mode pairing: a connection is created on its first request, and its reverse direction (the
// requester's QP, which the responses address) is learned from the first response whose PSN fits it. Several
// QPs between the same two hosts are told apart by PSN: the unpaired connections are indexed by host pair and
// by the PSN buckets their plausible response range covers, so that pairing a response looks at the few
// connections whose range holds its PSN (linear in the trace, whatever order the responses come in); of those,
// the one seen first.

// pairBucketBits is the size of a PSN bucket of the pairing index (4096 PSNs: 4096 buckets over 24 bits).
const pairBucketBits = 12

type hostPair struct{ req, resp netip.Addr }

type pairKey struct {
	hp     hostPair
	bucket uint32
}

// pairing is the index of the unpaired learned connections.
type pairing struct {
	byPSN map[pairKey][]*connState
	// writes holds, per host pair, the unpaired SEND/WRITE connections (paired ones are dropped lazily) and
	// nWrites how many of them are still unpaired: a CNP, which carries no PSN, can only be attributed when
	// there is exactly one.
	writes  map[hostPair][]*connState
	nWrites map[hostPair]int
}

func (pg *pairing) init() {
	pg.byPSN = make(map[pairKey][]*connState)
	pg.writes = make(map[hostPair][]*connState)
	pg.nWrites = make(map[hostPair]int)
}

// pairRange is the range of response PSNs (as rels) that fits the requests sent so far: an ACK or NAK at
// most one below the first PSN up to the last sent one; READ responses from the first request's PSN to past
// the last request's response range (plausibleResponse).
func (cs *connState) pairRange() (lo, hi int64) {
	if cs.c.Verb == VerbRead {
		return 0, cs.read().sndNxt + 4095
	}
	return -1, cs.gbn.sndNxt - 1
}

// add registers a new unpaired connection.
func (pg *pairing) add(cs *connState) {
	hp := hostPair{cs.c.ReqIP, cs.c.RespIP}
	if cs.c.Verb != VerbRead {
		pg.writes[hp] = append(pg.writes[hp], cs)
		pg.nWrites[hp]++
	}
	lo, _ := cs.pairRange()
	cs.pairHi = lo - 1
	pg.track(cs)
}

// track registers an unpaired connection in the buckets its response range has grown into (called after
// each of its requests). A range never needs more than every bucket.
func (pg *pairing) track(cs *connState) {
	lo, hi := cs.pairRange()
	hi = min(hi, lo+psnSpace-1)
	if hi <= cs.pairHi {
		return
	}
	hp := hostPair{cs.c.ReqIP, cs.c.RespIP}
	r := max(cs.pairHi+1, lo)
	if cs.pairHi >= lo && cs.bucketOf(r) == cs.bucketOf(cs.pairHi) {
		r = cs.nextBucket(r) // the connection is in this bucket already
	}
	for ; r <= hi; r = cs.nextBucket(r) {
		k := pairKey{hp, cs.bucketOf(r)}
		pg.byPSN[k] = append(pg.byPSN[k], cs)
	}
	cs.pairHi = hi
}

// psnSpace is the number of PSNs.
const psnSpace = roce.PSNMask + 1

// bucketOf is the pairing bucket of a rel's wire PSN.
func (cs *connState) bucketOf(r int64) uint32 { return cs.abs(r) >> pairBucketBits }

// nextBucket is the first rel after r in the next bucket.
func (cs *connState) nextBucket(r int64) int64 {
	return r + 1<<pairBucketBits - int64(cs.abs(r)&(1<<pairBucketBits-1))
}

// paired drops a connection from the CNP candidates (the PSN buckets drop it lazily).
func (pg *pairing) paired(cs *connState) {
	if cs.c.Verb != VerbRead {
		pg.nWrites[hostPair{cs.c.ReqIP, cs.c.RespIP}]--
	}
}

// match returns the unpaired connection from req to resp that a response PSN fits, nil if none does: of
// several, the one seen first. Responses come back in about the order the connections started, and several
// connections may well share their PSNs (a scenario's initial-psn is every QP's): the nearest last request is
// no evidence then, since a connection that started later has sent less beyond the PSN, and it chose wrongly.
func (pg *pairing) match(req, resp netip.Addr, p roce.PSN) *connState {
	k := pairKey{hostPair{req, resp}, uint32(p) >> pairBucketBits}
	l := pg.byPSN[k]
	var best *connState
	n := 0
	for _, cs := range l {
		if cs.respKnown {
			continue
		}
		l[n] = cs
		n++
		if !cs.plausibleResponse(p) {
			continue
		}
		if best == nil || cs.c.Index < best.c.Index {
			best = cs
		}
	}
	clear(l[n:])
	if n == 0 {
		delete(pg.byPSN, k)
	} else {
		pg.byPSN[k] = l[:n]
	}
	return best
}

// cnpTarget returns the only unpaired SEND/WRITE connection from req to resp, nil if there are none or several.
func (pg *pairing) cnpTarget(req, resp netip.Addr) *connState {
	hp := hostPair{req, resp}
	if pg.nWrites[hp] != 1 {
		return nil
	}
	l := pg.writes[hp]
	n := 0
	for _, cs := range l {
		if !cs.respKnown {
			l[n] = cs
			n++
		}
	}
	clear(l[n:])
	pg.writes[hp] = l[:n]
	return l[0]
}
