package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A search.jsonl written before msg_min and msg_max (its search-config.json has no mfs_probes) whose MFS probes
// this version does not retrace is refused on resume with an error saying so, not one blaming the options; a
// search of this version diverging the same way still blames the options; an earlier search that recorded no
// MFS probe resumes and is marked as this version's.
func TestResumeOfEarlierMFSProbes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Algo, cfg.Seed, cfg.Budget = AlgoSA, 3, 700
	dir := t.TempDir()
	if _, err := RunDir(context.Background(), SyntheticF(), cfg, DirOptions{Dir: dir, Profile: "synthetic"}); err != nil {
		t.Fatal(err)
	}
	logPath, cfgPath := filepath.Join(dir, LogFile), filepath.Join(dir, ConfigFile)
	origLog, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	origCfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(origCfg, []byte(`"mfs_probes": 2`)) {
		t.Fatalf("search-config.json does not record the MFS probes' generation:\n%s", origCfg)
	}
	earlierCfg := bytes.Replace(origCfg, []byte(",\n  \"mfs_probes\": 2"), nil, 1)
	// The log as an earlier version's probes would have it: the first MFS probe another workload.
	lines := bytes.SplitAfter(origLog, []byte("\n"))
	first := -1
	for i, l := range lines {
		var r Record
		if json.Unmarshal(l, &r) == nil && r.Kind == "mfs" {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatal("the search recorded no MFS probe: the test checks nothing")
	}
	var r Record
	if err := json.Unmarshal(lines[first], &r); err != nil {
		t.Fatal(err)
	}
	r.Workload.NumQPs++
	b, _ := json.Marshal(r)
	lines[first] = append(b, '\n')
	earlierLog := bytes.Join(lines, nil)

	resume := func(logB, cfgB []byte) error {
		if err := os.WriteFile(logPath, logB, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, cfgB, 0o644); err != nil {
			t.Fatal(err)
		}
		more := cfg
		more.Budget = 900
		_, err := RunDir(context.Background(), SyntheticF(), more, DirOptions{Dir: dir, Profile: "synthetic", Resume: true})
		return err
	}
	err = resume(earlierLog, earlierCfg)
	if err == nil || !errors.Is(err, errReplayDiverged) || !strings.Contains(err.Error(), "earlier version") ||
		strings.Contains(err.Error(), "options of the first run") {
		t.Errorf("resuming an earlier version's search: %v; want an error naming the earlier version's MFS probes", err)
	}
	if b, _ := os.ReadFile(cfgPath); bytes.Contains(b, []byte("mfs_probes")) {
		t.Error("the refused resume marked the earlier search as this version's")
	}
	err = resume(earlierLog, origCfg)
	if err == nil || !strings.Contains(err.Error(), "options of the first run") || strings.Contains(err.Error(), "earlier version") {
		t.Errorf("resuming this version's search that diverges: %v; want the options blamed", err)
	}
	// An earlier search cut before its first MFS probe resumes.
	if err := resume(bytes.Join(lines[:first], nil), earlierCfg); err != nil {
		t.Errorf("resuming an earlier search without MFS probes: %v", err)
	}
	if b, _ := os.ReadFile(cfgPath); !bytes.Contains(b, []byte(`"mfs_probes": 2`)) {
		t.Error("an earlier search resumed past its first MFS probe is not marked as this version's")
	}
}
