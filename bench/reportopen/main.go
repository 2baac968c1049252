// Command reportopen measures how long a `lumina report` page takes to open in headless Chromium: from the
// navigation to the moment the plots drawn at open have rendered (window.luminaReport.ready, on the page's own
// clock, which counts from the navigation), and, seen from here, to the moment every plot has (the
// time-sequence diagrams beyond the 16th connection are drawn on scrolling; renderAll draws them). Each run opens the page
// in a new tab of one browser with a fresh profile.
//
//	go run ./bench/gencap -n 1000000 -o /tmp/big.pcap
//	lumina report /tmp/big.pcap -o /tmp/big.html
//	go run ./bench/reportopen -runs 5 /tmp/big.html
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	runs := flag.Int("runs", 5, "page opens")
	timeout := flag.Duration("timeout", 2*time.Minute, "bound of one open")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: reportopen [-runs N] REPORT.html")
		os.Exit(2)
	}
	path, err := filepath.Abs(flag.Arg(0))
	if err == nil {
		_, err = os.Stat(path)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "reportopen:", err)
		os.Exit(2)
	}
	if err := measure(path, *runs, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "reportopen:", err)
		os.Exit(1)
	}
}

type state struct {
	Ready    bool                      `json:"ready"`
	RenderMs float64                   `json:"renderMs"`
	Deferred int                       `json:"deferred"`
	Errors   []string                  `json:"errors"`
	Marks    map[string]float64        `json:"marks"`
	Plots    map[string]map[string]any `json:"plots"`
}

func measure(path string, runs int, timeout time.Duration) error {
	prof, err := os.MkdirTemp("", "reportopen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(prof)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(browserPath()),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(prof), chromedp.WindowSize(1400, 1000))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx); err != nil {
		return fmt.Errorf("starting chromium: %w", err)
	}
	st, _ := os.Stat(path)
	fmt.Printf("%s: %.1f MB, %d opens in headless chromium\n", path, float64(st.Size())/1e6, runs)
	var page, outside []float64
	for i := 0; i < runs; i++ {
		tctx, tcancel := chromedp.NewContext(bctx) // a new tab
		ctx, cancel := context.WithTimeout(tctx, timeout)
		start := time.Now()
		err := chromedp.Do(ctx, chromedp.Navigate("file://"+path))
		if err == nil {
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`!!(window.luminaReport && window.luminaReport.ready)`, chromedp.WithPollingInterval(10*time.Millisecond)))
		}
		// Diagrams deferred until scrolled to (more than 16 connections) are drawn too: the figure is the time to
		// every plot.
		if err == nil {
			_, err = chromedp.Run(ctx, chromedp.Evaluate[int](`window.luminaReport.renderAll()`))
		}
		if err == nil {
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.luminaReport.pending === 0`, chromedp.WithPollingInterval(10*time.Millisecond)))
		}
		took := time.Since(start)
		var s state
		if err == nil {
			s, err = chromedp.Run(ctx, chromedp.Evaluate[state](`window.luminaReport`))
		}
		cancel()
		tcancel()
		if err != nil {
			return fmt.Errorf("open %d: %w", i+1, err)
		}
		if len(s.Errors) > 0 {
			return fmt.Errorf("open %d: page errors %v", i+1, s.Errors)
		}
		if s.Deferred > 0 {
			return fmt.Errorf("open %d: %d plots still deferred", i+1, s.Deferred)
		}
		page = append(page, s.RenderMs)
		outside = append(outside, float64(took.Milliseconds()))
		fmt.Printf("open %d: first plots rendered %.0f ms after navigation (page clock); all %d plots %.0f ms after it, seen from here; marks %v\n", i+1, s.RenderMs, len(s.Plots), float64(took.Milliseconds()), s.Marks)
	}
	fmt.Printf("median: first plots %.0f ms (page clock, min %.0f, max %.0f); all plots %.0f ms (from here, min %.0f, max %.0f)\n",
		median(page), minOf(page), maxOf(page), median(outside), minOf(outside), maxOf(outside))
	return nil
}

func browserPath() string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "chromium"
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
