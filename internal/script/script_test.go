package script

import (
	"strings"
	"testing"
)

const sample = `# A script.

packet port=0 psn=0x10 kinds=(data,ack) last
frame one
frame two
----
forward 1
event drop

# Between cases.
flush
----

counters
----
old
`

func TestParse(t *testing.T) {
	cs, err := Parse("s.txt", sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d cases, want 3", len(cs))
	}
	c := cs[0]
	if c.Pos != "s.txt:3" || c.Cmd != "packet" || c.Get("port", "") != "0" || c.Int(t, "psn", 0) != 16 ||
		strings.Join(c.Args["kinds"], "|") != "data|ack" || !c.Has("last") || c.Has("nope") || c.Get("nope", "d") != "d" {
		t.Errorf("case 0: %+v", c)
	}
	if strings.Join(c.Input, "|") != "frame one|frame two" || c.want != "forward 1\nevent drop" {
		t.Errorf("case 0 input %q want %q", c.Input, c.want)
	}
	if cs[1].Cmd != "flush" || cs[1].want != "" || cs[1].Pos != "s.txt:11" || cs[2].want != "old" {
		t.Errorf("cases 1, 2: %+v %+v", cs[1], cs[2])
	}
	for _, bad := range []string{"cmd\n", "cmd\ninput\n\n----\n"} {
		if _, err := Parse("b.txt", bad); err == nil || !strings.Contains(err.Error(), "b.txt:1") {
			t.Errorf("%q: error %v, want one naming b.txt:1", bad, err)
		}
	}
}

func TestRewrite(t *testing.T) {
	got := Rewrite(sample, []string{"forward 0", "held 1\nreleased 0", ""})
	want := strings.Replace(sample, "forward 1\nevent drop\n", "forward 0\n", 1)
	want = strings.Replace(want, "flush\n----\n", "flush\n----\nheld 1\nreleased 0\n", 1)
	want = strings.Replace(want, "----\nold\n", "----\n", 1)
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if again := Rewrite(got, []string{"forward 0", "held 1\nreleased 0", ""}); again != got {
		t.Errorf("rewriting is not idempotent:\n%s", again)
	}
}
