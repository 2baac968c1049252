package analyze

import (
	"math/rand/v2"
	"testing"
)

// Corrupted frames (random byte flips, truncations) never make the analyzers panic or fail: bad input yields
// verdicts, not crashes.
func TestCorruptedFramesNeverPanic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := counterTrace(t).frames
	for round := 0; round < 300; round++ {
		frames := make([]frame, len(base))
		for i, f := range base {
			d := append([]byte(nil), f.data...)
			for k := rng.IntN(4); k > 0; k-- {
				d[rng.IntN(len(d))] ^= byte(1 + rng.IntN(255))
			}
			if rng.IntN(5) == 0 {
				d = d[:rng.IntN(len(d))]
			}
			frames[i] = frame{data: d, ts: f.ts}
		}
		res, err := Analyze(&sliceReader{frames: frames}, Options{IndexBase: 1})
		if err != nil || res.Packets != len(frames) {
			t.Fatalf("round %d: err %v, packets %d", round, err, res.Packets)
		}
	}
}
