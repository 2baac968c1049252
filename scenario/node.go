package scenario

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// decoder walks the YAML AST against the schema, collecting every error instead of stopping at the first.
type decoder struct {
	file      string
	errs      Errors
	anchors   map[string]ast.Node
	ignoredAt []ignoredKey
	// failed holds the paths of the values that were rejected: what depends on them is not checked against
	// the defaults they left in place (one bad value, one error).
	failed map[string]bool
	// remote collects the remote testbed's hosts; remoteFields the keys read into it (ignored for other
	// testbeds).
	remote       Remote
	remoteFields []field
	remoteErrs   Errors
}

// val is a resolved value node with the dotted key path that reached it and its position.
type val struct {
	n    ast.Node
	path string
	line int
	col  int
}

// field is one key of a mapping.
type field struct {
	key   string
	kline int
	kcol  int
	v     val
}

func (d *decoder) errAt(line, col int, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Col: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) errv(v val, format string, args ...any) {
	if d.failed == nil {
		d.failed = map[string]bool{}
	}
	d.failed[v.path] = true
	d.errAt(v.line, v.col, v.path, format, args...)
}

// anyFailed reports whether one of the paths was rejected.
func (d *decoder) anyFailed(paths ...string) bool {
	for _, p := range paths {
		if d.failed[p] {
			return true
		}
	}
	return false
}

func (d *decoder) ignore(f field) {
	d.ignoredAt = append(d.ignoredAt, ignoredKey{f.kline, f.kcol, fmt.Sprintf("%s:%d:%d: %s", d.file, f.kline, f.kcol, f.v.path)})
}

func (d *decoder) unknown(f field, known []string) {
	d.errAt(f.kline, f.kcol, f.v.path, "unknown key; expected one of %s", strings.Join(known, ", "))
}

// syntaxError converts the parser's error into a positioned Error.
func (d *decoder) syntaxError(err error) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		line, col := 0, 0
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			line, col = tk.Position.Line, tk.Position.Column
		}
		d.errAt(line, col, "", "invalid YAML: %s", ye.GetMessage())
		return
	}
	d.errAt(0, 0, "", "invalid YAML: %v", err)
}

// nodePos is where a node starts: for a mapping, its first key (the mapping's own token is a colon).
func nodePos(n ast.Node) (int, int) {
	for i := 0; i < 4 && n != nil; i++ {
		switch m := n.(type) {
		case *ast.MappingNode:
			if len(m.Values) > 0 && m.Values[0].Key != nil && !m.IsFlowStyle {
				n = m.Values[0].Key
				continue
			}
		case *ast.MappingValueNode:
			if m.Key != nil {
				n = m.Key
				continue
			}
		}
		break
	}
	if n == nil {
		return 0, 0
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, 0
	}
	return tk.Position.Line, tk.Position.Column
}

// collectAnchors records every anchor so aliases can be resolved wherever they appear.
func (d *decoder) collectAnchors(n ast.Node, depth int) {
	if n == nil || depth > 10000 {
		return
	}
	switch v := n.(type) {
	case *ast.DocumentNode:
		d.collectAnchors(v.Body, depth+1)
	case *ast.AnchorNode:
		if v.Name != nil {
			d.anchors[v.Name.GetToken().Value] = v.Value
		}
		d.collectAnchors(v.Value, depth+1)
	case *ast.TagNode:
		d.collectAnchors(v.Value, depth+1)
	case *ast.MappingNode:
		for _, mv := range v.Values {
			d.collectAnchors(mv, depth+1)
		}
	case *ast.MappingValueNode:
		d.collectAnchors(v.Value, depth+1)
	case *ast.SequenceNode:
		for _, x := range v.Values {
			d.collectAnchors(x, depth+1)
		}
	}
}

// resolve unwraps anchors, tags and aliases; ok is false for an alias that names no anchor or a chain of
// aliases that loops.
func (d *decoder) resolve(n ast.Node) (ast.Node, bool) {
	for range 16 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			if v.Value == nil {
				return nil, false
			}
			t, ok := d.anchors[v.Value.GetToken().Value]
			if !ok {
				return nil, false
			}
			n = t
		default:
			return n, true
		}
	}
	return nil, false
}

func (d *decoder) mkval(n ast.Node, path string, line, col int) val {
	r, ok := d.resolve(n)
	if l, c := nodePos(n); l > 0 {
		line, col = l, c
	}
	if !ok {
		d.errAt(line, col, path, "%s is an alias with no anchor to resolve; expected an alias to an anchor defined with &NAME", printable(n.GetToken().Value+aliasName(n)))
	}
	return val{n: r, path: path, line: line, col: col}
}

// printable is s as written when it has no control characters, else quoted: a name from a quoted YAML
// scalar may hold a newline, which must not start a line of the error message.
func printable(s string) string {
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}

func aliasName(n ast.Node) string {
	if a, ok := n.(*ast.AliasNode); ok && a.Value != nil {
		return a.Value.GetToken().Value
	}
	return ""
}

// show describes a value as the user wrote it, for "X is not Y" messages.
func show(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "an empty value"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return strconv.Quote(v.Value)
	case *ast.LiteralNode:
		if v.Value != nil {
			return strconv.Quote(v.Value.Value)
		}
		return "a literal block"
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return "a value"
}

// fields lists a mapping's keys; an empty value counts as an empty mapping.
func (d *decoder) fields(v val) ([]field, bool) {
	var values []*ast.MappingValueNode
	switch m := v.n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	case nil, *ast.NullNode:
		return nil, true
	default:
		d.errv(v, "%s is not a mapping; expected a mapping of keys", show(v.n))
		return nil, false
	}
	out := make([]field, 0, len(values))
	for _, mv := range values {
		if mv == nil || mv.Key == nil {
			continue
		}
		kl, kc := nodePos(mv.Key)
		rk, _ := d.resolve(mv.Key)
		key, ok := scalarText(rk)
		if !ok || mv.Key.IsMergeKey() {
			d.errAt(kl, kc, v.path, "%s is not a plain key; expected a scalar key (merge keys are not supported)", show(mv.Key))
			continue
		}
		p := printable(key) // the path shows in error lines: a key holding a newline must not break one
		if v.path != "" {
			p = v.path + "." + p
		}
		out = append(out, field{key: key, kline: kl, kcol: kc, v: d.mkval(mv.Value, p, kl, kc)})
	}
	return out, true
}

// scalarText is a scalar's text (strings unquoted), used for keys and for numbers inside strings.
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		if tk := n.GetToken(); tk != nil {
			return tk.Value, true
		}
	}
	return "", false
}

// items lists a sequence's entries; an empty value counts as an empty list.
func (d *decoder) items(v val) ([]val, bool) {
	switch s := v.n.(type) {
	case *ast.SequenceNode:
		out := make([]val, 0, len(s.Values))
		for i, x := range s.Values {
			out = append(out, d.mkval(x, fmt.Sprintf("%s[%d]", v.path, i), v.line, v.col))
		}
		return out, true
	case nil, *ast.NullNode:
		return nil, true
	}
	d.errv(v, "%s is not a list; expected a list", show(v.n))
	return nil, false
}

// intOf returns an integer node's value; ok is false for anything else (floats included).
func intOf(n ast.Node) (int64, bool) {
	in, ok := n.(*ast.IntegerNode)
	if !ok {
		return 0, false
	}
	switch x := in.Value.(type) {
	case int64:
		return x, true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// intIn reads an integer in lo..hi.
func (d *decoder) intIn(v val, lo, hi int64) (int, bool) {
	x, ok := intOf(v.n)
	if !ok {
		d.errv(v, "%s is not an integer; expected an integer in %d..%d", show(v.n), lo, hi)
		return 0, false
	}
	if x < lo || x > hi {
		d.errv(v, "%d is out of range; expected an integer in %d..%d", x, lo, hi)
		return 0, false
	}
	return int(x), true
}

// numberOf reads an integer or decimal node; plain (unquoted) scalars such as 1e6, which YAML 1.2 reads as
// numbers but the parser leaves as strings, count too.
func numberOf(n ast.Node) (float64, bool) {
	switch v := n.(type) {
	case *ast.FloatNode:
		return v.Value, !math.IsNaN(v.Value)
	case *ast.IntegerNode:
		i, ok := intOf(v)
		return float64(i), ok
	case *ast.StringNode:
		if v.Token == nil || v.Token.Type != token.StringType {
			return 0, false
		}
		x, err := strconv.ParseFloat(v.Value, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, false
		}
		return x, true
	}
	return 0, false
}

// floatIn reads a number in lo..hi.
func (d *decoder) floatIn(v val, lo, hi float64) (float64, bool) {
	x, ok := numberOf(v.n)
	if !ok {
		d.errv(v, "%s is not a number; expected a number in %g..%g", show(v.n), lo, hi)
		return 0, false
	}
	if x < lo || x > hi {
		d.errv(v, "%s is out of range; expected a number in %g..%g", show(v.n), lo, hi)
		return 0, false
	}
	return x, true
}

// number reads any finite number.
func (d *decoder) number(v val) (float64, bool) {
	x, ok := numberOf(v.n)
	if !ok {
		d.errv(v, "%s is not a number; expected a number", show(v.n))
	}
	return x, ok
}

func (d *decoder) boolean(v val) (bool, bool) {
	b, ok := v.n.(*ast.BoolNode)
	if !ok {
		d.errv(v, "%s is not a boolean; expected true or false", show(v.n))
		return false, false
	}
	return b.Value, true
}

func (d *decoder) str(v val, expected string) (string, bool) {
	switch s := v.n.(type) {
	case *ast.StringNode:
		return s.Value, true
	case *ast.LiteralNode:
		if s.Value != nil {
			return s.Value.Value, true
		}
	}
	d.errv(v, "%s is not a string; expected %s", show(v.n), expected)
	return "", false
}

// stringCol is the column of byte offset off inside a string value, counting an opening quote.
func stringCol(v val, off int) int {
	if s, ok := v.n.(*ast.StringNode); ok && s.Token != nil {
		switch s.Token.Type {
		case token.DoubleQuoteType, token.SingleQuoteType:
			return v.col + 1 + off
		}
	}
	return v.col + off
}

// oneOf reads a string that must be one of choices (compared case-insensitively, returned lowercase).
func (d *decoder) oneOf(v val, choices ...string) (string, bool) {
	expected := "one of " + strings.Join(choices, ", ")
	s, ok := d.str(v, expected)
	if !ok {
		return "", false
	}
	ls := strings.ToLower(s)
	for _, c := range choices {
		if ls == c {
			return c, true
		}
	}
	d.errv(v, "%q is not valid; expected %s", s, expected)
	return "", false
}
