package refdir

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
)

// FromResults writes, as repetition 0 of the reference results directory out, what the reference Lumina would
// have left for the run whose results directory (ours, from `lumina run` on the reference-format configuration
// config) is results: the two dumpers' pcaps as its DPDK dumper writes them (nanosecond timestamps taken from
// the mirror timestamp, original length from the IP header) and their merge in sequence order (microsecond
// timestamps), the switch's QP list and per-port counters, each host's counters at start and finish in
// counter_dump.py's sections, and the configuration itself as out/config.yml.
func FromResults(results, config, out string) error {
	sc, err := scenario.Load(config)
	if err != nil {
		return err
	}
	rc, err := readRefConfig(config)
	if err != nil {
		return err
	}
	reqPort, rspPort, reqMirror, rspMirror, err := rc.ports(config)
	if err != nil {
		return err
	}
	if rc.ReqMirror.Dump.File == "" || rc.RspMirror.Dump.File == "" || rc.Aggregate == "" {
		return fmt.Errorf("%s: expected dump-filename for both mirrors and aggregate-pcap-filename", config)
	}
	var conns []resultsdir.ConnRecord
	if err := resultsdir.ReadList(results, resultsdir.FileConnections, &conns); err != nil {
		return err
	}
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(results, resultsdir.FileCounters, &cf); err != nil {
		return err
	}
	if cf.Switch.Injector == nil || len(cf.Switch.Injector.MirroredPerDumper) != 2 || len(cf.Switch.Ports) != 2 {
		return fmt.Errorf("%s: the reference has exactly two dumpers and two host ports", results)
	}
	it := filepath.Join(out, "0")
	for _, d := range []string{DirPcap, DirSwitch, DirRDMA} {
		if err := os.MkdirAll(filepath.Join(it, d), 0o755); err != nil {
			return err
		}
	}
	cfgBytes, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, FileConfig), cfgBytes, 0o644); err != nil {
		return err
	}

	// The dumpers' captures, then their merge.
	snap := sc.Network.SnapLen
	dumps := []string{filepath.Join(it, DirPcap, rc.ReqMirror.Dump.File), filepath.Join(it, DirPcap, rc.RspMirror.Dump.File)}
	for i, dst := range dumps {
		src := filepath.Join(results, resultsdir.DirDump, fmt.Sprintf("dumper-%d.pcap", i))
		if err := rewriteDump(src, dst, snap); err != nil {
			return err
		}
	}
	if err := writeMerge(dumps, filepath.Join(it, DirPcap, rc.Aggregate), snap); err != nil {
		return err
	}

	// The switch: the QP list the traffic generator reported, the port counters.
	var sb strings.Builder
	for _, c := range conns {
		q := qpInfo{QPNSnd: c.RequesterQPN, PSNSnd: c.RequesterIPSN, IPSnd: c.RequesterIP.String(), SndSwPort: reqPort,
			QPNRcv: c.ResponderQPN, PSNRcv: c.ResponderIPSN, IPRcv: c.ResponderIP.String(), RcvSwPort: rspPort}
		if c.Verb == scenario.VerbRead {
			q = qpInfo{QPNSnd: c.ResponderQPN, PSNSnd: c.RequesterIPSN, IPSnd: c.ResponderIP.String(), SndSwPort: rspPort,
				QPNRcv: c.RequesterQPN, PSNRcv: c.ResponderIPSN, IPRcv: c.RequesterIP.String(), RcvSwPort: reqPort}
		}
		// PyYAML's dump: keys sorted, one mapping per list item.
		fmt.Fprintf(&sb, "- ip_rcv: %s\n  ip_snd: %s\n  psn_rcv: %d\n  psn_snd: %d\n  qpn_rcv: %d\n  qpn_snd: %d\n  rcv_sw_port: %d\n  snd_sw_port: %d\n",
			q.IPRcv, q.IPSnd, q.PSNRcv, q.PSNSnd, q.QPNRcv, q.QPNSnd, q.RcvSwPort, q.SndSwPort)
	}
	if err := os.WriteFile(filepath.Join(it, DirSwitch, FileSwitchMessage), []byte(sb.String()), 0o644); err != nil {
		return err
	}
	sw := cf.Switch
	ingress := map[int]uint64{reqPort: sw.Ports[0].RxRoCE, rspPort: sw.Ports[1].RxRoCE, reqMirror: 0, rspMirror: 0}
	egress := map[int]uint64{reqPort: sw.Ports[0].TxRoCE, rspPort: sw.Ports[1].TxRoCE,
		reqMirror: sw.Injector.MirroredPerDumper[0], rspMirror: sw.Injector.MirroredPerDumper[1]}
	sb.Reset()
	sb.WriteString("counter:\n")
	for _, dir := range []struct {
		name string
		m    map[int]uint64
	}{{"egress", egress}, {"ingress", ingress}} {
		fmt.Fprintf(&sb, "  %s:\n", dir.name)
		for _, p := range sortedPorts(dir.m) {
			fmt.Fprintf(&sb, "    %d: %d\n", p, dir.m[p])
		}
	}
	sb.WriteString("event-table: []\n")
	if err := os.WriteFile(filepath.Join(it, DirSwitch, FileSwitchState), []byte(sb.String()), 0o644); err != nil {
		return err
	}

	// The hosts' counters, in counter_dump.py's sections.
	for _, h := range []struct {
		hc            resultsdir.HostCounters
		start, finish string
	}{{cf.Requester, FileReqCountStart, FileReqCountFinish}, {cf.Responder, FileRspCountStart, FileRspCountFinish}} {
		for _, f := range []struct {
			name string
			m    map[string]uint64
		}{{h.start, h.hc.Start}, {h.finish, h.hc.Finish}} {
			if err := os.WriteFile(filepath.Join(it, DirRDMA, f.name), []byte(counterDump(f.m)), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedPorts(m map[int]uint64) []int {
	out := make([]int, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// counterDump writes counters as counter_dump.py does: the sysfs hw_counters under hw-counters, the ethtool
// statistics (the physical-port and pause counters) under ethtool-counters.
func counterDump(m map[string]uint64) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var hw, eth strings.Builder
	for _, n := range names {
		if strings.HasSuffix(n, "_phy") || strings.Contains(n, "pause") {
			fmt.Fprintf(&eth, "  %s: %d\n", n, m[n])
		} else {
			fmt.Fprintf(&hw, "  %s: %d\n", n, m[n])
		}
	}
	return "hw-counters:\n" + hw.String() + "ethtool-counters:\n" + eth.String()
}

// rewriteDump copies one of our dumper pcaps as the reference's dumper writes it: the pcap timestamp is the
// mirror timestamp (48-bit ns, wrapping with it) and the original length is the IP total length + 14.
func rewriteDump(src, dst string, snap int) error {
	in, err := trace.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writePcap(dst, true, snap, func(put func(ts int64, data []byte, orig int) error) error {
		for {
			p, err := in.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			m, ok := roce.DecodeMirror(p.Data)
			if !ok {
				return fmt.Errorf("%s: packet %d has no mirror metadata", src, p.Index)
			}
			if err := put(int64(m.TimestampNs), p.Data, ipOrigLen(p.Data, p.OrigLen)); err != nil {
				return err
			}
		}
	})
}

// writeMerge writes the orchestrator's merge.pcap: both dumps in sequence order, microsecond timestamps.
func writeMerge(dumps []string, dst string, snap int) error {
	var readers []trace.Reader
	for _, d := range dumps {
		f, err := trace.Open(d)
		if err != nil {
			return err
		}
		defer f.Close()
		readers = append(readers, f)
	}
	m := trace.NewMerger(trace.MergeOptions{ByMirrorSeq: true, Seq: trace.SeqLumina31}, readers...)
	return writePcap(dst, false, snap, func(put func(ts int64, data []byte, orig int) error) error {
		for {
			p, err := m.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := put(p.Timestamp, p.Data, p.OrigLen); err != nil {
				return err
			}
		}
	})
}

func writePcap(dst string, nano bool, snap int, fill func(put func(ts int64, data []byte, orig int) error) error) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	w, err := trace.NewPcapWriter(bw, trace.PcapWriterOptions{Nanosecond: nano, SnapLen: uint32(snap), LinkType: trace.LinkTypeEthernet})
	if err != nil {
		f.Close()
		return err
	}
	err = fill(func(ts int64, data []byte, orig int) error { return w.WritePacket(ts, data, orig) })
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

// ipOrigLen is the reference dumper's original length: the IPv4 total length + 14 (untagged IPv4 only).
func ipOrigLen(frame []byte, orig int) int {
	if len(frame) >= 18 && frame[12] == 0x08 && frame[13] == 0x00 {
		return int(binary.BigEndian.Uint16(frame[16:])) + 14
	}
	return orig
}
