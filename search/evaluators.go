package search

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lumina-go/lumina/rnic"
)

// SyntheticProfile names the built-in planted-anomaly subsystem (SyntheticF), for trying the search without a
// simulator.
const SyntheticProfile = "synthetic"

// EvaluatorFor returns a new evaluator for the profile: the synthetic subsystem, the simulated evaluator for an
// embedded NIC profile that describes its micro-architecture, or for a profile file (a name ending in .yaml or
// .yml) with a micro section. Otherwise the error names the profiles that have one.
func EvaluatorFor(profile string) (Evaluator, error) {
	if profile == SyntheticProfile {
		return SyntheticF(), nil
	}
	if low := strings.ToLower(profile); strings.HasSuffix(low, ".yaml") || strings.HasSuffix(low, ".yml") {
		return NewSimEvaluator(profile)
	}
	if slices.Contains(rnic.ProfileNames(), profile) {
		if e, err := NewSimEvaluator(profile); err == nil {
			return e, nil
		}
	}
	return nil, fmt.Errorf("no evaluator exists for profile %q (profiles with one: %s, or a profile file *.yaml with a micro section)",
		profile, strings.Join(Profiles(), ", "))
}

// Profiles lists the profiles with an evaluator, sorted: synthetic and every embedded NIC profile with a micro
// section.
func Profiles() []string {
	out := []string{SyntheticProfile}
	for _, name := range rnic.ProfileNames() {
		if _, err := NewSimEvaluator(name); err == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
