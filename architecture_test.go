package lumina_test

// This test holds the house (ARCHITECTURE.md): it reads the import graph with `go list -deps` and fails on an
// import the design does not allow. Test files are not read: a test may reach across (inject's tests read real
// captures with trace).

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/lumina-go/lumina/"

// allowed lists, for each library package, the packages of this module it may import directly. A package the
// table does not know (a new one) is held to the never rules only; add it here and to ARCHITECTURE.md.
// Programs (cmd/..., bench/..., scripts/..., verbs/cmd/...) are the wiring and may import any library package.
var allowed = map[string][]string{
	"roce":            {},
	"version":         {},
	"internal/script": {},
	"internal/des":    {},
	"trace":           {"roce"},
	"scenario":        {"roce"},
	"inject":          {"roce", "scenario"},
	"rnic":            {"roce"},
	"lab":             {"roce", "rnic", "inject"},
	"netsim":          {"roce", "rnic", "inject", "lab", "internal/des"},
	"live":            {"roce", "rnic", "inject", "trace", "lab", "version"},
	"verbs":           {"roce", "rnic", "inject", "scenario"},
	"testbed":         {"roce", "rnic", "inject", "scenario", "trace", "lab", "netsim", "micro", "live", "verbs", "resultsdir", "remote", "hostnic", "search/collie", "version"},
	"remote":          {"roce", "rnic", "inject", "lab", "live", "hostnic", "scenario", "version"},
	"hostnic":         {"rnic", "scenario"},
	"resultsdir":      {"inject", "version"},
	"analyze":         {"roce", "rnic", "trace"},
	"analyze/summary": {"roce", "trace"},
	"micro":           {"roce", "rnic", "scenario", "internal/des"},
	"search":          {"roce", "rnic", "scenario", "micro", "version"},
	"search/collie":   {"scenario"},
	"verdict":         {"roce", "rnic", "scenario", "trace", "analyze", "analyze/summary", "resultsdir", "version"},
	"refdir":          {"roce", "scenario", "trace", "analyze", "verdict", "resultsdir", "version"},
	"report":          {"analyze", "analyze/summary", "verdict", "resultsdir", "refdir", "trace"},

	// Run history and comparison (lumina history, lumina diff) and progress on long commands.
	"rundiff":           {"analyze", "resultsdir", "scenario", "verdict", "version"},
	"history":           {"rundiff"},
	"internal/progress": {},
	"export":            {"roce", "trace", "analyze", "analyze/summary", "verdict", "resultsdir", "version"},
	"wireshark":         {},
	"htmlreport":        {"roce", "scenario", "trace", "analyze", "analyze/summary", "verdict", "resultsdir", "rundiff", "campaign/suite", "version"},
	"queue":             {},
	"campaign":          {"queue", "resultsdir", "rnic", "rundiff", "scenario", "search", "testbed", "verdict", "campaign/suite", "version"},

	"campaign/suite": {"version"},

	// Test support, imported by tests only.
	"internal/tracetest": {"roce", "trace"},
}

// never are the arrows that must not exist even through other packages: the data flows one way (scenario ->
// testbed -> trace -> analyzers -> report), the protocol cores know no backend, and nothing imports a program.
var never = []struct{ from, to, why string }{
	{"roce", "*", "the wire format is the ground floor"},
	{"version", "*", "the build's identity and the JSON document form are a leaf every writer may use"},
	{"refdir", "testbed", "the reference layout is read and judged like a results directory: it runs nothing"},
	{"trace", "inject", "a capture knows the wire format, not the injector"},
	{"inject", "trace", "the injector shares the mirror encoding through roce, not the capture package"},
	{"inject", "netsim", "the injector is pure: the simulator and the live switch drive it, not the reverse"},
	{"inject", "testbed", "the injector is pure: it knows no backend"},
	{"rnic", "netsim", "the transport is pure: the simulator drives it"},
	{"rnic", "testbed", "the transport is pure: it knows no backend"},
	{"rnic", "inject", "the NIC does not know the switch"},
	{"live", "netsim", "the real-packet testbed shares nothing with the simulator but the pure cores"},
	{"report", "testbed", "report renders what the verdict stage wrote; it does not run tests"},
	{"htmlreport", "testbed", "the HTML report renders what the verdict stage wrote; it does not run tests"},
	{"analyze", "scenario", "analyzers read a trace and its metadata, not the scenario file"},
	{"analyze", "testbed", "data flows one way: the testbed's results reach analyze, not its code"},
	{"analyze", "inject", "analyzers share protocol rules through roce and rnic"},
	{"trace", "testbed", "data flows one way"},
	{"testbed", "analyze", "the testbed runs and writes the results directory; judging it is the verdict stage's"},
	{"testbed", "verdict", "data flows one way: the verdict stage reads what the testbed wrote"},
	{"verdict", "testbed", "judging runs no traffic: it reads the results directory (package resultsdir)"},
	{"verdict", "netsim", "judging runs no traffic"},
	{"verdict", "live", "judging runs no traffic"},
	{"verdict", "remote", "judging runs no traffic"},
	{"remote", "netsim", "the remote testbed drives real hosts, not the simulator"},
	{"hostnic", "remote", "NIC setup is plain steps; how they reach a host is the agent's business"},
	{"resultsdir", "testbed", "the results directory is data, not the code that writes it"},
	{"scenario", "testbed", "data flows one way"},
	{"netsim", "testbed", "data flows one way"},
	{"netsim", "trace", "the simulator hands mirrored frames to the testbed, which writes the dumps"},
	{"micro", "netsim", "two models side by side: they share the engine (internal/des), not each other"},
	{"netsim", "micro", "two models side by side: they share the engine (internal/des), not each other"},
	{"*", "cmd", "nothing imports a program"},
}

// knownViolations are arrows the design forbids that the code still has. Each one must still exist (the test
// fails when it is gone, so that the entry is removed with the fix) and none may be added.
var knownViolations = map[string]string{}

type pkgInfo struct {
	imports []string // this module's packages it imports directly, module prefix removed
	program bool
}

func importGraph(t *testing.T) map[string]pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Standard}}\t{{join .Imports \" \"}}", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v\n%s", err, stderr.String())
	}
	g := map[string]pkgInfo{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("go list printed %q: want 4 tab-separated fields", sc.Text())
		}
		if !strings.HasPrefix(f[0], module) {
			continue
		}
		var imps []string
		for _, i := range strings.Fields(f[3]) {
			if strings.HasPrefix(i, module) {
				imps = append(imps, strings.TrimPrefix(i, module))
			}
		}
		g[strings.TrimPrefix(f[0], module)] = pkgInfo{imports: imps, program: f[1] == "main"}
	}
	if len(g) < 10 {
		t.Fatalf("go list found %d packages of this module: the test is not reading the module", len(g))
	}
	return g
}

// reach returns every package of the module that p imports, directly or not.
func reach(g map[string]pkgInfo, p string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(q string) {
		for _, i := range g[q].imports {
			if !seen[i] {
				seen[i] = true
				walk(i)
			}
		}
	}
	walk(p)
	out := make([]string, 0, len(seen))
	for q := range seen {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

func under(p, prefix string) bool {
	return prefix == "*" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// violations returns every arrow of g the rules forbid, with the rule's reason, in a stable order; and the
// library packages the table does not know.
func violations(g map[string]pkgInfo) (bad map[string]string, unknown []string) {
	bad = map[string]string{}
	for p, info := range g {
		if info.program {
			continue // programs are the wiring; Go itself forbids importing one
		}
		if allow, ok := allowed[p]; ok {
			for _, i := range info.imports {
				if !slices.Contains(allow, i) {
					bad[p+" -> "+i] = "not among its allowed imports (" + strings.Join(allow, ", ") + ")"
				}
			}
		} else {
			unknown = append(unknown, p)
		}
		for _, d := range reach(g, p) {
			for _, n := range never {
				if !under(p, n.from) || !under(d, n.to) || (n.from == "*" && under(p, n.to)) {
					continue
				}
				arrow := p + " -> " + d
				if !slices.Contains(info.imports, d) {
					arrow = p + " ->...-> " + d
				}
				bad[arrow] = "never: " + n.why
			}
		}
	}
	sort.Strings(unknown)
	return bad, unknown
}

func TestImportRules(t *testing.T) {
	bad, unknown := violations(importGraph(t))
	for _, p := range unknown {
		t.Logf("package %s is not in the table: held to the never rules only", p)
	}
	arrows := make([]string, 0, len(bad))
	for a := range bad {
		arrows = append(arrows, a)
	}
	sort.Strings(arrows)
	for _, a := range arrows {
		if _, ok := knownViolations[a]; !ok {
			t.Errorf("%s: %s", a, bad[a])
		}
	}
	for a, why := range knownViolations {
		if _, ok := bad[a]; !ok {
			t.Errorf("known violation %q (%s) is gone: remove it from knownViolations", a, why)
		}
	}
}

// TestImportRulesSeeViolations makes sure the checker is not vacuous: on a made-up graph with forbidden arrows
// it names each of them, and only them.
func TestImportRulesSeeViolations(t *testing.T) {
	g := map[string]pkgInfo{
		"roce":       {imports: []string{"trace"}},
		"trace":      {imports: []string{"roce"}},
		"inject":     {imports: []string{"roce", "scenario"}},
		"scenario":   {imports: []string{"roce", "testbed"}},
		"testbed":    {},
		"report":     {imports: []string{"analyze"}},
		"analyze":    {imports: []string{"roce"}},
		"newpkg":     {imports: []string{"cmd/lumina"}},
		"cmd/lumina": {imports: []string{"report", "testbed"}, program: true},
	}
	bad, unknown := violations(g)
	var got []string
	for a := range bad {
		got = append(got, a)
	}
	sort.Strings(got)
	if len(unknown) != 1 || unknown[0] != "newpkg" {
		t.Errorf("unknown packages %v, want [newpkg]", unknown)
	}
	for _, w := range []string{"roce -> trace", "scenario -> testbed", "inject ->...-> testbed", "newpkg -> cmd/lumina"} {
		if _, ok := bad[w]; !ok {
			t.Errorf("violations %v do not name %q", got, w)
		}
	}
	for _, a := range got {
		if strings.HasPrefix(a, "report") || strings.HasPrefix(a, "analyze") || strings.HasPrefix(a, "cmd/") {
			t.Errorf("%s reported: %s", a, bad[a])
		}
	}
}
