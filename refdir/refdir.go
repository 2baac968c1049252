// Package refdir reads the results directories of the reference Lumina (lumina-test/lumina): per repetition
// <i>/pcap-result/*.pcap (the two dumpers' captures and their merge), <i>/switch-result/ (the connections the
// traffic generator reported, the switch's port counters), <i>/rdma-result/ (each host's NIC counters at start
// and finish), and the configuration the run used. Analyze runs on them what the reference's tests run
// (integrity check with the switch's counters, host discard check, go-back-N and counter checks, the latency
// breakdown of every lost packet) with this project's analyzers; FromResults writes such a directory from one
// of our own results directories, so that the reading is tested on known runs.
package refdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// Names of the reference's results layout (lumina/orchestrator/host.py, switch.py).
const (
	DirPcap            = "pcap-result"
	DirSwitch          = "switch-result"
	DirRDMA            = "rdma-result"
	FileSwitchMessage  = "switch_message_snapshot.yml"
	FileSwitchState    = "switch_state_snapshot.yml"
	FileReqCountStart  = "requester_counter_start.yml"
	FileReqCountFinish = "requester_counter_finish.yml"
	FileRspCountStart  = "responder_counter_start.yml"
	FileRspCountFinish = "responder_counter_finish.yml"
	// FileConfig is where FromResults puts the configuration; Analyze looks for it there when none is given.
	FileConfig = "config.yml"
)

// ErrInput marks errors of the input (missing or malformed files): exit status 2.
var ErrInput = errors.New("bad reference results directory")

type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{e.err, ErrInput} }

func badf(format string, a ...any) error { return inputError{fmt.Errorf(format, a...)} }

// Iterations lists the repetition directories of a reference results directory (<i>/ holding pcap-result/),
// in numeric order; a directory that is itself one repetition gives itself.
func Iterations(dir string) []string {
	if isIteration(dir) {
		return []string{dir}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var its []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && isIteration(filepath.Join(dir, e.Name())) {
			its = append(its, filepath.Join(dir, e.Name()))
		}
	}
	sort.Slice(its, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(its[i]))
		b, _ := strconv.Atoi(filepath.Base(its[j]))
		return a < b
	})
	return its
}

func isIteration(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, DirPcap))
	return err == nil && st.IsDir()
}

// IsRefDir tells whether path is a reference Lumina results directory (or one repetition of one).
func IsRefDir(path string) bool { return len(Iterations(path)) > 0 }

// refConfig is what the analysis needs of the reference configuration beyond the scenario: the switch ports
// and the dump file names.
type refConfig struct {
	Aggregate string  `yaml:"aggregate-pcap-filename"`
	Requester refHost `yaml:"requester"`
	Responder refHost `yaml:"responder"`
	ReqMirror refHost `yaml:"requester-mirror"`
	RspMirror refHost `yaml:"responder-mirror"`
}

type refHost struct {
	NIC struct {
		SwitchPort *int `yaml:"switch-port"`
	} `yaml:"nic"`
	Dump struct {
		File string `yaml:"dump-filename"`
	} `yaml:"pkt-dump-conf"`
}

// ports returns the four switch ports, or an error naming the first missing one.
func (c *refConfig) ports(path string) (req, rsp, reqMirror, rspMirror int, err error) {
	get := func(h refHost, name string) int {
		if err != nil {
			return 0
		}
		if h.NIC.SwitchPort == nil {
			err = badf("%s: %s.nic.switch-port is missing; expected the switch port of each host and dumper, as the reference's configuration gives them", path, name)
			return 0
		}
		return *h.NIC.SwitchPort
	}
	req, rsp = get(c.Requester, "requester"), get(c.Responder, "responder")
	reqMirror, rspMirror = get(c.ReqMirror, "requester-mirror"), get(c.RspMirror, "responder-mirror")
	return
}

func readRefConfig(path string) (*refConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, badf("reading the configuration: %w", err)
	}
	var c refConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, badf("%s: %v", path, firstLine(err.Error()))
	}
	return &c, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// switchState is switch_state_snapshot.yml: the per-port RoCE counters (and the event table, not used).
type switchState struct {
	Counter struct {
		Ingress map[int]uint64 `yaml:"ingress"`
		Egress  map[int]uint64 `yaml:"egress"`
	} `yaml:"counter"`
}

// qpInfo is one entry of switch_message_snapshot.yml: the data sender's and receiver's QP numbers, initial
// PSNs and addresses (for READ the sender is the responder and psn_snd the requester's PSN).
type qpInfo struct {
	QPNSnd    uint32 `yaml:"qpn_snd"`
	PSNSnd    uint32 `yaml:"psn_snd"`
	IPSnd     string `yaml:"ip_snd"`
	SndSwPort int    `yaml:"snd_sw_port"`
	QPNRcv    uint32 `yaml:"qpn_rcv"`
	PSNRcv    uint32 `yaml:"psn_rcv"`
	IPRcv     string `yaml:"ip_rcv"`
	RcvSwPort int    `yaml:"rcv_sw_port"`
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return badf("%w", err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return badf("%s: %v", path, firstLine(err.Error()))
	}
	return nil
}

// readHostCounters reads a counter_dump.py file: sections port-counters, hw-counters and ethtool-counters of
// name: value lines, flattened into one map (the names do not collide across sections).
func readHostCounters(path string) (map[string]uint64, error) {
	var sections map[string]map[string]any
	if err := readYAML(path, &sections); err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, sec := range []string{"port-counters", "hw-counters", "ethtool-counters"} {
		for k, v := range sections[sec] {
			switch x := v.(type) {
			case uint64:
				out[k] = x
			case int64:
				if x >= 0 {
					out[k] = uint64(x)
				}
			case int:
				if x >= 0 {
					out[k] = uint64(x)
				}
			}
		}
	}
	return out, nil
}
