package verdict

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/trace"
)

// runStreamed runs sc on the simulator as `lumina run` does: the trace judged while it is written
// (NewStream, JudgeStream). It returns the results directory, the outcome and the stream.
func runStreamed(t *testing.T, sc *scenario.Scenario) (string, *Outcome, *Stream) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "r")
	var o *Outcome
	var s *Stream
	err := testbed.Run(sc, testbed.Options{OutDir: dir,
		Trace: func(d string, conns []resultsdir.ConnRecord) testbed.TraceConsumer {
			s = NewStream(d, sc, conns)
			return s
		},
		Finish: func(d string) (err error) {
			o, err = JudgeStream(d, sc, s)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, o, s
}

// judgedTwice is analysis.json as the run wrote it, then as Judge writes it again from the directory alone.
func judgedTwice(t *testing.T, dir string, sc *scenario.Scenario) (streamed, fromDisk []byte) {
	t.Helper()
	streamed, err := os.ReadFile(filepath.Join(dir, resultsdir.FileAnalysis))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Judge(dir, sc); err != nil {
		t.Fatal(err)
	}
	fromDisk, err = os.ReadFile(filepath.Join(dir, resultsdir.FileAnalysis))
	if err != nil {
		t.Fatal(err)
	}
	return streamed, fromDisk
}

// The verdict judged while the trace is written and the verdict judged from the directory alone (lumina analyze
// DIR, the remote and netns testbeds) write the same analysis.json, byte for byte: drops, ECN and CNPs, a
// corrupted packet, READ, IRN, and connections that stop on an error (the traffic log, known only at the end,
// decides their completeness).
func TestStreamedVerdictEqualsJudge(t *testing.T) {
	// interop-e810-to-cx5: the responder's NIC discards packets (rx_discards_phy), which the stream learns only
	// at the end: that run's trace is read back, and the result is the same.
	for _, name := range []string{"listing2", "nak-cnp-cx5", "cnp-three-senders-cx5", "corrupt",
		"fast-retransmit-read-cx5", "irn-selective-repeat", "max-retries-nonadaptive-cx5", "timeouts-adaptive-cx6dx",
		"interop-e810-to-cx5"} {
		t.Run(name, func(t *testing.T) {
			var sc *scenario.Scenario
			if name == "corrupt" {
				sc = load(t, small+"events:\n  - {qpn: 1, psn: 2, type: corrupt, iter: 1}\n")
			} else {
				var err error
				if sc, err = scenario.Load(filepath.Join("..", "examples", name+".yaml")); err != nil {
					t.Fatal(err)
				}
			}
			dir, o, _ := runStreamed(t, sc)
			if o.Streamed != (name != "interop-e810-to-cx5") {
				t.Fatalf("judged while written: %v", o.Streamed)
			}
			streamed, fromDisk := judgedTwice(t, dir, sc)
			if !bytes.Equal(streamed, fromDisk) {
				t.Fatalf("analysis.json judged while written differs from Judge's:\n%s\n---\n%s", streamed, fromDisk)
			}
			if o.Doc.Verdict != Pass {
				t.Fatalf("verdict %s; the example passes", o.Doc.Verdict)
			}
			if name == "corrupt" && o.Doc.Integrity.OK && !strings.Contains(string(streamed), `"corrupt`) {
				t.Fatalf("the corrupted packet is not in the analysis:\n%s", streamed)
			}
		})
	}
}

// A trace cut in the middle of a packet (a run stopped while writing) is judged the same both ways: invalid,
// the packet count failing with where the file is cut.
func TestStreamedCutTraceEqualsJudge(t *testing.T) {
	sc := load(t, small)
	dir, _, _ := runStreamed(t, sc)
	path := filepath.Join(dir, resultsdir.FileTrace)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := data[:len(data)-30]
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	var conns []resultsdir.ConnRecord
	if err := resultsdir.ReadList(dir, resultsdir.FileConnections, &conns); err != nil {
		t.Fatal(err)
	}
	s := NewStream(dir, sc, conns)
	for b := cut; len(b) > 0; b = b[min(len(b), 1000):] { // in pieces that end anywhere, each the stream's
		s.Write(bytes.Clone(b[:min(len(b), 1000)]))
	}
	s.End(nil)
	o, err := JudgeStream(dir, sc, s)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Streamed || o.Doc.Verdict != Invalid {
		t.Fatalf("streamed %v, verdict %s; want the stream's verdict, invalid", o.Streamed, o.Doc.Verdict)
	}
	var detail string
	for _, c := range o.Doc.Integrity.Checks {
		if c.Name == trace.CheckCountEqualsMirrored {
			detail = c.Detail
		}
	}
	if !strings.Contains(detail, "cut short in the middle of a packet") {
		t.Fatalf("packet-count detail %q does not say the trace is cut", detail)
	}
	streamed, fromDisk := judgedTwice(t, dir, sc)
	if !bytes.Equal(streamed, fromDisk) {
		t.Fatalf("analysis.json of the cut trace differs:\n%s\n---\n%s", streamed, fromDisk)
	}
}

// What the stream cannot stand for is judged from the directory: a stream that ended with an error, bytes that
// are not a trace, connections other than the run's, and counters that say a NIC discarded packets (the
// checkers use that on every NAK; the stream started without it).
func TestStreamFallsBackToJudge(t *testing.T) {
	sc := load(t, small)
	dir, _, _ := runStreamed(t, sc)
	data, err := os.ReadFile(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		t.Fatal(err)
	}
	var conns []resultsdir.ConnRecord
	if err := resultsdir.ReadList(dir, resultsdir.FileConnections, &conns); err != nil {
		t.Fatal(err)
	}
	other := append([]resultsdir.ConnRecord(nil), conns...)
	other[0].ResponderQPN++
	var cf resultsdir.CountersFile
	if err := resultsdir.ReadJSON(dir, resultsdir.FileCounters, &cf); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		conns   []resultsdir.ConnRecord
		bytes   []byte
		end     error
		discard bool
	}{
		"ended with an error": {conns: conns, bytes: data, end: errors.New("the run failed")},
		"not a trace":         {conns: conns, bytes: []byte("not a capture at all")},
		"other connections":   {conns: other, bytes: data},
		"NIC discards":        {conns: conns, bytes: data, discard: true},
	} {
		t.Run(name, func(t *testing.T) {
			cf := cf
			cf.Responder.Start = map[string]uint64{"rx_discards_phy": 0}
			cf.Responder.Finish = map[string]uint64{"rx_discards_phy": 0}
			if c.discard {
				cf.Responder.Finish["rx_discards_phy"] = 2
			}
			if err := resultsdir.WriteJSON(dir, resultsdir.FileCounters, cf); err != nil {
				t.Fatal(err)
			}
			s := NewStream(dir, sc, c.conns)
			s.Write(c.bytes)
			s.End(c.end)
			o, err := JudgeStream(dir, sc, s)
			if err != nil {
				t.Fatal(err)
			}
			if o.Streamed {
				t.Fatalf("the stream's result was used; want the directory judged")
			}
			streamed, fromDisk := judgedTwice(t, dir, sc)
			if !bytes.Equal(streamed, fromDisk) {
				t.Fatalf("analysis.json differs:\n%s\n---\n%s", streamed, fromDisk)
			}
		})
	}
	// The run's own counters: the stream's result stands.
	if err := resultsdir.WriteJSON(dir, resultsdir.FileCounters, cf); err != nil {
		t.Fatal(err)
	}
	s := NewStream(dir, sc, conns)
	s.Write(data)
	s.End(nil)
	if o, err := JudgeStream(dir, sc, s); err != nil || !o.Streamed {
		t.Fatalf("streamed %v, err %v; want the stream's result", o != nil && o.Streamed, err)
	}
}

// A run that fails part way (its simulated time runs out) ends the stream with an error: the verdict is not
// asked, and the stream's goroutine has ended.
func TestStreamOfFailedRunEnds(t *testing.T) {
	sc := load(t, strings.Replace(strings.Replace(small, "traffic:", "network: {run-timeout-ms: 1}\ntraffic:", 1),
		"num-msgs-per-qp: 4", "num-msgs-per-qp: 2000", 1))
	var s *Stream
	finished := false
	err := testbed.Run(sc, testbed.Options{OutDir: filepath.Join(t.TempDir(), "r"),
		Trace: func(d string, conns []resultsdir.ConnRecord) testbed.TraceConsumer {
			s = NewStream(d, sc, conns)
			return s
		},
		Finish: func(string) error { finished = true; return nil }})
	if err == nil || !strings.Contains(err.Error(), "run-timeout-ms") {
		t.Fatalf("err %v; want the run limit", err)
	}
	if s == nil || finished {
		t.Fatalf("stream %v, finish called %v; want a stream and no verdict", s != nil, finished)
	}
	<-s.done
	if s.endErr == nil {
		t.Fatal("the stream of a failed run ended without an error")
	}
}
