package version

import (
	"bytes"
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
