package verdict

import (
	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
)

// AnalyzeOptions are the analyzer options for a scenario's connections and counters, as a results directory's
// analysis uses them (NIC behaviours from the profiles, counter vendors, link speed); for results that come from
// elsewhere (the reference Lumina's results directories, package refdir).
func AnalyzeOptions(sc *scenario.Scenario, conns []resultsdir.ConnRecord, counters *resultsdir.CountersFile) analyze.Options {
	return analyzeOptions(sc, conns, counters, nil)
}

// VendorOf is the vendor of a host's NIC profile ("" when the profile does not load).
func VendorOf(sc *scenario.Scenario, h scenario.Host) string {
	p, err := rnic.LoadProfile(sc.ProfileRef(h.NIC.Type))
	if err != nil {
		return ""
	}
	return p.Vendor
}
