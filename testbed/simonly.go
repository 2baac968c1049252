package testbed

import (
	"fmt"

	"github.com/lumina-go/lumina/netsim"
	"github.com/lumina-go/lumina/scenario"
)

// SimulateOnly runs the scenario's simulation (testbed sim) as `lumina run` does, with its switch logic and
// events, and throws the mirrored frames away: no dumps, no trace, no analysis, no files. It is the yardstick
// of `lumina run`'s speed (bench/run.sh) and returns how many frames were mirrored (the trace's packets).
func SimulateOnly(sc *scenario.Scenario) (mirrored uint64, err error) {
	if sc.Workload != nil || (sc.Testbed != "" && sc.Testbed != "sim") {
		return 0, badInputf("%s: SimulateOnly runs testbed sim traffic only", sc.Path)
	}
	if err := preflight(sc); err != nil {
		return 0, err
	}
	cfg, err := netsimConfig(sc)
	if err != nil {
		return 0, err
	}
	rec, injectErr, err := switchSetup(sc, &cfg)
	if err != nil {
		return 0, err
	}
	rec.Latest = true // as in runSim: no per-packet history
	cfg.Dump = func(int, int64, []byte) { mirrored++ }
	if _, err := netsim.Run(cfg); err != nil {
		return 0, fmt.Errorf("simulation: %w", err)
	}
	if *injectErr != nil {
		return 0, badInputf("%s: %w", sc.Path, *injectErr)
	}
	return mirrored, nil
}
