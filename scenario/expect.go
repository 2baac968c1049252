package scenario

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Expectation kinds.
const (
	ExpectIntegrity = "integrity"
	ExpectCheck     = "check"
	ExpectPath      = "path"
)

// Operators of a path expectation.
const (
	OpEquals    = "equals"
	OpNotEquals = "not-equals"
	OpMin       = "min"
	OpMax       = "max"
	OpBetween   = "between"
	OpCount     = "count"
	OpApprox    = "approx"
)

var (
	expectOps     = []string{OpEquals, OpNotEquals, OpMin, OpMax, OpBetween, OpCount, OpApprox}
	checkNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	selectorKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	// plainRE and yamlWords tell which strings read back as the same string without quotes.
	plainRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
	yamlWords = []string{"true", "false", "null", "yes", "no", "on", "off", "y", "n"}
)

// Expectation is one entry of `expect:`. Exactly one of the three kinds:
//   - integrity: Integrity is "ok" or "invalid" (the trace's integrity verdict);
//   - check: every entry of analysis.json's checks list with analyzer == Check (and qp == *QP when set)
//     has ok == true, and at least one such entry exists;
//   - path: every value Path selects in analysis.json satisfies Op, and at least one is selected
//     (except count, which counts them).
type Expectation struct {
	Kind      string `json:"kind" yaml:"-"`
	Integrity string `json:"integrity,omitempty" yaml:"integrity,omitempty"`
	Check     string `json:"check,omitempty" yaml:"check,omitempty"`
	QP        *int   `json:"qp,omitempty" yaml:"qp,omitempty"`
	Path      string `json:"path,omitempty" yaml:"path,omitempty"`
	Op        string `json:"op,omitempty" yaml:"-"`
	// Want is the equals / not-equals operand: float64, string, bool or nil (as in decoded JSON).
	Want any `json:"want,omitempty" yaml:"-"`
	// Lo and Hi bound min (Lo), max (Hi) and between (both), inclusive.
	Lo float64 `json:"lo,omitempty" yaml:"-"`
	Hi float64 `json:"hi,omitempty" yaml:"-"`
	// Count is the exact number of selected values for count.
	Count int `json:"count,omitempty" yaml:"-"`
	// Approx and Tolerance: |got - Approx| <= Tolerance, or, when Relative (written "5%"), Tolerance is a
	// percentage: |got - Approx| <= Tolerance/100 * |Approx|.
	Approx    float64 `json:"approx,omitempty" yaml:"-"`
	Tolerance float64 `json:"tolerance,omitempty" yaml:"-"`
	Relative  bool    `json:"relative,omitempty" yaml:"-"`
	// Text is the entry in canonical one-line form, as reported in ExpectResult.Expect.
	Text string `json:"text" yaml:"-"`
	Line int    `json:"-" yaml:"-"`
	Col  int    `json:"-" yaml:"-"`

	sel []segment
}

// ExpectResult is the outcome of one expectation against one analysis.
type ExpectResult struct {
	Expect string `json:"expect"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// segment is one step of a selector: a key, then filters applied to the list found there.
type segment struct {
	name    string
	filters []filter
}

// filter is [*], [N] (0-based list index) or [k=v,k2=v2] (list elements whose fields all match).
type filter struct {
	all   bool
	index int
	isIdx bool
	conds []cond
}

type cond struct{ key, value string }

// parseSelector parses a dotted path; on error it returns the byte offset of the problem.
func parseSelector(s string) ([]segment, int, error) {
	if s == "" {
		return nil, 0, fmt.Errorf("the selector is empty")
	}
	var segs []segment
	i := 0
	for {
		start := i
		for i < len(s) && s[i] != '.' && s[i] != '[' {
			i++
		}
		name := s[start:i]
		if !selectorKeyRE.MatchString(name) {
			return nil, start, fmt.Errorf("%q is not a key name", name)
		}
		seg := segment{name: name}
		for i < len(s) && s[i] == '[' {
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, i, fmt.Errorf("'[' is not closed")
			}
			f, off, err := parseFilter(s[i+1 : i+end])
			if err != nil {
				return nil, i + 1 + off, err
			}
			seg.filters = append(seg.filters, f)
			i += end + 1
		}
		segs = append(segs, seg)
		if i == len(s) {
			return segs, 0, nil
		}
		if s[i] != '.' {
			return nil, i, fmt.Errorf("%q after ']'", s[i])
		}
		i++
		if i == len(s) {
			return nil, i, fmt.Errorf("the selector ends with '.'")
		}
	}
}

func parseFilter(s string) (filter, int, error) {
	t := strings.TrimSpace(s)
	if t == "*" {
		return filter{all: true}, 0, nil
	}
	if n, err := strconv.Atoi(t); err == nil {
		if n < 0 {
			return filter{}, 0, fmt.Errorf("index %d is negative", n)
		}
		return filter{index: n, isIdx: true}, 0, nil
	}
	var f filter
	off := 0
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !selectorKeyRE.MatchString(k) || v == "" {
			return filter{}, off, fmt.Errorf("%q is not a condition", strings.TrimSpace(part))
		}
		f.conds = append(f.conds, cond{key: k, value: v})
		off += len(part) + 1
	}
	return f, 0, nil
}

const (
	selectorHelp = "a selector such as traffic[qp=1].goodput_gbps (keys joined by '.', list filters [*], [N] or [key=value,...])"
	expectHelp   = "one of {integrity: ok|invalid}, {check: NAME, qp: K} or {path: SELECTOR, OP: VALUE} with OP one of equals, not-equals, min, max, between, count, approx"
)

// expectation validates one `expect:` entry.
func (d *decoder) expectation(v val, s *Scenario) (Expectation, bool) {
	e := Expectation{Line: v.line, Col: v.col}
	fields, ok := d.fields(v)
	if !ok {
		return e, false
	}
	by := map[string]field{}
	var ops []field
	var unknown []field
	for _, f := range fields {
		switch f.key {
		case ExpectIntegrity, ExpectCheck, ExpectPath, "qp":
			by[f.key] = f
		default:
			if slices.Contains(expectOps, f.key) {
				ops = append(ops, f)
			} else {
				unknown = append(unknown, f)
			}
		}
	}
	kinds := 0
	for _, k := range []string{ExpectIntegrity, ExpectCheck, ExpectPath} {
		if _, has := by[k]; has {
			kinds++
			e.Kind = k
		}
	}
	if kinds != 1 {
		d.errv(v, "%d of integrity, check and path; expected %s", kinds, expectHelp)
		return e, false
	}
	good := true
	allowed := map[string][]string{
		ExpectIntegrity: {ExpectIntegrity},
		ExpectCheck:     {ExpectCheck, "qp"},
		ExpectPath:      append([]string{ExpectPath}, expectOps...),
	}[e.Kind]
	for _, f := range unknown {
		d.unknown(f, allowed)
		good = false
	}
	if q, has := by["qp"]; has && e.Kind != ExpectCheck {
		d.errAt(q.kline, q.kcol, q.v.path, "only valid with check; expected a selector filter such as traffic[qp=%s] in path", show(q.v.n))
		good = false
	}
	if e.Kind != ExpectPath {
		for _, f := range ops {
			d.errAt(f.kline, f.kcol, f.v.path, "only valid with path; expected %s", expectHelp)
			good = false
		}
	}
	switch e.Kind {
	case ExpectIntegrity:
		x, ok := d.oneOf(by[ExpectIntegrity].v, "ok", "invalid")
		e.Integrity, good = x, good && ok
	case ExpectCheck:
		f := by[ExpectCheck]
		name, ok := d.str(f.v, "an analyzer name such as gbn or cnp")
		if ok && !checkNameRE.MatchString(name) {
			d.errv(f.v, "%q is not an analyzer name; expected letters, digits, '-', '_' or '.'", name)
			ok = false
		}
		e.Check, good = name, good && ok
		if q, has := by["qp"]; has {
			x, ok := d.indexIn(q.v, s.IndexBase, s.Traffic.NumConnections)
			e.QP, good = &x, good && ok
		}
	case ExpectPath:
		good = d.expectPath(v, by[ExpectPath], ops, &e) && good
	}
	if !good {
		return e, false
	}
	e.Text = e.canonical()
	return e, true
}

func (d *decoder) expectPath(v val, pf field, ops []field, e *Expectation) bool {
	good := true
	if p, ok := d.str(pf.v, selectorHelp); ok {
		sel, off, err := parseSelector(p)
		if err != nil {
			d.errAt(pf.v.line, stringCol(pf.v, off), pf.v.path, "bad selector at offset %d: %v; expected %s", off, err, selectorHelp)
			good = false
		}
		e.Path, e.sel = p, sel
	} else {
		good = false
	}
	if len(ops) != 1 {
		d.errv(v, "%d operators; expected exactly one of %s", len(ops), strings.Join(expectOps, ", "))
		return false
	}
	op := ops[0]
	e.Op = op.key
	switch op.key {
	case OpEquals, OpNotEquals:
		w, ok := scalarJSON(op.v.n)
		if !ok {
			d.errv(op.v, "%s is not a scalar; expected a number, string, boolean or null", show(op.v.n))
			return false
		}
		e.Want = w
	case OpMin:
		x, ok := d.number(op.v)
		e.Lo, good = x, good && ok
	case OpMax:
		x, ok := d.number(op.v)
		e.Hi, good = x, good && ok
	case OpBetween:
		its, ok := d.items(op.v)
		if !ok || len(its) != 2 {
			if ok {
				d.errv(op.v, "%d values; expected [LOW, HIGH]", len(its))
			}
			return false
		}
		lo, ok1 := d.number(its[0])
		hi, ok2 := d.number(its[1])
		if ok1 && ok2 && lo > hi {
			d.errv(op.v, "[%g, %g] is reversed; expected [LOW, HIGH] with LOW <= HIGH", lo, hi)
			return false
		}
		e.Lo, e.Hi, good = lo, hi, good && ok1 && ok2
	case OpCount:
		x, ok := d.intIn(op.v, 0, math.MaxInt32)
		e.Count, good = x, good && ok
	case OpApprox:
		good = d.approx(op.v, e) && good
	}
	return good
}

func (d *decoder) approx(v val, e *Expectation) bool {
	fields, ok := d.fields(v)
	if !ok {
		return false
	}
	var hasV, hasT bool
	good := true
	for _, f := range fields {
		switch f.key {
		case "value":
			x, ok := d.number(f.v)
			e.Approx, hasV, good = x, true, good && ok
		case "tolerance":
			hasT = true
			if s, isStr := f.v.n.(*ast.StringNode); isStr && strings.HasSuffix(s.Value, "%") {
				p, err := strconv.ParseFloat(strings.TrimSuffix(s.Value, "%"), 64)
				if err != nil || p < 0 || math.IsInf(p, 0) || math.IsNaN(p) {
					d.errv(f.v, "%q is not a percentage; expected a number >= 0 followed by %%, or an absolute number", s.Value)
					good = false
					continue
				}
				e.Tolerance, e.Relative = p, true
				continue
			}
			x, ok := d.floatIn(f.v, 0, math.MaxFloat64)
			e.Tolerance, good = x, good && ok
		default:
			d.unknown(f, []string{"value", "tolerance"})
			good = false
		}
	}
	if good && (!hasV || !hasT) {
		d.errv(v, "value and tolerance are both needed; expected {value: V, tolerance: T} (T absolute, or \"P%%\" relative to V)")
		return false
	}
	return good
}

// scalarJSON converts a YAML scalar to the value encoding/json would produce.
func scalarJSON(n ast.Node) (any, bool) {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return nil, true
	case *ast.StringNode:
		return v.Value, true
	case *ast.BoolNode:
		return v.Value, true
	case *ast.FloatNode:
		return v.Value, true
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return float64(x), true
		case uint64:
			return float64(x), true
		}
	}
	return nil, false
}

// canonical writes the expectation on one line in the file's syntax.
func (e Expectation) canonical() string {
	switch e.Kind {
	case ExpectIntegrity:
		return "integrity: " + e.Integrity
	case ExpectCheck:
		if e.QP != nil {
			return fmt.Sprintf("check: %s, qp: %d", e.Check, *e.QP)
		}
		return "check: " + e.Check
	}
	return "path: " + e.Path + ", " + e.Op + ": " + e.operand()
}

func (e Expectation) operand() string {
	switch e.Op {
	case OpEquals, OpNotEquals:
		if w, isStr := e.Want.(string); isStr && plainRE.MatchString(w) && !slices.Contains(yamlWords, strings.ToLower(w)) {
			return w
		}
		return showJSON(e.Want)
	case OpMin:
		return fmtNum(e.Lo)
	case OpMax:
		return fmtNum(e.Hi)
	case OpBetween:
		return "[" + fmtNum(e.Lo) + ", " + fmtNum(e.Hi) + "]"
	case OpCount:
		return strconv.Itoa(e.Count)
	case OpApprox:
		t := fmtNum(e.Tolerance)
		if e.Relative {
			t = fmtNum(e.Tolerance) + "%"
		}
		return "{value: " + fmtNum(e.Approx) + ", tolerance: " + t + "}"
	}
	return ""
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// showJSON renders a decoded-JSON value briefly: strings quoted, lists and objects summarized.
func showJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case float64:
		return fmtNum(x)
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return fmt.Sprintf("a list of %d items", len(x))
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// Evaluate checks the expectation against an analysis document decoded by encoding/json into any.
func (e Expectation) Evaluate(doc any) ExpectResult {
	r := ExpectResult{Expect: e.Text}
	if r.Expect == "" {
		r.Expect = e.canonical()
	}
	switch e.Kind {
	case ExpectIntegrity:
		r.OK, r.Detail = e.evalIntegrity(doc)
	case ExpectCheck:
		r.OK, r.Detail = e.evalCheck(doc)
	case ExpectPath:
		r.OK, r.Detail = e.evalPath(doc)
	default:
		r.Detail = fmt.Sprintf("unknown expectation kind %q", e.Kind)
	}
	return r
}

func (e Expectation) evalIntegrity(doc any) (bool, string) {
	m, _ := doc.(map[string]any)
	integ, _ := m["integrity"].(map[string]any)
	ok, isBool := integ["ok"].(bool)
	if !isBool {
		return false, "the analysis has no boolean integrity.ok"
	}
	got := "invalid"
	if ok {
		got = "ok"
	}
	if got == e.Integrity {
		return true, "integrity is " + got
	}
	detail := "integrity is " + got
	if checks, _ := integ["checks"].([]any); !ok {
		for _, c := range checks {
			cm, _ := c.(map[string]any)
			if pass, _ := cm["ok"].(bool); !pass {
				detail += fmt.Sprintf("; %v failed: %v", cm["name"], cm["detail"])
				break
			}
		}
	}
	return false, detail + ", expected " + e.Integrity
}

func (e Expectation) evalCheck(doc any) (bool, string) {
	m, _ := doc.(map[string]any)
	checks, isList := m["checks"].([]any)
	if !isList {
		return false, "nothing matched: the analysis has no checks list"
	}
	var present []string
	matched := 0
	for i, c := range checks {
		cm, _ := c.(map[string]any)
		name, _ := cm["analyzer"].(string)
		if !slices.Contains(present, name) {
			present = append(present, name)
		}
		if name != e.Check {
			continue
		}
		if e.QP != nil {
			if q, _ := cm["qp"].(float64); q != float64(*e.QP) || cm["qp"] == nil {
				continue
			}
		}
		matched++
		if pass, _ := cm["ok"].(bool); !pass {
			detail := fmt.Sprintf("checks[%d] (analyzer %s, qp %s) is not ok", i, name, showJSON(cm["qp"]))
			if vs, _ := cm["violations"].([]any); len(vs) > 0 {
				vm, _ := vs[0].(map[string]any)
				detail += fmt.Sprintf("; %d violations, first at packet %s: %v", len(vs), showJSON(vm["packet"]), vm["message"])
			}
			return false, detail
		}
	}
	if matched == 0 {
		who := "analyzer " + e.Check
		if e.QP != nil {
			who += fmt.Sprintf(" and qp %d", *e.QP)
		}
		return false, fmt.Sprintf("nothing matched: no checks entry with %s (analyzers present: %s)", who, strings.Join(present, ", "))
	}
	return true, fmt.Sprintf("%d checks entries of analyzer %s, all ok", matched, e.Check)
}

// hit is one selected value and the concrete path that reached it.
type hit struct {
	path string
	v    any
}

// selectValues walks the selector; when nothing is selected, why says where the walk ran dry.
func selectValues(sel []segment, doc any) (hits []hit, why string) {
	cur := []hit{{path: "", v: doc}}
	for _, seg := range sel {
		var next []hit
		for _, h := range cur {
			m, isMap := h.v.(map[string]any)
			where := h.path
			if where == "" {
				where = "the analysis"
			}
			if !isMap {
				why = fmt.Sprintf("%s is %s, not an object with key %q", where, showJSON(h.v), seg.name)
				continue
			}
			child, has := m[seg.name]
			if !has {
				why = fmt.Sprintf("%s has no key %q", where, seg.name)
				continue
			}
			p := seg.name
			if h.path != "" {
				p = h.path + "." + seg.name
			}
			next = append(next, hit{path: p, v: child})
		}
		for _, f := range seg.filters {
			var filtered []hit
			for _, h := range next {
				list, isList := h.v.([]any)
				if !isList {
					why = fmt.Sprintf("%s is %s, not a list", h.path, showJSON(h.v))
					continue
				}
				switch {
				case f.all:
					for i, x := range list {
						filtered = append(filtered, hit{path: fmt.Sprintf("%s[%d]", h.path, i), v: x})
					}
					if len(list) == 0 {
						why = h.path + " is an empty list"
					}
				case f.isIdx:
					if f.index < len(list) {
						filtered = append(filtered, hit{path: fmt.Sprintf("%s[%d]", h.path, f.index), v: list[f.index]})
					} else {
						why = fmt.Sprintf("%s has %d items, no index %d", h.path, len(list), f.index)
					}
				default:
					n := 0
					for i, x := range list {
						if matchConds(x, f.conds) {
							filtered = append(filtered, hit{path: fmt.Sprintf("%s[%d]", h.path, i), v: x})
							n++
						}
					}
					if n == 0 {
						why = fmt.Sprintf("no item of %s (%d items) has %s", h.path, len(list), condText(f.conds))
					}
				}
			}
			next = filtered
		}
		cur = next
		if len(cur) == 0 {
			return nil, why
		}
	}
	return cur, ""
}

func condText(cs []cond) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.key + "=" + c.value
	}
	return strings.Join(parts, ",")
}

// matchConds compares each condition with the element's field by the field's JSON type.
func matchConds(x any, cs []cond) bool {
	m, isMap := x.(map[string]any)
	if !isMap {
		return false
	}
	for _, c := range cs {
		fv, has := m[c.key]
		if !has {
			return false
		}
		switch y := fv.(type) {
		case float64:
			f, err := strconv.ParseFloat(c.value, 64)
			if err != nil || f != y {
				return false
			}
		case string:
			if y != c.value {
				return false
			}
		case bool:
			if strconv.FormatBool(y) != c.value {
				return false
			}
		case nil:
			if c.value != "null" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (e Expectation) evalPath(doc any) (bool, string) {
	sel := e.sel
	if sel == nil {
		var err error
		if sel, _, err = parseSelector(e.Path); err != nil {
			return false, "bad selector: " + err.Error()
		}
	}
	hits, why := selectValues(sel, doc)
	if e.Op == OpCount {
		detail := fmt.Sprintf("%d values selected", len(hits))
		if len(hits) == 1 {
			if l, isList := hits[0].v.([]any); isList && len(sel[len(sel)-1].filters) == 0 {
				detail += fmt.Sprintf(" (one list of %d items; write %s[*] to count its items)", len(l), e.Path)
			}
		}
		if len(hits) == 0 && why != "" {
			detail += " (" + why + ")"
		}
		if len(hits) != e.Count {
			return false, detail + fmt.Sprintf(", expected %d", e.Count)
		}
		return true, detail
	}
	if len(hits) == 0 {
		return false, fmt.Sprintf("nothing matched %s: %s", e.Path, why)
	}
	fails := 0
	firstFail := ""
	for _, h := range hits {
		if msg := e.test(h.v); msg != "" {
			if fails == 0 {
				firstFail = fmt.Sprintf("%s = %s %s", h.path, showJSON(h.v), msg)
			}
			fails++
		}
	}
	if fails > 0 {
		return false, fmt.Sprintf("%s (%d of %d selected values fail)", firstFail, fails, len(hits))
	}
	var vals []string
	for i, h := range hits {
		if i == 3 {
			vals = append(vals, fmt.Sprintf("... (%d values)", len(hits)))
			break
		}
		vals = append(vals, h.path+" = "+showJSON(h.v))
	}
	return true, strings.Join(vals, ", ")
}

// test returns "" when v satisfies the operator, else what is wrong with it.
func (e Expectation) test(v any) string {
	switch e.Op {
	case OpEquals:
		if !jsonEqual(v, e.Want) {
			return "is not " + showJSON(e.Want)
		}
		return ""
	case OpNotEquals:
		if jsonEqual(v, e.Want) {
			return "must not be " + showJSON(e.Want)
		}
		return ""
	}
	x, isNum := v.(float64)
	if !isNum {
		return "is not a number"
	}
	switch e.Op {
	case OpMin:
		if x < e.Lo {
			return "is below min " + fmtNum(e.Lo)
		}
	case OpMax:
		if x > e.Hi {
			return "is above max " + fmtNum(e.Hi)
		}
	case OpBetween:
		if x < e.Lo || x > e.Hi {
			return "is outside [" + fmtNum(e.Lo) + ", " + fmtNum(e.Hi) + "]"
		}
	case OpApprox:
		tol := e.Tolerance
		if e.Relative {
			tol = e.Tolerance / 100 * math.Abs(e.Approx)
		}
		if math.Abs(x-e.Approx) > tol {
			return "is not within " + fmtNum(tol) + " of " + fmtNum(e.Approx)
		}
	}
	return ""
}

func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// Evaluate runs every expectation against the analysis document.
func (s *Scenario) Evaluate(doc any) []ExpectResult {
	out := make([]ExpectResult, len(s.Expect))
	for i, e := range s.Expect {
		out[i] = e.Evaluate(doc)
	}
	return out
}
