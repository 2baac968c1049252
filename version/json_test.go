package version

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomValue builds a JSON-able value: nested objects and lists (empty ones too), strings with quotes,
// backslashes, braces, commas, colons, control and non-ASCII characters, numbers, booleans and nulls.
func randomValue(r *rand.Rand, depth int) any {
	k := r.IntN(8)
	if depth > 4 {
		k = 4 + r.IntN(4)
	}
	switch k {
	case 0, 1:
		m := map[string]any{}
		for i := r.IntN(5); i > 0; i-- {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	case 2, 3:
		l := []any{}
		for i := r.IntN(5); i > 0; i-- {
			l = append(l, randomValue(r, depth+1))
		}
		return l
	case 4:
		return randomString(r)
	case 5:
		return r.NormFloat64() * 1e6
	case 6:
		return r.IntN(2) == 0
	}
	return nil
}

func randomString(r *rand.Rand) string {
	const chars = `ab"\{}[],: <>&` + "\n\t\x01é€"
	var b strings.Builder
	rs := []rune(chars)
	for i := r.IntN(12); i > 0; i-- {
		b.WriteRune(rs[r.IntN(len(rs))])
	}
	return b.String()
}

// TestWriteDocumentSameAsMarshal: WriteDocument writes what MarshalDocument returns, byte for byte, on random
// documents and on one large enough to be written in many pieces.
func TestWriteDocumentSameAsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	docs := []any{map[string]any{}, struct{}{}, map[string]any{"a": []any{}, "b": map[string]any{}, "c": `x"}{,:`}}
	for i := 0; i < 2000; i++ {
		docs = append(docs, map[string]any{"doc": randomValue(r, 0), "n": i})
	}
	big := map[string]any{}
	for i := 0; i < 5000; i++ {
		big[randomString(r)+string(rune('a'+i%26))+strings.Repeat("k", i%7)] = randomValue(r, 1)
	}
	docs = append(docs, big)
	for i, d := range docs {
		want, err := MarshalDocument(d)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteDocument(&got, d); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("document %d: WriteDocument differs from MarshalDocument:\n%s\nwant:\n%s", i, got.Bytes(), want)
		}
	}
	if len(docs[len(docs)-1].(map[string]any)) < 1000 {
		t.Fatal("the large document is not large")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteDocumentErrors: a writer's error and a document that is not an object are returned.
func TestWriteDocumentErrors(t *testing.T) {
	if err := WriteDocument(failWriter{}, map[string]int{"a": 1}); err == nil || err.Error() != "disk full" {
		t.Errorf("failing writer: %v", err)
	}
	if err := WriteDocument(&bytes.Buffer{}, []int{1}); err == nil || !strings.Contains(err.Error(), "must be an object") {
		t.Errorf("a list: %v", err)
	}
}

// TestIndenterPieces: the indenter gives json.Indent's output whatever pieces the compact encoding comes in
// (a piece may end inside a string, right after a backslash, or inside a number or a literal), and long
// strings and numbers pass through its bounded buffer.
func TestIndenterPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	long := map[string]any{"s": strings.Repeat(`a\"b`, 50000), "n": []float64{1e300, -1.5e-300, 123456789012345}}
	for i := 0; i < 300; i++ {
		var v any = map[string]any{"doc": randomValue(r, 0), "t": true, "f": false, "z": nil, "n": -12.5e-7}
		if i == 0 {
			v = long
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, b, "", "  "); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		ind := indenter{w: &got}
		for rest := b; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(40))
			ind.write(rest[:n])
			rest = rest[n:]
		}
		ind.flush()
		if ind.err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("document %d (%v): in pieces\n%.2000s\nwant\n%.2000s", i, ind.err, got.Bytes(), want.Bytes())
		}
	}
}
