package version

import (
	"bytes"
	"encoding/json"
	"fmt"
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
