package version

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

type spElem struct {
	Name string  `json:"name"`
	V    float64 `json:"v"`
	P    *int    `json:"p,omitempty"`
	Any  any     `json:"any"`
}

// spPtrM encodes itself with a pointer receiver: json uses it on a list's (addressable) elements.
type spPtrM struct{ n int }

func (p *spPtrM) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf(`{"n<>":%d}`, p.n)), nil }

type spInner struct {
	Flows []spElem `json:"flows"`
	Count int      `json:"count"`
}

type spValue struct {
	Vals []int `json:"vals"`
}

type spDoc struct {
	*SpInner
	spValue
	Checks  []spElem  `json:"checks"`
	Ptrs    []spPtrM  `json:"ptrs"`
	Maybe   []int     `json:"maybe,omitempty"`
	Raw     []byte    `json:"raw"`
	Nested  spInner   `json:"nested"`
	Plain   []string  // no tag
	hidden  []int     // not encoded
	Skipped []int     `json:"-"`
	Nil     []spElem  `json:"nil"`
	PtrList []*spElem `json:"ptr_list"`
	// M marshals itself only when addressable: a document passed by value must not get it called.
	M spPtrM `json:"m"`
}

type SpInner = spInner

// spClash has a promoted list whose name an outer field takes: encoding/json encodes the outer one.
type spClash struct {
	*SpInner
	Flows string `json:"flows"`
}

func spElems(r *rand.Rand, n int) []spElem {
	l := make([]spElem, n)
	for i := range l {
		l[i] = spElem{Name: randomString(r), V: r.NormFloat64(), Any: randomValue(r, 2)}
		if i%3 == 0 {
			k := i
			l[i].P = &k
		}
	}
	return l
}

// WriteDocument encodes long lists one element at a time (the skeleton holds the rest); the document is
// MarshalDocument's byte for byte: promoted lists of embedded pointers and values, self-encoding elements
// (pointer receiver), HTML characters, omitempty, []byte, untagged and skipped fields, nil lists, lists in
// nested objects, and a clashing name (not spliced).
func TestWriteDocumentSplicesLongLists(t *testing.T) {
	old := longList
	longList = 4
	t.Cleanup(func() { longList = old })
	r := rand.New(rand.NewPCG(3, 4))
	var docs []any
	for i := 0; i < 300; i++ {
		n := r.IntN(9)
		d := &spDoc{spValue: spValue{Vals: r.Perm(n)}, Checks: spElems(r, n), Maybe: r.Perm(n),
			Raw: []byte("<x>&" + randomString(r)), Nested: spInner{Flows: spElems(r, n)}, Plain: []string{randomString(r)},
			hidden: []int{1}, Skipped: r.Perm(n), M: spPtrM{i}}
		for j := 0; j < n; j++ {
			d.Ptrs = append(d.Ptrs, spPtrM{j})
			e := spElem{Name: "<&>"}
			d.PtrList = append(d.PtrList, &e, nil)
		}
		if i%2 == 0 {
			d.SpInner = &spInner{Flows: spElems(r, r.IntN(9)), Count: i}
		}
		docs = append(docs, d, *d)
	}
	spliced := 0
	for i := 0; i < 50; i++ {
		docs = append(docs, &spClash{SpInner: &spInner{Flows: spElems(r, 8)}, Flows: randomString(r)})
	}
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
		_, long, ok := skeleton(d)
		if _, clash := d.(*spClash); clash && ok {
			t.Fatalf("document %d: a clashing name was spliced", i)
		}
		if ok && len(long) > 0 {
			spliced++
		}
	}
	if spliced < 200 {
		t.Fatalf("%d of %d documents spliced: the test does not exercise the splicing", spliced, len(docs))
	}
}
