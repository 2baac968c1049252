// Package campaign runs suites of lumina runs (a matrix of scenarios x NIC profiles or testbeds x seeds) through
// the NATS JetStream work queue of package queue, and writes one summary per campaign: per item its verdict,
// exit status, key metrics and results directory, merged by item index so that it is byte-identical whatever
// the number of workers, their speed, or how often they or the coordinator were stopped (docs/campaign.md).
package campaign

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/lumina-go/lumina/queue"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/version"
)

// Spec is a campaign file.
type Spec struct {
	// Name names the campaign (default: the file name without extension).
	Name string `yaml:"name"`
	// Scenarios are scenario files, relative to the campaign file.
	Scenarios []string `yaml:"scenarios"`
	// Profiles are NIC profiles (names, or profile files relative to the campaign file) set on both hosts of
	// each scenario, run on the simulated testbed.
	Profiles []string `yaml:"profiles"`
	// Testbeds are testbeds that workers own by name (lumina worker --testbed NAME): the scenario runs as
	// written on the worker that declared the name.
	Testbeds []string `yaml:"testbeds"`
	// Seeds override the scenario's seed; empty: the scenario's own.
	Seeds []uint64 `yaml:"seeds"`
	// Timeout is each item's deadline once a worker started it (Go duration; default 10m).
	Timeout string `yaml:"timeout"`
	// Attempts is how many times an item is delivered before it is given up (default 3).
	Attempts int `yaml:"attempts"`
}

// Defaults of a Spec.
const (
	DefaultTimeout  = 10 * time.Minute
	DefaultAttempts = 3
	maxItems        = 100000
)

// Item is one run of the matrix.
type Item struct {
	Index    int    // 0-based, the order of the summary
	ID       string // scenario/profile-or-testbed/seed, for people
	Scenario string // path as given in the campaign file
	Abs      string // absolute path
	YAML     []byte // the scenario file's content
	Profile  string // NIC profile override (sim), or ""
	Testbed  string // named testbed, or ""
	Seed     uint64
	HasSeed  bool
	Key      string // queue key: index and a hash of everything the run depends on
	Rel      string // results directory, relative to the campaign directory
}

// Plan is a validated campaign: its items in summary order.
type Plan struct {
	Name     string
	File     string
	Timeout  time.Duration
	Attempts int
	Items    []Item
}

// Load reads and validates a campaign file. Every error names the file and the place (key, list index).
func Load(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading campaign: %w", err)
	}
	return Parse(data, path)
}

// Parse validates a campaign file held in memory; path locates the files it names.
func Parse(data []byte, path string) (*Plan, error) {
	var s Spec
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: empty campaign file; expected at least a scenarios list", path)
	}
	if err := yaml.UnmarshalWithOptions(data, &s, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("%s: %s (keys: name, scenarios, profiles, testbeds, seeds, timeout, attempts)", path, yaml.FormatError(err, false, true))
	}
	p := &Plan{Name: s.Name, File: path, Timeout: DefaultTimeout, Attempts: DefaultAttempts}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, a...)...))
	}
	// The name is the default campaign directory campaigns/<name>: one path element, never leaving it.
	if !filepath.IsLocal(p.Name) || strings.ContainsAny(p.Name, `/\`) || strings.HasPrefix(p.Name, ".") {
		bad("name: %q: expected a plain name (no path separators, not starting with '.')", p.Name)
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			bad("timeout: %q: expected a positive duration such as 90s or 10m", s.Timeout)
		}
		p.Timeout = d
	}
	if s.Attempts != 0 {
		if s.Attempts < 1 || s.Attempts > 100 {
			bad("attempts: %d: expected 1 to 100 deliveries", s.Attempts)
		}
		p.Attempts = s.Attempts
	}
	if len(s.Scenarios) == 0 {
		bad("scenarios: expected at least one scenario file")
	}
	base := filepath.Dir(path)
	type sc struct {
		given, abs string
		data       []byte
		parsed     *scenario.Scenario
	}
	var scs []sc
	seenSc := map[string]int{}
	for i, f := range s.Scenarios {
		abs, err := filepath.Abs(filepath.Join(base, f))
		if filepath.IsAbs(f) {
			abs, err = f, nil
		}
		if err != nil {
			bad("scenarios[%d]: %v", i, err)
			continue
		}
		if j, dup := seenSc[abs]; dup {
			bad("scenarios[%d]: %s is scenarios[%d] again", i, f, j)
			continue
		}
		seenSc[abs] = i
		data, err := os.ReadFile(abs)
		if err != nil {
			bad("scenarios[%d]: %s: cannot read it: %v", i, f, errors.Unwrap(err))
			continue
		}
		parsed, err := scenario.Parse(data, abs)
		if err != nil {
			bad("scenarios[%d]: %v", i, err)
			continue
		}
		scs = append(scs, sc{f, abs, data, parsed})
	}
	profiles := map[string]bool{}
	profileData := map[string][]byte{} // profile file -> its content (hashed into the item keys)
	for i, pr := range s.Profiles {
		switch low := strings.ToLower(pr); {
		case pr == "":
			bad("profiles[%d]: empty profile name", i)
		case strings.HasSuffix(low, ".yaml") || strings.HasSuffix(low, ".yml"):
			abs, err := filepath.Abs(filepath.Join(base, pr))
			if filepath.IsAbs(pr) {
				abs = pr
			}
			if err == nil {
				_, err = rnic.LoadProfile(abs)
			}
			if err == nil {
				profileData[abs], err = os.ReadFile(abs)
			}
			if err != nil {
				bad("profiles[%d]: %v", i, err)
			}
			s.Profiles[i] = abs
		case !slices.Contains(rnic.ProfileNames(), pr):
			bad("profiles[%d]: unknown NIC profile %q (expected one of %s, or a profile file *.yaml)", i, pr, strings.Join(rnic.ProfileNames(), ", "))
		}
		if profiles[s.Profiles[i]] {
			bad("profiles[%d]: %q is listed twice", i, pr)
		}
		profiles[s.Profiles[i]] = true
	}
	testbeds := map[string]bool{}
	for i, tb := range s.Testbeds {
		if err := queue.CheckToken("testbed name", tb); err != nil {
			bad("testbeds[%d]: %v", i, err)
		} else if tb == queue.CapSim {
			bad("testbeds[%d]: %q is the simulator: list NIC profiles under profiles: instead", i, tb)
		}
		if testbeds[tb] {
			bad("testbeds[%d]: %q is listed twice", i, tb)
		}
		testbeds[tb] = true
	}
	seeds := map[uint64]bool{}
	for i, sd := range s.Seeds {
		if seeds[sd] {
			bad("seeds[%d]: %d is listed twice", i, sd)
		}
		seeds[sd] = true
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	type target struct{ profile, testbed string }
	var targets []target
	for _, pr := range s.Profiles {
		targets = append(targets, target{profile: pr})
	}
	for _, tb := range s.Testbeds {
		targets = append(targets, target{testbed: tb})
	}
	if len(targets) == 0 {
		targets = []target{{}}
	}
	seedList := []*uint64{nil}
	if len(s.Seeds) > 0 {
		seedList = nil
		for i := range s.Seeds {
			seedList = append(seedList, &s.Seeds[i])
		}
	}
	if n := len(scs) * len(targets) * len(seedList); n > maxItems {
		return nil, fmt.Errorf("%s: the matrix has %d items; expected at most %d", path, n, maxItems)
	}
	ver := version.Get().String()
	ids := map[string]int{}
	for _, c := range scs {
		// Files the scenario names (its NIC profile files) enter the key: a changed file is a new item.
		var named []byte
		for _, typ := range []string{c.parsed.Requester.NIC.Type, c.parsed.Responder.NIC.Type} {
			if ref := c.parsed.ProfileRef(typ); ref != typ {
				b, err := os.ReadFile(ref)
				if err != nil {
					return nil, fmt.Errorf("%s: scenario %s: NIC profile file %s: %v", path, c.given, ref, errors.Unwrap(err))
				}
				named = append(append(named, b...), 0)
			}
		}
		for _, t := range targets {
			if t.profile == "" && t.testbed == "" && c.parsed.Testbed != "" && c.parsed.Testbed != "sim" {
				return nil, fmt.Errorf("%s: scenario %s runs on testbed %q: list the name of the worker-owned testbed under testbeds", path, c.given, c.parsed.Testbed)
			}
			if t.profile != "" && c.parsed.Testbed != "" && c.parsed.Testbed != "sim" {
				// A profile item runs on the simulator's workers: a scenario written for a real testbed
				// (VMs, remote hosts) must not start there.
				return nil, fmt.Errorf("%s: scenario %s runs on testbed %q, and profiles: runs every scenario on the simulator: list its worker-owned testbed under testbeds (with no profiles), or make a simulator copy of the scenario", path, c.given, c.parsed.Testbed)
			}
			for _, sd := range seedList {
				it := Item{Index: len(p.Items), Scenario: c.given, Abs: c.abs, YAML: c.data, Profile: t.profile, Testbed: t.testbed}
				it.Seed = c.parsed.Seed
				if sd != nil {
					it.Seed, it.HasSeed = *sd, true
				}
				name := strings.TrimSuffix(filepath.Base(c.given), filepath.Ext(c.given))
				target := "as-written"
				switch {
				case t.profile != "":
					target = strings.TrimSuffix(filepath.Base(t.profile), filepath.Ext(t.profile))
				case t.testbed != "":
					target = "testbed-" + t.testbed
				}
				it.ID = fmt.Sprintf("%s/%s/seed-%d", name, target, it.Seed)
				if j, dup := ids[it.ID]; dup {
					return nil, fmt.Errorf("%s: items %d and %d are both %s: two scenarios or profiles of the same name (rename one)", path, j, it.Index, it.ID)
				}
				ids[it.ID] = it.Index
				// The key is a hash of what the run depends on: contents (scenario, profile file, files the
				// scenario names), not paths, and the lumina version; a change is a new item, never a stale result.
				h := fnv.New64a()
				fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00", ver, t.testbed, it.Seed, len(c.data))
				h.Write(c.data)
				if d, ok := profileData[t.profile]; ok {
					fmt.Fprintf(h, "\x00file\x00%d\x00", len(d))
					h.Write(d)
				} else {
					fmt.Fprintf(h, "\x00name\x00%s\x00", t.profile)
				}
				h.Write(named)
				it.Key = fmt.Sprintf("i%05d-%016x", it.Index, h.Sum64())
				it.Rel = filepath.Join("items", fmt.Sprintf("%04d-%s-%s-s%d", it.Index, sanitize(name), sanitize(target), it.Seed))
				p.Items = append(p.Items, it)
			}
		}
	}
	return p, nil
}

// Cap is the capability a worker needs for the item.
func (it *Item) Cap() string {
	if it.Testbed != "" {
		return "testbed-" + it.Testbed
	}
	return queue.CapSim
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r == '-' || r == '_' || r == '.' || (r >= '0' && r <= '9') || (r|0x20 >= 'a' && r|0x20 <= 'z')) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
