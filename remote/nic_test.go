package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// rxeHost is a fake host for hostnic with one netdev (eth0), the ip and rdma commands Soft-RoCE's plan runs,
// and the counter sources of an rxe device; it records the commands run.
type rxeHost struct {
	files   map[string]string
	addrs   []string // eth0's addresses
	links   map[string]string
	modules map[string]bool
	missing map[string]bool  // tools not installed
	fail    map[string]error // command (joined) -> error
	ran     []string
	// counters added to every hw_counters value and rdma statistic value (a "finish" reading)
	bump uint64
}

func newRxeHost() *rxeHost {
	return &rxeHost{files: map[string]string{"/sys/class/net/eth0/ifindex": "2\n"}, addrs: []string{"10.9.9.9/24"},
		links: map[string]string{}, modules: map[string]bool{}, missing: map[string]bool{}, fail: map[string]error{}}
}

func (h *rxeHost) ReadFile(path string) ([]byte, error) {
	if v, ok := h.files[path]; ok {
		return []byte(v), nil
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
}

func (h *rxeHost) WriteFile(path string, data []byte) error {
	if _, ok := h.files[path]; !ok {
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	h.files[path] = string(data)
	return nil
}

func (h *rxeHost) ReadDir(path string) ([]string, error) {
	var out []string
	for f := range h.files {
		if d, name := filepath.Split(f); filepath.Clean(d) == path {
			out = append(out, name)
		}
	}
	if out == nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	slices.Sort(out)
	return out, nil
}

func (h *rxeHost) LookPath(name string) (string, error) {
	if h.missing[name] {
		return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	return "/usr/sbin/" + name, nil
}

func (h *rxeHost) Run(_ context.Context, argv []string) ([]byte, error) {
	cmd := strings.Join(argv, " ")
	h.ran = append(h.ran, cmd)
	if err := h.fail[cmd]; err != nil {
		return nil, err
	}
	switch {
	case cmd == "ip -o -4 addr show dev eth0":
		var b strings.Builder
		for _, a := range h.addrs {
			fmt.Fprintf(&b, "2: eth0    inet %s brd 10.0.0.255 scope global eth0\\       valid_lft forever preferred_lft forever\n", a)
		}
		return []byte(b.String()), nil
	case cmd == "ip -o -6 addr show dev eth0":
		return nil, nil
	case cmd == "ip -4 addr flush dev eth0":
		h.addrs = nil
	case cmd == "ip -6 addr flush dev eth0":
	case len(argv) == 6 && argv[0] == "ip" && argv[1] == "addr" && (argv[2] == "replace" || argv[2] == "add"):
		if !slices.Contains(h.addrs, argv[3]) {
			h.addrs = append(h.addrs, argv[3])
		}
	case len(argv) == 6 && argv[0] == "ip" && argv[1] == "addr" && argv[2] == "del":
		h.addrs = slices.DeleteFunc(h.addrs, func(a string) bool { return a == argv[3] })
	case cmd == "modprobe rdma_rxe":
		h.modules["rdma_rxe"] = true
	case len(argv) == 8 && argv[0] == "rdma" && argv[2] == "add":
		dev := argv[3]
		h.links[dev] = argv[7]
		port := "/sys/class/infiniband/" + dev + "/ports/1/"
		h.files[port+"state"] = "4: ACTIVE\n"
		for n, v := range map[string]uint64{"sent_pkts": 10, "rcvd_pkts": 4, "rcvd_seq_err": 0, "duplicate_request": 0} {
			h.files[port+"hw_counters/"+n] = fmt.Sprint(v)
		}
	case len(argv) == 4 && argv[0] == "rdma" && argv[2] == "delete":
		delete(h.links, argv[3])
		for f := range h.files {
			if strings.HasPrefix(f, "/sys/class/infiniband/"+argv[3]+"/") {
				delete(h.files, f)
			}
		}
	case cmd == "rdma statistic show link rxe0/1":
		return fmt.Appendf(nil, "link rxe0/1 sent_pkts 999 rcvd_pkts 999 out_of_seq_request %d completer_retry_err %d\n", h.bump, h.bump), nil
	case cmd == "ethtool -S eth0":
		return []byte("NIC statistics:\n     peer_ifindex: 3\n"), nil
	default:
		return nil, fmt.Errorf("fake host: unexpected command %q", cmd)
	}
	return nil, nil
}

// state is everything the plan may change, to compare before and after.
func (h *rxeHost) state() string {
	return fmt.Sprintf("addrs %v links %v files %v", h.addrs, h.links, slices.Sorted(maps.Keys(h.files)))
}

func rxeSetupLine(host string) string {
	return `{"id":1,"op":"nic-setup","args":{"nic":{"host":"` + host + `","vendor":"rxe","if-name":"eth0","ib-device":"rxe0","ip-list":["10.0.0.2/24"]}}}`
}

// serveLines sends each request and waits for its answer before the next (the agent stops what runs when its
// input ends, as when the controller is gone), then ends the input and waits for the agent's cleanup.
func serveLines(t *testing.T, a *Agent, lines ...string) []Response {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- a.Serve(context.Background(), inR, outW); outW.Close() }()
	dec := json.NewDecoder(outR)
	var rs []Response
	for _, l := range lines {
		if _, err := io.WriteString(inW, l+"\n"); err != nil {
			t.Fatal(err)
		}
		var r Response
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return rs
}

// nic-setup runs the rxe plan and reports each step; counters reads rxe's own counter names from hw_counters
// (which win over rdma statistic) and rdma statistic; nic-undo restores the host exactly (the module stays
// loaded, as the plan says); the journal then holds no NIC entry.
func TestAgentNICSetupCountersUndo(t *testing.T) {
	h := newRxeHost()
	before := h.state()
	dir := filepath.Join(t.TempDir(), "run")
	a := &Agent{RunDir: dir, NIC: h, Run: func([]string) (string, error) { return "", nil }}
	counters := `{"id":2,"op":"counters","args":{"nic":{"host":"requester","vendor":"rxe","if-name":"eth0","ib-device":"rxe0"}}}`
	rs := serveLines(t, a, rxeSetupLine("requester"), counters, `{"id":3,"op":"nic-undo"}`)
	for _, r := range rs {
		if !r.OK {
			t.Fatalf("response %d: %s", r.ID, r.Error)
		}
	}
	var setup NICResult
	if err := json.Unmarshal(rs[0].Result, &setup); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range setup.Steps {
		got = append(got, s.Step)
	}
	all := strings.Join(got, "\n")
	for _, w := range []string{
		"requester: check that rdma is installed",
		"requester: flush the IPv4 addresses of eth0: ip -4 addr flush dev eth0 [undo: ip addr add {addr} dev eth0 with the values ip -o -4 addr show dev eth0 prints before]",
		"requester: add address 10.0.0.2/24 to eth0: ip addr replace 10.0.0.2/24 dev eth0 [undo: ip addr del 10.0.0.2/24 dev eth0]",
		"requester: create the Soft-RoCE device rxe0 on eth0: rdma link add rxe0 type rxe netdev eth0 [undo: rdma link delete rxe0]",
		"requester: check that RDMA device rxe0 port 1 exists",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("nic-setup steps lack %q:\n%s", w, all)
		}
	}
	var flushNote string
	for _, s := range setup.Steps {
		if strings.Contains(s.Step, "flush the IPv4") {
			flushNote = s.Note
		}
	}
	if flushNote != "was addr=10.9.9.9/24" {
		t.Errorf("flush step note %q; want the address it will restore", flushNote)
	}
	var snap struct {
		Values map[string]uint64 `json:"values"`
		Source map[string]string `json:"source"`
	}
	if err := json.Unmarshal(rs[1].Result, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Values["sent_pkts"] != 10 || snap.Source["sent_pkts"] != "sysfs-hw_counters" ||
		snap.Values["out_of_seq_request"] != 0 || snap.Source["out_of_seq_request"] != "rdma-statistic" ||
		snap.Values["peer_ifindex"] != 3 || snap.Source["peer_ifindex"] != "ethtool-S" {
		t.Errorf("counters %+v", snap)
	}
	var undo NICResult
	if err := json.Unmarshal(rs[2].Result, &undo); err != nil {
		t.Fatal(err)
	}
	if len(undo.Steps) != 3 || !strings.Contains(undo.Steps[0].Step, "rdma link delete rxe0") ||
		!strings.Contains(undo.Steps[2].Step, "ip addr add 10.9.9.9/24 dev eth0") {
		t.Errorf("nic-undo steps %+v; want the device deleted first and the old address added back last", undo.Steps)
	}
	if after := h.state(); after != before {
		t.Errorf("host not restored:\nbefore %s\nafter  %s", before, after)
	}
	if !h.modules["rdma_rxe"] {
		t.Error("rdma_rxe was never loaded")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
}

// A session that ends without nic-undo (the controller died) undoes the NIC's changes itself; a second
// nic-setup in one session is refused.
func TestAgentNICSetupUndoneAtSessionEnd(t *testing.T) {
	h := newRxeHost()
	before := h.state()
	a := &Agent{RunDir: filepath.Join(t.TempDir(), "run"), NIC: h, Run: func([]string) (string, error) { return "", nil }}
	rs := serveLines(t, a, rxeSetupLine("requester"), rxeSetupLine("requester"))
	if !rs[0].OK || rs[1].OK || !strings.Contains(rs[1].Error, "nic-setup already ran") {
		t.Fatalf("responses %+v", rs)
	}
	if after := h.state(); after != before {
		t.Errorf("host not restored at the end of the session:\nbefore %s\nafter  %s", before, after)
	}
	if n := strings.Count(strings.Join(h.ran, "\n"), "rdma link delete rxe0"); n != 1 {
		t.Errorf("rxe0 deleted %d times; want once: %q", n, h.ran)
	}
}

// A killed agent leaves its journal: lumina agent --cleanup (Cleanup) undoes the NIC's changes from it, in
// reverse order, with the ip and ethtool commands journaled around them.
func TestCleanupUndoesJournaledNICSteps(t *testing.T) {
	h := newRxeHost()
	before := h.state()
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var ran []string
	run := func(argv []string) (string, error) { ran = append(ran, strings.Join(argv, " ")); return "", nil }
	a := &Agent{RunDir: dir, NIC: h, Run: run}
	if err := a.journal([]string{"ip", "link", "set", "dev", "eth9", "mtu", "1500"}); err != nil {
		t.Fatal(err)
	}
	if r := a.handle(context.Background(), []byte(rxeSetupLine("requester"))); !r.OK {
		t.Fatal(r.Error)
	}
	b, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		t.Fatalf("journal is not JSON: %v\n%s", err, b)
	}
	if j := compact.String(); !strings.HasPrefix(j, `{"schema_version":1,"undo":[["ip","link","set","dev","eth9","mtu","1500"],{"nic":`) || !strings.Contains(j, `"argv":["rdma","link","delete","rxe0"]`) {
		t.Errorf("journal %s", j)
	}
	if h.state() == before {
		t.Fatal("nic-setup changed nothing")
	}
	// The agent is "killed": nothing of it runs; a fresh process cleans up from the journal.
	if err := Cleanup(dir, run, h); err != nil {
		t.Fatal(err)
	}
	if after := h.state(); after != before {
		t.Errorf("host not restored by Cleanup:\nbefore %s\nafter  %s", before, after)
	}
	if len(ran) != 1 || ran[0] != "ip link set dev eth9 mtu 1500" {
		t.Errorf("journaled commands run %q", ran)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
	// A journal entry that is neither a command nor a NIC step is refused, not guessed at.
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, JournalFile), []byte(`[{"rm":"-rf"}]`), 0o600)
	if err := Cleanup(dir, run, h); err == nil || !strings.Contains(err.Error(), "undo journal") {
		t.Errorf("bad journal: %v", err)
	}
}

// A missing tool and a permission error are errors naming the host and the step; what was done before the
// failing step is undone at the end of the session.
func TestAgentNICSetupErrorsNameHostAndStep(t *testing.T) {
	h := newRxeHost()
	h.missing["rdma"] = true
	a := &Agent{RunDir: filepath.Join(t.TempDir(), "run"), NIC: h}
	rs := serveLines(t, a, rxeSetupLine("requester (root@192.0.2.1:22)"))
	if rs[0].OK || !strings.Contains(rs[0].Error, "hostnic: requester (root@192.0.2.1:22): step 1 (check that rdma is installed") ||
		!strings.Contains(rs[0].Error, "tool not installed") {
		t.Errorf("missing rdma: %+v", rs[0])
	}

	h = newRxeHost()
	before := h.state()
	h.fail["rdma link add rxe0 type rxe netdev eth0"] = fmt.Errorf("exit status 1: %w", syscall.EPERM)
	a = &Agent{RunDir: filepath.Join(t.TempDir(), "run"), NIC: h}
	rs = serveLines(t, a, rxeSetupLine("responder"))
	if e := rs[0].Error; rs[0].OK || !strings.Contains(e, "hostnic: responder: step 9 (create the Soft-RoCE device rxe0 on eth0)") ||
		!strings.Contains(e, "(create the Soft-RoCE device rxe0 on eth0)") || !strings.Contains(e, "permission denied") {
		t.Errorf("EPERM: %+v", rs[0])
	}
	if after := h.state(); after != before {
		t.Errorf("the steps before the failure were not undone:\nbefore %s\nafter  %s", before, after)
	}
	// Bad arguments are refused before anything runs, naming the field.
	h = newRxeHost()
	a = &Agent{RunDir: filepath.Join(t.TempDir(), "run"), NIC: h}
	rs = serveLines(t, a, `{"id":1,"op":"nic-setup","args":{"nic":{"host":"requester","vendor":"broadcom","if-name":"eth0"}}}`,
		`{"id":2,"op":"counters","args":{"nic":{"host":"requester","vendor":"nvidia","if-name":"eth0"}}}`)
	if rs[0].OK || !strings.Contains(rs[0].Error, "vendor") || rs[1].OK || !strings.Contains(rs[1].Error, "nic.ib-device is empty") || len(h.ran) != 0 {
		t.Errorf("bad arguments: %+v, ran %q", rs, h.ran)
	}
}

// hello looks up the NIC setup's tools before anything changes: a missing one is a problem naming it.
func TestAgentHelloChecksNICTools(t *testing.T) {
	h := newRxeHost()
	h.missing["rdma"] = true
	a := &Agent{RunDir: filepath.Join(t.TempDir(), "run"), NIC: h, Run: func([]string) (string, error) { return "", nil }}
	rs := serveLines(t, a, `{"id":1,"op":"hello","args":{"tools":["rdma","modprobe"]}}`, `{"id":2,"op":"hello","args":{"tools":["/bin/sh"]}}`)
	var hr HelloResult
	if err := json.Unmarshal(rs[0].Result, &hr); err != nil {
		t.Fatal(err)
	}
	if len(hr.Problems) != 1 || !strings.HasPrefix(hr.Problems[0], "rdma is not installed on ") {
		t.Errorf("problems %q; want rdma (only) missing", hr.Problems)
	}
	if rs[1].OK || !strings.Contains(rs[1].Error, "is not a command name") {
		t.Errorf("a path as a tool: %+v", rs[1])
	}
}
