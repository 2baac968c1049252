package trace

import "testing"

func TestUnwrap48(t *testing.T) {
	var u Unwrap48
	const top = 1<<48 - 1
	steps := []struct {
		in   uint64
		want int64
	}{
		{top - 10, top - 10},
		{top - 4, top - 4},
		{top - 6, top - 6}, // a small step back stays one
		{3, top + 4},       // the wrap goes forward: 2^48 + 3
		{top - 1, top - 1}, // back across the wrap by 5 ns
		{100, 1<<48 + 100},
		{1 << 47, 1<<48 + 1<<47},
		{top, 1<<49 - 1},
		{1<<48 + 5, 1<<49 + 5}, // only the low 48 bits count: 5 after the next wrap
	}
	for i, s := range steps {
		if got := u.Extend(s.in); got != s.want {
			t.Fatalf("step %d: Extend(%d) = %d, want %d", i, s.in, got, s.want)
		}
	}
}
