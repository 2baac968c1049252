// Package bench holds the benchmark programs and scripts; this test holds the scripts to one timing (lib.sh).
package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The timing scripts parse, source lib.sh and time nothing themselves: the timing loop and the median are
// lib.sh's alone, so that the figures of run.sh, qps.sh, analyze.sh and export.sh cannot drift apart.
func TestScriptsShareTheTiming(t *testing.T) {
	scripts, err := filepath.Glob("*.sh")
	if err != nil || len(scripts) < 5 {
		t.Fatalf("bench/*.sh: %v %v; want lib.sh and the four timing scripts", scripts, err)
	}
	own := regexp.MustCompile(`/usr/bin/time|TIMEFORMAT|date \+%s%N|sort -g`)
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", s, err, out)
		}
		if s == "lib.sh" {
			continue
		}
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\n. bench/lib.sh\n") {
			t.Errorf("%s does not source bench/lib.sh", s)
		}
		if m := own.FindString(string(b)); m != "" {
			t.Errorf("%s times or takes medians itself (%q): use bench_runs and bench_median of lib.sh", s, m)
		}
	}
}

// lib runs a bash script after sourcing lib.sh.
func lib(t *testing.T, script string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail; . ./lib.sh; "+script)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestMedian(t *testing.T) {
	for in, want := range map[string]string{"3 1 2": "2", "4 1 3 2": "2.5", "0.25": "0.25", "10 9 1.5": "9"} {
		if out, e, code := lib(t, "bench_median "+in); code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("bench_median %s = %q (exit %d %s), want %s", in, out, code, e, want)
		}
	}
}

// bench_runs times each run (wall and CPU to the millisecond, peak RSS), takes the medians, and stops the
// script on a status it was not told to accept, with the command's stderr.
func TestBenchRuns(t *testing.T) {
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		t.Fatalf("/usr/bin/time: %v (Debian package time; scripts/test.sh installs it)", err)
	}
	out, e, code := lib(t, `bench_runs 3 sleep 0.05; echo "${#B_WALLS[@]} ${#B_CPUS[@]} ${#B_RSSS[@]}|$B_WALL|$B_CPU|$B_RSS|$B_RSS_MAX"`)
	f := strings.Split(strings.TrimSpace(out), "|")
	if code != 0 || len(f) != 5 || f[0] != "3 3 3" {
		t.Fatalf("bench_runs 3: exit %d, %q %s; want three runs of each figure", code, out, e)
	}
	wall, err1 := strconv.ParseFloat(f[1], 64)
	cpu, err2 := strconv.ParseFloat(f[2], 64)
	rss, err3 := strconv.Atoi(f[3])
	rssMax, err4 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || wall < 0.05 || wall > 5 || cpu < 0 || cpu > wall || rss <= 0 || rssMax < rss {
		t.Errorf("bench_runs of sleep 0.05: wall %s cpu %s rss %s max %s; want wall >= 0.05 s, cpu below it, rss > 0 KB, max >= median", f[1], f[2], f[3], f[4])
	}
	if !regexp.MustCompile(`^\d+\.\d{3}$`).MatchString(f[1]) {
		t.Errorf("wall %q: want seconds to the millisecond", f[1])
	}

	// lumina analyze exits 1 when a check fails: accepted when told, with its figures.
	if out, e, code := lib(t, `BENCH_OK="0 1" bench_runs 1 sh -c 'exit 1'; echo "ok $B_RSS"`); code != 0 || !strings.HasPrefix(out, "ok ") || strings.TrimSpace(out) == "ok" {
		t.Errorf("an accepted exit 1: exit %d, %q %s", code, out, e)
	}
	for _, c := range []struct{ ok, cmd, status string }{{"", "exit 1", "1"}, {"0 1", "exit 2", "2"}, {"0 1", "kill -9 $$", "137"}} {
		out, e, code := lib(t, `BENCH_OK="`+c.ok+`" bench_runs 2 sh -c 'echo failing >&2; `+c.cmd+`'; echo figures`)
		if code != 1 || strings.Contains(out, "figures") || !strings.Contains(e, "failing") || !strings.Contains(e, "exited with status "+c.status) {
			t.Errorf("BENCH_OK=%q, %s: exit %d, stdout %q, stderr %q; want the script stopped (1) naming status %s, the command's stderr shown", c.ok, c.cmd, code, out, e, c.status)
		}
	}
}
