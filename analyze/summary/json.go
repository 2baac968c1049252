package summary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// IntCount is one value and how often it occurred.
type IntCount struct {
	Key   int
	Count int64
}

// IntCounts is a distribution over small integers (DSCP values, VLAN ids). It marshals as a JSON object from
// value (as a string, JSON keys being strings) to count, with keys in numeric order so output reads naturally.
type IntCounts []IntCount

// Get returns the count of key (0 if absent).
func (c IntCounts) Get(key int) int64 {
	for _, e := range c {
		if e.Key == key {
			return e.Count
		}
	}
	return 0
}

// MarshalJSON writes {"0": 12, "26": 3}.
func (c IntCounts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, e := range c {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(e.Key), 10)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, e.Count, 10)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *IntCounts) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decoding counts: %w", err)
	}
	*c = (*c)[:0]
	for k, v := range m {
		n, err := strconv.Atoi(k)
		if err != nil {
			return fmt.Errorf("decoding counts: key %q is not an integer", k)
		}
		*c = append(*c, IntCount{Key: n, Count: v})
	}
	slices.SortFunc(*c, func(a, b IntCount) int { return a.Key - b.Key })
	return nil
}

// WriteJSON writes the report as indented JSON followed by a newline. Map keys are sorted, so the output is
// byte-identical for the same input.
func (r *Report) WriteJSON(w io.Writer) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}
