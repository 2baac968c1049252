package verdict

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/resultsdir"
)

// ReadSwitchCounts reads the switch's mirrored and RoCE-received packet counts from a results directory's
// counters.json (or the directory itself), for the integrity check of dumps analyzed directly.
func ReadSwitchCounts(path string) (summary.SwitchCounts, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, resultsdir.FileCounters)
	}
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(filepath.Dir(path), filepath.Base(path), &cf); err != nil {
		return summary.SwitchCounts{}, err
	}
	if cf.Switch.Ports == nil {
		// The status file of lumina switch --status (a Linux testbed run by hand) has the same counts.
		var st struct {
			UptimeNs *int64 `json:"uptime_ns"`
			Ports    []struct {
				RxRoCE   uint64 `json:"rx_roce"`
				Mirrored uint64 `json:"mirrored"`
			} `json:"ports"`
		}
		if err := resultsdir.ReadJSON(filepath.Dir(path), filepath.Base(path), &st); err != nil || st.UptimeNs == nil || len(st.Ports) != 2 {
			return summary.SwitchCounts{}, fmt.Errorf("%s: no switch counters (want a results directory's counters.json or the status file of lumina switch --status)", path)
		}
		var c summary.SwitchCounts
		for _, p := range st.Ports {
			c.Mirrored += p.Mirrored
			c.RxRoCE += p.RxRoCE
		}
		c.Source = path
		return c, nil
	}
	return summary.SwitchCounts{Mirrored: cf.Switch.Mirrored, RxRoCE: cf.Switch.RxRoCE, Source: path}, nil
}

// FindSwitchCounts finds the counters of the results directory the captures come from: every path is
// DIR/dump/*.pcap or DIR/trace.pcapng of the same DIR, which holds counters.json.
func FindSwitchCounts(paths []string) (summary.SwitchCounts, bool) {
	dir := ""
	for _, p := range paths {
		d := filepath.Dir(p)
		switch {
		case filepath.Base(d) == resultsdir.DirDump:
			d = filepath.Dir(d)
		case filepath.Base(p) == resultsdir.FileTrace:
		default:
			return summary.SwitchCounts{}, false
		}
		if dir != "" && d != dir {
			return summary.SwitchCounts{}, false
		}
		dir = d
	}
	if dir == "" {
		return summary.SwitchCounts{}, false
	}
	c, err := ReadSwitchCounts(filepath.Join(dir, resultsdir.FileCounters))
	return c, err == nil
}
