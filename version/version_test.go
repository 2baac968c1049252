package version

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/lumina-go/lumina", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
	got := fromBuildInfo(bi, true)
	want := Info{Version: "(devel)", Commit: "0123abcd", Modified: true, Go: "go1.26.1"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if s := got.String(); s != "lumina (devel) commit 0123abcd (modified) go1.26.1" {
		t.Fatalf("String() = %q", s)
	}
	// No build information (or no VCS stamp): say unknown rather than invent a commit.
	none := fromBuildInfo(nil, false)
	if none.Version != "unknown" || none.Commit != "unknown" || none.Modified || none.Go != runtime.Version() {
		t.Fatalf("without build info: %+v", none)
	}
	clean := fromBuildInfo(&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, true)
	if clean.Version != "v1.2.3" || clean.Commit != "unknown" || clean.String() != "lumina v1.2.3 commit unknown "+runtime.Version() {
		t.Fatalf("clean: %+v %q", clean, clean.String())
	}
}

func TestMarshalDocument(t *testing.T) {
	b, err := MarshalDocument(struct {
		A int    `json:"a"`
		B string `json:"b"`
	}{1, "<x>"})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"schema_version\": 1,\n  \"a\": 1,\n  \"b\": \"\\u003cx\\u003e\"\n}\n"
	if string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
	if b, _ := MarshalDocument(struct{}{}); string(b) != "{\n  \"schema_version\": 1\n}\n" {
		t.Fatalf("empty object: %q", b)
	}
	if _, err := MarshalDocument([]int{1}); err == nil {
		t.Fatal("a list is not a document")
	}
}

func TestListRoundTripAndLegacy(t *testing.T) {
	b, err := MarshalList("qps", []int{3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "{\n  \"schema_version\": 1,\n  \"qps\": [\n    3,\n    4\n  ]\n}\n" {
		t.Fatalf("got %q", b)
	}
	var got []int
	if err := UnmarshalList(b, "qps", &got); err != nil || len(got) != 2 || got[1] != 4 {
		t.Fatalf("round trip: %v %v", got, err)
	}
	got = nil
	if err := UnmarshalList([]byte("[7]"), "qps", &got); err != nil || len(got) != 1 || got[0] != 7 {
		t.Fatalf("legacy bare list: %v %v", got, err)
	}
	if b, _ := MarshalList("qps", []int(nil)); !json.Valid(b) || string(b) != "{\n  \"schema_version\": 1,\n  \"qps\": []\n}\n" {
		t.Fatalf("nil list: %q", b)
	}
	err = UnmarshalList([]byte(`{"schema_version": 99, "qps": []}`), "qps", &got)
	if err == nil || err.Error() != "schema_version 99: written by a newer lumina (this one reads up to 1); use that version" {
		t.Fatalf("newer schema: %v", err)
	}
	if err := UnmarshalList([]byte(`{"schema_version": 1}`), "qps", &got); err == nil {
		t.Fatal("a document without the list must be an error")
	}
}
