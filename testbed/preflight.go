package testbed

import (
	"github.com/lumina-go/lumina/netsim"
	"github.com/lumina-go/lumina/scenario"
)

// netnsMaxDumpers is the netns testbed's dumper limit (live.NewTestbed).
const netnsMaxDumpers = 16

// preflight rejects, before anything is created or run, the values the scenario validator accepts but the
// chosen testbed cannot honour: each such value is bad input (exit status 2), never a failed run.
func preflight(sc *scenario.Scenario) error {
	if sc.Workload == nil && (sc.Testbed == "" || sc.Testbed == "sim" || sc.Testbed == "netns") {
		cfg, err := netsimConfig(sc)
		if err != nil {
			return err
		}
		if err := netsim.ValidateConfig(&cfg); err != nil {
			return badInputf("%s: %w", sc.Path, err)
		}
	}
	switch sc.Testbed {
	case "netns":
		if n := max(len(sc.Network.DumperWeights), sc.Network.Dumpers); n > netnsMaxDumpers {
			return badInputf("%s: network.dumpers %d: the netns testbed runs 1..%d dumpers (one network namespace each)", sc.Path, n, netnsMaxDumpers)
		}
	case "rxe-vm":
		return rxeUnsupported(sc)
	}
	return nil
}
