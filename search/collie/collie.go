// Package collie holds Collie's published anomalies as data (seeds/003, table 2 and appendix A, in
// anomalies.yaml): for each anomaly its subsystem, symptom, the conditions its table and text give (the
// minimal feature set, as predicates over the search space's dimensions), its concrete trigger and where in the
// paper each comes from; and which anomalies each simulated profile must hold. Predict answers "does some
// published condition hold at this workload" for a profile. Tests and the search benchmark read it.
//
// It depends only on the workload type (package scenario), so the micro-architecture model's tests can use it.
package collie

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"

	"github.com/lumina-go/lumina/scenario"
)

//go:embed anomalies.yaml
var anomaliesYAML []byte

// File is the embedded file's name, used in error messages.
const File = "search/collie/anomalies.yaml"

// Symptoms, as the search's monitor names them.
const (
	Pause         = "pause"
	LowThroughput = "low-throughput"
)

// Range bounds an integer quantity; a nil end is open.
type Range struct {
	Min *int `yaml:"min"`
	Max *int `yaml:"max"`
}

func (r *Range) holds(v int) bool {
	return r == nil || ((r.Min == nil || v >= *r.Min) && (r.Max == nil || v <= *r.Max))
}

// When is one anomaly's published minimal feature set: every non-empty condition must hold. TotalQPs counts
// connections in both directions (num_qps per direction, doubled for bi and loopback), TotalMRs all memory
// regions (num_qps x num_mrs), MsgMin and MsgMax bound the smallest and the largest request of the vector.
type When struct {
	QPType    []string `yaml:"qp_type"`
	Opcode    []string `yaml:"opcode"`
	Direction []string `yaml:"direction"`
	Memory    []string `yaml:"memory"`
	MTU       []int    `yaml:"mtu"`
	NumQPs    *Range   `yaml:"num_qps"`
	TotalQPs  *Range   `yaml:"total_qps"`
	WQEBatch  *Range   `yaml:"wqe_batch"`
	SGE       *Range   `yaml:"sge"`
	WQDepth   *Range   `yaml:"wq_depth"`
	NumMRs    *Range   `yaml:"num_mrs"`
	TotalMRs  *Range   `yaml:"total_mrs"`
	MRSize    *Range   `yaml:"mr_size"`
	MsgMin    *Range   `yaml:"msg_min"`
	MsgMax    *Range   `yaml:"msg_max"`
}

// Host is what the subsystem itself must be for the anomaly to exist.
type Host struct {
	RelaxedOrdering *bool `yaml:"relaxed_ordering"`
}

// Anomaly is one of Collie's published anomalies.
type Anomaly struct {
	ID        int    `yaml:"id"`
	Subsystem string `yaml:"subsystem"` // F (NVIDIA CX-6, 200G) or H (Broadcom P2100G, 100G): table 1
	Status    string `yaml:"status"`    // old (known before Collie) or new
	Symptom   string `yaml:"symptom"`   // pause | low-throughput
	Cause     string `yaml:"cause"`
	Title     string `yaml:"title"`
	Host      *Host  `yaml:"host"`
	When      When   `yaml:"when"`
	Source    string `yaml:"source"`
	// Trigger is the appendix's simplified concrete trigger setting.
	Trigger     scenario.Workload `yaml:"trigger"`
	TriggerNote string            `yaml:"trigger_note"`
}

// Profile names the anomalies a simulated profile must hold.
type Profile struct {
	Name            string `yaml:"name"`
	Subsystem       string `yaml:"subsystem"`
	Anomalies       []int  `yaml:"anomalies"`
	RelaxedOrdering bool   `yaml:"relaxed_ordering"`
	Note            string `yaml:"note"`
}

// Catalog is the whole file.
type Catalog struct {
	Source    string    `yaml:"source"`
	Anomalies []Anomaly `yaml:"anomalies"`
	Profiles  []Profile `yaml:"profiles"`
}

var (
	loadOnce sync.Once
	loaded   *Catalog
	loadErr  error
)

// Load returns the embedded catalog, parsed and validated once.
func Load() (*Catalog, error) {
	loadOnce.Do(func() { loaded, loadErr = Parse(anomaliesYAML, File) })
	return loaded, loadErr
}

// Parse reads and validates a catalog; errors name the file, the anomaly or profile and the field.
func Parse(data []byte, name string) (*Catalog, error) {
	var c Catalog
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &c, nil
}

var (
	qpTypes    = []string{"rc", "uc", "ud"}
	opcodes    = []string{"send", "write", "read"}
	directions = []string{"uni", "bi", "loopback"}
	memories   = []string{"local", "remote-numa", "gpu-same-switch", "gpu-cross-switch"}
	mtus       = []int{256, 512, 1024, 2048, 4096}
)

func (c *Catalog) validate() error {
	var errs []error
	if len(c.Anomalies) == 0 {
		return errors.New("no anomalies")
	}
	seen := map[int]*Anomaly{}
	for i := range c.Anomalies {
		a := &c.Anomalies[i]
		bad := func(f string, args ...any) {
			errs = append(errs, fmt.Errorf("anomaly #%d (entry %d): %s", a.ID, i+1, fmt.Sprintf(f, args...)))
		}
		if a.ID < 1 {
			bad("id %d: want a positive number", a.ID)
		} else if seen[a.ID] != nil {
			bad("id %d appears twice", a.ID)
		}
		seen[a.ID] = a
		if a.Subsystem == "" {
			bad("subsystem is empty")
		}
		if a.Status != "old" && a.Status != "new" {
			bad("status %q: want old or new", a.Status)
		}
		if a.Symptom != Pause && a.Symptom != LowThroughput {
			bad("symptom %q: want %s or %s", a.Symptom, Pause, LowThroughput)
		}
		if a.Title == "" || a.Source == "" || a.Cause == "" {
			bad("title, cause and source must all be given")
		}
		if err := a.When.check(); err != nil {
			bad("when: %v", err)
		}
		if err := checkTrigger(&a.Trigger); err != nil {
			bad("trigger: %v", err)
		} else if !a.When.Holds(a.Trigger) {
			bad("the trigger does not meet the conditions (%s): a necessary condition must hold at the appendix's own trigger", a.When.Unmet(a.Trigger))
		}
	}
	names := map[string]bool{}
	for i := range c.Profiles {
		p := &c.Profiles[i]
		bad := func(f string, args ...any) {
			errs = append(errs, fmt.Errorf("profile %q (entry %d): %s", p.Name, i+1, fmt.Sprintf(f, args...)))
		}
		if p.Name == "" || names[p.Name] {
			bad("name empty or repeated")
		}
		names[p.Name] = true
		if len(p.Anomalies) == 0 {
			bad("no anomalies")
		}
		for _, id := range p.Anomalies {
			a := seen[id]
			switch {
			case a == nil:
				bad("anomaly #%d is not in the catalog", id)
			case a.Subsystem != p.Subsystem:
				bad("anomaly #%d is of subsystem %s, the profile of %s", id, a.Subsystem, p.Subsystem)
			case a.Host != nil && a.Host.RelaxedOrdering != nil && *a.Host.RelaxedOrdering != p.RelaxedOrdering:
				bad("anomaly #%d needs relaxed_ordering %v, the profile has %v", id, *a.Host.RelaxedOrdering, p.RelaxedOrdering)
			}
		}
		if slices.Contains(p.Anomalies, 0) || len(slices.Compact(slices.Sorted(slices.Values(p.Anomalies)))) != len(p.Anomalies) {
			bad("anomalies %v repeat a number", p.Anomalies)
		}
	}
	return errors.Join(errs...)
}

func (w *When) check() error {
	var errs []string
	strs := func(name string, got, allowed []string) {
		for _, v := range got {
			if !slices.Contains(allowed, v) {
				errs = append(errs, fmt.Sprintf("%s %q: want one of %s", name, v, strings.Join(allowed, ", ")))
			}
		}
	}
	strs("qp_type", w.QPType, qpTypes)
	strs("opcode", w.Opcode, opcodes)
	strs("direction", w.Direction, directions)
	strs("memory", w.Memory, memories)
	for _, m := range w.MTU {
		if !slices.Contains(mtus, m) {
			errs = append(errs, fmt.Sprintf("mtu %d: want one of 256, 512, 1024, 2048, 4096", m))
		}
	}
	n := len(w.QPType) + len(w.Opcode) + len(w.Direction) + len(w.Memory) + len(w.MTU)
	for _, r := range w.ranges() {
		if r.r == nil {
			continue
		}
		n++
		switch {
		case r.r.Min == nil && r.r.Max == nil:
			errs = append(errs, fmt.Sprintf("%s: give min, max or both", r.name))
		case r.r.Min != nil && *r.r.Min < 1:
			errs = append(errs, fmt.Sprintf("%s: min %d, want at least 1", r.name, *r.r.Min))
		case r.r.Min != nil && r.r.Max != nil && *r.r.Min > *r.r.Max:
			errs = append(errs, fmt.Sprintf("%s: min %d above max %d", r.name, *r.r.Min, *r.r.Max))
		}
	}
	if n == 0 {
		errs = append(errs, "no condition")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

type namedRange struct {
	name string
	r    *Range
	v    func(scenario.Workload) int
}

func (w *When) ranges() []namedRange {
	return []namedRange{
		{"num_qps", w.NumQPs, func(x scenario.Workload) int { return x.NumQPs }},
		{"total_qps", w.TotalQPs, TotalQPs},
		{"wqe_batch", w.WQEBatch, func(x scenario.Workload) int { return x.WQEBatch }},
		{"sge", w.SGE, func(x scenario.Workload) int { return x.SGE }},
		{"wq_depth", w.WQDepth, func(x scenario.Workload) int { return x.WQDepth }},
		{"num_mrs", w.NumMRs, func(x scenario.Workload) int { return x.NumMRs }},
		{"total_mrs", w.TotalMRs, func(x scenario.Workload) int { return x.NumQPs * x.NumMRs }},
		{"mr_size", w.MRSize, func(x scenario.Workload) int { return x.MRSize }},
		{"msg_min", w.MsgMin, func(x scenario.Workload) int { return slices.Min(x.MsgSizes) }},
		{"msg_max", w.MsgMax, func(x scenario.Workload) int { return slices.Max(x.MsgSizes) }},
	}
}

// TotalQPs is the workload's connections in both directions: num_qps counts one direction.
func TotalQPs(w scenario.Workload) int {
	if w.Direction == "bi" || w.Direction == "loopback" {
		return 2 * w.NumQPs
	}
	return w.NumQPs
}

// Holds reports whether every condition holds at w (a workload without requests meets none).
func (w *When) Holds(x scenario.Workload) bool { return w.Unmet(x) == "" }

// Unmet names the first condition that does not hold at x, or "" when all do.
func (w *When) Unmet(x scenario.Workload) string {
	for _, c := range []struct {
		name string
		vals []string
		v    string
	}{{"qp_type", w.QPType, x.QPType}, {"opcode", w.Opcode, x.Opcode}, {"direction", w.Direction, x.Direction},
		{"memory", w.Memory, x.Memory}} {
		if len(c.vals) > 0 && !slices.Contains(c.vals, c.v) {
			return fmt.Sprintf("%s %s not in %v", c.name, c.v, c.vals)
		}
	}
	if len(w.MTU) > 0 && !slices.Contains(w.MTU, x.MTU) {
		return fmt.Sprintf("mtu %d not in %v", x.MTU, w.MTU)
	}
	if len(x.MsgSizes) == 0 {
		return "no message sizes"
	}
	for _, r := range w.ranges() {
		if v := r.v(x); !r.r.holds(v) {
			return fmt.Sprintf("%s %d outside %s", r.name, v, r.r)
		}
	}
	return ""
}

func (r *Range) String() string {
	lo, hi := "", ""
	if r.Min != nil {
		lo = fmt.Sprint(*r.Min)
	}
	if r.Max != nil {
		hi = fmt.Sprint(*r.Max)
	}
	return "[" + lo + ", " + hi + "]"
}

func checkTrigger(w *scenario.Workload) error {
	switch {
	case !slices.Contains(qpTypes, w.QPType), !slices.Contains(opcodes, w.Opcode),
		!slices.Contains(directions, w.Direction), !slices.Contains(memories, w.Memory):
		return fmt.Errorf("qp_type %q, opcode %q, direction %q, memory %q: one is not a known value", w.QPType, w.Opcode, w.Direction, w.Memory)
	case !slices.Contains(mtus, w.MTU):
		return fmt.Errorf("mtu %d is not a RoCE MTU", w.MTU)
	case w.NumQPs < 1 || w.WQEBatch < 1 || w.SGE < 1 || w.WQDepth < 1 || w.NumMRs < 1 || w.MRSize < 1 || len(w.MsgSizes) == 0:
		return errors.New("num_qps, wqe_batch, sge, wq_depth, num_mrs, mr_size and msg_sizes must all be given and positive")
	}
	return nil
}

// Anomaly returns the anomaly with the number, or nil.
func (c *Catalog) Anomaly(id int) *Anomaly {
	for i := range c.Anomalies {
		if c.Anomalies[i].ID == id {
			return &c.Anomalies[i]
		}
	}
	return nil
}

// Lookup returns the named profile's entry, or nil when the profile is not one of the catalog's (a NIC Collie
// published nothing for, or a profile file: the user's NIC, not the paper's).
func (c *Catalog) Lookup(name string) *Profile {
	for i := range c.Profiles {
		if c.Profiles[i].Name == name {
			return &c.Profiles[i]
		}
	}
	return nil
}

// Profile returns the named profile's entry, or an error naming the profiles the catalog lists.
func (c *Catalog) Profile(name string) (*Profile, error) {
	if p := c.Lookup(name); p != nil {
		return p, nil
	}
	var names []string
	for _, p := range c.Profiles {
		names = append(names, p.Name)
	}
	return nil, fmt.Errorf("%s lists no profile %q (it lists %s)", File, name, strings.Join(names, ", "))
}

// Predict lists the profile's anomalies whose published conditions hold at w, in the profile's order.
func (p *Profile) Predict(c *Catalog, w scenario.Workload) []int {
	var out []int
	for _, id := range p.Anomalies {
		if a := c.Anomaly(id); a != nil && a.When.Holds(w) {
			out = append(out, id)
		}
	}
	return out
}
