package hostnic

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fakeHost is a Runner over a temporary directory that stands for "/" (sysfs and configfs files are plain
// files) plus the state of the tools a plan runs (ip, mlxreg, mlnx_qos, ethtool, lldptool, rdma, irdma's
// configfs directory), so that Apply and Undo can be checked end to end.
type fakeHost struct {
	t      *testing.T
	root   string
	tools  map[string]bool
	denied map[string]bool // paths whose writes fail with EACCES
	failOn string          // a command line (argv joined by spaces) that exits 1
	calls  []string

	addrs    map[string][]string // "-4"/"-6" -> CIDRs on the interface
	mlxreg   map[string]uint64
	trust    string
	dscp     [64]int
	ets      [3]string // -p, -s, -t
	privFlag string
	lldpETS  map[string]string
	lldpApp  map[string]bool
	links    map[string]string
	dcqcn    string // irdma's device value behind the configfs entry
	modules  map[string]bool
	outputs  map[string]string // fixed outputs by command line (rdma statistic, ethtool -S)
	runErrs  map[string]error  // fixed failures by command line
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{t: t, root: t.TempDir(), tools: map[string]bool{}, denied: map[string]bool{},
		addrs:   map[string][]string{"-4": {"192.168.1.5/24"}, "-6": {"fe80::1/64"}},
		mlxreg:  map[string]uint64{"roce_adp_retrans_en": 1, "roce_slow_restart_en": 0, "roce_tx_window_en": 0},
		trust:   "pcp",
		ets:     [3]string{"0,0,0,0,0,0,0,0", "ets,strict,strict,strict,strict,strict,strict,strict", "100,0,0,0,0,0,0,0"},
		lldpETS: map[string]string{"willing": "yes", "up2tc": "0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0", "tsa": "", "tcbw": ""},
		lldpApp: map[string]bool{}, links: map[string]string{}, modules: map[string]bool{}, outputs: map[string]string{},
		privFlag: "on", dcqcn: "0"}
	for d := range h.dscp {
		h.dscp[d] = d / 8
	}
	for _, tool := range []string{"ip", "mlxreg", "mlnx_qos", "ethtool", "lldptool", "rdma", "modprobe", "mkdir", "rmdir"} {
		h.tools[tool] = true
	}
	return h
}

func (h *fakeHost) file(path, value string) {
	p := filepath.Join(h.root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// copyTree copies a testdata tree (e.g. sysfs-mlx5/sys/...) into the fake root.
func (h *fakeHost) copyTree(dir string) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.file("/"+rel, strings.TrimSpace(string(b)))
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) ReadFile(path string) ([]byte, error) {
	if strings.Contains(path, "unreadable") {
		return nil, &fs.PathError{Op: "read", Path: path, Err: syscall.EINVAL}
	}
	return os.ReadFile(filepath.Join(h.root, path))
}

func (h *fakeHost) WriteFile(path string, data []byte) error {
	if h.denied[path] {
		return &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	p := filepath.Join(h.root, path)
	if _, err := os.Stat(p); err != nil {
		return err // sysfs: attributes are never created by writing
	}
	if strings.HasSuffix(path, "/roce_dcqcn_enable") {
		h.dcqcn = strings.TrimSpace(string(data))
	}
	return os.WriteFile(p, data, 0o644)
}

func (h *fakeHost) ReadDir(path string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(h.root, path))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

func (h *fakeHost) LookPath(name string) (string, error) {
	if !h.tools[name] {
		return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	return "/usr/sbin/" + name, nil
}

func (h *fakeHost) Run(_ context.Context, argv []string) ([]byte, error) {
	line := strings.Join(argv, " ")
	h.calls = append(h.calls, line)
	if !h.tools[argv[0]] {
		return nil, &exec.Error{Name: argv[0], Err: exec.ErrNotFound}
	}
	if line == h.failOn {
		return nil, fmt.Errorf("exit status 1: %s: Operation not supported", argv[0])
	}
	if err, ok := h.runErrs[line]; ok {
		return nil, err
	}
	if out, ok := h.outputs[line]; ok {
		return []byte(out), nil
	}
	a := argv[1:]
	bad := func() ([]byte, error) { return nil, fmt.Errorf("fake host: unexpected command %q", line) }
	switch argv[0] {
	case "ip":
		switch {
		case len(a) == 6 && a[0] == "-o" && a[2] == "addr" && a[3] == "show":
			var b strings.Builder
			for _, c := range h.addrs[a[1]] {
				fam := "inet"
				if a[1] == "-6" {
					fam = "inet6"
				}
				fmt.Fprintf(&b, "3: %s    %s %s scope global %s\\       valid_lft forever preferred_lft forever\n", a[5], fam, c, a[5])
			}
			return []byte(b.String()), nil
		case len(a) == 5 && a[1] == "addr" && a[2] == "flush":
			h.addrs[a[0]] = nil
		case len(a) == 5 && a[0] == "addr" && (a[1] == "replace" || a[1] == "add" || a[1] == "del"):
			fam := "-4"
			if strings.Contains(a[2], ":") {
				fam = "-6"
			}
			l := slices.DeleteFunc(h.addrs[fam], func(c string) bool { return c == a[2] })
			if a[1] != "del" {
				l = append(l, a[2])
			}
			h.addrs[fam] = l
		default:
			return bad()
		}
	case "mlxreg":
		switch {
		case len(a) == 5 && a[4] == "--get":
			var b strings.Builder
			b.WriteString("Sending access register...\n\nField Name                  | Data\n=============================\n")
			for _, k := range sortedKeys(h.mlxreg) {
				fmt.Fprintf(&b, "%-28s| 0x%08x\n", k, h.mlxreg[k])
			}
			return []byte(b.String()), nil
		case len(a) == 7 && a[4] == "--set" && a[6] == "--yes":
			k, v, _ := strings.Cut(a[5], "=")
			n, err := strconv.ParseUint(v, 0, 64)
			if err != nil {
				return bad()
			}
			h.mlxreg[k] = n
		default:
			return bad()
		}
	case "mlnx_qos":
		switch {
		case len(a) == 2:
			return []byte(h.mlnxQos()), nil
		case len(a) == 3 && strings.HasPrefix(a[2], "--trust="):
			h.trust = strings.TrimPrefix(a[2], "--trust=")
		case len(a) == 3 && strings.HasPrefix(a[2], "--dscp2prio=set,"):
			f := strings.Split(strings.TrimPrefix(a[2], "--dscp2prio=set,"), ",")
			d, _ := strconv.Atoi(f[0])
			p, _ := strconv.Atoi(f[1])
			h.dscp[d] = p
		case len(a) == 8 && a[2] == "-p" && a[4] == "-s" && a[6] == "-t":
			h.ets = [3]string{a[3], a[5], a[7]}
		default:
			return bad()
		}
	case "ethtool":
		switch {
		case len(a) == 2 && a[0] == "--show-priv-flags":
			return []byte("Private flags for " + a[1] + ":\nlink-down-on-close     : off\nfw-lldp-agent          : " + h.privFlag + "\n"), nil
		case len(a) == 4 && a[0] == "--set-priv-flags" && a[2] == "fw-lldp-agent":
			h.privFlag = a[3]
		default:
			return bad()
		}
	case "lldptool":
		switch {
		case a[0] == "-t" && a[4] == "ETS-CFG":
			var b strings.Builder
			for _, k := range []string{"willing", "up2tc", "tsa", "tcbw"} {
				fmt.Fprintf(&b, "%s=%s\n", k, h.lldpETS[k])
			}
			return []byte(b.String()), nil
		case a[0] == "-T" && a[4] == "ETS-CFG":
			for _, kv := range a[5:] {
				k, v, _ := strings.Cut(kv, "=")
				h.lldpETS[k] = v
			}
		case a[0] == "-t" && a[4] == "APP":
			// openlldp's get_arg_app layout, as lldptool prints it (arg=value, the value spanning lines).
			var b strings.Builder
			b.WriteString("app=(prio,sel,proto)\n")
			for i, k := range sortedKeys(h.lldpApp) {
				fmt.Fprintf(&b, "%d:(%s) local hw (set)\n", i, strings.TrimPrefix(k, "app="))
			}
			return []byte(b.String()), nil
		case a[0] == "-T" && a[4] == "APP" && a[5] == "-d":
			delete(h.lldpApp, a[6])
		case a[0] == "-T" && a[4] == "APP":
			h.lldpApp[a[5]] = true
		default:
			return bad()
		}
	case "mkdir":
		dir := filepath.Join(h.root, a[1])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if strings.Contains(a[1], "/config/irdma/") {
			h.file(a[1]+"/roce_dcqcn_enable", h.dcqcn)
		}
	case "rmdir":
		if err := os.RemoveAll(filepath.Join(h.root, a[0])); err != nil {
			return nil, err
		}
	case "modprobe":
		h.modules[a[0]] = true
	case "rdma":
		switch {
		case len(a) == 7 && a[0] == "link" && a[1] == "add" && h.modules["rdma_rxe"]:
			h.links[a[2]] = a[6]
			h.file("/sys/class/infiniband/"+a[2]+"/ports/1/state", "4: ACTIVE")
		case len(a) == 3 && a[0] == "link" && a[1] == "delete":
			delete(h.links, a[2])
			os.RemoveAll(filepath.Join(h.root, "sys/class/infiniband", a[2]))
		default:
			return bad()
		}
	default:
		return bad()
	}
	return nil, nil
}

func (h *fakeHost) mlnxQos() string {
	var b strings.Builder
	b.WriteString("DCBX mode: OS controlled\nPriority trust state: " + h.trust + "\ndscp2prio mapping:\n")
	for p := range 8 {
		fmt.Fprintf(&b, "\tprio:%d dscp:", p)
		for d := 63; d >= 0; d-- {
			if h.dscp[d] == p {
				fmt.Fprintf(&b, "%02d,", d)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("Cable len: 7\n")
	p2t := strings.Split(h.ets[0], ",")
	tsa := strings.Split(h.ets[1], ",")
	bw := strings.Split(h.ets[2], ",")
	for tc := range 8 {
		var prios []string
		for p, t := range p2t {
			if t == strconv.Itoa(tc) {
				prios = append(prios, strconv.Itoa(p))
			}
		}
		if len(prios) == 0 {
			continue
		}
		if tsa[tc] == "ets" {
			fmt.Fprintf(&b, "tc: %d ratelimit: unlimited, tsa: ets, bw: %s%%\n", tc, bw[tc])
		} else {
			fmt.Fprintf(&b, "tc: %d ratelimit: unlimited, tsa: %s\n", tc, tsa[tc])
		}
		for _, p := range prios {
			fmt.Fprintf(&b, "\t priority:  %s\n", p)
		}
	}
	return b.String()
}

// state renders everything the fake host holds: every file with its content and every tool's state.
func (h *fakeHost) state() string {
	var lines []string
	filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.root, p)
		if d.IsDir() {
			lines = append(lines, "dir /"+rel)
			return nil
		}
		b, _ := os.ReadFile(p)
		lines = append(lines, "/"+rel+" = "+strings.TrimSpace(string(b)))
		return nil
	})
	sort.Strings(lines)
	links := make([]string, 0, len(h.links))
	for k, v := range h.links {
		links = append(links, k+"@"+v)
	}
	sort.Strings(links)
	apps := sortedKeys(h.lldpApp)
	return strings.Join(lines, "\n") + fmt.Sprintf("\naddrs %v\nmlxreg %v\ntrust %s dscp %v ets %v\npriv %s lldp %v apps %v\nlinks %v dcqcn %s",
		h.addrs, h.mlxreg, h.trust, h.dscp, h.ets, h.privFlag, h.lldpETS, apps, links, h.dcqcn)
}
