package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/verbs"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/version"
)

// The rxe-vm testbed runs a scenario on Linux Soft-RoCE (rdma_rxe) inside a qemu guest: requester and responder
// in two network namespaces with an rxe device each, our real-time switch (`lumina switch`) between them and
// our dumpers behind it (scripts/rxe-vm/guest-init.sh). The guest is built by scripts/rxe-vm/build.sh and booted
// by scripts/rxe-vm/run.sh; this file prepares the job, calls the scripts and turns what the guest brings back
// into the results directory the analysis reads.

// Environment variables of the rxe-vm testbed.
const (
	EnvRxeScripts = "LUMINA_RXE_SCRIPTS" // directory holding build.sh and run.sh (default: found from the cwd)
	EnvRxeTool    = "LUMINA_RXE_TOOL"    // perftest | verbs (default: verbs when built, else perftest)
	EnvRxeNoBuild = "LUMINA_RXE_NO_BUILD"
	EnvRxeCache   = "LUMINA_RXE_CACHE"
)

// RxeRawDir is the subdirectory of the results directory where the guest's own files are kept (logs, tool
// output, counter snapshots, the switch's status), for the curious and for debugging.
const RxeRawDir = resultsdir.DirRxeRaw

// rxeJob is what the guest runs, derived from the scenario.
type rxeJob struct {
	tool     string // perftest | verbs
	perftest string // ib_write_bw | ib_send_bw | ib_read_bw
	dumpers  int
	vethMTU  int
}

// planRxeJob checks that the scenario can run on rxe and picks the traffic tool.
func planRxeJob(sc *scenario.Scenario, verbsBuilt bool, tool string) (rxeJob, error) {
	t := sc.Traffic
	j := rxeJob{tool: tool, dumpers: max(len(sc.Network.DumperWeights), sc.Network.Dumpers, 1), vethMTU: 1500}
	if j.tool == "" {
		j.tool = "perftest"
		if verbsBuilt {
			j.tool = "verbs"
		}
	}
	switch j.tool {
	case "perftest", "verbs":
	default:
		return j, badInputf("%s=%q; expected perftest or verbs", EnvRxeTool, j.tool)
	}
	if j.tool == "verbs" && !verbsBuilt {
		return j, badInputf("%s=verbs but the verbs generator is not built (scripts/rxe-vm/build.sh builds it when libibverbs-dev is installed)", EnvRxeTool)
	}
	switch t.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		return j, badInputf("%s: traffic.mtu %d: rxe supports the IB MTUs 256, 512, 1024, 2048 and 4096", sc.Path, t.MTU)
	}
	if t.MTU > 1024 {
		// rxe's active MTU is the largest IB MTU that fits the netdev MTU with the RoCE headers.
		j.vethMTU = t.MTU + 256
	}
	if j.tool == "perftest" {
		switch t.Verb {
		case scenario.VerbWrite:
			j.perftest = "ib_write_bw"
		case scenario.VerbSend:
			j.perftest = "ib_send_bw"
		default:
			// The switch learns a connection at its first SEND or WRITE; a READ connection has none, and a
			// READ's data packets (the responses) flow the other way.
			return j, badInputf("%s: traffic.rdma-verb %s on rxe-vm needs the verbs generator (its connections are reported to the switch); perftest with learning mode runs write and send only", sc.Path, t.Verb)
		}
		if t.MultiGID || len(t.DSCPList) > 0 {
			return j, badInputf("%s: multi-gid and dscp-list need the verbs generator; perftest runs every QP on one GID", sc.Path)
		}
		for i, ev := range sc.Events {
			if ev.Packet != "" && ev.Packet != scenario.PacketData {
				return j, badInputf("%s:%d: events[%d] targets %s packets; with perftest the switch learns connections from their data packets and only data events apply (use the verbs generator)", sc.Path, ev.Line, i, ev.Packet)
			}
		}
	}
	return j, nil
}

// env renders job.env for the guest (shell assignments; every value is a number or a plain word).
func (j rxeJob) env(sc *scenario.Scenario) string {
	t := sc.Traffic
	var b strings.Builder
	ips := func(ps []netip.Prefix) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = p.String()
		}
		return strings.Join(s, " ")
	}
	fmt.Fprintf(&b, "TOOL=%s\nPERFTEST=%s\nVERB=%s\nQPS=%d\nMSGS=%d\nSIZE=%d\nMTU=%d\n", j.tool, j.perftest, t.Verb,
		t.NumConnections, t.NumMsgsPerQP, t.MessageSize, t.MTU)
	fmt.Fprintf(&b, "REQ_IPS=%q\nRESP_IPS=%q\nDUMPERS=%d\nVETH_MTU=%d\nREWRITE_PORT=%d\n", ips(sc.Requester.NIC.IPList),
		ips(sc.Responder.NIC.IPList), j.dumpers, j.vethMTU, sc.RewriteUDPDstPort)
	fmt.Fprintf(&b, "TRAFFIC_TIMEOUT=%d\n", rxeTrafficTimeout(sc))
	if j.tool == "perftest" {
		// -u: the QP's retransmission timeout exponent; perftest has no retry-count option (it uses 7).
		var extra []string
		if t.MinRetransmitTimeout > 0 {
			extra = append(extra, "-u", strconv.Itoa(t.MinRetransmitTimeout))
		}
		if t.TxDepth > 0 {
			extra = append(extra, "-t", strconv.Itoa(t.TxDepth))
		}
		fmt.Fprintf(&b, "PERFTEST_ARGS=%q\n", strings.Join(extra, " "))
	}
	return b.String()
}

// rxeTrafficTimeout bounds the traffic step in the guest: TCG moves a few MB/s, and every retransmission
// timeout costs 4.096 us * 2^t.
func rxeTrafficTimeout(sc *scenario.Scenario) int {
	t := sc.Traffic
	bytes := int64(t.NumConnections) * int64(max(t.NumMsgsPerQP, 1)) * int64(t.MessageSize)
	s := 60 + bytes/(1<<20)*2
	return int(min(s, 600))
}

// rxeScriptsDir finds scripts/rxe-vm: $LUMINA_RXE_SCRIPTS, else upwards from the working directory and from
// the executable.
func rxeScriptsDir() (string, error) {
	if d := os.Getenv(EnvRxeScripts); d != "" {
		if _, err := os.Stat(filepath.Join(d, "run.sh")); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvRxeScripts, d, err)
		}
		return d, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			p := filepath.Join(d, "scripts", "rxe-vm")
			if _, err := os.Stat(filepath.Join(p, "run.sh")); err == nil {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("rxe-vm testbed: scripts/rxe-vm/run.sh not found above %s; run from the repository or set %s", strings.Join(starts, " or "), EnvRxeScripts)
}

func rxeCacheDir() string {
	if d := os.Getenv(EnvRxeCache); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "lumina", "rxe-vm")
}

// script runs one of the shell scripts under a deadline, its output going to progress.
func script(ctx context.Context, progress io.Writer, path string, args ...string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	var tail bytes.Buffer
	w := io.Writer(&tail)
	if progress != nil {
		w = io.MultiWriter(&tail, progress)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		lines := strings.Split(strings.TrimSpace(tail.String()), "\n")
		return fmt.Errorf("%s: %w: %s", filepath.Base(path), err, strings.Join(lines[max(len(lines)-6, 0):], "\n  "))
	}
	return nil
}

// rxeUnsupported rejects the simulator-only scenario keys the rxe-vm testbed cannot honour, before anything
// (the guest build included) runs.
func rxeUnsupported(sc *scenario.Scenario) error {
	if sc.Traffic.InitialPSN != nil {
		return badInputf("%s: traffic.initial-psn: the rxe-vm testbed cannot choose initial PSNs (the kernel does); it is for the sim and netns testbeds", sc.Path)
	}
	if sc.Network.SwitchClockStartNs != 0 {
		return badInputf("%s: network.switch-clock-start-ns: the rxe-vm testbed's switch runs on the guest's clock; it is for the sim and netns testbeds", sc.Path)
	}
	return nil
}

func runRxeVM(sc *scenario.Scenario, opts Options) (*rawResults, error) {
	if err := rxeUnsupported(sc); err != nil {
		return nil, err
	}
	dir, err := rxeScriptsDir()
	if err != nil {
		return nil, err
	}
	cache := rxeCacheDir()
	ctx := context.Background()
	if os.Getenv(EnvRxeNoBuild) == "" {
		bctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		err := script(bctx, opts.Progress, filepath.Join(dir, "build.sh"), "--cache", cache)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("rxe-vm testbed: building the guest: %w", err)
		}
	}
	_, verr := os.Stat(filepath.Join(cache, "bin", "lumina-verbs"))
	job, err := planRxeJob(sc, verr == nil, os.Getenv(EnvRxeTool))
	if err != nil {
		return nil, err
	}
	jobDir, err := os.MkdirTemp("", "lumina-rxe-job-")
	if err != nil {
		return nil, fmt.Errorf("rxe-vm testbed: %w", err)
	}
	defer os.RemoveAll(jobDir)
	if err := writeEffective(filepath.Join(jobDir, resultsdir.FileScenario), sc); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(jobDir, "job.env"), []byte(job.env(sc)), 0o644); err != nil {
		return nil, fmt.Errorf("rxe-vm testbed: writing the job: %w", err)
	}
	rawDir := filepath.Join(opts.OutDir, RxeRawDir)
	if err := os.RemoveAll(rawDir); err != nil {
		return nil, fmt.Errorf("clearing previous results: %w", err)
	}
	limit := rxeTrafficTimeout(sc) + 240
	rctx, cancel := context.WithTimeout(ctx, time.Duration(limit+60)*time.Second)
	defer cancel()
	if err := script(rctx, opts.Progress, filepath.Join(dir, "run.sh"), "--job", jobDir, "--out", rawDir,
		"--cache", cache, "--timeout", strconv.Itoa(limit)); err != nil {
		return nil, fmt.Errorf("rxe-vm testbed: %w", err)
	}
	return collectRxeVM(sc, job, rawDir, opts.OutDir)
}

// writeEffective writes the effective scenario of a results directory, headed by a comment naming the build
// of lumina that ran it (a comment, so that the file loads back unchanged).
func writeEffective(path string, sc *scenario.Scenario) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	if _, err := fmt.Fprintf(f, "# written by %s\n", version.Get()); err != nil {
		f.Close()
		return fmt.Errorf("writing effective scenario: %w", err)
	}
	if err := sc.WriteEffective(f); err != nil {
		f.Close()
		return fmt.Errorf("writing effective scenario: %w", err)
	}
	return f.Close()
}

// rxeSwitchStatus is the part of `lumina switch --status` the results need (live.SwitchStatus).
type rxeSwitchStatus struct {
	Ports [2]struct {
		Name     string `json:"name"`
		RxRoCE   uint64 `json:"rx_roce"`
		TxRoCE   uint64 `json:"tx_roce"`
		Mirrored uint64 `json:"mirrored"`
	} `json:"ports"`
	Mirrored uint64            `json:"mirrored"`
	Injector *inject.Counters  `json:"injector"`
	Entries  []json.RawMessage `json:"entries"`
	Learned  []inject.ConnMeta `json:"learned"`
}

// VerbsReport is the verbs generator's report (lumina-verbs client output): per connection its metadata,
// status, message completion times and goodput.
type VerbsReport = verbs.Report

// VerbsConn is one connection of a VerbsReport.
type VerbsConn = verbs.ConnReport

// collectRxeVM turns the guest's files into the results directory.
func collectRxeVM(sc *scenario.Scenario, job rxeJob, raw, out string) (*rawResults, error) {
	pcaps, _ := filepath.Glob(filepath.Join(raw, "dump", "dumper-*.pcap"))
	if len(pcaps) == 0 {
		return nil, fmt.Errorf("rxe-vm testbed: the guest brought back no dump in %s; see %s", filepath.Join(raw, "dump"), filepath.Join(raw, "guest.log"))
	}
	for _, p := range pcaps {
		if err := copyFile(p, filepath.Join(out, resultsdir.DirDump, filepath.Base(p))); err != nil {
			return nil, err
		}
	}
	var st rxeSwitchStatus
	if err := readJSON(raw, "switch-status.json", &st); err != nil {
		return nil, fmt.Errorf("rxe-vm testbed: the switch's status: %w", err)
	}
	if err := writeEffective(filepath.Join(out, resultsdir.FileScenario), sc); err != nil {
		return nil, err
	}
	counters, err := rxeCounters(raw, st)
	if err != nil {
		return nil, err
	}
	if err := writeJSON(out, resultsdir.FileCounters, counters); err != nil {
		return nil, err
	}
	sw := struct {
		Entries []json.RawMessage `json:"entries"`
	}{Entries: st.Entries}
	if sw.Entries == nil {
		sw.Entries = []json.RawMessage{}
	}
	if err := writeJSON(out, resultsdir.FileSwitch, sw); err != nil {
		return nil, err
	}
	var conns []resultsdir.ConnRecord
	traffic := []resultsdir.TrafficRecord{}
	switch job.tool {
	case "perftest":
		conns, err = perftestConns(sc, raw, st.Learned)
		if err != nil {
			return nil, err
		}
	case "verbs":
		var rep VerbsReport
		if err := readJSON(raw, "verbs-client.json", &rep); err != nil {
			return nil, fmt.Errorf("rxe-vm testbed: the verbs generator's report: %w; see %s", err, filepath.Join(raw, "verbs-client.log"))
		}
		if rep.Error != "" {
			return nil, fmt.Errorf("rxe-vm testbed: the verbs generator failed: %s", rep.Error)
		}
		conns, traffic, err = verbsResults(sc, rep)
		if err != nil {
			return nil, err
		}
	}
	if err := writeList(out, resultsdir.FileConnections, conns); err != nil {
		return nil, err
	}
	if err := writeList(out, resultsdir.FileTraffic, traffic); err != nil {
		return nil, err
	}
	// The guest's switch does not record ITER per mirrored packet: the analyzers derive it from the trace.
	return &rawResults{annotate: func(uint64) (int, int, bool) { return 0, 0, false }}, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("rxe-vm testbed: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("rxe-vm testbed: %w", err)
	}
	return nil
}

// rxeCounters reads the guest's hw_counters snapshots ("DEVICE NAME VALUE" lines) and the switch's status.
func rxeCounters(raw string, st rxeSwitchStatus) (resultsdir.CountersFile, error) {
	cf := resultsdir.CountersFile{
		Requester: resultsdir.HostCounters{NIC: "rxe", Vendor: "rxe", Start: map[string]uint64{}, Finish: map[string]uint64{}},
		Responder: resultsdir.HostCounters{NIC: "rxe", Vendor: "rxe", Start: map[string]uint64{}, Finish: map[string]uint64{}},
	}
	for _, phase := range []string{"start", "finish"} {
		name := filepath.Join(raw, "counters-"+phase+".txt")
		b, err := os.ReadFile(name)
		if err != nil {
			return cf, fmt.Errorf("rxe-vm testbed: NIC counters: %w", err)
		}
		for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				return cf, fmt.Errorf("rxe-vm testbed: %s:%d: %q; expected DEVICE NAME VALUE", name, i+1, line)
			}
			v, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil {
				return cf, fmt.Errorf("rxe-vm testbed: %s:%d: counter %s: %w", name, i+1, f[1], err)
			}
			h := &cf.Requester
			if f[0] == "rxeresp" {
				h = &cf.Responder
			}
			if phase == "start" {
				h.Start[f[1]] = v
			} else {
				h.Finish[f[1]] = v
			}
		}
	}
	for _, p := range st.Ports {
		cf.Switch.Ports = append(cf.Switch.Ports, inject.PortCounters{RxRoCE: p.RxRoCE, TxRoCE: p.TxRoCE, Mirrored: p.Mirrored})
		cf.Switch.RxRoCE += p.RxRoCE
	}
	cf.Switch.Mirrored = st.Mirrored
	cf.Switch.Injector = st.Injector
	return cf, nil
}

// perftest prints each QP's addresses: "local address: LID 0000 QPN 0x0011 PSN 0x1c1bc6 ...", then the remote's.
var perftestAddr = regexp.MustCompile(`(local|remote) address: LID \S+ QPN (0x[0-9a-fA-F]+) PSN (0x[0-9a-fA-F]+)`)

// perftestConns joins the connections the switch learned (in learning order: the scenario's numbering) with
// the QPNs and PSNs perftest's client printed (the requester's QPN never appears in its requests).
func perftestConns(sc *scenario.Scenario, raw string, learned []inject.ConnMeta) ([]resultsdir.ConnRecord, error) {
	name := filepath.Join(raw, "perftest-client.txt")
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("rxe-vm testbed: %w", err)
	}
	type qp struct{ local, remote, lpsn uint32 }
	var qps []qp
	sc2 := bufio.NewScanner(bytes.NewReader(b))
	for sc2.Scan() {
		m := perftestAddr.FindStringSubmatch(sc2.Text())
		if m == nil {
			continue
		}
		qpn, _ := strconv.ParseUint(m[2], 0, 32)
		psn, _ := strconv.ParseUint(m[3], 0, 32)
		if m[1] == "local" {
			qps = append(qps, qp{local: uint32(qpn), lpsn: uint32(psn)})
		} else if len(qps) > 0 {
			qps[len(qps)-1].remote = uint32(qpn)
		}
	}
	t := sc.Traffic
	if len(learned) != t.NumConnections {
		return nil, fmt.Errorf("rxe-vm testbed: the switch learned %d connections, the scenario has %d (perftest output: %s)", len(learned), t.NumConnections, name)
	}
	out := make([]resultsdir.ConnRecord, len(learned))
	for i, l := range learned {
		c := resultsdir.ConnRecord{QP: i + sc.IndexBase, Verb: l.Verb, RequesterIP: l.ReqIP, ResponderIP: l.RespIP,
			ResponderQPN: l.RespQPN, RequesterIPSN: uint32(l.ReqIPSN), PacketsPerMsg: t.PacketsPerMessage(),
			NumMsgs: t.NumMsgsPerQP, MTU: t.MTU}
		found := false
		for _, q := range qps {
			if q.remote == l.RespQPN {
				c.RequesterQPN, found = q.local, true
				if q.lpsn != uint32(l.ReqIPSN) {
					return nil, fmt.Errorf("rxe-vm testbed: connection %d: perftest's initial PSN %#x differs from the first PSN the switch saw, %#x: the first data packet was lost before the switch or the learning is wrong", i+sc.IndexBase, q.lpsn, uint32(l.ReqIPSN))
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("rxe-vm testbed: connection %d (responder QPN %#x) is not in perftest's output %s", i+sc.IndexBase, l.RespQPN, name)
		}
		out[i] = c
	}
	return out, nil
}

// verbsResults converts the generator's report into connections.json and traffic.json records.
func verbsResults(sc *scenario.Scenario, rep VerbsReport) ([]resultsdir.ConnRecord, []resultsdir.TrafficRecord, error) {
	sort.Slice(rep.Conns, func(i, j int) bool { return rep.Conns[i].Index < rep.Conns[j].Index })
	conns := make([]resultsdir.ConnRecord, len(rep.Conns))
	traffic := make([]resultsdir.TrafficRecord, len(rep.Conns))
	for i, c := range rep.Conns {
		req, err1 := netip.ParseAddr(c.ReqIP)
		resp, err2 := netip.ParseAddr(c.RespIP)
		if err := errors.Join(err1, err2); err != nil {
			return nil, nil, fmt.Errorf("the verbs generator's connection %d: %w", c.Index, err)
		}
		conns[i] = resultsdir.ConnRecord{QP: c.Index + sc.IndexBase, Verb: c.Verb, RequesterIP: req, ResponderIP: resp,
			RequesterQPN: c.ReqQPN, ResponderQPN: c.RespQPN, RequesterIPSN: c.ReqIPSN, ResponderIPSN: c.RespIPSN,
			PacketsPerMsg: c.PacketsPerMsg, NumMsgs: c.NumMsgs, MTU: sc.Traffic.MTU}
		traffic[i] = resultsdir.TrafficRecord{QP: c.Index + sc.IndexBase, Verb: c.Verb, Status: c.Status, Posted: c.Posted,
			Completed: c.Completed, MCTUs: c.MCTUs, GoodputGbps: c.GoodputGbps}
		if traffic[i].MCTUs == nil {
			traffic[i].MCTUs = []float64{}
		}
	}
	return conns, traffic, nil
}
