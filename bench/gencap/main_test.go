package main

import (
	"path/filepath"
	"testing"

	"github.com/lumina-go/lumina/analyze"
)

// The generated capture is a valid go-back-N trace that the analyzer learns right: every requester QP
// 0x200+i pairs with its responder QP 0xd00+i, and every check passes, with the drops and the go-back-N
// timeouts placed in a small capture.
func TestCaptureIsValidGoBackN(t *testing.T) {
	defer func(d, r int) { dropEvery, rewindEvery = d, r }(dropEvery, rewindEvery)
	dropEvery, rewindEvery = 7000, 5000
	path := filepath.Join(t.TempDir(), "cap.pcap")
	if err := generate(path, 20000, 8, 1); err != nil {
		t.Fatal(err)
	}
	res, err := analyze.AnalyzeFile(path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Packets != 20000 || len(res.Connections) != 16 {
		t.Fatalf("%d packets, %d connections, want 20000 and 16", res.Packets, len(res.Connections))
	}
	for _, c := range res.Connections {
		if c.RespQPN < 0xd00 || c.RespQPN >= 0xd10 || c.ReqQPN != c.RespQPN-0xd00+0x200 {
			t.Errorf("learned requester QP %#x with responder QP %#x", c.ReqQPN, c.RespQPN)
		}
	}
	if len(res.Retransmissions) == 0 || res.CaptureGaps != 2 {
		t.Errorf("%d retransmissions, %d capture gaps: want the timeouts and the 2 drops in the capture",
			len(res.Retransmissions), res.CaptureGaps)
	}
	if len(res.Checks) != 16 {
		t.Errorf("%d checks, want 16", len(res.Checks))
	}
	for _, c := range res.Checks {
		if !c.OK {
			t.Errorf("%s qp %d: %d violation(s) %+v", c.Analyzer, c.QP, c.ViolationCount, c.Violations)
		}
	}
}
