package htmlreport

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lumina-go/lumina/analyze"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// chromium finds Debian's chromium (scripts/test.sh installs it).
func chromium(t testing.TB) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the report's browser tests need Debian's chromium (apt-get install chromium; scripts/test.sh installs it)")
	return ""
}

// browser is one headless Chromium with a fresh profile, and what its pages said on the console.
type browser struct {
	ctx    context.Context
	cancel func()
	mu     sync.Mutex
	errors []string
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	b.cancel = func() { cancel(); acancel() }
	if err := chromedp.Do(ctx); err != nil {
		b.cancel()
		t.Fatalf("starting chromium: %v", err)
	}
	// Console errors, warnings and uncaught exceptions of every page the tab opens.
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(b.cancel)
	return b
}

func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// plotInfo is window.luminaReport.plots[id].
type plotInfo struct {
	Series int      `json:"series"`
	Names  []string `json:"names"`
	Points []int    `json:"points"`
	Total  []int    `json:"total"`
}

type reportState struct {
	Ready    bool                `json:"ready"`
	Errors   []string            `json:"errors"`
	RenderMs float64             `json:"renderMs"`
	Plots    map[string]plotInfo `json:"plots"`
}

// open writes the page to a file, opens it and waits until every plot has rendered.
func (b *browser) open(t testing.TB, p *Page, timeout time.Duration) (reportState, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	if err := WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Navigate("file://"+path))
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`!!(window.luminaReport && window.luminaReport.ready)`, chromedp.WithPollingInterval(20*time.Millisecond)))
	}
	var st reportState
	if err == nil {
		st, err = chromedp.Run(ctx, chromedp.Evaluate[reportState](`window.luminaReport`))
	}
	if err != nil {
		t.Fatalf("opening %s: %v (console: %v)", path, err, b.consoleErrors())
	}
	return st, path
}

func eval[T any](t testing.TB, b *browser, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// noErrors fails on any console error or warning and on errors the page's script caught.
func noErrors(t *testing.T, b *browser, st reportState) {
	t.Helper()
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console: %v", errs)
	}
	if len(st.Errors) > 0 {
		t.Errorf("page errors: %v", st.Errors)
	}
}

// wantPlot checks that a plot is there with the series and points the data says.
func wantPlot(t *testing.T, st reportState, id string, points []int) {
	t.Helper()
	p, ok := st.Plots[id]
	if !ok {
		t.Errorf("plot %s missing (plots: %v)", id, keys(st.Plots))
		return
	}
	if p.Series != len(points) || fmt.Sprint(p.Points) != fmt.Sprint(points) {
		t.Errorf("plot %s: %d series with points %v, want %d series with %v", id, p.Series, p.Points, len(points), points)
	}
}

func keys(m map[string]plotInfo) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// The listing2 report in a browser: no console errors, every plot there with the series and points its data
// has (fewer packets than the decimation limit: every packet is drawn), and a screenshot that is not blank.
func TestBrowserResultsReport(t *testing.T) {
	b := newBrowser(t)
	p := load(t, "testdata/listing2")
	st, _ := b.open(t, p, 60*time.Second)
	noErrors(t, b, st)
	r := p.Runs[0]
	for _, c := range r.Trace.Conns {
		wantPlot(t, st, fmt.Sprintf("r0-ts-%d", c.QP), tsPoints(t, c))
	}
	np := len(r.Positions)
	wantPlot(t, st, "r0-positions", []int{np, np, np, np})
	// listing2's one position recovered once by NAK (5 µs) and once by timeout (537 ms): NACK- and
	// timeout-triggered latencies are separate series, on a log axis.
	if ax := eval[string](t, b, `echarts.getInstanceByDom(document.getElementById('r0-positions')).getOption().yAxis[0].type`); ax != "log" {
		t.Errorf("retransmission latency axis is %q, want log (µs NACK recoveries beside a 537 ms timeout)", ax)
	}
	var ladder []int
	for _, m := range r.Timeouts {
		if len(m.TimeoutIntervalsUs) > 0 {
			ladder = append(ladder, len(m.TimeoutIntervalsUs))
		}
	}
	wantPlot(t, st, "r0-ladder", ladder)
	wantPlot(t, st, "r0-cnp", cnpPoints(r.Trace))
	// The CNP timeline's time axis ends at the trace's end, as the diagram of the connection that lasts to it
	// (QP 2, whose timeout retransmission is the trace's last packet) does.
	maxes := eval[[]float64](t, b, `['r0-ts-2', 'r0-cnp'].map(id => echarts.getInstanceByDom(document.getElementById(id)).getOption().xAxis[0].max)`)
	if len(maxes) != 2 || maxes[0] != r.Trace.EndUs || maxes[1] != r.Trace.EndUs || r.Trace.EndUs <= 0 {
		t.Errorf("time axes of QP 2 and the CNP timeline end at %v, want both at the trace's end %v µs", maxes, r.Trace.EndUs)
	}
	// The headings name every count, the injected events too.
	if h := eval[string](t, b, `[...document.querySelectorAll('h3')].map(h => h.textContent).join('|')`); strings.Contains(h, "undefined") || !strings.Contains(h, "injected events 2") {
		t.Errorf("diagram headings %q; want the injected events counted by name", h)
	}
	var mct []int
	for _, c := range r.MCT {
		mct = append(mct, len(c.Points)+1) // and the start at (least MCT, 0)
	}
	wantPlot(t, st, "r0-mct", mct)
	if len(st.Plots) != len(r.Trace.Conns)+4 {
		t.Errorf("%d plots (%v), want %d", len(st.Plots), keys(st.Plots), len(r.Trace.Conns)+4)
	}
	// The tables: integrity conditions, expectations (all pass) and the counters.
	type tables struct {
		Integrity, Expect, Bad int
		Verdict                string
	}
	rows := eval[tables](t, b, `({Integrity: [...document.querySelectorAll('h2')].filter(h => h.textContent === 'Integrity').length,
		Expect: document.querySelectorAll('table')[2].rows.length - 1,
		Bad: document.querySelectorAll('tr.bad').length,
		Verdict: document.querySelector('.verdict').textContent})`)
	if rows.Integrity != 1 || rows.Expect != len(r.Expectations) || rows.Verdict != "pass" || rows.Bad != 0 {
		t.Errorf("page tables: %+v; want the Integrity section, %d expectation rows, verdict pass, no failed row", rows, len(r.Expectations))
	}
	// Checks: the passing ones of an analyzer share a row, with their QPs as ranges.
	checks := eval[[]string](t, b, `(() => { let e = [...document.querySelectorAll('h2')].find(h => h.textContent === 'Checks');
		while (e && e.tagName !== 'TABLE') { e = e.nextElementSibling; }
		return [...e.rows].slice(1).map(r => [...r.cells].slice(0, 3).map(c => c.textContent).join('|')); })()`)
	if fmt.Sprint(checks) != "[cnp|1-2|pass gbn|1-2|pass]" {
		t.Errorf("checks table rows %q; want cnp and gbn passing on QPs 1-2", checks)
	}
	// Hovering a point with the mouse shows its packet.
	// The first NAK of QP 2 (in time order, the NAK series' first point: NAKs are never decimated).
	q2 := r.Trace.Conns[1].Packets
	kinds, _ := base64.StdEncoding.DecodeString(q2.Kind)
	pkts, nakPkt := u32col(t, q2.Pkt), -1
	for i, k := range kinds {
		if k == KindNAK {
			nakPkt = int(pkts[i])
			break
		}
	}
	if tip := hover(t, b, "r0-ts-2", "NAK", 0, 0.5); !strings.Contains(tip, fmt.Sprintf("packet #%d (NAK;", nakPkt)) || !strings.Contains(tip, "PSN") {
		t.Errorf("the NAK's tooltip says %q; want packet #%d, its kind and PSN", tip, nakPkt)
	}
	screenshotNotBlank(t, b)
}

// hover zooms a plot to a narrow window around a drawn point of a series (so that no other point covers it),
// moves the mouse onto it and returns the tooltip's text.
func hover(t *testing.T, b *browser, plot, series string, i int, window float64) string {
	t.Helper()
	ctx0, cancel0 := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel0()
	xy, err := chromedp.Run(ctx0, chromedp.Evaluate[[]float64](fmt.Sprintf(`new Promise(done => {
		const d = document.getElementById(%q); d.scrollIntoView({block: 'center'});
		const c = echarts.getInstanceByDom(d); let o = c.getOption(); const s = o.series.findIndex(x => x.name === %q);
		const p = o.series[s].data[%d], row = p[2], w = %g;
		if (w > 0) { c.dispatchAction({type: 'dataZoom', dataZoomIndex: 0, startValue: p[0] - w / 2, endValue: p[0] + w / 2}); }
		requestAnimationFrame(() => requestAnimationFrame(() => {
			o = c.getOption(); const q = o.series[s].data.find(x => x[2] === row);
			const px = c.convertToPixel({seriesIndex: s}, [q[0], q[1]]); const r = d.getBoundingClientRect();
			done([r.left + px[0], r.top + px[1]]);
		}));
	})`, plot, series, i, window), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("finding %s %s point %d: %v", plot, series, i, err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, xy[0]-3, xy[1]), chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, xy[0], xy[1])); err != nil {
		t.Fatalf("hovering: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`[...document.getElementById(%q).querySelectorAll('div')].some(e => e.textContent.startsWith('packet #') && getComputedStyle(e).display !== 'none' && getComputedStyle(e).visibility !== 'hidden')`, plot),
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Errorf("hovering %s %s point %d at %v: no tooltip (%v)", plot, series, i, xy, err)
		return ""
	}
	return eval[string](t, b, fmt.Sprintf(`[...document.getElementById(%q).querySelectorAll('div')].filter(e => e.textContent.startsWith('packet #')).pop().textContent`, plot))
}

func screenshotNotBlank(t *testing.T, b *browser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bd := img.Bounds()
	var n, sum, sum2 float64
	colors := map[uint32]bool{}
	for y := bd.Min.Y; y < bd.Max.Y; y += 2 {
		for x := bd.Min.X; x < bd.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			l := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(bl)) / 257
			n++
			sum += l
			sum2 += l * l
			if len(colors) < 1000 {
				colors[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			}
		}
	}
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	if sd < 10 || len(colors) < 20 {
		t.Errorf("the screenshot (%dx%d) looks blank: luminance sd %.1f, %d colours", bd.Dx(), bd.Dy(), sd, len(colors))
	}
	if os.Getenv("LUMINA_REPORT_SCREENSHOT") != "" {
		_ = os.WriteFile(os.Getenv("LUMINA_REPORT_SCREENSHOT"), buf, 0o644)
	}
}

// Two runs side by side, a capture and a search directory render without errors, with their plots.
func TestBrowserOtherPages(t *testing.T) {
	b := newBrowser(t)
	cmp := load(t, "testdata/listing2", "testdata/cnp-scope")
	st, _ := b.open(t, cmp, 60*time.Second)
	noErrors(t, b, st)
	for i, r := range cmp.Runs {
		for _, c := range r.Trace.Conns {
			wantPlot(t, st, fmt.Sprintf("r%d-ts-%d", i, c.QP), tsPoints(t, c))
		}
		wantPlot(t, st, fmt.Sprintf("r%d-cnp", i), cnpPoints(r.Trace))
	}
	// The notes and the worse-direction column of lumina diff's comparison are shown.
	notes := eval[string](t, b, `[...document.querySelectorAll('p.compare-note')].map(p => p.textContent).join('|') + '|' + [...document.querySelectorAll('th')].map(h => h.textContent).join(',')`)
	if !strings.Contains(notes, strings.Join(cmp.CompareNotes, "|")) || !strings.Contains(notes, "unit,tolerance,worse,status") {
		t.Errorf("compare page notes and headings: %q; want the notes %q and the tolerance, worse and status columns", notes, cmp.CompareNotes)
	}
	// In the metric table (the page's first), regressed rows are highlighted as bad, the other rows that moved as moved.
	got := eval[string](t, b, `(t => t.querySelectorAll('tr.moved').length + ',' + t.querySelectorAll('tr.bad').length)(document.querySelector('table'))`)
	moved, bad := 0, 0
	for _, m := range cmp.Compare {
		switch {
		case m.Status == "regressed":
			bad++
		case m.Moved:
			moved++
		}
	}
	if want := fmt.Sprintf("%d,%d", moved, bad); got != want || moved == 0 || bad == 0 {
		t.Errorf("metric rows highlighted moved,bad = %s, want %s (both non-zero)", got, want)
	}

	capt := load(t, "testdata/listing2/trace.pcapng")
	st, _ = b.open(t, capt, 60*time.Second)
	noErrors(t, b, st)
	for _, c := range capt.Runs[0].Trace.Conns {
		wantPlot(t, st, fmt.Sprintf("r0-ts-%d", c.QP), tsPoints(t, c))
	}

	// Third-party captures (testdata/real-captures): with connections the checkers learned, and without any.
	for _, f := range []string{"magnate3_cx_nvmeof_rdma_discover.pcap", "magnate3_mlx_uc_send_badicrc.pcap", "hexvec_cx4lx_cnp_from_scapy_test.pcap"} {
		rc := load(t, filepath.Join("..", "testdata", "real-captures", f))
		st, _ = b.open(t, rc, 60*time.Second)
		noErrors(t, b, st)
		for _, c := range rc.Runs[0].Trace.Conns {
			wantPlot(t, st, fmt.Sprintf("r0-ts-%d", c.QP), tsPoints(t, c))
		}
		if len(st.Plots) < len(rc.Runs[0].Trace.Conns) {
			t.Errorf("%s: %d plots for %d connections", f, len(st.Plots), len(rc.Runs[0].Trace.Conns))
		}
		if tv := rc.Runs[0].Trace; tv.CNP.N > 0 {
			wantPlot(t, st, "r0-cnp", cnpPoints(tv))
		}
		if strings.HasPrefix(f, "hexvec_cx4lx_cnp") {
			if _, ok := st.Plots["r0-cnp"]; !ok || rc.Runs[0].Trace.CNPCounts[2] != 1 {
				t.Errorf("%s: the one CNP (no connection learned) is not on a CNP timeline: plots %v, counts %v", f, keys(st.Plots), rc.Runs[0].Trace.CNPCounts)
			}
		}
	}

	srch := load(t, "testdata/search")
	st, _ = b.open(t, srch, 60*time.Second)
	noErrors(t, b, st)
	var pts []int
	for _, e := range srch.Search.Evals {
		pts = append(pts, len(e.Points))
	}
	wantPlot(t, st, "energy", append(pts, len(srch.Search.Best)))
	// The anomaly table names the published anomaly (#9) whose conditions hold at the first anomaly's point.
	if got := eval[string](t, b, `[...document.querySelectorAll('th')].map(e => e.textContent).slice(0, 3).join('|') + '/' +
		[...document.querySelectorAll('tr')][1].children[2].textContent`); got != "id|symptom|published (Collie)/#9" {
		t.Errorf("search page: anomaly table %q, want the published column with #9", got)
	}

	// A campaign: the verdicts (2 pass, 2 fail: two bars), retransmissions and timeouts per item, the items'
	// rows (failed ones highlighted) and a link to the one item report there is.
	suite := load(t, "testdata/campaign")
	st, _ = b.open(t, suite, 60*time.Second)
	noErrors(t, b, st)
	wantPlot(t, st, "suite-verdicts", []int{2})
	wantPlot(t, st, "suite-retx", []int{4, 4})
	rows := eval[string](t, b, `document.querySelectorAll('tr.bad').length + '|' + [...document.querySelectorAll('a')].map(a => a.getAttribute('href')).join(',')`)
	if rows != "2|items/0000-listing2-cx5-s1/report.html" {
		t.Errorf("suite page: failed rows | links = %q, want 2 failed rows and item 0's report linked", rows)
	}
}

// synthetic is a page with one connection of n data packets (PSN i at i µs, every 1000th injected), to
// check the decimation: the overview draws at most MaxPoints per series, a zoomed window every packet in it.
func synthetic(n, conns int) *Page {
	tv := &TraceView{Packets: n * conns, Metadata: "none", Opcodes: map[int]string{10: "RC RDMA WRITE Middle"}, Events: []string{"none", "drop"},
		CNPCounts: []int{0, 0}}
	for q := 1; q <= conns; q++ {
		var b colBuilder
		counts := make([]int, numKinds+1)
		for i := 0; i < n; i++ {
			ev := uint8(0)
			if i%1000 == 0 {
				ev = 1
				counts[numKinds]++
			}
			b.add(float64(i), int32(i), KindData, ev, 10, uint32(i), i)
			counts[KindData]++
		}
		tv.Conns = append(tv.Conns, ConnTrace{QP: q, Verb: "write", Label: fmt.Sprintf("QP %d", q), Counts: counts, Packets: b.columns()})
	}
	var empty colBuilder
	tv.CNP = empty.columns()
	r := &Run{Source: "synthetic", Verdict: "pass", Trace: tv}
	return &Page{Kind: KindResults, Title: "synthetic", MaxPoints: DefaultMaxPoints, Runs: []*Run{r}}
}

func TestBrowserDecimatesAndZooms(t *testing.T) {
	const n = 200000
	b := newBrowser(t)
	st, _ := b.open(t, synthetic(n, 1), 120*time.Second)
	noErrors(t, b, st)
	p := st.Plots["r0-ts-1"]
	// PSNs rise with time: every time bucket (n / (MaxPoints/2) packets) gives its first and last packet.
	if p.Series != 6 || p.Points[0] != DefaultMaxPoints {
		t.Fatalf("overview of %d packets: %v points; want %d in the data series (the lowest and highest PSN of %d buckets)", n, p.Points, DefaultMaxPoints, DefaultMaxPoints/2)
	}
	if p.Points[5] != n/1000 || p.Total[0] != n {
		t.Errorf("injected series %d points (want %d, under the limit: all drawn); totals %v", p.Points[5], n/1000, p.Total)
	}
	// Zoom to [100000, 101999.5] µs: 2000 packets, under the limit, so every one is drawn.
	eval[bool](t, b, `(() => { const c = echarts.getInstanceByDom(document.getElementById('r0-ts-1'));
		c.dispatchAction({type: 'dataZoom', dataZoomIndex: 0, startValue: 100000, endValue: 101999.5}); return true; })()`)
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.luminaReport.plots['r0-ts-1'].points[0] < 4000`,
		chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("zooming: %v", err)
	}
	zoomed := eval[plotInfo](t, b, `window.luminaReport.plots['r0-ts-1']`)
	if zoomed.Points[0] != 2000 || zoomed.Points[5] != 2 {
		t.Errorf("zoomed to 2000 packets: %v points drawn; want 2000 data points, 2 injected", zoomed.Points)
	}
	// Above the large-mode threshold the points still answer the mouse: packet 100500 at 100500 µs (points
	// are under a pixel apart here, so a neighbour may answer; its PSN must be its own).
	tip := hover(t, b, "r0-ts-1", "data", 500, 0)
	var pkt, psn int
	if i := strings.Index(tip, "packet #"); i >= 0 {
		fmt.Sscanf(tip[i:], "packet #%d", &pkt)
	}
	if i := strings.Index(tip, "PSN "); i >= 0 {
		fmt.Sscanf(tip[i:], "PSN %d", &psn)
	}
	if pkt < 100495 || pkt > 100505 || psn != pkt {
		t.Errorf("tooltip of the zoomed window's 501st packet: %q; want packet #100500 (±5) with its own PSN", tip)
	}
	noErrors(t, b, st)
}

// Beyond 16 connections a time-sequence diagram is drawn when it scrolls near: the page opens with 16, and
// every one is there, with its points, once drawn.
func TestBrowserDefersManyConnections(t *testing.T) {
	const conns = 20
	b := newBrowser(t)
	p := synthetic(100, conns)
	st, _ := b.open(t, p, 60*time.Second)
	noErrors(t, b, st)
	if len(st.Plots) != 16 {
		t.Errorf("%d plots at open, want the first 16 connections'", len(st.Plots))
	}
	if d := eval[int](t, b, `window.luminaReport.deferred`); d != conns-16 {
		t.Errorf("%d diagrams deferred, want %d", d, conns-16)
	}
	// Scrolling to the end draws the last one.
	eval[bool](t, b, `(window.scrollTo(0, document.body.scrollHeight), true)`)
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`!!window.luminaReport.plots['r0-ts-%d'] && window.luminaReport.pending === 0`, conns),
		chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("the last diagram was not drawn on scrolling to it: %v", err)
	}
	if d := eval[int](t, b, `window.luminaReport.renderAll()`); d != 0 {
		t.Errorf("%d diagrams left after renderAll", d)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.luminaReport.pending === 0`, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	st = eval[reportState](t, b, `window.luminaReport`)
	for _, c := range p.Runs[0].Trace.Conns {
		wantPlot(t, st, fmt.Sprintf("r0-ts-%d", c.QP), tsPoints(t, c))
	}
	noErrors(t, b, st)
}

// tsPoints is what a time-sequence diagram of few packets draws per series: the five packet kinds, then one
// series per injected event type present, in event order.
func tsPoints(t *testing.T, c ConnTrace) []int {
	t.Helper()
	ev, err := base64.StdEncoding.DecodeString(c.Packets.Ev)
	if err != nil {
		t.Fatal(err)
	}
	var per [256]int
	for _, e := range ev {
		per[e]++
	}
	out := append([]int(nil), c.Counts[:numKinds]...)
	for e := 1; e < 256; e++ {
		if per[e] > 0 {
			out = append(out, per[e])
		}
	}
	return out
}

// Rare series are never decimated: a drop among 20,000 ECN-marked packets, and 5,000 NAKs, are all drawn in
// the overview, while the data and ECN series are held to MaxPoints.
func TestBrowserRareSeriesNotDecimated(t *testing.T) {
	const n, naks, drop = 20000, 5000, 10001
	tv := &TraceView{Packets: n + naks, Metadata: "mirror", Opcodes: map[int]string{10: "RC RDMA WRITE Middle", 17: "RC Acknowledge"},
		Events: []string{"none", "drop", "ecn"}, CNPCounts: []int{0, 0}}
	var b colBuilder
	counts := make([]int, numKinds+1)
	for i := 0; i < n; i++ {
		ev := uint8(2) // every data packet ECN-marked, but one dropped: its PSN lies between its neighbours'
		if i == drop {
			ev = 1
		}
		b.add(float64(i), int32(i), KindData, ev, 10, uint32(i), i)
		counts[KindData]++
		counts[numKinds]++
		if i%4 == 0 {
			b.add(float64(i)+0.5, int32(i), KindNAK, 0, 17, uint32(i), n+i/4)
			counts[KindNAK]++
		}
	}
	tv.Conns = []ConnTrace{{QP: 1, Verb: "write", Label: "QP 1", Counts: counts, Packets: b.columns()}}
	var empty colBuilder
	tv.CNP = empty.columns()
	p := &Page{Kind: KindResults, Title: "rare", MaxPoints: DefaultMaxPoints, Runs: []*Run{{Source: "rare", Verdict: "pass", Trace: tv}}}
	br := newBrowser(t)
	st, _ := br.open(t, p, 120*time.Second)
	noErrors(t, br, st)
	pl := st.Plots["r0-ts-1"]
	if fmt.Sprint(pl.Names) != "[data retransmitted ACK NAK CNP injected drop injected ecn]" {
		t.Fatalf("series %v; want the five kinds, then one per event type", pl.Names)
	}
	if pl.Points[0] != DefaultMaxPoints || pl.Points[6] != DefaultMaxPoints {
		t.Errorf("data %d, ECN %d points; want both decimated to %d", pl.Points[0], pl.Points[6], DefaultMaxPoints)
	}
	if pl.Points[3] != naks || pl.Points[5] != 1 {
		t.Errorf("NAK %d (want %d), drop %d (want 1) points drawn", pl.Points[3], naks, pl.Points[5])
	}
	row := eval[int](t, br, `(() => { const c = echarts.getInstanceByDom(document.getElementById('r0-ts-1'));
		const s = c.getOption().series.find(x => x.name === 'injected drop'); return s.data.length === 1 ? s.data[0][0] : -1; })()`)
	if row != drop {
		t.Errorf("the drop is drawn at %d µs, want %d", row, drop)
	}
}

// plotInk counts the pixels of a plot's canvas inside its grid (axes and legend excluded) that are near the
// colour of its first series (ECharts' first palette colour, #5470c6): what is actually drawn.
func plotInk(t *testing.T, b *browser, id string) int {
	t.Helper()
	return eval[int](t, b, fmt.Sprintf(`(() => { const d = document.getElementById(%q), cv = d.querySelector('canvas');
		const g = cv.getContext('2d'), k = cv.width / d.clientWidth;
		const x0 = Math.ceil(72 * k), y0 = Math.ceil(42 * k), w = Math.floor(cv.width - x0 - 32 * k), h = Math.floor(cv.height - y0 - 72 * k);
		const px = g.getImageData(x0, y0, w, h).data; let n = 0;
		for (let i = 0; i < px.length; i += 4) { if (Math.abs(px[i] - 0x54) < 40 && Math.abs(px[i + 1] - 0x70) < 40 && Math.abs(px[i + 2] - 0xc6) < 40 && px[i + 3] > 128) { n++; } }
		return n; })()`, id))
}

// A connection of one message still has an MCT CDF that shows: a step from (MCT, 0) to (MCT, 1) and its
// point, drawn in the plot (pixels of the series' colour inside the grid), not just present in the data.
func TestBrowserMCTSingleMessage(t *testing.T) {
	r := &Run{Source: "one", Verdict: "pass", MCT: []MCTCurve{{QP: 1, Points: [][2]float64{{42, 1}}}}}
	p := &Page{Kind: KindResults, Title: "one message", MaxPoints: DefaultMaxPoints, Runs: []*Run{r}}
	b := newBrowser(t)
	st, _ := b.open(t, p, 60*time.Second)
	noErrors(t, b, st)
	wantPlot(t, st, "r0-mct", []int{2})
	if n := plotInk(t, b, "r0-mct"); n < 20 {
		t.Errorf("the one-message MCT curve draws %d pixels in the plot; want a visible step and point", n)
	}
}

// cnpPoints is what the CNP timeline draws per series: CE marks, CNPs, and CNPs of no known connection if any.
func cnpPoints(tv *TraceView) []int {
	if tv.CNPCounts[2] > 0 {
		return tv.CNPCounts
	}
	return tv.CNPCounts[:2]
}

// The first violations of a failed check are on lines of their own in the cell (white-space: pre-line), and the
// counters, carried as strings, are shown exactly.
func TestBrowserViolationLinesAndBigCounters(t *testing.T) {
	p := load(t, "testdata/listing2")
	r := p.Runs[0]
	r.Checks = append(r.Checks, CheckRow{Analyzer: "gbn", QP: 9, Count: 2, Violations: []analyze.Violation{
		{Packet: 11, Message: "first"}, {Packet: 12, Message: "second"}}})
	big := uint64(1)<<60 + 1
	r.Counters[0].Finish = &big
	b := newBrowser(t)
	st, _ := b.open(t, p, 60*time.Second)
	noErrors(t, b, st)
	type cell struct {
		Text, WhiteSpace string
		Lines            int
	}
	c := eval[cell](t, b, `(() => { const td = [...document.querySelectorAll('tr.bad td')].find(d => d.textContent.startsWith('#11'));
		const s = td.firstChild, lh = parseFloat(getComputedStyle(s).lineHeight) || 18;
		return {Text: td.textContent, WhiteSpace: getComputedStyle(s).whiteSpace, Lines: Math.round(s.getBoundingClientRect().height / lh)}; })()`)
	if c.WhiteSpace != "pre-line" || c.Lines != 2 || c.Text != "#11: first\n#12: second" {
		t.Errorf("violations cell %+v; want two lines, pre-line", c)
	}
	if !strings.Contains(eval[string](t, b, `document.body.textContent`), "1152921504606846977") {
		t.Error("a counter of 2^60+1 is not shown exactly")
	}
}
