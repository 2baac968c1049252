package campaign

import "testing"

// The text summary's metrics read at a glance: whole numbers as they are, large ones without decimals, the
// rest to about four significant digits.
func TestShortMetric(t *testing.T) {
	for v, want := range map[float64]string{254: "254", 0: "0", 26847.51115: "26848", 1.696: "1.696", 26.8471: "26.85",
		0.003051496835422108: "0.003051", -2.5: "-2.500", 1e20: "100000000000000000000"} {
		if got := short(v); got != want {
			t.Errorf("short(%v) = %q, want %q", v, got, want)
		}
	}
}
