package des

import (
	"math/rand/v2"
	"testing"
)

func TestEventOrder(t *testing.T) {
	var q Queue
	r := rand.New(rand.NewPCG(1, 2))
	type key struct{ at, id int64 }
	var want []key
	for i := 0; i < 2000; i++ {
		at := int64(r.IntN(50)) // many ties
		q.Push(Event{At: at, Aux: int32(i)})
		want = append(want, key{at, int64(i)})
	}
	// Expected total order: time, then insertion order.
	for i := 1; i < len(want); i++ {
		for j := i; j > 0 && (want[j].at < want[j-1].at); j-- {
			want[j], want[j-1] = want[j-1], want[j]
		}
	}
	for i, w := range want {
		e := q.Pop()
		if e.At != w.at || int64(e.Aux) != w.id {
			t.Fatalf("pop %d: (%d, %d): want (%d, %d)", i, e.At, e.Aux, w.at, w.id)
		}
	}
	if q.Len() != 0 {
		t.Fatalf("%d events left: want 0", q.Len())
	}
}

func TestRing(t *testing.T) {
	var r Ring[int32]
	next, want := int32(0), int32(0)
	for round := 0; round < 50; round++ { // interleave pushes and pops across several growths
		for i := 0; i < round%7+3; i++ {
			r.Push(next)
			next++
		}
		for i := 0; i < round%5+1 && r.Len() > 0; i++ {
			if f := r.Front(); f != want {
				t.Fatalf("front %d, want %d", f, want)
			}
			if v := r.Pop(); v != want {
				t.Fatalf("pop %d, want %d", v, want)
			}
			want++
		}
	}
	if r.Len() != int(next-want) {
		t.Fatalf("len %d, want %d", r.Len(), next-want)
	}
}

func TestRingBack(t *testing.T) {
	var r Ring[int64]
	for i := int64(1); i <= 20; i++ { // across growths, with the head moving
		r.Push(i)
		if r.Back() != i {
			t.Fatalf("back %d after pushing %d", r.Back(), i)
		}
		if i%3 == 0 {
			r.Pop()
		}
	}
	if r.Front() != 7 || r.Len() != 14 {
		t.Fatalf("front %d len %d, want 7 and 14", r.Front(), r.Len())
	}
}

// Events pushed into lanes come out in the same total order as through the heap alone, whether a lane's
// pushes are in time order or not (an out-of-order push falls back to the heap).
func TestLanesKeepTheOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var plain, laned Queue
	laned.Lanes(3)
	var now int64
	lastAt := [3]int64{}
	for step := 0; step < 20000; step++ {
		if plain.Len() > 0 && r.IntN(3) == 0 {
			a, b := plain.Pop(), laned.Pop()
			if a.At != b.At || a.Aux != b.Aux || a.Kind != b.Kind {
				t.Fatalf("step %d: heap alone gave (%d, %d), with lanes (%d, %d)", step, a.At, a.Aux, b.At, b.Aux)
			}
			now = a.At
			continue
		}
		l := r.IntN(4) // 3: the heap
		at := now + int64(r.IntN(20))
		if l < 3 && r.IntN(10) > 0 {
			at = max(at, lastAt[l]) // mostly in order, sometimes not
		}
		e := Event{At: at, Aux: int32(step), Kind: uint8(l)}
		plain.Push(e)
		if l == 3 {
			laned.Push(e)
		} else {
			laned.PushLane(l, e)
			lastAt[l] = max(lastAt[l], at)
		}
		if plain.Len() != laned.Len() {
			t.Fatalf("step %d: len %d with lanes, %d without", step, laned.Len(), plain.Len())
		}
	}
	for plain.Len() > 0 {
		if a, b := plain.Pop(), laned.Pop(); a.At != b.At || a.Aux != b.Aux {
			t.Fatalf("drain: heap alone gave (%d, %d), with lanes (%d, %d)", a.At, a.Aux, b.At, b.Aux)
		}
	}
	if laned.Len() != 0 {
		t.Fatalf("%d events left in the lanes", laned.Len())
	}
}
