// Package progress shows how far a long command is: a bar redrawn in place when standard error is a terminal,
// a plain line every few seconds when it is not (a CI log, a file), nothing when quiet. It writes only to the
// writer it is given (standard error): never to standard output, never to a results file. A nil *Meter (Mode
// Off) does nothing and costs one nil check per call.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Mode is how progress is shown.
type Mode int

const (
	Off   Mode = iota // nothing (--quiet, or --json where a caller wants stderr clean)
	Lines             // a plain line every Options.Interval (standard error is not a terminal)
	Bar               // a bar redrawn in place (standard error is a terminal)
)

func (m Mode) String() string { return [...]string{"off", "lines", "bar"}[m] }

// ModeFor chooses the mode for w: Off when quiet, Bar when w is a terminal, else Lines.
func ModeFor(w io.Writer, quiet bool) Mode {
	if quiet || w == nil {
		return Off
	}
	if f, ok := w.(*os.File); ok && IsTerminal(f) {
		return Bar
	}
	return Lines
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Units of done and total.
const (
	Count = "" // a plain count ("1234/5000")
	Bytes = "bytes"
)

// Options configure a Meter.
type Options struct {
	Mode Mode
	// Label starts every line ("lumina run", "search").
	Label string
	// Unit of done and total: Count or Bytes.
	Unit string
	// Delay: nothing is shown before the command has run this long (a short command stays silent).
	Delay time.Duration
	// Interval between plain lines (default 2 s); a bar is redrawn at most every 100 ms.
	Interval time.Duration
	// Width of the bar in characters (default 30).
	Width int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Tick keeps the output alive between updates (a phase that reports no progress still gets its line
	// every interval, its bar's clock runs): a goroutine until Done.
	Tick bool
}

// Meter reports the progress of one command.
type Meter struct {
	mu       sync.Mutex
	w        io.Writer
	o        Options
	start    time.Time
	last     time.Time // last output
	shown    bool      // something was written
	drawn    bool      // a bar is on the current line
	phase    string
	done     int64
	total    int64
	detail   string
	finished bool
	stop     chan struct{}
}

// New returns a meter writing to w, or nil (which does nothing) when the mode is Off.
func New(w io.Writer, o Options) *Meter {
	if o.Mode == Off || w == nil {
		return nil
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
		if o.Mode == Bar {
			o.Interval = 100 * time.Millisecond
		}
	}
	if o.Width <= 0 {
		o.Width = 30
	}
	m := &Meter{w: w, o: o, start: o.Now()}
	if o.Tick {
		m.stop = make(chan struct{})
		go m.tick()
	}
	return m
}

func (m *Meter) tick() {
	t := time.NewTicker(min(m.o.Interval, 250*time.Millisecond)) // show decides whether it is time
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.mu.Lock()
			m.show(false)
			m.mu.Unlock()
		}
	}
}

// Phase names what the command is doing now ("simulating", "writing the trace"); the next update shows it.
// total <= 0 means the phase's extent is unknown.
func (m *Meter) Phase(name string, total int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if name != m.phase {
		m.phase, m.done, m.total, m.detail = name, 0, total, ""
		m.last = time.Time{} // shown at the next update, or now
		m.show(false)
	}
}

// Update says how far the current phase is: done of total (total <= 0: unknown), and a short detail.
func (m *Meter) Update(done, total int64, detail string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done, m.total, m.detail = done, total, detail
	m.show(false)
}

// Done ends the meter of a command that finished: a bar is cleared from its line; plain lines end with a last
// line ("..., done") when any was shown.
func (m *Meter) Done() { m.end(true) }

// Abort ends the meter of a command that failed or was stopped: a bar is cleared from its line (so that the
// message that follows starts on a clean one); plain lines end without a last line, never claiming done.
func (m *Meter) Abort() { m.end(false) }

func (m *Meter) end(ok bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finished {
		return
	}
	m.finished = true
	if m.stop != nil {
		close(m.stop)
	}
	switch {
	case m.o.Mode == Bar && m.drawn:
		fmt.Fprint(m.w, "\r\033[K")
		m.drawn = false
	case m.o.Mode == Lines && m.shown && ok:
		if m.total > 0 {
			m.done = m.total
		}
		fmt.Fprintln(m.w, m.line(m.o.Now())+", done")
	}
}

// Writer returns a writer for other messages on the same stream: a bar is cleared before them and redrawn
// after, so that they do not mix. Writes with the meter nil go straight to w.
func (m *Meter) Writer(w io.Writer) io.Writer {
	if m == nil || m.o.Mode != Bar {
		return w
	}
	return writerFunc(func(p []byte) (int, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.drawn {
			fmt.Fprint(m.w, "\r\033[K")
			m.drawn = false
		}
		n, err := w.Write(p)
		if !m.finished && m.shown {
			m.show(true)
		}
		return n, err
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// show writes the progress if it is time to (or force).
func (m *Meter) show(force bool) {
	if m.finished {
		return
	}
	now := m.o.Now()
	if now.Sub(m.start) < m.o.Delay {
		return
	}
	if !force && !m.last.IsZero() && now.Sub(m.last) < m.o.Interval {
		return
	}
	m.last = now
	m.shown = true
	if m.o.Mode == Bar {
		fmt.Fprint(m.w, "\r"+m.bar(now)+"\033[K")
		m.drawn = true
		return
	}
	fmt.Fprintln(m.w, m.line(now))
}

func (m *Meter) head() string {
	s := m.o.Label
	if m.phase != "" {
		s += ": " + m.phase
	}
	return s
}

// line is the plain form: "lumina run: simulating 1234/5000 packets (24%), 3s, detail".
func (m *Meter) line(now time.Time) string {
	var b strings.Builder
	b.WriteString(m.head())
	if m.total > 0 || m.done > 0 {
		b.WriteString(" " + m.amount())
	}
	if m.total > 0 {
		fmt.Fprintf(&b, " (%d%%)", m.percent())
	}
	fmt.Fprintf(&b, ", %s", elapsed(now.Sub(m.start)))
	if m.detail != "" {
		b.WriteString(", " + m.detail)
	}
	return b.String()
}

// bar is the terminal form: "lumina run: simulating [#########.....]  24% 1234/5000 3s detail".
func (m *Meter) bar(now time.Time) string {
	var b strings.Builder
	b.WriteString(m.head() + " ")
	if m.total > 0 {
		fill := int(int64(m.o.Width) * min(m.done, m.total) / m.total)
		fmt.Fprintf(&b, "[%s%s] %3d%% ", strings.Repeat("#", fill), strings.Repeat(".", m.o.Width-fill), m.percent())
	}
	if m.total > 0 || m.done > 0 {
		b.WriteString(m.amount() + " ")
	}
	b.WriteString(elapsed(now.Sub(m.start)))
	if m.detail != "" {
		b.WriteString(" " + m.detail)
	}
	return b.String()
}

func (m *Meter) percent() int64 {
	return min(100, m.done*100/m.total)
}

func (m *Meter) amount() string {
	if m.o.Unit == Bytes {
		if m.total > 0 {
			return humanBytes(m.done) + "/" + humanBytes(m.total)
		}
		return humanBytes(m.done)
	}
	if m.total > 0 {
		return fmt.Sprintf("%d/%d", m.done, m.total)
	}
	return fmt.Sprint(m.done)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.0fs", d.Seconds())
	}
	return d.Truncate(time.Second).String()
}
