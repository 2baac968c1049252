package verdict

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/trace"
)

const small = `
seed: 3
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic: {num-connections: 1, num-msgs-per-qp: 4, message-size: 4096, mtu: 1024}
`

// A dump cut in the middle of a packet (a dumper killed mid-write) leaves a trace that stops at its last whole
// packet: when the packet count then falls short of the switch's, the verdict says which dump was cut.
func TestCutDumpNamed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	if err := testbed.Run(load(t, small), testbed.Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(dir, resultsdir.DirDump, "dumper-0.pcap")
	st, err := os.Stat(dump)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(dump, st.Size()-10); err != nil {
		t.Fatal(err)
	}
	// The switch mirrored one packet more than the trace (reconstructed from the cut dump) holds.
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(dir, resultsdir.FileCounters, &cf); err != nil {
		t.Fatal(err)
	}
	cf.Switch.Mirrored++
	if err := resultsdir.WriteJSON(dir, resultsdir.FileCounters, cf); err != nil {
		t.Fatal(err)
	}
	o, err := Reanalyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.Doc.Verdict != Invalid || o.ExitCode() != 3 {
		t.Fatalf("verdict %s; want invalid", o.Doc.Verdict)
	}
	var detail string
	for _, c := range o.Doc.Integrity.Checks {
		if c.Name == trace.CheckCountEqualsMirrored {
			detail = c.Detail
		}
	}
	if !strings.Contains(detail, "dumper-0.pcap is cut short in the middle of a packet") {
		t.Errorf("count condition: %q; want it to name the cut dump", detail)
	}
}

// A results directory a run left incomplete is refused with the marker's reason (exit status 3).
func TestIncompleteRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, resultsdir.FileIncomplete), []byte("lumina: the run was interrupted by SIGTERM\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Reanalyze(dir)
	if !errors.Is(err, resultsdir.ErrIncomplete) || !strings.Contains(err.Error(), "interrupted by SIGTERM") {
		t.Errorf("Reanalyze(marked dir) = %v; want ErrIncomplete with the reason", err)
	}
}

// An analyzer that panics never crashes the verdict: on a trace that fails its integrity check the run is
// judged invalid as before (and the analysis is stopped, not waited for to its end); on one that passes, the
// panic is an error naming the trace.
func TestAnalyzerPanicRecovered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	if err := testbed.Run(load(t, small), testbed.Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	defer func(f func(string, analyze.Options, *atomic.Bool) (*analyze.Analysis, error)) { runAnalyzers = f }(runAnalyzers)
	runAnalyzers = func(string, analyze.Options, *atomic.Bool) (*analyze.Analysis, error) {
		panic("analyzer bug")
	}
	_, err := Reanalyze(dir)
	if err == nil || !strings.Contains(err.Error(), "analyzer bug") || !strings.Contains(err.Error(), resultsdir.FileTrace) {
		t.Fatalf("intact trace, panicking analyzer: %v; want an error naming the trace and the panic", err)
	}

	// The switch mirrored more than the trace holds: the integrity check fails.
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(dir, resultsdir.FileCounters, &cf); err != nil {
		t.Fatal(err)
	}
	cf.Switch.Mirrored += 5
	if err := resultsdir.WriteJSON(dir, resultsdir.FileCounters, cf); err != nil {
		t.Fatal(err)
	}
	o, err := Reanalyze(dir)
	if err != nil || o.Doc.Verdict != Invalid || o.ExitCode() != 3 {
		t.Fatalf("broken trace, panicking analyzer: %v, %+v; want the verdict invalid", err, o)
	}

	// An analysis still going on when the check fails is told to stop (this one would run for a minute).
	stopped := false
	runAnalyzers = func(_ string, _ analyze.Options, stop *atomic.Bool) (*analyze.Analysis, error) {
		for range 60_000 {
			if stop.Load() {
				stopped = true
				return nil, errAnalysisStopped
			}
			time.Sleep(time.Millisecond)
		}
		return &analyze.Analysis{}, nil
	}
	o, err = Reanalyze(dir)
	if err != nil || o.Doc.Verdict != Invalid || !stopped {
		t.Fatalf("broken trace: %v, verdict %v, analysis stopped %v; want invalid and the analysis stopped", err, o, stopped)
	}

	// The real analyzers stop at their next packet.
	var stop atomic.Bool
	stop.Store(true)
	if _, err := analyzeTrace(dir, analyze.Options{}, &stop); !errors.Is(err, errAnalysisStopped) {
		t.Errorf("analyzeTrace with stop set: %v; want errAnalysisStopped", err)
	}
}
