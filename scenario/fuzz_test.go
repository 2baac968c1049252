package scenario

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse: no input panics; every error is positioned in the named file; every accepted scenario's
// effective form loads back to an equal scenario.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/listing2.yaml", "testdata/reference-example.yml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		richScenario,
		"traffic: {rdma-verb: send_read, num-qps: \"1,2\"}\nevents:\n  - {qpn: 2, psn: 1, packet: read-req, type: drop}\n",
		"x: &a {b: *a}\ntraffic: *a\n",
		"traffic: *\"a\\n0\"\n", // an alias whose quoted name holds a newline
		"\"a\\n0\": 1\n",        // a key whose quoted name holds a newline
		"expect:\n  - {path: 'a[k=v,j=1][0].b[*]', count: 1}\n",
		"traffic: [1,\n",
		"events:\n  - {qpn: 1-8, psn: all, type: delay, delay-us: 1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "f.yaml")
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("error line without the file name: %q", line)
				}
			}
			return
		}
		roundTrip(t, s)
	})
}
