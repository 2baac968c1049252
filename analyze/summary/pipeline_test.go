package summary

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// pipelineCaptures writes two time-interleaved captures of RoCE traffic with every kind of frame the summary
// counts (frames of many sizes, ACKs, NAKs, CNPs, CE marks, a bad ICRC, a cut frame, VLANs, not-RoCE frames).
func pipelineCaptures(t *testing.T) []string {
	dir := t.TempDir()
	var paths []string
	for file := 0; file < 2; file++ {
		var frames [][]byte
		var ts []int64
		for i := 0; i < 3000; i++ {
			qp := uint32(0x100 + (i*7+file)%23)
			var f []byte
			switch {
			case i%97 == 5:
				f = frame(t, frameSpec{op: roce.CNP, qp: qp + 0x100, from: hostB, to: hostA, tos: 0xc2})
			case i%10 == 9:
				syn := uint8(0x1f)
				if i%50 == 9 {
					syn = 0x60 // NAK: PSN sequence error
				}
				f = frame(t, frameSpec{op: roce.RCAcknowledge, psn: uint32(i), qp: qp + 0x100, from: hostB, to: hostA, syndrome: syn})
			case i%211 == 3:
				f = append(frame(t, frameSpec{op: roce.RCWriteMiddle, psn: uint32(i), qp: qp, payload: 256})[:60:60], 0) // cut
			case i%307 == 1:
				f = make([]byte, 60) // not IP
			default:
				f = frame(t, frameSpec{op: roce.RCWriteMiddle, psn: uint32(i - i%13), qp: qp, tos: uint8(2 + i%3/2),
					payload: 16 + (i*131)%4000, vlan: uint16(i % 3)})
				if i%401 == 7 {
					f[len(f)-1] ^= 0xff // a bad ICRC
				}
			}
			frames = append(frames, f)
			ts = append(ts, int64(1000+2*i+file))
		}
		paths = append(paths, writePcap(t, dir, "c"+string(rune('0'+file))+".pcap", frames, ts))
	}
	return paths
}

func reportJSON(t *testing.T, paths []string, workers int) string {
	t.Helper()
	r, err := Analyze(paths, Options{Workers: workers, TopFlows: -1})
	if err != nil {
		return "error: " + err.Error()
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPipelineSameReport: the pipeline gives the one-worker report with read buffers so small that they are
// retired and recycled every few packets, on one file and on two merged by time, with any number of decoders.
func TestPipelineSameReport(t *testing.T) {
	paths := pipelineCaptures(t)
	defer func(n int) { pipeReadBuffer = n }(pipeReadBuffer)
	for _, in := range [][]string{paths[:1], paths} {
		want := reportJSON(t, in, 1)
		if len(want) < 1000 || want[:6] == "error:" || !strings.Contains(want, `"bad":`) || strings.Contains(want, `"bad":0`) {
			t.Fatalf("%v: one-worker report %.200s", in, want)
		}
		for _, size := range []int{4 << 10, 9 << 10, 256 << 10} {
			pipeReadBuffer = size
			for _, w := range []int{2, 3, 7} {
				if got := reportJSON(t, in, w); got != want {
					t.Errorf("%d files, read buffers of %d bytes, %d workers: the report differs from the one-worker path's", len(in), size, w)
				}
			}
		}
	}
}

// TestPipelineStopped: reading a Source after its report stops with an error instead of waiting forever.
func TestPipelineStopped(t *testing.T) {
	paths := pipelineCaptures(t)
	src, err := Open(paths[:1], Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := 0; i < 10; i++ {
		if _, err := src.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Report(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; n < 1_000_000; n++ {
		if _, err = src.Next(); err != nil {
			break
		}
	}
	if !errors.Is(err, errStopped) || n > 3000 {
		t.Fatalf("after Report: %d more packets, then %v; want at most the batches already read, then errStopped", n, err)
	}
}

// bulkyPcapng writes a pcapng of RoCE frames whose other bytes dwarf them: each frame is followed by an
// unknown block of junk bytes (unknown), or carries comments of comments x 4 KiB (opt). It returns the path
// and the largest block.
func bulkyPcapng(t *testing.T, packets, junk, comments int) (string, int) {
	t.Helper()
	le := binary.LittleEndian
	var out []byte
	largest := 0
	block := func(typ uint32, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		n := 12 + len(body)
		largest = max(largest, n)
		out = le.AppendUint32(le.AppendUint32(out, typ), uint32(n))
		out = le.AppendUint32(append(out, body...), uint32(n))
	}
	block(0x0a0d0d0a, le.AppendUint64(le.AppendUint16(le.AppendUint16(le.AppendUint32(nil, 0x1a2b3c4d), 1), 0), ^uint64(0)))
	block(1, le.AppendUint32(le.AppendUint16(le.AppendUint16(nil, 1), 0), 65535))
	note := bytes.Repeat([]byte{'x'}, 4<<10)
	for i := 0; i < packets; i++ {
		f := frame(t, frameSpec{op: roce.RCWriteMiddle, psn: uint32(i), qp: 0x100 + uint32(i%5), payload: 64 + i%9})
		body := le.AppendUint32(le.AppendUint32(le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 0), 0), uint32(i)), uint32(len(f))), uint32(len(f)))
		body = append(body, f...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		for c := 0; c < comments; c++ {
			body = append(le.AppendUint16(le.AppendUint16(body, 1), uint16(len(note))), note...)
		}
		if comments > 0 {
			body = append(body, 0, 0, 0, 0)
		}
		block(6, body)
		if junk > 0 {
			block(0xBAD, make([]byte, junk))
		}
	}
	path := filepath.Join(t.TempDir(), "bulky.pcapng")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, largest
}

// TestPipelineMemoryBounded: the memory the pipeline holds is bounded by the batch limit, not by the capture:
// unknown blocks skipped between frames and packet comments count, so that a batch holds about pipeBatchBytes
// of read buffers and comments whatever the frames weigh, and the read buffers allocated over the whole run
// stay a few batches' worth (before, a batch of 256 frames held every buffer the skipped bytes went through,
// and 256 comments). The report is the one-worker path's.
func TestPipelineMemoryBounded(t *testing.T) {
	defer func(n, m int) { pipeReadBuffer, pipeBatchBytes = n, m }(pipeReadBuffer, pipeBatchBytes)
	for _, c := range []struct {
		name           string
		junk, comments int
	}{{"unknown blocks", 32 << 10, 0}, {"comments", 0, 4}} {
		pipeReadBuffer, pipeBatchBytes = 8<<10, 128<<10
		path, largest := bulkyPcapng(t, 400, c.junk, c.comments)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		want := reportJSON(t, []string{path}, 1)
		if !strings.Contains(want, `"packets":400`) {
			t.Fatalf("%s: one-worker report %.300s", c.name, want)
		}
		const workers = 2
		src, err := Open([]string{path}, Options{Workers: workers, TopFlows: -1})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; ; n++ {
			if _, err := src.Next(); err != nil {
				break
			}
		}
		r, err := src.Report()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		p := src.pipe
		src.Close()
		if string(b) != want || n != 400 {
			t.Errorf("%s: %d packets; the report differs from the one-worker path's", c.name, n)
		}
		// A batch may overshoot the limit by what one packet's reading takes: its block, read into at most a
		// few buffers, and its comments.
		if limit := pipeBatchBytes + 4*largest; p.largest > limit {
			t.Errorf("%s: a batch held %d bytes of read buffers and comments; want at most %d", c.name, p.largest, limit)
		}
		if limit := (workers + pipeBatchesExtra + 2) * (pipeBatchBytes + 4*largest); p.allocated > limit || int64(limit) > st.Size()/3 {
			t.Errorf("%s: %d bytes of read buffers allocated reading %d bytes; want at most %d (a few batches)", c.name, p.allocated, st.Size(), limit)
		}
	}
}

// TestPipelineReportMidway: a report taken after reading part of the stream counts exactly the packets read,
// as the one-worker path's does, whether the read stopped inside a batch, at its end or in the first one (the
// counter stage counts the batches the reader is done with; stop counts the rest of the one it is in).
func TestPipelineReportMidway(t *testing.T) {
	paths := pipelineCaptures(t)
	partial := func(workers, n int) string {
		src, err := Open(paths, Options{Workers: workers, TopFlows: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		for i := 0; i < n; i++ {
			if _, err := src.Next(); err != nil {
				t.Fatalf("%d workers: packet %d: %v", workers, i, err)
			}
		}
		r, err := src.Report()
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, n := range []int{0, 1, 100, pipeBatchFrames - 1, pipeBatchFrames, pipeBatchFrames + 1, 3*pipeBatchFrames + 17, 5999} {
		want := partial(1, n)
		if !strings.Contains(want, fmt.Sprintf(`"packets":%d,`, n)) {
			t.Fatalf("%d packets read: one-worker report %.200s", n, want)
		}
		for _, w := range []int{2, 5} {
			if got := partial(w, n); got != want {
				t.Errorf("%d packets read, %d workers: the report differs from the one-worker path's\n got %.300s\nwant %.300s", n, w, got, want)
			}
		}
	}
}

// TestPipelineConsumerDecodes: with the decoders held back, the consumer decodes the batches itself (the reader
// drops the work items the queue has no room for, rather than wait); released midway, the decoders find work
// items of batches the consumer took (some already filled again) and leave them; the report is the one-worker
// path's.
func TestPipelineConsumerDecodes(t *testing.T) {
	paths := pipelineCaptures(t)
	want := reportJSON(t, paths, 1)
	defer func() { pipeHoldDecoders = nil }()
	for _, release := range []int{3*pipeBatchFrames + 5, 5000} {
		pipeHoldDecoders = make(chan struct{})
		src, err := Open(paths, Options{Workers: 3, TopFlows: -1})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; ; n++ {
			if n == release {
				close(pipeHoldDecoders)
			}
			if _, err := src.Next(); err != nil {
				break
			}
		}
		r, err := src.Report()
		if err != nil {
			t.Fatal(err)
		}
		p := src.pipe
		src.Close()
		b, _ := json.Marshal(r)
		if string(b) != want || n != 6000 {
			t.Errorf("decoders released after %d packets: %d packets; the report differs from the one-worker path's", release, n)
		}
		if p.selfDecoded < release/pipeBatchFrames || p.passed.Load() == 0 {
			t.Errorf("decoders released after %d packets: the consumer decoded %d batches, the decoders passed %d work items; want at least %d and some",
				release, p.selfDecoded, p.passed.Load(), release/pipeBatchFrames)
		}
	}
}
