package inject

// WRR is smooth weighted round robin (the scheme nginx uses): every pick adds each weight to its dumper's
// credit, takes the dumper with the most credit and charges it the total. Weights 2:1 give 0,1,0,0,1,0,...,
// spreading each dumper's share evenly instead of in bursts, which keeps dumper queues short.
type WRR struct {
	weight []int64
	credit []int64
	total  int64
}

// NewWRR returns a scheduler over len(weights) outputs.
func NewWRR(weights []int) WRR {
	w := WRR{weight: make([]int64, len(weights)), credit: make([]int64, len(weights))}
	for i, x := range weights {
		w.weight[i] = int64(x)
		w.total += int64(x)
	}
	return w
}

// Next returns the output for the next item (the dumper for the next mirrored copy); ties go to the lowest
// index, so the order is deterministic.
func (w *WRR) Next() int {
	best := 0
	for i := range w.weight {
		w.credit[i] += w.weight[i]
		if w.credit[i] > w.credit[best] {
			best = i
		}
	}
	w.credit[best] -= w.total
	return best
}
