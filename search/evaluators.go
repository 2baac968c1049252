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

// ProfileSpace narrows sp to the points the profile's NIC can create: it leaves out the QP types the profile
// does not support (rnic.Profile.QPTypes), as Collie's search on that NIC would find creating such a QP fail. The
// synthetic subsystem supports every type. The error says when nothing of sp is left.
func ProfileSpace(profile string, sp Space) (Space, error) {
	if profile == SyntheticProfile {
		return sp, nil
	}
	p, err := rnic.LoadProfile(profile)
	if err != nil {
		return sp, err
	}
	sp.QPTypes = slices.DeleteFunc(slices.Clone(sp.QPTypes), func(t string) bool { return !p.SupportsQPType(t) })
	if len(sp.QPTypes) == 0 {
		return sp, fmt.Errorf("space: profile %s supports none of its qp_type values (its qp-types: %s)", p.Name,
			strings.Join(p.SupportedQPTypes(), ", "))
	}
	return sp, nil
}

// CheckProfileSpace reports, naming the field and the profile, a QP type that sp asks for explicitly (a
// restriction) and the profile's NIC cannot create.
func CheckProfileSpace(profile string, sp Space) error {
	if profile == SyntheticProfile {
		return nil
	}
	p, err := rnic.LoadProfile(profile)
	if err != nil {
		return err
	}
	for _, t := range sp.QPTypes {
		if err := p.CheckQPType(t); err != nil {
			return err
		}
	}
	return nil
}
