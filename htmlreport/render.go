// Package htmlreport writes `lumina report`: one self-contained HTML file that opens offline, with interactive
// plots (Apache ECharts, embedded) of a results directory, a plain capture, a search directory, or two runs
// side by side. The data goes into the page as JSON; a small script of ours renders it. The same input gives
// the same bytes.
package htmlreport

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

//go:embed assets/echarts.min.js
var echartsJS string

//go:embed assets/report.js
var reportJS string

// The licence and notice of the embedded ECharts (and of the d3 code inside it), carried in every page.
var (
	//go:embed assets/NOTICE
	echartsNOTICE string
	//go:embed assets/LICENSE-d3
	echartsLicenseD3 string
	//go:embed assets/LICENSE
	echartsLICENSE string
)

//go:embed assets/report.css
var reportCSS string

// DataJSON is the page's data as embedded (compact JSON with <, > and & escaped, so that "</script>" cannot
// occur in it).
func DataJSON(p *Page) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encoding the report's data: %w", err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Write writes the page as one HTML document. The packet columns (most of a large page) go straight from
// the page's strings into w: the page's JSON is encoded with a short marker in place of each column and the
// columns are written where their markers are, so that the page is never in memory a second time.
func Write(w io.Writer, p *Page) error {
	data, cols, err := dataWithMarkers(p)
	if err != nil {
		return err
	}
	if bytes.Contains(data, []byte("</")) { // SetEscapeHTML makes this impossible; a page must never break out
		return fmt.Errorf("the report's data contains </")
	}
	bw, ok := w.(*bufio.Writer)
	if !ok {
		bw = bufio.NewWriterSize(w, 1<<16)
	}
	bw.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	bw.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	bw.WriteString("<meta name=\"generator\" content=\"lumina report\">\n")
	fmt.Fprintf(bw, "<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", html.EscapeString(p.Title), reportCSS)
	bw.WriteString("<div id=\"app\"><noscript>This report needs JavaScript to draw its tables and plots.</noscript></div>\n")
	bw.WriteString("<script type=\"application/json\" id=\"lumina-data\">")
	// data holds each column's marker once, in order: write what lies between them, and the columns.
	for _, c := range cols {
		i := bytes.Index(data, c.marker)
		bw.Write(data[:i])
		bw.WriteByte('"')
		bw.WriteString(*c.s) // base64: nothing to escape
		bw.WriteByte('"')
		data = data[i+len(c.marker):]
	}
	bw.Write(data)
	bw.WriteString("</script>\n")
	writeLicenceComment(bw)
	bw.WriteString("<script>\n")
	bw.WriteString(echartsJS)
	bw.WriteString("\n</script>\n<script>\n")
	bw.WriteString(reportJS)
	bw.WriteString("</script>\n</body>\n</html>\n")
	return bw.Flush()
}

// markedColumn is one column string of the page and the marker that stands for it in the encoded data.
type markedColumn struct {
	s      *string
	marker []byte
}

// dataWithMarkers encodes the page's data with each packet column replaced by a marker (the JSON string
// "\u0000N\u0000", which no column can hold), and lists the columns in the order their markers occur. If any marker is
// not found exactly once (a string of the page that happens to read like one), it gives the data whole.
func dataWithMarkers(p *Page) ([]byte, []markedColumn, error) {
	var cols []markedColumn
	var saved []string
	add := func(c *Columns) {
		for _, f := range []*string{&c.T, &c.Y, &c.Kind, &c.Ev, &c.Op, &c.PSN, &c.Pkt} {
			saved = append(saved, *f)
			cols = append(cols, markedColumn{s: f})
		}
	}
	for _, r := range p.Runs {
		if r == nil || r.Trace == nil {
			continue
		}
		for i := range r.Trace.Conns {
			add(&r.Trace.Conns[i].Packets)
		}
		add(&r.Trace.CNP)
	}
	for i := range cols {
		m := "\x00" + strconv.Itoa(i) + "\x00"
		*cols[i].s = m
		cols[i].marker = []byte(`"\u0000` + strconv.Itoa(i) + `\u0000"`)
	}
	restore := func() {
		for i, c := range cols {
			*c.s = saved[i]
		}
		for i := range cols {
			cols[i].s = &saved[i]
		}
	}
	data, err := DataJSON(p)
	restore()
	if err != nil {
		return nil, nil, err
	}
	at := make([]int, len(cols))
	for i := range cols {
		if bytes.Count(data, cols[i].marker) != 1 {
			data, err = DataJSON(p)
			return data, nil, err
		}
		at[i] = bytes.Index(data, cols[i].marker)
	}
	sort.Sort(byPos{cols, at})
	return data, cols, nil
}

// WriteFile writes the page to path whole: into a temporary file beside it, then renamed, so that a failed
// write leaves no partial report.
func WriteFile(path string, p *Page) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := Write(bufio.NewWriterSize(tmp, 1<<16), p); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

type byPos struct {
	c  []markedColumn
	at []int
}

func (b byPos) Len() int           { return len(b.c) }
func (b byPos) Less(i, j int) bool { return b.at[i] < b.at[j] }
func (b byPos) Swap(i, j int) {
	b.c[i], b.c[j] = b.c[j], b.c[i]
	b.at[i], b.at[j] = b.at[j], b.at[i]
}

// writeLicenceComment writes the NOTICE and licences of the embedded Apache ECharts (6.1.0) as an HTML
// comment before it, so that a page handed on carries them.
func writeLicenceComment(w *bufio.Writer) {
	w.WriteString("<!--\nThe script below is Apache ECharts 6.1.0 (https://echarts.apache.org/), under the Apache License 2.0.\n\n")
	w.WriteString("NOTICE:\n" + echartsNOTICE + "\n\nThe d3 code inside it, under this licence:\n" + echartsLicenseD3 + "\n\n")
	w.WriteString(echartsLICENSE + "\n-->\n")
}
