package search

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lumina-go/lumina/version"
)

// Files of a search results directory (spec/nic-microarchitecture.md, "Command-line contract of the search").
const (
	AnomaliesFile = "anomalies.json"
	LogFile       = "search.jsonl"
	ConfigFile    = "search-config.json" // the options, so that --resume can check it continues the same search
	ScenarioDir   = "scenarios"
	// AnomaliesKey is the key of the list of anomalies in anomalies.json.
	AnomaliesKey = "anomalies"
)

// DirOptions says where and how a search writes its results.
type DirOptions struct {
	Dir     string
	Profile string // NIC profile named in the reproducing scenarios
	Resume  bool   // continue DIR/search.jsonl instead of starting a new search
	// Published, when the profile is one of a published study's subsystems, lists the published anomalies
	// whose conditions hold at a workload (cmd/lumina gives Collie's catalog, search/collie); each anomaly's
	// Published is set from the point the search hit. Nil: nothing is published for the profile.
	Published func(Workload) []int
}

// savedConfig is what search-config.json holds.
type savedConfig struct {
	Profile string `json:"profile"`
	Config  Config `json:"config"`
	// MFSProbes is the generation of the minimal-feature-set probes (and the verify probes that follow them) the
	// search's log records: absent (0) in a search written before msg_min and msg_max, whose probes followed
	// msg_mix and differ, so that resuming one past them diverges.
	MFSProbes int `json:"mfs_probes,omitempty"`
}

// mfsProbes is the generation of this version's MFS probes (savedConfig.MFSProbes).
const mfsProbes = 2

// RunDir runs a search that writes DIR/search.jsonl as it goes, then DIR/anomalies.json and one reproducing
// scenario per anomaly under DIR/scenarios/. With Resume it replays DIR/search.jsonl (dropping a torn last
// line) to rebuild the state without re-evaluating, then continues appending. Without Resume it refuses to
// overwrite an existing search.jsonl.
func RunDir(ctx context.Context, ev Evaluator, cfg Config, opt DirOptions) (*Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating results directory: %w", err)
	}
	logPath := filepath.Join(opt.Dir, LogFile)
	cfgPath := filepath.Join(opt.Dir, ConfigFile)
	probes, oldProbes := mfsProbes, false
	if opt.Resume {
		saved, err := checkSavedConfig(cfgPath, opt.Profile, cfg)
		if err != nil {
			return nil, err
		}
		recs, good, err := ReadLog(logPath)
		if err != nil {
			return nil, err
		}
		// A log without MFS probes continues with this version's; one with an earlier version's keeps its mark.
		if saved < mfsProbes && slices.ContainsFunc(recs, func(r Record) bool { return r.Kind == "mfs" || r.Kind == "verify" || r.Kind == "reduce" }) {
			probes, oldProbes = saved, true
		}
		if err := os.Truncate(logPath, good); err != nil {
			return nil, fmt.Errorf("dropping the torn last line of %s: %w", logPath, err)
		}
		cfg.Replay = recs
	} else if st, err := os.Stat(logPath); err == nil && st.Size() > 0 {
		return nil, fmt.Errorf("%s already holds a search: continue it with --resume or choose another --out", logPath)
	}
	sc, err := version.MarshalDocument(savedConfig{Profile: opt.Profile, Config: cfg, MFSProbes: probes})
	if err != nil {
		return nil, fmt.Errorf("encoding the options: %w", err)
	}
	if err := writeFileAtomic(cfgPath, sc); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the search log: %w", err)
	}
	bw := bufio.NewWriter(f)
	userLog, userProgress := cfg.Log, cfg.Progress
	cfg.Log = func(r Record) error {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		bw.Write(b)
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
		if userLog != nil {
			return userLog(r)
		}
		return nil
	}
	// Flush once per round, so a killed search leaves whole rounds behind.
	cfg.Progress = func(p Progress) {
		bw.Flush()
		if userProgress != nil {
			userProgress(p)
		}
	}
	res, serr := Search(ctx, ev, cfg)
	if oldProbes && errors.Is(serr, errReplayDiverged) {
		serr = fmt.Errorf("%s was written by an earlier version of lumina whose minimal-feature-set probes differ (msg_mix, now msg_min and msg_max), so it cannot be resumed past them (%w); start the search again with another --out",
			logPath, errReplayDiverged)
	}
	if err := bw.Flush(); err != nil && serr == nil {
		serr = fmt.Errorf("writing %s: %w", logPath, err)
	}
	if err := f.Close(); err != nil && serr == nil {
		serr = fmt.Errorf("closing %s: %w", logPath, err)
	}
	if res == nil {
		return nil, serr
	}
	if opt.Published != nil {
		for _, a := range res.Anomalies {
			ids := opt.Published(a.Workload)
			if ids == nil {
				ids = []int{} // written as [], "none of them", apart from absent ("nothing published")
			}
			a.Published = &ids
		}
	}
	if err := writeAnomalies(opt, cfg, res); err != nil && serr == nil {
		serr = err
	}
	return res, serr
}

// ReadLog reads a search.jsonl. A last line without its newline is a write cut short and is dropped (good
// is the length of the whole lines); a broken whole line is an error naming the line.
func ReadLog(path string) (recs []Record, good int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the search log to resume: %w", err)
	}
	for line := 1; len(data) > 0; line++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn last line
		}
		var r Record
		dec := json.NewDecoder(bytes.NewReader(data[:i]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if r.Eval != len(recs)+1 {
			return nil, 0, fmt.Errorf("%s:%d: evaluation %d, expected %d", path, line, r.Eval, len(recs)+1)
		}
		recs = append(recs, r)
		good += int64(i + 1)
		data = data[i+1:]
	}
	return recs, good, nil
}

// checkSavedConfig checks that the search saved in path ran with the options now given (but the budget); it
// returns the generation of its MFS probes (savedConfig.MFSProbes).
func checkSavedConfig(path, profile string, cfg Config) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%s is missing: nothing to resume in this directory", path)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the options to resume: %w", err)
	}
	var saved map[string]json.RawMessage
	if err := json.Unmarshal(data, &saved); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var probes int
	if b, ok := saved["mfs_probes"]; ok {
		if err := json.Unmarshal(b, &probes); err != nil {
			return 0, fmt.Errorf("%s: mfs_probes: %w", path, err)
		}
	}
	now, _ := json.Marshal(savedConfig{Profile: profile, Config: cfg})
	var cur map[string]json.RawMessage
	json.Unmarshal(now, &cur)
	var a, b map[string]json.RawMessage
	json.Unmarshal(saved["config"], &a)
	json.Unmarshal(cur["config"], &b)
	if !jsonEqual(saved["profile"], cur["profile"]) {
		return 0, fmt.Errorf("%s: the search ran on profile %s, not %s; resume with the same options", path, saved["profile"], cur["profile"])
	}
	for k, v := range a {
		if k == "budget" {
			continue // a resumed search may go further
		}
		if !jsonEqual(v, b[k]) {
			var was, now struct {
				QPTypes []string `json:"qp_type"`
			}
			if k == "space" && json.Unmarshal(v, &was) == nil && json.Unmarshal(b[k], &now) == nil &&
				!slices.Equal(was.QPTypes, now.QPTypes) {
				// No option brings them back: the profile's space leaves out what its NIC cannot create.
				return 0, fmt.Errorf("%s: the search ran over QP types %s, but profile %s's space now has only %s "+
					"(its NIC cannot create the others; an earlier version searched them): start the search again with another --out",
					path, strings.Join(was.QPTypes, ", "), profile, strings.Join(now.QPTypes, ", "))
			}
			return 0, fmt.Errorf("%s: the search ran with %s %s, now %s; resume with the same options", path, k, v, b[k])
		}
	}
	return probes, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

func writeAnomalies(opt DirOptions, cfg Config, res *Result) error {
	if len(res.Anomalies) > 0 {
		if err := os.MkdirAll(filepath.Join(opt.Dir, ScenarioDir), 0o755); err != nil {
			return fmt.Errorf("creating the scenarios directory: %w", err)
		}
	}
	for _, a := range res.Anomalies {
		a.Scenario = filepath.Join(opt.Dir, ScenarioDir, fmt.Sprintf("anomaly-%d.yaml", a.ID))
		var sb strings.Builder
		WriteScenario(&sb, opt.Profile, cfg.Seed, a)
		if err := writeFileAtomic(a.Scenario, []byte(sb.String())); err != nil {
			return err
		}
	}
	list := res.Anomalies
	if list == nil {
		list = []*Anomaly{}
	}
	b, err := version.MarshalList(AnomaliesKey, list)
	if err != nil {
		return fmt.Errorf("encoding anomalies: %w", err)
	}
	return writeFileAtomic(filepath.Join(opt.Dir, AnomaliesFile), b)
}

// WriteScenario writes a scenario that reproduces an anomaly on the simulated testbed: both hosts carry the
// profile's NIC, and the workload section holds the reproducer's dimensions under their JSON names.
func WriteScenario(w io.Writer, profile string, searchSeed uint64, a *Anomaly) {
	r := a.Reproducer
	fmt.Fprintf(w, "# lumina search: anomaly %d (%s) on profile %s, found at evaluation %d (search seed %d).\n",
		a.ID, a.Symptom, profile, a.FoundAt, searchSeed)
	fmt.Fprintf(w, "# Minimal feature set: %s\n", a.MFS)
	if a.MFSCut {
		fmt.Fprintf(w, "# (the search budget ran out during its probes: the set holds the point but may not be minimal)\n")
	}
	if a.Unconfirmed != nil {
		fmt.Fprintf(w, "# The point the search hit had more than one cause: one factor at a time gave %s, whose simplest\n", a.Unconfirmed)
		if a.Reduced != nil {
			fmt.Fprintf(w, "# point did not show the symptom; the set above is that of one cause, at %s.\n", a.Reduced)
		} else {
			fmt.Fprintf(w, "# point did not show the symptom, and no single cause was isolated: the set above is the point.\n")
		}
	}
	if a.Minimal {
		fmt.Fprintf(w, "# The workload is the simplest inside that set; it showed the symptom again.\n")
	} else {
		fmt.Fprintf(w, "# The workload is the point the search hit (the simplified one did not show the symptom).\n")
	}
	fmt.Fprintf(w, "testbed: sim\nseed: %d\n", a.Seed)
	fmt.Fprintf(w, "requester:\n  nic: {type: %s}\nresponder:\n  nic: {type: %s}\n", profile, profile)
	fmt.Fprintf(w, "workload:\n  qp_type: %s\n  opcode: %s\n  num_qps: %d\n  mtu: %d\n  wqe_batch: %d\n  sge: %d\n",
		r.QPType, r.Opcode, r.NumQPs, r.MTU, r.WQEBatch, r.SGE)
	fmt.Fprintf(w, "  wq_depth: %d\n  num_mrs: %d\n  mr_size: %d\n  msg_sizes: [", r.WQDepth, r.NumMRs, r.MRSize)
	for i, m := range r.MsgSizes {
		if i > 0 {
			fmt.Fprint(w, ", ")
		}
		fmt.Fprint(w, m)
	}
	fmt.Fprintf(w, "]\n  direction: %s\n  memory: %s\n", r.Direction, r.Memory)
	if len(r.Events) > 0 {
		fmt.Fprintf(w, "  events:\n")
		for _, e := range r.Events {
			fmt.Fprintf(w, "    - {qpn: %d, psn: %d, iter: %d, type: %s}\n", e.QP, e.PSN, e.Iter, e.Type)
		}
	}
}

// writeFileAtomic replaces path with data through a temporary file, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
