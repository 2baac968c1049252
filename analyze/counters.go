package analyze

import (
	"sort"
	"strings"
)

// CounterCheck compares one NIC counter's change over the run with what the trace implies.
type CounterCheck struct {
	Host     string `json:"host"`
	Name     string `json:"name"`
	Expected int64  `json:"expected"`
	Actual   *int64 `json:"actual"` // finish - start; null when the NIC does not expose the counter
	OK       bool   `json:"ok"`
	Note     string `json:"note,omitempty"`
}

// expectation is what the trace implies for one counter on one host.
type expectation struct {
	name string
	n    int64
	why  string
	// receiverSide marks counts reconstructed from what the trace shows delivered to this host: when the host's
	// NIC discarded packets after the switch, the trace cannot determine them.
	receiverSide bool
}

// counterExpectations derives, per host role, the counters the trace determines. NVIDIA (mlx5 hw_counters):
// the data sender counts NAKs it acted on (packet_seq_err) and timeouts (local_ack_timeout_err); the
// Write/Send receiver counts sequence errors (out_of_sequence) and duplicates (duplicate_request); a READ
// requester counts re-issues on a gap (implied_nak_seq_err) and timeouts; a READ responder counts re-issued
// requests as duplicate_request; every receiver counts corrupted packets (rx_icrc_encapsulated), CE-marked
// packets (np_ecn_marked_roce_packets) and its CNPs (np_cnp_sent). Intel (irdma): cnpSent, RxECNMrkd,
// cnpHandled only. Soft-RoCE (rxe): rcvd_seq_err, out_of_seq_request and duplicate_request.
func (a *analyzer) counterExpectations(role int, vendor string) []expectation {
	var seqErr, timeouts, oos, dup, implied int64
	for _, cs := range a.conns {
		read := cs.c.Verb == VerbRead && cs.sawRead
		if cs.sawRead && cs.sawWS {
			continue
		}
		switch {
		case read && role == roleRequester:
			implied += int64(cs.read().reissueGap)
			timeouts += int64(cs.read().reissueTimeout)
		case read && role == roleResponder:
			dup += int64(cs.read().reissueDelivered)
		case role == roleRequester:
			if cs.isIRN() {
				seqErr += int64(cs.irn.naksSent) // every IRN NAK is a sequence-error NAK the requester receives
				timeouts += int64(cs.irn.timeoutRounds)
			} else {
				seqErr += int64(cs.gbn.nakRounds)
				timeouts += int64(cs.gbn.timeoutRounds)
			}
		default:
			if cs.isIRN() {
				oos += int64(cs.irn.naksSent)
				dup += int64(cs.irn.dups)
			} else {
				oos += int64(cs.gbn.episodes)
				dup += int64(cs.gbn.dups)
			}
		}
	}
	h := a.hosts[role]
	// The reaction point handles the CNPs delivered to the host when DCQCN's RP is on and ignores them when off.
	rp := a.opts.Requester
	if role == roleResponder {
		rp = a.opts.Responder
	}
	handled, ignored := h.cnpRecv, int64(0)
	handledWhy, ignoredWhy := "CNPs delivered to this host (its DCQCN reaction point is on)", "none: the reaction point is on"
	if !rp.RPEnabled {
		handled, ignored = 0, h.cnpRecv
		handledWhy, ignoredWhy = "none: the reaction point is off", "CNPs delivered to this host (its DCQCN reaction point is off)"
	}
	if vendor == "rxe" {
		// Soft-RoCE (rxe_hw_counters.c): rcvd_seq_err counts the sequence-error NAKs the requester acted on
		// (rxe_comp.c check_ack), out_of_seq_request one per gap (rxe_resp.c check_psn: one NAK per gap) and
		// duplicate_request every duplicate request, re-issued READs included. It has no CNP, ECN or ICRC
		// counter, and completer_retry_err mixes NAK and timeout retries.
		if role == roleRequester {
			return []expectation{{"rcvd_seq_err", seqErr, "NAKs this requester acted on (go-back-N rounds)", false}}
		}
		return []expectation{
			{"out_of_seq_request", oos, "sequence errors (NAKs owed) at this responder", true},
			{"duplicate_request", dup, "duplicate requests delivered to this responder", true},
		}
	}
	if vendor == "intel" {
		return []expectation{
			{"cnpSent", h.cnpSent, "CNPs this host sent in the trace", false},
			{"RxECNMrkd", h.ceRecv, "CE-marked data packets delivered to this host", false},
			{"cnpHandled", handled, handledWhy, false},
			{"cnpIgnored", ignored, ignoredWhy, false},
		}
	}
	common := []expectation{
		{"rx_icrc_encapsulated", h.corruptRecv, "corrupted packets delivered to this host", false},
		{"np_ecn_marked_roce_packets", h.ceRecv, "CE-marked data packets delivered to this host", false},
		{"np_cnp_sent", h.cnpSent, "CNPs this host sent in the trace", false},
		{"rp_cnp_handled", handled, handledWhy, false},
		{"rp_cnp_ignored", ignored, ignoredWhy, false},
	}
	if role == roleRequester {
		return append([]expectation{
			{"packet_seq_err", seqErr, "NAKs this requester acted on (go-back-N rounds)", false},
			{"local_ack_timeout_err", timeouts, "timeout retransmissions", false},
			{"implied_nak_seq_err", implied, "READs re-issued on a gap in the responses", false},
		}, common...)
	}
	return append([]expectation{
		{"out_of_sequence", oos, "sequence errors (NAKs owed) at this responder", true},
		{"duplicate_request", dup, "duplicate requests delivered to this responder", true},
	}, common...)
}

// counterChecks compares every host's counter changes with the trace. A counter the NIC does not expose is
// reported as such (ok) instead of failing or crashing.
func (a *analyzer) counterChecks() []CounterCheck {
	out := []CounterCheck{}
	for _, hc := range a.opts.Counters {
		role := roleUnknown
		for i, n := range roleNames {
			if hc.Host == n {
				role = i
			}
		}
		if role == roleUnknown {
			out = append(out, CounterCheck{Host: hc.Host, Name: "*", OK: false,
				Note: "unknown host name: expected requester or responder"})
			continue
		}
		vendor := hc.Vendor
		if vendor == "" {
			vendor = [2]NICInfo{a.opts.Requester, a.opts.Responder}[role].Vendor
		}
		exps := a.counterExpectations(role, vendor)
		// The reference's host check: a NIC must not discard packets that reached it (every counter whose name
		// says "discard" stays put); the trace cannot show such losses, only their consequences.
		for _, name := range sortedNames(hc.Finish) {
			if strings.Contains(strings.ToLower(name), "discard") {
				exps = append(exps, expectation{name, 0, "discards: the NIC dropped packets that reached it", false})
			}
		}
		for _, e := range exps {
			cc := CounterCheck{Host: hc.Host, Name: e.name, Expected: e.n}
			s, okS := hc.Start[e.name]
			f, okF := hc.Finish[e.name]
			switch {
			case !okS && !okF:
				cc.OK, cc.Note = true, "not exposed by this NIC"
			case !okS || !okF:
				cc.Note = "present in only one snapshot"
			case f < s:
				d := int64(f) - int64(s)
				cc.Actual = &d
				cc.Note = "counter went backwards (reset or wrapped during the run)"
			case e.receiverSide && a.discards[role] > 0:
				d := int64(f - s)
				cc.Actual = &d
				cc.OK, cc.Note = true, "not determined by the trace: this NIC discarded packets the trace shows delivered"
			default:
				d := int64(f - s)
				cc.Actual = &d
				cc.OK = d == e.n
				if !cc.OK {
					cc.Note = "the trace shows " + itoa(e.n) + " " + e.why
					if e.n == 0 && strings.HasPrefix(e.why, "discards") {
						cc.Note = "the NIC discarded " + itoa(d) + " packets that reached it"
					}
				}
			}
			out = append(out, cc)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

func sortedNames(m map[string]uint64) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func itoa(v int64) string {
	if v < 0 {
		return "-" + uitoa(uint64(-v))
	}
	return uitoa(uint64(v))
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
