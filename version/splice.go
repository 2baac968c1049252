package version

import (
	"bytes"
	"encoding"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// longList is the length from which WriteDocument encodes a list field of a document one element at a time
// rather than with the rest of the document (a variable for the tests).
var longList = 1024

// longField is a long list field of a document, by its JSON name, with its value.
type longField struct {
	name string
	list reflect.Value
}

// writeSpliced writes MarshalDocument(v) without holding the encoding of v's long lists: the analysis of 65,536
// connections encodes to 70 MB, and the encoder's buffer, doubling as it grows, was the peak of lumina
// analyze's memory. v's copy with its long lists set to nil (the skeleton) is encoded whole; each list is
// encoded element by element where the skeleton has null. done is false when v is not a struct whose long
// lists can be told apart by name (the caller then encodes v whole); nothing has been written then.
func writeSpliced(w io.Writer, v any) (done bool, err error) {
	skel, long, ok := skeleton(v)
	if !ok || len(long) == 0 {
		return false, nil
	}
	b, err := json.Marshal(skel)
	if err != nil {
		return false, nil // the whole encoding says what is wrong
	}
	type span struct {
		start, end int
		f          longField
	}
	byName := map[string]longField{}
	for _, f := range long {
		byName[f.name] = f
	}
	var spans []span
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false, nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false, nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return false, nil
		}
		key, _ := t.(string)
		if f, ok := byName[key]; ok {
			if string(raw) != "null" {
				return false, nil
			}
			end := int(dec.InputOffset())
			spans = append(spans, span{end - len(raw), end, f})
			delete(byName, key)
		}
	}
	if len(byName) > 0 {
		return false, nil
	}
	ind := indenter{w: w, out: make([]byte, 0, 64<<10)}
	ind.write([]byte(`{"schema_version":` + strconv.Itoa(SchemaVersion) + ","))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // escapes HTML as json.Marshal does
	prev := 1
	for _, s := range spans {
		ind.write(b[prev:s.start])
		ind.write([]byte{'['})
		for i := 0; i < s.f.list.Len(); i++ {
			if i > 0 {
				ind.write([]byte{','})
			}
			buf.Reset()
			// The address: a list's elements are addressable, and json uses a pointer receiver's MarshalJSON
			// on them.
			if err := enc.Encode(s.f.list.Index(i).Addr().Interface()); err != nil {
				return true, err
			}
			ind.write(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
		}
		ind.write([]byte{']'})
		prev = s.end
		if ind.err != nil {
			return true, ind.err
		}
	}
	ind.write(b[prev:])
	ind.out = append(ind.out, '\n')
	ind.flush()
	return true, ind.err
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// marshals says whether t (or *t) encodes itself.
func marshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(marshalerType) || t.Implements(textMarshalerType) || p.Implements(marshalerType) ||
		p.Implements(textMarshalerType)
}

// skeleton returns a copy of the struct v (or *v) whose long list fields, its own and those its embedded structs
// promote, are nil, and those lists. ok is false when v is not such a struct, or a long list's JSON name is
// not unique among the fields (encoding/json's rules for clashing names then decide which one is encoded).
func skeleton(v any) (skel any, long []longField, ok bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, nil, false
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || marshals(rv.Type()) {
		return nil, nil, false
	}
	cp := reflect.New(rv.Type())
	cp.Elem().Set(rv)
	names := map[string]int{}
	if !strip(cp.Elem(), names, &long, 0) {
		return nil, nil, false
	}
	for _, f := range long {
		if names[f.name] != 1 {
			return nil, nil, false
		}
	}
	if reflect.ValueOf(v).Kind() != reflect.Pointer {
		// Encoded by value, as json.Marshal(v) would: through the pointer, a field whose MarshalJSON has a
		// pointer receiver would be addressable and marshal itself, where json.Marshal(v) does not call it.
		return cp.Elem().Interface(), long, true
	}
	return cp.Interface(), long, true
}

// strip sets the long lists of the addressable struct s to nil (copying the structs its embedded pointers
// point to first), adding them to long and every field's JSON name to names.
func strip(s reflect.Value, names map[string]int, long *[]longField, depth int) bool {
	if depth > 8 {
		return false
	}
	t := s.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := s.Field(i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				if !f.IsExported() || marshals(ft.Elem()) {
					return false
				}
				if fv.IsNil() {
					continue // encoding/json skips it
				}
				c := reflect.New(ft.Elem())
				c.Elem().Set(fv.Elem())
				if !strip(c.Elem(), names, long, depth+1) {
					return false
				}
				fv.Set(c)
				continue
			}
			if ft.Kind() == reflect.Struct {
				if marshals(ft) || !strip(fv, names, long, depth+1) {
					return false
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name]++
		if fv.Kind() == reflect.Slice && fv.Len() >= longList && opts == "" && fv.Type().Elem().Kind() != reflect.Uint8 &&
			!marshals(f.Type) {
			*long = append(*long, longField{name: name, list: reflect.ValueOf(fv.Interface())})
			fv.Set(reflect.Zero(f.Type))
		}
	}
	return true
}
