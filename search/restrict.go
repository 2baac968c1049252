package search

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// restrictKeys are the dimensions a restriction file may narrow.
var restrictKeys = []string{"qp_type", "opcode", "num_qps", "mtu", "wqe_batch", "sge", "wq_depth", "num_mrs",
	"mr_size", "msg_sizes", "msg_count", "direction", "memory", "max_events", "max_total_mrs"}

// ParseRestrict narrows base to a restriction file (Collie §5.2, anomaly prevention: the developer describes
// every workload the application can produce). Each key is a dimension: a list of values for qp_type, opcode,
// mtu, direction and memory; [LOW, HIGH] for the numeric ones (msg_sizes bounds every request, msg_count the
// vector length); max_events and max_total_mrs a number. Values must lie inside base (max_total_mrs may lift
// its bound). Errors name the file, line and key.
//
//	qp_type: [rc]
//	opcode: [write, read]
//	num_qps: [1, 64]
//	msg_sizes: [32, 4096]
func ParseRestrict(file string, data []byte, base Space) (Space, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return base, fmt.Errorf("%s: invalid YAML: %w", file, err)
	}
	s := base
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return s, nil // an empty file restricts nothing
	}
	var pairs []*ast.MappingValueNode
	switch b := f.Docs[0].Body.(type) {
	case *ast.MappingNode:
		pairs = b.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{b}
	default:
		return s, posErr(file, f.Docs[0].Body, "expected a mapping of dimension: values")
	}
	seen := map[string]bool{}
	for _, kv := range pairs {
		key := kv.Key.GetToken().Value
		fail := func(format string, a ...any) error {
			return posErr(file, kv.Key, key+": "+fmt.Sprintf(format, a...))
		}
		if !slices.Contains(restrictKeys, key) {
			return s, posErr(file, kv.Key, fmt.Sprintf("unknown dimension %q; expected one of %s", key, strings.Join(restrictKeys, ", ")))
		}
		if seen[key] {
			return s, fail("given twice")
		}
		seen[key] = true
		if key == "max_total_mrs" {
			n, ok := intOf(kv.Value)
			if !ok || n < 0 {
				return s, fail("expected a number of MRs (num_qps x num_mrs) >= 0, 0 for no bound")
			}
			s.MaxTotalMRs = n
			continue
		}
		if key == "max_events" {
			n, ok := intOf(kv.Value)
			if !ok || n < 0 || n > 64 {
				return s, fail("expected a number of events 0..64")
			}
			s.MaxEvents = n
			continue
		}
		seq, ok := kv.Value.(*ast.SequenceNode)
		if !ok || len(seq.Values) == 0 {
			return s, fail("expected a non-empty list, e.g. [a, b]")
		}
		if err := restrictDim(file, key, seq, base, &s, fail); err != nil {
			return s, err
		}
	}
	if err := s.Check(); err != nil {
		return s, fmt.Errorf("%s: the restricted space is empty: %w", file, err)
	}
	return s, nil
}

// restrictDim narrows one list-valued dimension of s to the values (categorical dimensions, mtu) or the
// [LOW, HIGH] range (numeric ones) seq gives, each checked against base; fail formats an error at the key.
func restrictDim(file, key string, seq *ast.SequenceNode, base Space, s *Space, fail func(string, ...any) error) error {
	switch key {
	case "qp_type", "opcode", "direction", "memory":
		all := map[string][]string{"qp_type": base.QPTypes, "opcode": base.Opcodes, "direction": base.Directions,
			"memory": base.Memories}[key]
		var vals []string
		for _, n := range seq.Values {
			v, isStr := n.(*ast.StringNode)
			if !isStr || !slices.Contains(all, v.Value) {
				return posErr(file, n, fmt.Sprintf("%s: %s is not one of %s", key, n, strings.Join(all, ", ")))
			}
			if !slices.Contains(vals, v.Value) {
				vals = append(vals, v.Value)
			}
		}
		switch key {
		case "qp_type":
			s.QPTypes = vals
		case "opcode":
			s.Opcodes = vals
		case "direction":
			s.Directions = vals
		default:
			s.Memories = vals
		}
	case "mtu":
		var vals []int
		for _, n := range seq.Values {
			v, ok := intOf(n)
			if !ok || !slices.Contains(base.MTUs, v) {
				return posErr(file, n, fmt.Sprintf("mtu: %s is not one of %v", n, base.MTUs))
			}
			if !slices.Contains(vals, v) {
				vals = append(vals, v)
			}
		}
		slices.Sort(vals)
		s.MTUs = vals
	default:
		r := map[string]*IntRange{"num_qps": &s.NumQPs, "wqe_batch": &s.WQEBatch, "sge": &s.SGE,
			"wq_depth": &s.WQDepth, "num_mrs": &s.NumMRs, "mr_size": &s.MRSize, "msg_sizes": &s.MsgSize,
			"msg_count": &s.MsgCount}[key]
		lo, okLo := intOf(seq.Values[0])
		hi, okHi := lo, okLo
		if len(seq.Values) == 2 {
			hi, okHi = intOf(seq.Values[1])
		}
		if len(seq.Values) > 2 || !okLo || !okHi || lo > hi || lo < r.Min || hi > r.Max {
			return fail("expected [LOW, HIGH] with %d <= LOW <= HIGH <= %d", r.Min, r.Max)
		}
		r.Min, r.Max = lo, hi
	}
	return nil
}

func intOf(n ast.Node) (int, bool) {
	v, ok := n.(*ast.IntegerNode)
	if !ok {
		return 0, false
	}
	switch x := v.Value.(type) {
	case int64:
		return int(x), true
	case uint64:
		if x <= 1<<62 {
			return int(x), true
		}
	}
	return 0, false
}

func posErr(file string, n ast.Node, msg string) error {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return fmt.Errorf("%s:%d:%d: %s", file, tk.Position.Line, tk.Position.Column, msg)
	}
	return fmt.Errorf("%s: %s", file, msg)
}
