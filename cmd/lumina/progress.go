package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/internal/progress"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/search"
	"github.com/lumina-go/lumina/trace"
)

// Progress on long commands (internal/progress): a bar when standard error is a terminal, a line every 2 s
// when it is not, nothing with --quiet. Only standard error is written.

// envProgressMode forces the mode (bar, lines, off) whatever standard error is: for tests, and for a CI log
// that wants the bar's lines.
const envProgressMode = "LUMINA_PROGRESS"

// envProgressDelay is a test hook: the delay before any progress is shown, instead of the command's.
const envProgressDelay = "LUMINA_TEST_PROGRESS_DELAY"

// newMeter is the meter of a command: nothing before delay (a short command stays silent).
func newMeter(stderr io.Writer, quiet bool, label string, unit string, delay time.Duration) *progress.Meter {
	mode := progress.ModeFor(stderr, quiet)
	if !quiet {
		switch os.Getenv(envProgressMode) {
		case "bar":
			mode = progress.Bar
		case "lines":
			mode = progress.Lines
		case "off":
			mode = progress.Off
		}
	}
	if d, err := time.ParseDuration(os.Getenv(envProgressDelay)); err == nil {
		delay = d
	}
	return progress.New(stderr, progress.Options{Mode: mode, Label: label, Unit: unit, Delay: delay, Tick: true})
}

// runMeter is testbed.Options.Meter for a meter: nil (no callback at all) when the meter is off.
func runMeter(m *progress.Meter) func(phase string, done, total int64) {
	if m == nil {
		return nil
	}
	phase := ""
	return func(ph string, done, total int64) {
		if ph != phase {
			phase = ph
			m.Phase(ph, total)
		}
		if total > 0 && done >= total {
			done = total - 1 // an estimate: the phase is not over until the testbed says so
		}
		m.Update(done, total, "")
	}
}

// searchMeter is the search's progress: evaluations done of the budget, anomalies found, best energy. The
// first plain line says what the energy is.
func searchMeter(m *progress.Meter, stderr io.Writer) func(search.Progress) {
	if m == nil {
		return nil
	}
	explained := false
	return func(p search.Progress) {
		if !explained {
			explained = true
			fmt.Fprintf(m.Writer(stderr), "search: energy: %s\n", energyMeaning)
		}
		rate := float64(p.Evaluations) / max(p.Elapsed.Seconds(), 1e-9)
		m.Update(int64(p.Evaluations), int64(p.Budget), fmt.Sprintf("%.0f/s, best energy %.3g, %d anomalies, %d skipped",
			rate, p.BestEnergy, p.Anomalies, p.Skipped))
	}
}

// countingReader is the analyze command's progress: it passes the packets through and tells the meter about
// the bytes read of the captures' total size: of one capture, where its last packet ends (exact); of several
// merged, each packet's captured length and a record header summed (an estimate).
type countingReader struct {
	src    trace.Reader
	m      *progress.Meter
	total  int64
	single bool
	bytes  int64
	n      int
}

// Decoded passes on the source's decoding (analyze.Predecoded), so that the analyzers do not decode again.
func (c *countingReader) Decoded() (*roce.Packet, bool) {
	if d, ok := c.src.(analyze.Predecoded); ok {
		return d.Decoded()
	}
	return nil, false
}

// MirrorTagged passes on what the source knows of its captures (analyze.MirrorTagger); true when it does not
// know, which leaves the decision to the first RoCE packet as before.
func (c *countingReader) MirrorTagged() bool {
	if t, ok := c.src.(analyze.MirrorTagger); ok {
		return t.MirrorTagged()
	}
	return true
}

func (c *countingReader) Next() (*trace.Packet, error) {
	p, err := c.src.Next()
	if err == nil {
		if c.single {
			c.bytes = p.Offset + int64(len(p.Data)) + 16
		} else {
			c.bytes += int64(len(p.Data)) + 16
		}
		if c.n++; c.n&0x3fff == 0 {
			c.m.Update(min(c.bytes, c.total), c.total, fmt.Sprintf("%d packets", c.n))
		}
	}
	return p, err
}

// captureBytes is the total size of the capture files.
func captureBytes(paths []string) int64 {
	var n int64
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}
