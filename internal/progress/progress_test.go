package progress

import (
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func lines(s string) []string            { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// Plain lines: nothing before the delay, then one line per interval, a line at each phase change, and a last
// line at the end.
func TestLines(t *testing.T) {
	c := newClock()
	var out strings.Builder
	m := New(&out, Options{Mode: Lines, Label: "lumina run", Delay: time.Second, Now: c.now})
	m.Phase("simulating", 1000)
	m.Update(10, 1000, "")
	c.advance(500 * time.Millisecond)
	m.Update(100, 1000, "")
	if out.Len() != 0 {
		t.Fatalf("before the delay: %q", out.String())
	}
	c.advance(time.Second) // 1.5 s
	m.Update(250, 1000, "2 anomalies")
	c.advance(time.Second) // 2.5 s: within the interval
	m.Update(400, 1000, "")
	c.advance(1100 * time.Millisecond) // 3.6 s
	m.Update(600, 1000, "")
	m.Phase("writing the trace", 0)
	c.advance(100 * time.Millisecond)
	m.Update(0, 0, "")
	m.Done()
	m.Done()
	m.Update(1, 1, "after the end")
	want := []string{
		"lumina run: simulating 250/1000 (25%), 2s, 2 anomalies",
		"lumina run: simulating 600/1000 (60%), 4s",
		"lumina run: writing the trace, 4s",
		"lumina run: writing the trace, 4s, done",
	}
	if got := lines(out.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(out.String(), "\r") || strings.Contains(out.String(), "\033") {
		t.Error("plain lines carry terminal control characters")
	}
}

// A bar: redrawn in place (carriage return, erase to the end of line), at most every 100 ms; other messages
// clear it and redraw it; the end clears it.
func TestBar(t *testing.T) {
	c := newClock()
	var out strings.Builder
	m := New(&out, Options{Mode: Bar, Label: "analyze", Unit: Bytes, Width: 10, Now: c.now})
	m.Update(512<<10, 2<<20, "")
	c.advance(50 * time.Millisecond)
	m.Update(1<<20, 2<<20, "") // too soon
	c.advance(60 * time.Millisecond)
	m.Update(3<<19, 2<<20, "")
	first := "\ranalyze [##........]  25% 512.0 KiB/2.0 MiB 0s\033[K"
	second := "\ranalyze [#######...]  75% 1.5 MiB/2.0 MiB 0s\033[K"
	if out.String() != first+second {
		t.Fatalf("bar:\n%q\nwant\n%q", out.String(), first+second)
	}
	out.Reset()
	io.WriteString(m.Writer(&out), "lumina: a warning\n")
	if out.String() != "\r\033[Klumina: a warning\n"+second {
		t.Errorf("a message during the bar: %q", out.String())
	}
	out.Reset()
	m.Done()
	if out.String() != "\r\033[K" {
		t.Errorf("Done: %q, want the line cleared", out.String())
	}
}

// With Tick, a phase that reports nothing still gets a line every interval; Done stops it.
func TestTick(t *testing.T) {
	var out syncBuilder
	m := New(&out, Options{Mode: Lines, Label: "x", Interval: 20 * time.Millisecond, Tick: true})
	m.Phase("writing", 0)
	time.Sleep(150 * time.Millisecond)
	m.Done()
	n := strings.Count(out.String(), "x: writing")
	time.Sleep(60 * time.Millisecond)
	if n < 3 || strings.Count(out.String(), "x: writing") != n || !strings.HasSuffix(out.String(), ", done\n") {
		t.Errorf("%d lines in 150 ms of a 20 ms interval (want at least 3, none after Done):\n%s", n, out.String())
	}
}

type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Off (quiet): New gives nil, and nil does nothing; Writer passes through.
func TestOff(t *testing.T) {
	var out strings.Builder
	m := New(&out, Options{Mode: Off})
	if m != nil {
		t.Fatal("Off gave a meter")
	}
	m.Phase("x", 1)
	m.Update(1, 2, "x")
	m.Done()
	io.WriteString(m.Writer(&out), "msg\n")
	if out.String() != "msg\n" {
		t.Errorf("output %q", out.String())
	}
}

// The mode follows standard error: a terminal (a pty) gets the bar, a pipe or a file plain lines, quiet
// nothing.
func TestModeFor(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var buf strings.Builder
	for _, c := range []struct {
		w     io.Writer
		quiet bool
		want  Mode
	}{{tty, false, Bar}, {tty, true, Off}, {w, false, Lines}, {&buf, false, Lines}, {w, true, Off}, {nil, false, Off}} {
		if got := ModeFor(c.w, c.quiet); got != c.want {
			t.Errorf("ModeFor(%T, quiet %v) = %v, want %v", c.w, c.quiet, got, c.want)
		}
	}
}

// The cost when off: a nil meter's Update.
func BenchmarkOff(b *testing.B) {
	var m *Meter
	for i := range b.N {
		m.Update(int64(i), int64(b.N), "")
	}
}

// The cost of an update between two redraws of a bar (the common case when on).
func BenchmarkBarBetweenRedraws(b *testing.B) {
	m := New(io.Discard, Options{Mode: Bar, Label: "x"})
	for i := range b.N {
		m.Update(int64(i), int64(b.N), "")
	}
}

// Abort clears a bar as Done does, and ends plain lines without claiming done.
func TestAbort(t *testing.T) {
	c := newClock()
	var out strings.Builder
	m := New(&out, Options{Mode: Lines, Label: "lumina run", Now: c.now})
	m.Phase("simulating", 10)
	m.Update(5, 10, "")
	m.Abort()
	m.Done()
	m.Update(6, 10, "")
	if got := lines(out.String()); strings.Join(got, "\n") != "lumina run: simulating 0/10 (0%), 0s" {
		t.Errorf("lines after Abort:\n%s", out.String())
	}
	out.Reset()
	m = New(&out, Options{Mode: Bar, Label: "lumina run", Now: c.now})
	m.Update(5, 10, "")
	m.Abort()
	m.Update(6, 10, "")
	if s := out.String(); !strings.HasPrefix(s, "\rlumina run [") || !strings.HasSuffix(s, "\033[K\r\033[K") || strings.Count(s, "\r") != 2 {
		t.Errorf("bar after Abort: %q; want the bar, then cleared, nothing after", s)
	}
}
