package analyze

import (
	"encoding/json"
	"math/rand"
	"net/netip"
	"testing"
)

// The map-based CNP inference the tables replaced, kept as the reference the tables must agree with.

func refMinGap(c *cnpState, scope string) int64 {
	last := map[scopeKey]int64{}
	var best int64 = -1
	for _, o := range c.cnps {
		if o.conn < 0 {
			continue
		}
		k := keyOf(scope, o.np, o.ip, o.conn)
		if t, ok := last[k]; ok && (best < 0 || o.t-t < best) {
			best = o.t - t
		}
		last[k] = o.t
	}
	return best
}

func refPredict(c *cnpState, scope string, intervalNs int64, withNAK bool) []bool {
	out := make([]bool, len(c.trigs))
	last := map[scopeKey]int64{}
	for i, tr := range c.trigs {
		if tr.kind == trigNAK && !withNAK {
			continue
		}
		k := keyOf(scope, tr.np, tr.ip, tr.conn)
		t, ok := last[k]
		if !ok || intervalNs >= 0 && tr.t-t >= intervalNs {
			out[i] = true
			last[k] = tr.t
		}
	}
	return out
}

func refMatch(c *cnpState, due []bool) (answered []bool, missed, extra []int) {
	answered = make([]bool, len(c.trigs))
	used := make([]bool, len(c.cnps))
	byConn := map[int32][]int{}
	for j, o := range c.cnps {
		if o.conn >= 0 {
			byConn[o.conn] = append(byConn[o.conn], j)
		}
	}
	next := map[int32]int{}
	for i, tr := range c.trigs {
		if !due[i] {
			continue
		}
		from := tr.t
		if tr.kind == trigNAK {
			from -= earlyCNPWindowNs
		}
		list := byConn[tr.conn]
		k := next[tr.conn]
		for k < len(list) && c.cnps[list[k]].t < from {
			k++
		}
		if k < len(list) && c.cnps[list[k]].t-tr.t <= cnpLatencyNs {
			used[list[k]] = true
			answered[i] = true
			k++
		} else {
			missed = append(missed, i)
		}
		next[tr.conn] = k
	}
	for j, o := range c.cnps {
		if !used[j] && o.conn >= 0 {
			extra = append(extra, j)
		}
	}
	return answered, missed, extra
}

// randomCNPState is a trace's records: ids IP ids, triggers and CNPs of conns connections in time order.
// Some notification points and IPs lie outside the ids (the tables' map fallback), some CNPs are
// unattributed, and the connections with the highest numbers may have triggers but no CNP.
func randomCNPState(rng *rand.Rand, ids, conns, n int) *cnpState {
	c := &cnpState{}
	c.init()
	for i := 0; i < ids; i++ {
		c.id(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
	}
	var t int64 = 1_000_000
	for i := 0; i < n; i++ {
		t += int64(rng.Intn(3000))
		np := int32(rng.Intn(ids+4) - 2) // -2 .. ids+1: two outside the table
		ip := int32(rng.Intn(ids + 1))   // one outside
		conn := int32(rng.Intn(conns))
		if rng.Intn(3) == 0 {
			kind := trigCE
			if rng.Intn(4) == 0 {
				kind = trigNAK
			}
			c.trigs = append(c.trigs, cnpTrig{kind: kind, conn: conn, t: t, idx: i, np: np, ip: ip})
		} else {
			if rng.Intn(10) == 0 {
				conn = -1
			} else if conn >= int32(conns)-2 {
				conn = int32(conns) - 3
			}
			c.cnps = append(c.cnps, cnpObs{t: t, idx: i, np: np, ip: ip, conn: conn})
		}
	}
	return c
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The tables of predict, minGap and match give what the maps gave, scope by scope, interval by interval.
func TestCNPTablesAgreeWithMaps(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 200; round++ {
		ids, conns := 1+rng.Intn(6), 3+rng.Intn(8)
		c := randomCNPState(rng, ids, conns, rng.Intn(300))
		for _, s := range scopes {
			if got, want := c.minGap(s), refMinGap(c, s); got != want {
				t.Fatalf("round %d scope %s: minGap %d, want %d", round, s, got, want)
			}
			for _, iv := range []int64{-1, 0, 2000, 5000, c.minGap(s)} {
				for _, nak := range []bool{false, true} {
					got := make([]bool, len(c.trigs))
					for i := range got {
						got[i] = rng.Intn(2) == 0 // predict must overwrite every entry
					}
					c.predict(s, iv, nak, got)
					want := refPredict(c, s, iv, nak)
					if !equalBools(got, want) {
						t.Fatalf("round %d scope %s interval %d nak %v: predict %v, want %v", round, s, iv, nak, got, want)
					}
					ans, missed, extra := c.match(got)
					wAns, wMissed, wExtra := refMatch(c, want)
					if !equalBools(ans, wAns) || !equalInts(missed, wMissed) || !equalInts(extra, wExtra) {
						t.Fatalf("round %d scope %s interval %d: match answered %v missed %v extra %v, want %v %v %v",
							round, s, iv, ans, missed, extra, wAns, wMissed, wExtra)
					}
				}
			}
		}
	}
}

// A key outside the table (a notification point or IP with no id) gets its own time, apart from every other
// key and kept across calls.
func TestScopeTimesOutsideTable(t *testing.T) {
	c := &cnpState{}
	c.init()
	c.id(netip.MustParseAddr("10.0.0.1"))
	for _, s := range []string{ScopePort, ScopeDestIP} {
		st := c.lastTimes(s)
		in, out, out2 := st.at(0, 0, 1), st.at(5, 0, 1), st.at(6, 0, 1)
		if *in != noTime || *out != noTime || *out2 != noTime {
			t.Fatalf("%s: new keys hold %d %d %d, want no time", s, *in, *out, *out2)
		}
		*in, *out, *out2 = 1, 2, 3
		if *st.at(0, 0, 2) != 1 || *st.at(5, 0, 2) != 2 || *st.at(6, 0, 2) != 3 {
			t.Errorf("%s: times %d %d %d, want 1 2 3 (the connection is no part of the key)", s,
				*st.at(0, 0, 2), *st.at(5, 0, 2), *st.at(6, 0, 2))
		}
	}
	st := c.lastTimes(ScopeDestIP)
	*st.at(0, 0, 0) = 1
	if *st.at(0, 3, 0) != noTime || *st.at(-1, 0, 0) != noTime {
		t.Errorf("dest-ip: another IP or notification point shares the time of (0, 0)")
	}
}

// A trigger's due encodes as the object a map from scope name to due gave, for every combination.
func TestScopeDueJSONLikeMap(t *testing.T) {
	for bits := 0; bits < 8; bits++ {
		d := ScopeDue{DestIP: bits&1 != 0, Port: bits&2 != 0, QP: bits&4 != 0}
		m := map[string]bool{}
		for _, s := range scopes {
			m[s] = d.Of(s)
		}
		if m[ScopeDestIP] != d.DestIP || m[ScopePort] != d.Port || m[ScopeQP] != d.QP {
			t.Fatalf("Of disagrees with the fields: %+v vs %v", d, m)
		}
		got, err := json.Marshal(CNPTrigger{Due: d})
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(struct {
			Packet   int             `json:"packet"`
			QP       int             `json:"qp"`
			Kind     string          `json:"kind"`
			TimeUs   float64         `json:"time_us"`
			Answered bool            `json:"answered"`
			Due      map[string]bool `json:"due"`
		}{Due: m})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("due %+v: JSON %s, want %s", d, got, want)
		}
		var back CNPTrigger
		if err := json.Unmarshal(want, &back); err != nil || back.Due != d {
			t.Errorf("due %+v: read back from the map's JSON as %+v (%v)", d, back.Due, err)
		}
	}
}

// Many IP ids and few records: the dest-ip scope keeps its times in the map only, and still agrees with the
// reference.
func TestCNPTablesManyIDs(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	c := randomCNPState(rng, 3000, 5, 200)
	if st := c.lastTimes(ScopeDestIP); len(st.table) != 0 {
		t.Fatalf("dest-ip table of %d entries for %d records", len(st.table), len(c.trigs)+len(c.cnps))
	}
	for _, s := range scopes {
		if got, want := c.minGap(s), refMinGap(c, s); got != want {
			t.Fatalf("scope %s: minGap %d, want %d", s, got, want)
		}
		got := make([]bool, len(c.trigs))
		c.predict(s, 1000, true, got)
		if want := refPredict(c, s, 1000, true); !equalBools(got, want) {
			t.Fatalf("scope %s: predict %v, want %v", s, got, want)
		}
	}
}
