package rnic

import (
	"slices"
	"strings"
	"testing"
)

// TestProfileQPTypes: p2100g states that its NIC creates RC and UD QPs only (bnxt_re refuses UC), the other
// profiles leave qp-types out and support all three, and a bad qp-types list is an error at its key.
func TestProfileQPTypes(t *testing.T) {
	for name, want := range map[string][]string{"p2100g": {"rc", "ud"}, "cx6vpi-200g": {"rc", "uc", "ud"},
		"collie-f": {"rc", "uc", "ud"}, "cx5": {"rc", "uc", "ud"}} {
		p, err := LoadProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.SupportedQPTypes(); !slices.Equal(got, want) {
			t.Errorf("%s: qp types %v, want %v", name, got, want)
		}
	}
	p, err := LoadProfile("p2100g")
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckQPType("rc") != nil || p.CheckQPType("ud") != nil {
		t.Errorf("p2100g refuses rc or ud")
	}
	if err := p.CheckQPType("uc"); err == nil || !strings.Contains(err.Error(), "qp_type uc") ||
		!strings.Contains(err.Error(), "p2100g") || !strings.Contains(err.Error(), "rc, ud") {
		t.Errorf("p2100g uc: error %v, want one naming qp_type uc, the profile and its qp-types", err)
	}

	base, err := profileFS.ReadFile("profiles/p2100g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ to, want string }{
		{"qp-types: [rc, xc]", `qp-types[1]: "xc": want rc, uc or ud`},
		{"qp-types: [rc, rc]", `qp-types[1]: "rc" is listed twice`},
		{"qp-types: []", "qp-types: empty"},
	} {
		data := strings.Replace(string(base), "qp-types: [rc, ud]", c.to, 1)
		if data == string(base) {
			t.Fatal("qp-types: [rc, ud] not in p2100g.yaml")
		}
		_, err := ParseProfile("x.yaml", []byte(data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.to, err, c.want)
			continue
		}
		if pe, ok := err.(*ProfileError); !ok || pe.Line != 10 {
			t.Errorf("%s: error %v, want a ProfileError at line 10", c.to, err)
		}
	}
}
