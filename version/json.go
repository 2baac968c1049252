package version

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// MarshalDocument encodes v, which must encode as a JSON object, indented by two spaces with "schema_version"
// as its first key and a final newline: the form of every JSON document lumina writes.
func MarshalDocument(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("a JSON document must be an object, not %.20s", b)
	}
	head := `{"schema_version":` + strconv.Itoa(SchemaVersion)
	var doc []byte
	if bytes.Equal(b, []byte("{}")) {
		doc = append([]byte(head), '}')
	} else {
		doc = append(append([]byte(head), ','), b[1:]...)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// MarshalList is MarshalDocument of {"schema_version": N, key: list}: the form of the documents that hold one
// list (traffic.json, connections.json, anomalies.json).
func MarshalList(key string, list any) ([]byte, error) {
	l, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(l, []byte("null")) {
		l = []byte("[]")
	}
	return MarshalDocument(map[string]json.RawMessage{key: l})
}

// CheckSchema reads the schema_version of a document and refuses one written by a newer lumina, whose fields
// this build may misread. A document without the field (or a bare list) is version 0, which readers accept.
func CheckSchema(data []byte) (int, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return 0, nil
	}
	var head struct {
		V *int `json:"schema_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return 0, err
	}
	if head.V == nil {
		return 0, nil
	}
	if *head.V > SchemaVersion || *head.V < 0 {
		return *head.V, fmt.Errorf("schema_version %d: written by a newer lumina (this one reads up to %d); use that version", *head.V, SchemaVersion)
	}
	return *head.V, nil
}

// UnmarshalList decodes a document MarshalList wrote under key, or a bare list (schema version 0), into list.
func UnmarshalList(data []byte, key string, list any) error {
	if _, err := CheckSchema(data); err != nil {
		return err
	}
	t := bytes.TrimSpace(data)
	if len(t) > 0 && t[0] == '[' {
		return json.Unmarshal(t, list)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(t, &doc); err != nil {
		return err
	}
	raw, ok := doc[key]
	if !ok {
		return fmt.Errorf("no %q list in the document", key)
	}
	return json.Unmarshal(raw, list)
}

// WriteDocument writes MarshalDocument(v) to w byte for byte, indenting as it writes: it holds the compact
// encoding only, not the indented copy and the buffers in between (a few hundred megabytes for the analysis
// of tens of thousands of connections). The compact encoding is json.Encoder's own buffer, handed to
// docWriter in one Write: json.Marshal would copy it once more (tens of megabytes at the peak of memory).
// A long list (see longList) is encoded one element at a time, so an element that cannot be encoded (a NaN, a
// failing MarshalJSON) is found after part of the document was written: the output then stops short, never
// closed, and the error is returned; the caller must not take w's contents as a document.
func WriteDocument(w io.Writer, v any) error {
	if done, err := writeSpliced(w, v); done {
		return err
	}
	dw := &docWriter{ind: indenter{w: w, out: make([]byte, 0, 64<<10)}}
	return json.NewEncoder(dw).Encode(v) // escapes HTML as json.Marshal does
}

// docWriter indents the one compact document json.Encoder writes, with schema_version first.
type docWriter struct{ ind indenter }

func (d *docWriter) Write(src []byte) (int, error) {
	b := bytes.TrimSpace(src)
	if len(b) < 2 || b[0] != '{' {
		return 0, fmt.Errorf("a JSON document must be an object, not %.20s", b)
	}
	ind := &d.ind
	ind.write([]byte(`{"schema_version":` + strconv.Itoa(SchemaVersion)))
	if !bytes.Equal(b, []byte("{}")) {
		ind.write([]byte{','})
	}
	ind.write(b[1:])
	ind.out = append(ind.out, '\n')
	ind.flush()
	if ind.err != nil {
		return 0, ind.err
	}
	return len(src), nil
}

// indenter is json.Indent(dst, src, "", "  ") for the compact output of json.Marshal (no space outside
// strings), fed in pieces and writing as it goes.
type indenter struct {
	w                io.Writer
	out              []byte
	err              error
	depth            int
	inString, escape bool
	needIndent       bool // after { or [: the newline waits, so that empty ones stay {} and []
}

func (d *indenter) write(src []byte) {
	for len(src) > 0 {
		if len(d.out) >= indentFlush {
			d.flush()
		}
		room := indentFlush + 1 - len(d.out) // bytes of src taken in one go: d.out stays bounded
		if d.inString {
			// The string's bytes up to and with its closing quote, copied at once.
			i, end := 0, min(len(src), room)
			for i < end {
				c := src[i]
				i++
				if d.escape {
					d.escape = false
				} else if c == '\\' {
					d.escape = true
				} else if c == '"' {
					d.inString = false
					break
				}
			}
			d.out = append(d.out, src[:i]...)
			src = src[i:]
			continue
		}
		c := src[0]
		if d.needIndent && c != '}' && c != ']' {
			d.needIndent = false
			d.depth++
			d.newline()
		}
		switch c {
		case '"':
			d.inString = true
			d.out = append(d.out, c)
		case '{', '[':
			d.needIndent = true
			d.out = append(d.out, c)
		case ',':
			d.out = append(d.out, c)
			d.newline()
		case ':':
			d.out = append(d.out, c, ' ')
		case '}', ']':
			if d.needIndent {
				d.needIndent = false
			} else {
				d.depth--
				d.newline()
			}
			d.out = append(d.out, c)
		default:
			// A number or a literal (true, false, null): up to the next structural byte, copied at once.
			i, end := 1, min(len(src), room)
			for i < end && !jsonStructural[src[i]] {
				i++
			}
			d.out = append(d.out, src[:i]...)
			src = src[i:]
			continue
		}
		src = src[1:]
	}
}

// indentFlush is the size at which the indenter writes out what it holds.
const indentFlush = 60 << 10

// jsonStructural is the bytes that end a number or a literal in compact JSON.
var jsonStructural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true, ',': true, ':': true}

func (d *indenter) newline() {
	d.out = append(d.out, '\n')
	for i := 0; i < d.depth; i++ {
		d.out = append(d.out, ' ', ' ')
	}
}

func (d *indenter) flush() {
	if d.err == nil && len(d.out) > 0 {
		_, d.err = d.w.Write(d.out)
	}
	d.out = d.out[:0]
}
