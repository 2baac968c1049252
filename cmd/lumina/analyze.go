package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/internal/progress"
	"github.com/lumina-go/lumina/refdir"
	"github.com/lumina-go/lumina/report"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/trace"
	"github.com/lumina-go/lumina/verdict"
	"github.com/lumina-go/lumina/version"
)

func newAnalyzeCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		jsonOut  bool
		order    string
		port     uint16
		top      int
		noCheck  bool
		noICRC   bool
		counters string
		config   string
		quiet    bool
	)
	cmd := &cobra.Command{
		Use:   "analyze CAPTURE... | RESULTS_DIR",
		Short: "Analyze pcap/pcapng captures, or re-run the analyzers on a results directory",
		Long: `analyze decodes any pcap or pcapng capture (Lumina-tagged or not: tcpdump, ibdump, Wireshark, a switch
mirror) and reports packets, RoCE packets, ICRC verdicts, opcodes, ECN and DSCP distributions, CNPs and
the CE-to-CNP ratio, NAKs by code, RNR NAKs, per-flow statistics, retransmissions and gaps, with the
health thresholds of the RoCE troubleshooting guide; then it runs the checkers that need no scenario
(go-back-N logic, retransmission latencies, CNP scope inference) on the connections it finds.
Several captures are merged in time order, or in mirror-sequence order when they are Lumina dumps.
Lumina dumps get the integrity check first (consecutive mirror sequence numbers, increasing timestamps,
packet counts equal to the switch's when its counters are known, no drops reported by the dumpers);
a trace that fails it is not judged (exit 3).

Given a results directory of 'lumina run', it re-runs the integrity check, the analyzers and the
scenario's expectations and rewrites analysis.json.

Given a results directory of the reference Lumina (<i>/pcap-result/*.pcap, <i>/switch-result/*.yml,
<i>/rdma-result/*counter*.yml; the configuration from --config or DIR/config.yml), it runs on each
repetition what the reference's tests run: the integrity check with the switch's counters, the host
discard and counter checks, go-back-N, and the latency breakdown of every lost packet.

Exit status: 0 every check passed, 1 a check failed, 2 bad input (unreadable or malformed capture),
3 invalid test (a trace that fails the integrity check, an incomplete results directory).`,
		Example: `  lumina analyze capture.pcap
  lumina analyze --json dumper-0.pcap dumper-1.pcap
  lumina analyze results/listing2`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && !resultsdir.IsDir(args[0]) && refdir.IsRefDir(args[0]) {
				return analyzeReference(stdout, args[0], config, jsonOut)
			}
			if config != "" {
				return badInput("--config applies to a reference Lumina results directory (<i>/pcap-result/...), not to %s", strings.Join(args, " "))
			}
			if len(args) == 1 && resultsdir.IsDir(args[0]) {
				mtr := newMeter(stderr, quiet || jsonOut, "lumina analyze", "", time.Second)
				mtr.Phase("re-analyzing "+args[0], 0)
				o, err := verdict.Reanalyze(args[0])
				if err != nil {
					mtr.Abort()
				} else {
					mtr.Done()
				}
				if err != nil {
					if errors.Is(err, resultsdir.ErrIncomplete) {
						return fail(exitInvalid, err)
					}
					return fail(exitBadArgs, err) // unreadable or inconsistent results: no verdict
				}
				if jsonOut {
					if err := writeIndentedJSON(stdout, o.Doc); err != nil {
						return err
					}
				} else {
					report.Run(stdout, o)
				}
				if code := o.ExitCode(); code != exitOK {
					return fail(code, errors.New(""))
				}
				return nil
			}
			for _, a := range args {
				if st, err := os.Stat(a); err == nil && st.IsDir() {
					return badInput("%s is a directory but neither a results directory of lumina run (no %s) nor one of the reference Lumina (no <i>/%s); give capture files, e.g. %s",
						a, resultsdir.FileScenario, refdir.DirPcap, filepath.Join(a, "*.pcap"))
				}
			}
			// Files of a results directory that a run left incomplete are refused as the directory is: what an
			// interrupted or failed run wrote is never judged.
			for _, a := range args {
				dir := filepath.Dir(a)
				if filepath.Base(dir) == resultsdir.DirDump {
					dir = filepath.Dir(dir)
				}
				if err := resultsdir.CheckComplete(dir); err != nil {
					return fail(exitInvalid, fmt.Errorf("%s: %w", a, err))
				}
			}
			ord, err := summary.ParseOrder(order)
			if err != nil {
				return badInput("--order: %v", err)
			}
			if port == 0 {
				return badInput("--port 0: want the RoCEv2 UDP destination port, 1 to 65535 (4791 is the IANA port)")
			}
			opts := summary.Options{Order: ord, Port: port, TopFlows: top, SkipICRC: noICRC}
			if counters != "" {
				c, err := verdict.ReadSwitchCounts(counters)
				if err != nil {
					return badInput("--counters: %v", err)
				}
				opts.Counters = &c
			} else if c, ok := verdict.FindSwitchCounts(args); ok {
				opts.Counters = &c
			}
			mtr := newMeter(stderr, quiet || jsonOut, "lumina analyze", progress.Bytes, time.Second)
			doc, err := analyzeCaptures(args, opts, !noCheck, mtr)
			if err != nil {
				mtr.Abort()
			} else {
				mtr.Done()
			}
			if err != nil {
				return captureError(err)
			}
			if jsonOut {
				if err := writeIndentedJSON(stdout, doc); err != nil {
					return err
				}
			} else {
				report.Capture(stdout, doc)
			}
			if doc.Integrity != nil && !doc.Integrity.OK {
				return fail(exitInvalid, errors.New(""))
			}
			if !doc.ChecksOK() {
				return fail(exitFailed, errors.New(""))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&order, "order", "auto", "merge order of several captures: auto, time or mirror-seq")
	cmd.Flags().Uint16Var(&port, "port", 4791, "RoCEv2 UDP destination port")
	cmd.Flags().IntVar(&top, "top", 20, "flows listed in the summary (negative: all)")
	cmd.Flags().BoolVar(&noCheck, "no-checks", false, "only the packet summary: skip the go-back-N, latency and CNP checkers")
	cmd.Flags().StringVar(&counters, "counters", "", "the switch's counters for the integrity check of Lumina dumps: a results directory's counters.json "+
		"(found by itself for DIR/dump/*.pcap and DIR/trace.pcapng)")
	cmd.Flags().StringVar(&config, "config", "", "the reference Lumina configuration of a reference results directory (default: DIR/config.yml)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on large captures (a bar on a terminal, else a line every 2 s, after the first second)")
	cmd.Flags().BoolVar(&noICRC, "no-icrc", false, "do not verify ICRCs (counted as not checked): decode-only speed")
	return cmd
}

// analyzeReference analyzes a reference Lumina results directory.
func analyzeReference(stdout io.Writer, dir, config string, jsonOut bool) error {
	if config == "" {
		c, err := refdir.FindConfig(dir)
		if err != nil {
			return fail(exitBadArgs, err)
		}
		config = c
	}
	doc, err := refdir.Analyze(dir, config)
	if err != nil {
		return fail(exitBadArgs, err)
	}
	if jsonOut {
		if err := writeIndentedJSON(stdout, doc); err != nil {
			return err
		}
	} else {
		report.Reference(stdout, doc)
	}
	if code := doc.ExitCode(); code != exitOK {
		return fail(code, errors.New(""))
	}
	return nil
}

// analyzeCaptures reads the captures once: the summary counts every packet as the scenario-free checkers
// (go-back-N, latencies, CNP inference) consume the same stream.
func analyzeCaptures(paths []string, opts summary.Options, checks bool, mtr *progress.Meter) (*report.CaptureDoc, error) {
	src, err := summary.Open(paths, opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	var in trace.Reader = src
	if mtr != nil { // the progress: bytes read of the captures' size
		in = &countingReader{src: src, m: mtr, total: captureBytes(paths), single: len(paths) == 1}
	}
	var an *analyze.Analysis
	if checks {
		an, err = analyze.Analyze(in, analyze.Options{IndexBase: 1})
	}
	for err == nil { // drain what the checkers left (and everything with --no-checks)
		_, err = in.Next()
	}
	rep, rerr := src.Report()
	if rerr != nil {
		return nil, rerr
	}
	if !errors.Is(err, io.EOF) {
		return nil, err
	}
	doc := &report.CaptureDoc{Report: rep}
	if an != nil && (rep.Integrity == nil || rep.Integrity.OK) {
		doc.Set(an) // a trace that fails the integrity check is not judged: its gaps are not the NIC's
	}
	return doc, nil
}

func captureError(err error) error {
	var fe *trace.FormatError
	var ie *trace.IOError
	if errors.As(err, &fe) || errors.As(err, &ie) {
		return fail(exitBadArgs, err)
	}
	return fail(exitBadArgs, fmt.Errorf("%w", err))
}

func writeIndentedJSON(w io.Writer, v any) error {
	return version.WriteDocument(w, v) // what MarshalDocument returns, without holding the indented copy
}
