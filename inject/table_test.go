package inject

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// TestTranslation checks the intent -> entry translation, starting with the paper's Figure 2: requester
// 10.0.0.1 QPN 0xfe IPSN 1001, responder 10.0.0.2 QPN 0xea, "4th packet of QP 1" -> dst 10.0.0.2, QPN 0xea,
// PSN 1004.
func TestTranslation(t *testing.T) {
	wrap := fig2("write")
	wrap.ReqIPSN = 0xfffffe
	tests := []struct {
		name   string
		conn   ConnMeta
		intent Intent
		want   Entry
	}{
		{"figure 2", fig2("write"), Intent{Kind: KindData, PSN: 3, Iter: 1, Action: roce.EventECN, Source: "ev[0]"},
			Entry{Kind: KindData, SrcIP: ipReq, DstIP: ipResp, DstQPN: 0xea, PSN: 1004, Iter: 1, Action: roce.EventECN, Source: "ev[0]"}},
		{"send any round", fig2("send"), Intent{Kind: KindData, PSN: 0, Action: roce.EventDrop},
			Entry{Kind: KindData, SrcIP: ipReq, DstIP: ipResp, DstQPN: 0xea, PSN: 1001, Action: roce.EventDrop}},
		{"read responses use the requester's PSN space", fig2("read"), Intent{Kind: KindData, PSN: 3, Iter: 2, Action: roce.EventDrop},
			Entry{Kind: KindData, SrcIP: ipResp, DstIP: ipReq, DstQPN: 0xfe, PSN: 1004, Iter: 2, Action: roce.EventDrop}},
		{"read request", fig2("read"), Intent{Kind: KindReadReq, PSN: 8, Iter: 1, Action: roce.EventDrop},
			Entry{Kind: KindReadReq, SrcIP: ipReq, DstIP: ipResp, DstQPN: 0xea, PSN: 1009, Iter: 1, Action: roce.EventDrop}},
		{"24-bit wrap", wrap, Intent{Kind: KindData, PSN: 3, Iter: 1, Action: roce.EventDrop},
			Entry{Kind: KindData, SrcIP: ipReq, DstIP: ipResp, DstQPN: 0xea, PSN: 1, Iter: 1, Action: roce.EventDrop}},
		{"ack from the responder", fig2("write"), Intent{Kind: KindAck, Nth: 4, Action: roce.EventDrop},
			Entry{Kind: KindAck, SrcIP: ipResp, DstIP: ipReq, DstQPN: 0xfe, Nth: 4, Action: roce.EventDrop}},
		{"write cnp from the responder", fig2("write"), Intent{Kind: KindCNP, Nth: 0, Action: roce.EventDrop},
			Entry{Kind: KindCNP, SrcIP: ipResp, DstIP: ipReq, DstQPN: 0xfe, Action: roce.EventDrop}},
		{"read cnp from the requester", fig2("read"), Intent{Kind: KindCNP, Nth: 1, Action: roce.EventDrop},
			Entry{Kind: KindCNP, SrcIP: ipReq, DstIP: ipResp, DstQPN: 0xea, Nth: 1, Action: roce.EventDrop}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSwitch(t, Config{Conns: []ConnMeta{tc.conn}, Intents: []Intent{tc.intent}})
			got := s.Entries()
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("entries = %+v\nwant      [%+v]", got, tc.want)
			}
		})
	}
}

// TestFigure2Marks runs Figure 2's connection: only the 4th data packet (PSN 1004) is CE-marked, and the entry
// records one hit.
func TestFigure2Marks(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")},
		Intents: []Intent{{Kind: KindData, PSN: 3, Iter: 1, Action: roce.EventECN, Source: "traffic.data-pkt-events[0]"}}})
	var v Verdict
	for psn := roce.PSN(1001); psn <= 1008; psn++ {
		s.Process(int64(psn), 0, build(t, wr(psn)), &v)
		if len(v.Forward) != 1 {
			t.Fatalf("psn %d: %d frames forwarded, want 1", psn, len(v.Forward))
		}
		marked := decode(t, v.Forward[0]).ECN() == 3
		if marked != (psn == 1004) {
			t.Errorf("psn %d: CE = %v", psn, marked)
		}
		if want := map[bool]string{true: "traffic.data-pkt-events[0]"}[psn == 1004]; v.Matched != want {
			t.Errorf("psn %d: matched %q, want %q", psn, v.Matched, want)
		}
	}
	if h := s.Hits(); len(h) != 1 || h[0] != 1 {
		t.Errorf("hits = %v, want [1]", h)
	}
	if e := s.Entries(); e[0].Hits != 1 {
		t.Errorf("entry hits = %d, want 1", e[0].Hits)
	}
}

func TestTableCapacity(t *testing.T) {
	in := []Intent{{PSN: 0, Action: roce.EventDrop}, {PSN: 1, Action: roce.EventDrop}, {PSN: 2, Action: roce.EventDrop}}
	_, err := New(Config{Conns: []ConnMeta{fig2("write")}, Intents: in, TableCapacity: 2})
	if err == nil {
		t.Fatal("3 intents fit a table of 2")
	}
	for _, want := range []string{"needs 3 event table entries", "holds 2", "network.event-table-capacity"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := New(Config{Conns: []ConnMeta{fig2("write")}, Intents: in, TableCapacity: 3}); err != nil {
		t.Errorf("3 intents in a table of 3: %v", err)
	}
}

func TestValidation(t *testing.T) {
	c := fig2("write")
	c.PacketsPerMsg, c.NumMsgs = 4, 2
	v6 := fig2("write")
	v6.RespIP = netip.MustParseAddr("fd00::2")
	c2 := fig2("write")
	c2.Index = 1
	tests := []struct {
		name  string
		cfg   Config
		wants []string
	}{
		{"no such connection", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Conn: 1, Action: roce.EventDrop, Source: "ev[3]"}}},
			[]string{"ev[3]", "connection 1 does not exist", "0..0"}},
		{"psn beyond the traffic", Config{Conns: []ConnMeta{c}, Intents: []Intent{{PSN: 8, Action: roce.EventDrop, Source: "ev[1]"}}},
			[]string{"ev[1]", "psn offset 8", "8 data packets", "0..7"}},
		{"negative psn", Config{Conns: []ConnMeta{c}, Intents: []Intent{{PSN: -1, Action: roce.EventDrop, Source: "ev[1]"}}},
			[]string{"ev[1]", "psn offset -1"}},
		{"read-req on a write connection", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Kind: KindReadReq, Action: roce.EventDrop, Source: "e"}}},
			[]string{"e:", "write connection", "read connection"}},
		{"unknown action", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Action: roce.EventNone, Source: "e"}}},
			[]string{"e:", "action 0 is unknown"}},
		{"unknown kind", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Kind: 9, Action: roce.EventDrop, Source: "e"}}},
			[]string{"e:", "packet kind 9"}},
		{"delay without duration", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Action: roce.EventDelay, Source: "e"}}},
			[]string{"e:", "positive duration"}},
		{"reorder behind 0", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Action: roce.EventReorder, Source: "e"}}},
			[]string{"e:", "behind 0"}},
		{"duplicate 0 copies", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Action: roce.EventDuplicate, Source: "e"}}},
			[]string{"e:", "0 copies"}},
		{"rewrite unknown field", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Action: roce.EventRewrite, Field: "ttl", Source: "e"}}},
			[]string{"e:", `field "ttl"`, "migreq"}},
		{"rewrite value too large", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Action: roce.EventRewrite, Field: "dscp", Value: 64, Source: "e"}}},
			[]string{"e:", "dscp value 64", "0..63"}},
		{"two events on one packet", Config{Conns: []ConnMeta{c}, Intents: []Intent{
			{PSN: 2, Iter: 1, Action: roce.EventDrop, Source: "a"}, {PSN: 2, Iter: 1, Action: roce.EventECN, Source: "b"}}},
			[]string{"b:", "same packet as a", "psn 1003"}},
		{"negative nth", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Kind: KindNAK, Nth: -1, Action: roce.EventDrop, Source: "e"}}},
			[]string{"e:", "nth -1"}},
		{"intent without source", Config{Conns: []ConnMeta{c}, Intents: []Intent{{Action: roce.EventDrop}, {Conn: 4, Action: roce.EventDrop}}},
			[]string{"intent #1", "connection 4"}},
		{"bad verb", Config{Conns: []ConnMeta{fig2("atomic")}}, []string{"connection 0", `verb "atomic"`}},
		{"mixed families", Config{Conns: []ConnMeta{v6}}, []string{"connection 0", "same family"}},
		{"duplicate connection", Config{Conns: []ConnMeta{c, c2}}, []string{"connection 1", "connection 0"}},
		{"index gap", Config{Conns: []ConnMeta{c2}}, []string{"index 1", "0..0"}},
		{"three ports", Config{Ports: 3}, []string{"3 ports", "expected 2"}},
		{"zero weight", Config{DumperWeights: []int{1, 0}}, []string{"dumper 1", "weight 0"}},
		{"negative capacity", Config{TableCapacity: -1}, []string{"capacity -1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestEntriesJSON checks the snapshot names kinds and actions the way the scenario does.
func TestEntriesJSON(t *testing.T) {
	s := newSwitch(t, Config{Conns: []ConnMeta{fig2("write")}, Intents: []Intent{
		{Kind: KindData, PSN: 3, Iter: 1, Action: roce.EventECN, Source: "x"},
		{Kind: KindNAK, Nth: 0, Action: roce.EventRewrite, Field: "migreq", Value: 1, Source: "y"}}})
	b, err := json.Marshal(s.Entries())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"data"`, `"action":"ecn"`, `"src_ip":"10.0.0.1"`, `"dst_qpn":234`,
		`"psn":1004`, `"kind":"nak"`, `"action":"rewrite"`, `"source":"y"`, `"hits":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not contain %s", b, want)
		}
	}
}

// Intents travel as JSON to the remote testbed's switch agent: every kind and action reads back as written,
// and an unknown name is an error naming the expected ones.
func TestIntentJSONRoundTrip(t *testing.T) {
	var in []Intent
	for k := KindData; k <= KindReadReq; k++ {
		for a := roce.EventNone; a <= roce.EventRewrite; a++ {
			in = append(in, Intent{Conn: int(k), Kind: k, PSN: 3, Nth: 2, Iter: 1, MsgIter: true, Action: a,
				DelayNs: 5, Behind: 1, Copies: 2, Field: "dscp", Value: 7, Source: "events[0]"})
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out []Intent
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip changed the intents:\n%+v\n%+v", in, out)
	}
	var k PacketKind
	if err := json.Unmarshal([]byte(`"syn"`), &k); err == nil || !strings.Contains(err.Error(), `packet kind "syn"; expected one of`) {
		t.Errorf("unknown kind: %v", err)
	}
	var a roce.EventType
	if err := json.Unmarshal([]byte(`"explode"`), &a); err == nil || !strings.Contains(err.Error(), `action "explode"; expected one of`) {
		t.Errorf("unknown action: %v", err)
	}
}

// ConnMeta's JSON form is the live control plane's wire format: the names must not drift.
func TestConnMetaJSON(t *testing.T) {
	m := fig2("read")
	m.PacketsPerMsg, m.NumMsgs = 4, 2
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"index":0,"verb":"read","req_ip":"10.0.0.1","resp_ip":"10.0.0.2","req_qpn":254,"resp_qpn":234,` +
		`"req_ipsn":1001,"resp_ipsn":3002,"packets_per_msg":4,"num_msgs":2}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var back ConnMeta
	if err := json.Unmarshal(b, &back); err != nil || back != m {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}
