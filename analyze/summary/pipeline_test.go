package summary

import (
	"encoding/json"
	"errors"
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
