package scenario

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The reference configuration's host keys mean the same thing for testbed: remote: control-ip, username and
// ssh-key-filepath are the SSH destination; nic.if-name the data interface; nic.switch-port the switch port
// cabled to it; the mirrors are dumpers 0 and 1. For any other testbed they stay ignored (load_test.go).
func TestReferenceKeysForRemote(t *testing.T) {
	data, err := os.ReadFile("testdata/reference-example.yml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(append([]byte("testbed: remote\n"), data...), "ref.yml")
	if err != nil {
		t.Fatal(err)
	}
	r := s.Remote
	if r == nil {
		t.Fatal("no remote section")
	}
	want := RemoteHost{Role: "requester", ControlIP: "192.168.1.12", Username: "tester", KeyFile: "/home/tester/.ssh/id_ed25519",
		IfName: "ens1f0", PCIAddr: "03:00.0", IBDevice: "mlx5_0", IBPort: 1, SwitchPort: "132"}
	got := r.Requester
	got.Workspace = ""
	if got != want {
		t.Errorf("requester\n got %+v\nwant %+v", got, want)
	}
	if r.Switch.ControlIP != "192.168.1.11" || r.Switch.Username != "tester" || r.Switch.Role != "switch" {
		t.Errorf("switch %+v", r.Switch)
	}
	if len(r.Dumpers) != 2 || r.Dumpers[0].Role != "requester-mirror" || r.Dumpers[0].ControlIP != "192.168.1.14" ||
		r.Dumpers[0].IfName != "ens2f0" || r.Dumpers[0].SwitchPort != "148" || r.Dumpers[1].ControlIP != "192.168.1.15" {
		t.Errorf("dumpers %+v", r.Dumpers)
	}
	if r.Requester.Address() != "192.168.1.12:22" {
		t.Errorf("address %s", r.Requester.Address())
	}
	for _, k := range s.IgnoredKeys {
		for _, used := range []string{"requester.control-ip", "requester.nic.if-name", "switch.username", "requester-mirror.nic.switch-port"} {
			if bytes.HasSuffix([]byte(k), []byte(" "+used)) {
				t.Errorf("%s is used by the remote testbed, yet recorded as ignored", k)
			}
		}
	}
	// The effective scenario keeps the hosts and loads back to the same remote section.
	var b bytes.Buffer
	if err := s.WriteEffective(&b); err != nil {
		t.Fatal(err)
	}
	s2, err := Parse(b.Bytes(), "eff.yml")
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if s2.Remote == nil || s2.Remote.Requester != r.Requester || len(s2.Remote.Dumpers) != 2 || s2.Remote.Dumpers[1] != r.Dumpers[1] {
		t.Errorf("effective scenario's remote section %+v; want %+v", s2.Remote, r)
	}
	// Another testbed: no remote section.
	s3, err := Parse(data, "ref.yml")
	if err != nil || s3.Remote != nil {
		t.Errorf("sim testbed: remote %+v, %v", s3.Remote, err)
	}
}

// A remote key of the wrong type is an error for testbed: remote only; other testbeds never checked them.
func TestRemoteKeyTypes(t *testing.T) {
	y := "requester:\n  control-ip: [1, 2]\n  nic: {type: cx5, ib-port: x}\n"
	if _, err := Parse([]byte("testbed: sim\n"+y), "x.yaml"); err != nil {
		t.Errorf("sim: %v", err)
	}
	_, err := Parse([]byte("testbed: remote\n"+y), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "x.yaml:3:15: requester.control-ip: a list is not a string") || !strings.Contains(err.Error(), "requester.nic.ib-port") {
		t.Errorf("remote: %v", err)
	}
}
