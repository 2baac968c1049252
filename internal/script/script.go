// Package script runs data-driven tests in the style of etcd-io/raft's testdata/*.txt (cockroachdb/datadriven,
// in the hundred lines this project needs): a file of commands, each followed by the output it must produce.
//
//	# Prose explains the script; blank lines and # lines between cases are kept as they are.
//	command key=value key=(v1,v2) flag
//	optional input lines
//	----
//	expected output lines, up to the next blank line
//
// Run calls a function per case and compares what it returns with the expected output; `go test -rewrite`
// writes the actual outputs back into the file instead. Outputs may not contain blank lines.
package script

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata scripts with the actual ones")

// Case is one command of a script.
type Case struct {
	Pos   string // file:line of the command
	Cmd   string
	Args  map[string][]string // key=v or key=(v1,v2); a bare word is a key with no values
	Input []string
	want  string
}

// Has tells whether the command has the argument.
func (c *Case) Has(key string) bool { _, ok := c.Args[key]; return ok }

// Get returns the argument's single value, or def when it is absent.
func (c *Case) Get(key, def string) string {
	if v, ok := c.Args[key]; ok && len(v) > 0 {
		return v[0]
	}
	return def
}

// Int returns the argument as an integer (decimal or 0x hex), or def when it is absent; a malformed value
// fails the test.
func (c *Case) Int(t testing.TB, key string, def int64) int64 {
	t.Helper()
	s := c.Get(key, "")
	if s == "" {
		return def
	}
	var v int64
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatalf("%s: %s=%s is not an integer", c.Pos, key, s)
	}
	return v
}

// Parse reads a script. Its errors name the file and line.
func Parse(path string, text string) ([]*Case, error) {
	lines := strings.Split(text, "\n")
	var cases []*Case
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		c := &Case{Pos: fmt.Sprintf("%s:%d", path, i+1), Args: map[string][]string{}}
		f := strings.Fields(l)
		c.Cmd = f[0]
		for _, a := range f[1:] {
			k, v, ok := strings.Cut(a, "=")
			switch {
			case !ok:
				c.Args[k] = nil
			case strings.HasPrefix(v, "(") && strings.HasSuffix(v, ")"):
				c.Args[k] = strings.Split(v[1:len(v)-1], ",")
			default:
				c.Args[k] = []string{v}
			}
		}
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			if strings.TrimSpace(lines[i]) == "" {
				return nil, fmt.Errorf("%s: command has no ---- line before the blank line %d", c.Pos, i+1)
			}
			c.Input = append(c.Input, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: command has no ---- line", c.Pos)
		}
		var want []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		cases = append(cases, c)
	}
	return cases, nil
}

// Run runs every case of the script at path through f, in order, and compares each output with the
// expected one; with -rewrite it writes the actual outputs into the file instead.
func Run(t *testing.T, path string, f func(t *testing.T, c *Case) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Parse(path, string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no commands", path)
	}
	outs := make([]string, len(cases))
	for i, c := range cases {
		outs[i] = strings.TrimRight(f(t, c), "\n")
		if strings.Contains(outs[i], "\n\n") {
			t.Fatalf("%s: the output has a blank line, which a script cannot hold:\n%s", c.Pos, outs[i])
		}
		if !*rewrite && outs[i] != c.want {
			t.Errorf("%s: %s\n--- got\n%s\n--- want\n%s", c.Pos, c.Cmd, outs[i], c.want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(Rewrite(string(b), outs)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// RunGlob runs every script that glob names, each as a subtest with a fresh driver from newDriver (a script's
// commands share its driver's state). No script is an error.
func RunGlob(t *testing.T, glob string, newDriver func() func(t *testing.T, c *Case) string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s (%v)", glob, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { Run(t, f, newDriver()) })
	}
}

// Rewrite returns the script text with the expected output of its i-th command replaced by outs[i]. The text
// must parse.
func Rewrite(text string, outs []string) string {
	lines := strings.Split(text, "\n")
	var out []string
	k := 0
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if lines[i] != "----" {
			continue
		}
		if k < len(outs) && outs[k] != "" {
			out = append(out, strings.Split(outs[k], "\n")...)
		}
		k++
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
		}
	}
	return strings.Join(out, "\n")
}
