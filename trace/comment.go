package trace

import "github.com/lumina-go/lumina/roce"

// Annotation is what a Lumina pcapng comment says about its packet. testbed writes "event=drop seq=17 iter=2
// qp=1" on every packet of a results directory's trace.pcapng; other tools may separate the key=value words
// with commas, semicolons, tabs or newlines. ParseComment is the one reader of this form: the analyzers and
// lumina export both use it.
type Annotation struct {
	Event roce.EventType // event=NAME (none, drop, ecn, ...), event=N (0..255) or event=event-N
	Seq   uint64         // seq=N: the mirror sequence number
	Iter  int            // iter=N: the round of the packet's PSN (the scenario's ITER)
	QP    int            // qp=N: the connection, as the comment numbers it

	HasEvent, HasSeq, HasIter, HasQP bool
	// Other is set when the comment holds more than these four keys with valid values (other words, a
	// repeated key, a value that does not parse).
	Other bool
}

// commentSep reports whether b separates the words of a comment.
func commentSep(b byte) bool {
	return b == ' ' || b == ',' || b == ';' || b == '\t' || b == '\n' || b == '\r'
}

// ParseComment reads an Annotation from a pcapng comment, without allocating. A key counts only as a whole word
// ("myevent=drop" is not an event); the first valid occurrence of a key wins.
func ParseComment(s string) Annotation {
	var a Annotation
	for len(s) > 0 {
		i := 0
		for i < len(s) && !commentSep(s[i]) {
			i++
		}
		w := s[:i]
		if i < len(s) {
			s = s[i+1:]
		} else {
			s = ""
		}
		if w == "" {
			continue
		}
		eq := -1
		for j := 0; j < len(w); j++ {
			if w[j] == '=' {
				eq = j
				break
			}
		}
		if eq < 0 {
			a.Other = true
			continue
		}
		k, v := w[:eq], w[eq+1:]
		switch {
		case k == "event" && !a.HasEvent:
			if e, ok := ParseCommentEvent(v); ok {
				a.Event, a.HasEvent = e, true
				continue
			}
		case k == "seq" && !a.HasSeq:
			if n, ok := commentUint(v, 1<<48-1); ok {
				a.Seq, a.HasSeq = n, true
				continue
			}
		case k == "iter" && !a.HasIter:
			if n, ok := commentUint(v, 1<<31-1); ok {
				a.Iter, a.HasIter = int(n), true
				continue
			}
		case k == "qp" && !a.HasQP:
			if n, ok := commentUint(v, 1<<31-1); ok {
				a.QP, a.HasQP = int(n), true
				continue
			}
		}
		a.Other = true
	}
	return a
}

// ParseCommentEvent reads the value of a comment's event= key: an event name (roce.EventType's String: none,
// drop, ecn, ..., event-N) or the event's number, 0 to 255.
func ParseCommentEvent(v string) (roce.EventType, bool) {
	if e, ok := roce.ParseEventType(v); ok {
		return e, true
	}
	if len(v) > len("event-") && v[:len("event-")] == "event-" {
		v = v[len("event-"):]
	}
	if n, ok := commentUint(v, 255); ok {
		return roce.EventType(n), true
	}
	return 0, false
}

// commentUint parses a decimal number of at most max.
func commentUint(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 15 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n, n <= max
}
