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
