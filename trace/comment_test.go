package trace

import (
	"testing"

	"github.com/lumina-go/lumina/roce"
)

func TestParseComment(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Annotation
	}{
		{"event=drop seq=17 iter=2 qp=1", Annotation{Event: roce.EventDrop, Seq: 17, Iter: 2, QP: 1, HasEvent: true, HasSeq: true, HasIter: true, HasQP: true}},
		{"event=ecn,seq=3;iter=1\tqp=0\n", Annotation{Event: roce.EventECN, Seq: 3, Iter: 1, HasEvent: true, HasSeq: true, HasIter: true, HasQP: true}},
		{"event=3 seq=9", Annotation{Event: roce.EventCorrupt, Seq: 9, HasEvent: true, HasSeq: true}},
		{"event=event-200", Annotation{Event: 200, HasEvent: true}},
		{"event=none", Annotation{HasEvent: true}},
		{"myevent=drop", Annotation{Other: true}},
		{"event=bogus", Annotation{Other: true}},
		{"event=256", Annotation{Other: true}},
		{"qp=99999999999 note", Annotation{Other: true}},
		{"hello, event=drop", Annotation{Event: roce.EventDrop, HasEvent: true, Other: true}},
		{"event=drop event=ecn", Annotation{Event: roce.EventDrop, HasEvent: true, Other: true}},
		{"", Annotation{}},
	} {
		if got := ParseComment(c.in); got != c.want {
			t.Errorf("ParseComment(%q) = %+v; want %+v", c.in, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ParseComment("event=drop seq=17 iter=2 qp=1") }); n != 0 {
		t.Errorf("ParseComment allocates %v times", n)
	}
}
