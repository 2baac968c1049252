// Package htmlreport writes `lumina report`: one self-contained HTML file that opens offline, with interactive
// plots (Apache ECharts, embedded) of a results directory, a plain capture, a search directory, or two runs
// side by side. The data goes into the page as JSON; a small script of ours renders it. The same input gives
// the same bytes.
package htmlreport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
)

//go:embed assets/echarts.min.js
var echartsJS string

//go:embed assets/report.js
var reportJS string

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

// Write writes the page as one HTML document.
func Write(w io.Writer, p *Page) error {
	data, err := DataJSON(p)
	if err != nil {
		return err
	}
	if bytes.Contains(data, []byte("</")) { // SetEscapeHTML makes this impossible; a page must never break out
		return fmt.Errorf("the report's data contains </")
	}
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<meta name=\"generator\" content=\"lumina report\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", html.EscapeString(p.Title), reportCSS)
	b.WriteString("<div id=\"app\"><noscript>This report needs JavaScript to draw its tables and plots.</noscript></div>\n")
	b.WriteString("<script type=\"application/json\" id=\"lumina-data\">")
	b.Write(data)
	b.WriteString("</script>\n<script>\n")
	b.WriteString(echartsJS)
	b.WriteString("\n</script>\n<script>\n")
	b.WriteString(reportJS)
	b.WriteString("</script>\n</body>\n</html>\n")
	_, err = w.Write(b.Bytes())
	return err
}

// WriteFile writes the page to path whole: into a temporary file beside it, then renamed, so that a failed
// write leaves no partial report.
func WriteFile(path string, p *Page) error {
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b.Bytes()); err != nil {
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
