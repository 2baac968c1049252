package scenario

import (
	"os"
	"strings"
	"testing"
)

// TestDocExamplesLoad keeps docs/scenario.md honest: every yaml block in it is a valid scenario.
func TestDocExamplesLoad(t *testing.T) {
	data, err := os.ReadFile("../docs/scenario.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for i, part := range strings.Split(string(data), "```yaml\n")[1:] {
		block, _, found := strings.Cut(part, "```")
		if !found {
			t.Fatalf("yaml block %d is not closed", i)
		}
		if _, err := Parse([]byte(block), "docs-block"); err != nil {
			t.Errorf("yaml block %d does not load: %v\n%s", i, err, block)
		}
		blocks++
	}
	if blocks < 6 {
		t.Errorf("found %d yaml blocks; the reference documents at least 6", blocks)
	}
}
