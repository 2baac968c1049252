package search

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// The evaluator registry lets the simulator (or later a hardware driver) plug in an Evaluator per NIC profile
// without the search depending on it: it registers from an init function.
var (
	regMu sync.RWMutex
	reg   = map[string]func() Evaluator{}
)

// SyntheticProfile names the built-in planted-anomaly subsystem (SyntheticF), for trying the search without a
// simulator.
const SyntheticProfile = "synthetic"

func init() { RegisterEvaluator(SyntheticProfile, func() Evaluator { return SyntheticF() }) }

// RegisterEvaluator makes an evaluator factory available for a profile name, replacing any earlier one.
func RegisterEvaluator(profile string, factory func() Evaluator) {
	regMu.Lock()
	defer regMu.Unlock()
	reg[profile] = factory
}

// EvaluatorFor returns a new evaluator for the profile, or an error naming the profiles that have one. A name
// ending in .yaml or .yml is a profile file: the simulated evaluator runs it if it has a micro section.
func EvaluatorFor(profile string) (Evaluator, error) {
	regMu.RLock()
	f, ok := reg[profile]
	regMu.RUnlock()
	if low := strings.ToLower(profile); !ok && (strings.HasSuffix(low, ".yaml") || strings.HasSuffix(low, ".yml")) {
		return NewSimEvaluator(profile)
	}
	if !ok {
		return nil, fmt.Errorf("no evaluator exists for profile %q (profiles with one: %s, or a profile file *.yaml with a micro section)",
			profile, strings.Join(Profiles(), ", "))
	}
	return f(), nil
}

// Profiles lists the profiles with a registered evaluator, sorted.
func Profiles() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(reg))
	for k := range reg {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
