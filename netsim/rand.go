package netsim

import (
	"math/rand/v2"

	"github.com/lumina-go/lumina/internal/des"
)

// fnv64 is FNV-1a of a component name.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// SubSeed derives a component's seed from the scenario seed and the component's name, so that adding a component
// never shifts the random stream of another.
func SubSeed(seed uint64, name string) uint64 { return des.SplitMix64(seed ^ fnv64(name)) }

// newRand returns the PCG stream of the named component.
func newRand(seed uint64, name string) *rand.Rand {
	s := SubSeed(seed, name)
	return rand.New(rand.NewPCG(s, des.SplitMix64(s)))
}
