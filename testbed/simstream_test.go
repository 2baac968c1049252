package testbed

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/trace"
)

// The trace the simulator writes while it runs (simstream.go) is byte for byte the one reconstruct merges from
// the dumps: several dumpers, drops, ECN marks, CNPs, IRN's SACK NAKs.
func TestStreamedTraceIsReconstructed(t *testing.T) {
	for _, name := range []string{"listing2", "noisy-neighbor-cx4lx-8", "ets-two-classes-cx5", "irn-selective-repeat"} {
		sc, err := scenario.Load("../examples/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, resultsdir.DirDump), 0o755); err != nil {
			t.Fatal(err)
		}
		raw, err := runSim(sc, Options{OutDir: dir, recordAll: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !raw.traceDone {
			t.Fatalf("%s: the simulator did not write the trace while it ran", name)
		}
		streamed, err := os.ReadFile(filepath.Join(dir, resultsdir.FileTrace))
		if err != nil {
			t.Fatal(err)
		}
		if err := reconstruct(dir, raw, sc.IndexBase); err != nil {
			t.Fatal(err)
		}
		merged, err := os.ReadFile(filepath.Join(dir, resultsdir.FileTrace))
		if err != nil {
			t.Fatal(err)
		}
		if len(streamed) < 1000 || !bytes.Equal(streamed, merged) {
			t.Errorf("%s: streamed trace (%d bytes) differs from the dumps' merge (%d bytes)", name, len(streamed), len(merged))
		}
		// The yardstick of bench/run.sh simulates the same packets.
		f, err := trace.Open(filepath.Join(dir, resultsdir.FileTrace))
		if err != nil {
			t.Fatal(err)
		}
		var pkts uint64
		for {
			if _, err := f.Next(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			pkts++
		}
		f.Close()
		if n, err := SimulateOnly(sc); err != nil || n != pkts {
			t.Errorf("%s: SimulateOnly: %d mirrored packets, %v; the run's trace has %d", name, n, err, pkts)
		}
	}
}

// A mirrored copy out of the mirror order fails the run rather than giving a trace that is not the dumps'
// merge.
func TestStreamRefusesMirrorOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "dumper-0.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true, SnapLen: 65535, LinkType: trace.LinkTypeEthernet})
	if err != nil {
		t.Fatal(err)
	}
	noAnnotation := func(uint64) (int, int, bool) { return 0, 0, false }
	st, err := newSimStream(dir, []*dumper{{w: w}}, 65535, 0, 1, noAnnotation)
	if err != nil {
		t.Fatal(err)
	}
	p := roce.Packet{Version: roce.RoCEv2, TTL: 64, SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3"),
		UDPDst: roce.UDPPort, BTH: roce.BTH{Opcode: roce.RCWriteOnly, PSN: 1}, PayloadLen: 8}
	for _, seq := range []uint64{1, 2, 4} {
		frame, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := roce.EncodeMirror(frame, roce.Mirror{Seq: seq, TimestampNs: seq * 100}); err != nil {
			t.Fatal(err)
		}
		st.dump(0, int64(seq*100), frame)
	}
	if err := st.finish(); err == nil || !strings.Contains(err.Error(), "mirrored seq 4 after 2") {
		t.Errorf("finish: %v; want the out-of-order copy named", err)
	}
}

// SimHooks hear the connections set up before any traffic, then the simulation's events.
func TestSimHooks(t *testing.T) {
	sc, err := scenario.Parse([]byte(`
seed: 2
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic: {num-connections: 3, num-msgs-per-qp: 50, message-size: 1048576, mtu: 1024}
`), "hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var setup [][2]int
	var events []uint64
	hooks := &SimHooks{
		Setup: func(conns, total int) {
			if len(events) > 0 {
				t.Errorf("connection set-up reported after %d events", events[len(events)-1])
			}
			setup = append(setup, [2]int{conns, total})
		},
		Events: func(_ int64, ev uint64) { events = append(events, ev) },
	}
	if err := Run(sc, Options{OutDir: filepath.Join(t.TempDir(), "res"), SimHooks: hooks}); err != nil {
		t.Fatal(err)
	}
	if len(setup) != 1 || setup[0] != [2]int{3, 3} {
		t.Errorf("set-up reports %v, want [[3 3]]", setup)
	}
	// 150 messages of 1,024 packets: 153,600 data packets and their ACKs, several events each.
	if len(events) < 2 || events[0] != SimHookEvery || events[1] != 2*SimHookEvery {
		t.Errorf("event reports %v, want every %d", events, SimHookEvery)
	}
}

// recorder is a TraceConsumer that keeps the chunks it is given as they are (no copy), handing one back now
// and then: the bytes it heard are read at End, so a chunk the writer changed after handing it over shows there.
type recorder struct {
	conns  []resultsdir.ConnRecord
	chunks []heard
	calls  int
	ends   []error
	got    []byte // at End: the chunks' bytes in order
}

// heard is a chunk given to the recorder: still its own (kept), or handed back (copied at that moment).
type heard struct{ kept, copied []byte }

func (r *recorder) Write(p []byte) []byte {
	if len(r.ends) > 0 {
		panic("Write after End")
	}
	r.chunks = append(r.chunks, heard{kept: p})
	r.calls++
	if r.calls%2 == 0 && len(r.chunks) > 1 { // the one before this: the writer may fill it again
		h := &r.chunks[len(r.chunks)-2]
		sp := h.kept
		h.copied, h.kept = append([]byte(nil), sp...), nil
		return sp
	}
	return nil
}

func (r *recorder) End(err error) {
	r.ends = append(r.ends, err)
	for _, h := range r.chunks {
		r.got = append(r.got, h.kept...)
		r.got = append(r.got, h.copied...)
	}
}

// Options.Trace hears the run's connections (connections.json's records) and then exactly trace.pcapng's bytes,
// in several writes whose chunks the writer leaves alone once handed over, and one End(nil); a run that fails ends it with an error.
func TestTraceConsumerHearsTheFile(t *testing.T) {
	sc, err := scenario.Load("../examples/listing2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Traffic.NumMsgsPerQP = 600 // a trace of several chunks (about 2.7 MB: frames cut to the snap length)
	var rec *recorder
	dir := filepath.Join(t.TempDir(), "r")
	err = Run(sc, Options{OutDir: dir, Trace: func(d string, conns []resultsdir.ConnRecord) TraceConsumer {
		if rec != nil {
			t.Error("Trace called twice")
		}
		rec = &recorder{conns: conns}
		return rec
	}})
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil || !bytes.Equal(rec.got, file) || len(rec.ends) != 1 || rec.ends[0] != nil {
		t.Fatalf("consumer: %v; got %d bytes of the file's %d, equal %v, ends %v", rec != nil, len(rec.got), len(file),
			bytes.Equal(rec.got, file), rec.ends)
	}
	if rec.calls < 4 {
		t.Fatalf("%d writes of a %d-byte trace; want the header and several chunks of packets", rec.calls, len(file))
	}
	var conns []resultsdir.ConnRecord
	if err := resultsdir.ReadList(dir, resultsdir.FileConnections, &conns); err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || len(rec.conns) != len(conns) {
		t.Fatalf("connections heard %v; connections.json %v", rec.conns, conns)
	}
	for i := range conns {
		if conns[i] != rec.conns[i] {
			t.Fatalf("connection %d heard %+v; connections.json %+v", i, rec.conns[i], conns[i])
		}
	}

	// A run whose simulated time runs out.
	rec = nil
	sc.Network.RunTimeoutMs = 1
	sc.Traffic.NumMsgsPerQP = 5000
	err = Run(sc, Options{OutDir: filepath.Join(t.TempDir(), "r"), Trace: func(d string, conns []resultsdir.ConnRecord) TraceConsumer {
		rec = &recorder{conns: conns}
		return rec
	}})
	if err == nil || rec == nil || len(rec.ends) != 1 || rec.ends[0] == nil {
		t.Fatalf("err %v; consumer %v; want the run failed and the consumer ended with an error", err, rec != nil)
	}
}

// A run without a trace consumer (a campaign item, refgen) keeps none of its trace in memory: the heap in use
// during a long run stays well below the trace's size.
func TestStreamWithoutConsumerKeepsNoTrace(t *testing.T) {
	sc, err := scenario.Load("../examples/listing2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Traffic.NumMsgsPerQP = 10000 // about 45 MB of trace
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	dir := filepath.Join(t.TempDir(), "r")
	if err := Run(sc, Options{OutDir: dir, SimHooks: &SimHooks{Events: func(int64, uint64) { sample() }}}); err != nil {
		t.Fatal(err)
	}
	sample()
	fi, err := os.Stat(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		t.Fatal(err)
	}
	if grew := int64(peak) - int64(base); fi.Size() < 30<<20 || grew > fi.Size()/3 {
		t.Errorf("heap in use grew by %d MB during a run writing a %d MB trace; want well below it", grew>>20, fi.Size()>>20)
	} else {
		t.Logf("heap in use grew by %d MB during a run writing a %d MB trace", grew>>20, fi.Size()>>20)
	}
}
