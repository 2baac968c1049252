package rnic

import (
	"math"
	"testing"
)

// rxe's completer never decrements retry_cnt 7 (rxe_comp.c COMPST_ERROR_RETRY); other values count down.
func TestRxeRetryCnt7IsInfinite(t *testing.T) {
	rxe := mustProfile(t, "rxe")
	for _, tc := range []struct {
		prof  *Profile
		retry uint8
		want  int
	}{{rxe, 7, math.MaxInt}, {rxe, 6, 6}, {mustProfile(t, "ideal"), 7, 7}} {
		q, err := NewQP(QPConfig{Profile: tc.prof, MTU: 1024, Timeout: 14, RetryCnt: tc.retry, LocalQPN: 1, RemoteQPN: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := q.retryLimit(); got != tc.want {
			t.Errorf("%s retry_cnt %d: limit %d; want %d", tc.prof.Name, tc.retry, got, tc.want)
		}
	}
	// rxe has no notification point: CE marks never become CNPs, even with the NP "enabled".
	np := NewNP(rxe, 0, true)
	if np.OnCE(0, CNPKey{QPN: 1}) || np.OnNAK(0, CNPKey{QPN: 1}) {
		t.Error("rxe's NP sent a CNP")
	}
	if c := NewCounters(rxe); c.Name(CtrOutOfSequence) != "out_of_seq_request" || c.Name(CtrPacketSeqErr) != "rcvd_seq_err" || c.Name(CtrNPCNPSent) != "" {
		t.Errorf("rxe counter names: %q %q %q", c.Name(CtrOutOfSequence), c.Name(CtrPacketSeqErr), c.Name(CtrNPCNPSent))
	}
}
