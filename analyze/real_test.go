package analyze

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const realDir = "../testdata/real-captures/"

func analyzeReal(t *testing.T, name string) *Analysis {
	t.Helper()
	res, err := AnalyzeFile(filepath.Join(realDir, name), Options{IndexBase: 1})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if os.Getenv("ANALYZE_DUMP") != "" {
		b, _ := json.MarshalIndent(res, "", " ")
		t.Logf("%s:\n%s", name, b)
	}
	return res
}

// Every real capture analyzes without error or panic, and produces well-formed JSON.
func TestRealCapturesNeverFail(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(realDir, "*.pcap"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in %s: %v", realDir, err)
	}
	for _, f := range files {
		res := analyzeReal(t, filepath.Base(f))
		if _, err := json.Marshal(res); err != nil {
			t.Errorf("%s: marshal: %v", f, err)
		}
		if res.Metadata != "none" {
			t.Errorf("%s: metadata %q, want none (plain capture)", f, res.Metadata)
		}
		if strings.HasPrefix(filepath.Base(f), "wireshark") && res.RoCEPackets != 0 {
			t.Errorf("%s: native InfiniBand capture gave %d RoCE packets", f, res.RoCEPackets)
		}
	}
}

// Clean RC flows of real NICs pass go-back-N; UC and UD flows are skipped, never failed.
func TestRealCapturesVerdicts(t *testing.T) {
	cases := []struct {
		file      string
		gbnChecks int
		skipUC    bool
	}{
		{"oferby-proxy_roce.pcap", 2, false},
		{"magnate3_cx_rocev2_send_multiqp.pcap", 16, false}, // 16 QPs one way, plus reverse flows whose ACKs were captured
		{"magnate3_mlx_uc_send_badicrc.pcap", 0, true},
		{"magnate3_uccl_uc_write_imm.pcap", 0, true}, // its one RC WRITE's request is not in the capture
	}
	for _, tc := range cases {
		res := analyzeReal(t, tc.file)
		n := 0
		for _, c := range res.Checks {
			if c.Analyzer == "gbn" {
				n++
			}
			if !c.OK {
				t.Errorf("%s: %s qp %d failed: %+v", tc.file, c.Analyzer, c.QP, c.Violations)
			}
		}
		if n < tc.gbnChecks || tc.gbnChecks == 0 && n != 0 {
			t.Errorf("%s: %d gbn checks, want at least %d (checks %+v, skipped %+v)", tc.file, n, tc.gbnChecks, res.Checks, res.Skipped)
		}
		uc := 0
		for _, s := range res.Skipped {
			if strings.HasPrefix(s.Reason, "UC transport") {
				uc++
			}
		}
		if tc.skipUC != (uc > 0) {
			t.Errorf("%s: %d UC flows skipped, want skipped=%v: %+v", tc.file, uc, tc.skipUC, res.Skipped)
		}
		if len(res.Retransmissions) != 0 {
			t.Errorf("%s: clean capture shows retransmissions %+v", tc.file, res.Retransmissions)
		}
	}
}
