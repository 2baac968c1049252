package testbed

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/lumina-go/lumina/live"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
)

// runNetns runs the scenario on the netns testbed: requester, switch, responder and dumper namespaces joined
// by veth pairs, the real-time switch running the same injector as the simulator, the dumpers, and two
// software RNICs (the scenario's NIC profiles driven in real time). It needs root.
func runNetns(sc *scenario.Scenario, opts Options) (*rawResults, error) {
	if err := live.RequireRoot(); err != nil {
		return nil, badInputf("%s: testbed netns: %w", sc.Path, err)
	}
	cfg, err := netsimConfig(sc)
	if err != nil {
		return nil, err
	}
	rec, injectErr, err := switchSetup(sc, &cfg)
	if err != nil {
		return nil, err
	}
	snap := sc.Network.SnapLen
	res, err := live.RunNetns(context.Background(), live.NetnsConfig{Sim: cfg, OutDir: filepath.Join(opts.OutDir, resultsdir.DirDump),
		SnapLen: snap, RewritePort: uint16(sc.RewriteUDPDstPort)})
	if *injectErr != nil {
		return nil, badInputf("%s: %w", sc.Path, *injectErr)
	}
	if err != nil {
		return nil, fmt.Errorf("netns testbed: %w", err)
	}
	if err := writeRunFiles(opts.OutDir, sc, &res.Result, rec); err != nil {
		return nil, err
	}
	return rawOf(rec), nil
}
