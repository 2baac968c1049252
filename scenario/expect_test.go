package scenario

import (
	"encoding/json"
	"testing"
)

const analysisJSON = `{
  "integrity": {"ok": true, "checks": [{"name": "seqnum", "ok": true, "detail": ""}]},
  "checks": [
    {"analyzer": "gbn", "qp": 1, "ok": true, "violations": []},
    {"analyzer": "gbn", "qp": 2, "ok": false, "violations": [{"packet": 17, "message": "NAK carries PSN 5, expected 4"}]},
    {"analyzer": "cnp", "qp": 1, "ok": true, "violations": []}
  ],
  "retransmissions": [
    {"qp": 2, "psn": 5, "psn_abs": 1234, "msg": 1, "iter": 1, "trigger": "nack", "nack_generation_us": 1.5, "nack_reaction_us": 3.25, "latency_us": 5},
    {"qp": 2, "psn": 5, "psn_abs": 1234, "msg": 1, "iter": 2, "trigger": "timeout", "nack_generation_us": null, "nack_reaction_us": null, "latency_us": 67000}
  ],
  "cnp": {"ecn_marked": 1, "cnps": 1, "expected": 1, "scope_inferred": "port", "min_interval_us": null},
  "counters": [
    {"host": "responder", "name": "np_cnp_sent", "expected": 1, "actual": 1, "ok": true},
    {"host": "requester", "name": "packet_seq_err", "expected": 1, "actual": 0, "ok": false}
  ],
  "traffic": [
    {"qp": 1, "mct_us": [10.5, 11.0], "goodput_gbps": 48.0},
    {"qp": 2, "mct_us": [70000.0], "goodput_gbps": 0.1}
  ]
}`

func TestExpectEvaluate(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(analysisJSON), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		entry  string
		ok     bool
		text   string
		detail string
	}{
		{"{integrity: ok}", true, "integrity: ok", "integrity is ok"},
		{"{integrity: invalid}", false, "integrity: invalid", "integrity is ok, expected invalid"},
		{"{check: gbn, qp: 1}", true, "check: gbn, qp: 1", "1 checks entries of analyzer gbn, all ok"},
		{"{check: gbn}", false, "check: gbn", "checks[1] (analyzer gbn, qp 2) is not ok; 1 violations, first at packet 17: NAK carries PSN 5, expected 4"},
		{"{check: cnp}", true, "check: cnp", "1 checks entries of analyzer cnp, all ok"},
		{"{check: irn}", false, "check: irn", "nothing matched: no checks entry with analyzer irn (analyzers present: gbn, cnp)"},
		{"{check: cnp, qp: 3}", false, "check: cnp, qp: 3", "nothing matched: no checks entry with analyzer cnp and qp 3 (analyzers present: gbn, cnp)"},
		{"{path: cnp.scope_inferred, equals: port}", true, "path: cnp.scope_inferred, equals: port", `cnp.scope_inferred = "port"`},
		{"{path: cnp.scope_inferred, equals: qp}", false, "path: cnp.scope_inferred, equals: qp", `cnp.scope_inferred = "port" is not "qp" (1 of 1 selected values fail)`},
		{"{path: cnp.scope_inferred, not-equals: none}", true, "path: cnp.scope_inferred, not-equals: none", `cnp.scope_inferred = "port"`},
		{"{path: cnp.min_interval_us, equals: null}", true, "path: cnp.min_interval_us, equals: null", "cnp.min_interval_us = null"},
		{"{path: cnp.cnps, equals: 1}", true, "path: cnp.cnps, equals: 1", "cnp.cnps = 1"},
		{"{path: 'retransmissions[qp=2,psn=5,iter=1].trigger', equals: nack}", true, "path: retransmissions[qp=2,psn=5,iter=1].trigger, equals: nack", `retransmissions[0].trigger = "nack"`},
		{"{path: 'retransmissions[qp=2].nack_reaction_us', max: 10}", false, "path: retransmissions[qp=2].nack_reaction_us, max: 10",
			"retransmissions[1].nack_reaction_us = null is not a number (1 of 2 selected values fail)"},
		{"{path: 'retransmissions[qp=2,trigger=nack].nack_reaction_us', max: 10}", true, "path: retransmissions[qp=2,trigger=nack].nack_reaction_us, max: 10", "retransmissions[0].nack_reaction_us = 3.25"},
		{"{path: 'retransmissions[qp=2,trigger=nack].nack_reaction_us', max: 3}", false, "path: retransmissions[qp=2,trigger=nack].nack_reaction_us, max: 3",
			"retransmissions[0].nack_reaction_us = 3.25 is above max 3 (1 of 1 selected values fail)"},
		{"{path: 'retransmissions[qp=3].latency_us', max: 10}", false, "path: retransmissions[qp=3].latency_us, max: 10",
			"nothing matched retransmissions[qp=3].latency_us: no item of retransmissions (2 items) has qp=3"},
		{"{path: 'counters[host=responder,name=np_cnp_sent].actual', equals: 1}", true, "path: counters[host=responder,name=np_cnp_sent].actual, equals: 1", "counters[0].actual = 1"},
		{"{path: 'counters[*].ok', equals: true}", false, "path: counters[*].ok, equals: true", "counters[1].ok = false is not true (1 of 2 selected values fail)"},
		{"{path: 'traffic[qp=1].goodput_gbps', min: 40}", true, "path: traffic[qp=1].goodput_gbps, min: 40", "traffic[0].goodput_gbps = 48"},
		{"{path: 'traffic[*].goodput_gbps', min: 40}", false, "path: traffic[*].goodput_gbps, min: 40", "traffic[1].goodput_gbps = 0.1 is below min 40 (1 of 2 selected values fail)"},
		{"{path: 'traffic[*].mct_us[0]', between: [10, 100000]}", true, "path: traffic[*].mct_us[0], between: [10, 100000]", "traffic[0].mct_us[0] = 10.5, traffic[1].mct_us[0] = 70000"},
		{"{path: 'traffic[0].mct_us[5]', max: 1}", false, "path: traffic[0].mct_us[5], max: 1", "nothing matched traffic[0].mct_us[5]: traffic[0].mct_us has 2 items, no index 5"},
		{"{path: 'traffic[qp=1].goodput_gbps', approx: {value: 50, tolerance: 5%}}", true, "path: traffic[qp=1].goodput_gbps, approx: {value: 50, tolerance: 5%}", "traffic[0].goodput_gbps = 48"},
		{"{path: 'traffic[qp=1].goodput_gbps', approx: {value: 50, tolerance: 3%}}", false, "path: traffic[qp=1].goodput_gbps, approx: {value: 50, tolerance: 3%}",
			"traffic[0].goodput_gbps = 48 is not within 1.5 of 50 (1 of 1 selected values fail)"},
		{"{path: 'traffic[qp=1].goodput_gbps', approx: {value: 50, tolerance: 2}}", true, "path: traffic[qp=1].goodput_gbps, approx: {value: 50, tolerance: 2}", "traffic[0].goodput_gbps = 48"},
		{"{path: 'retransmissions[*]', count: 2}", true, "path: retransmissions[*], count: 2", "2 values selected"},
		{"{path: 'retransmissions[trigger=timeout]', count: 0}", false, "path: retransmissions[trigger=timeout], count: 0", "1 values selected, expected 0"},
		{"{path: 'retransmissions[trigger=read-reissue]', count: 0}", true, "path: retransmissions[trigger=read-reissue], count: 0",
			"0 values selected (no item of retransmissions (2 items) has trigger=read-reissue)"},
		{"{path: retransmissions, count: 2}", false, "path: retransmissions, count: 2",
			"1 values selected (one list of 2 items; write retransmissions[*] to count its items), expected 2"},
		{"{path: cnp.nothing, min: 0}", false, "path: cnp.nothing, min: 0", `nothing matched cnp.nothing: cnp has no key "nothing"`},
		{"{path: cnp.cnps.deeper, min: 0}", false, "path: cnp.cnps.deeper, min: 0", `nothing matched cnp.cnps.deeper: cnp.cnps is 1, not an object with key "deeper"`},
		{"{path: 'cnp[0]', min: 0}", false, "path: cnp[0], min: 0", "nothing matched cnp[0]: cnp is an object, not a list"},
	} {
		s := mustParse(t, "traffic: {num-qps: 4}\nexpect:\n  - "+c.entry+"\n")
		if len(s.Expect) != 1 {
			t.Fatalf("%s: %d expectations", c.entry, len(s.Expect))
		}
		e := s.Expect[0]
		if e.Line != 3 || e.Col != 5 {
			t.Errorf("%s: at %d:%d; want 3:5", c.entry, e.Line, e.Col)
		}
		r := e.Evaluate(doc)
		if r.OK != c.ok || r.Expect != c.text || r.Detail != c.detail {
			t.Errorf("%s:\n got {ok: %v, expect: %s, detail: %s}\nwant {ok: %v, expect: %s, detail: %s}", c.entry, r.OK, r.Expect, r.Detail, c.ok, c.text, c.detail)
		}
	}
}

func TestExpectResultJSON(t *testing.T) {
	b, err := json.Marshal(ExpectResult{Expect: "integrity: ok", OK: true, Detail: "integrity is ok"})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"expect":"integrity: ok","ok":true,"detail":"integrity is ok"}` {
		t.Errorf("JSON %s", b)
	}
}

func TestExpectOnOddDocuments(t *testing.T) {
	s := mustParse(t, "expect:\n  - {integrity: ok}\n  - {check: gbn}\n  - {path: a.b, min: 1}\n  - {path: 'a[*]', count: 0}\n")
	for _, doc := range []any{nil, "text", 3.0, []any{1.0}, map[string]any{"integrity": "yes", "checks": map[string]any{}, "a": nil}} {
		for _, r := range s.Evaluate(doc) {
			if r.OK != (r.Expect == "path: a[*], count: 0") || r.Detail == "" {
				t.Errorf("doc %v: %+v", doc, r)
			}
		}
	}
}
