package htmlreport

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/campaign"
)

// A campaign directory (lumina campaign's summary.json beside items/) is a suite page: every item with its
// verdict and metrics as the summary has them, a link only where the item's results hold a report.
func TestLoadSuite(t *testing.T) {
	p, err := Load([]string{"testdata/campaign"})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Suite
	if p.Kind != KindSuite || s == nil || s.Campaign != "suite-fixture" || len(s.Items) != 4 || s.Exit != 1 {
		t.Fatalf("page kind %q, suite %+v", p.Kind, s)
	}
	verdicts := map[string]int{}
	for _, it := range s.Items {
		verdicts[it.Verdict]++
		if it.Metrics["packets"] != 254 || it.Metrics["retransmissions"] != 2 {
			t.Errorf("item %s: metrics %v, want listing2's 254 packets and 2 retransmissions", it.ID, it.Metrics)
		}
	}
	if verdicts["pass"] != 2 || verdicts["fail"] != 2 {
		t.Errorf("verdicts %v, want 2 pass and 2 fail (listing2 on cx5 and e810)", verdicts)
	}
	if len(s.Reports) != 4 || !s.Reports[0] || s.Reports[1] || s.Reports[2] || s.Reports[3] {
		t.Errorf("reports %v: want only item 0's (the only one with a report.html)", s.Reports)
	}
}

// A summary.json that is not a campaign's is not taken for one, and a broken one is bad input.
func TestSuiteBadInput(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(`{"campaign": "x", "items": {"not": "a list"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{dir}); err == nil {
		t.Error("a summary whose items are not a list was loaded")
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "summary.json"), []byte(`{"packets": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if isCampaignDir(other) {
		t.Error("a summary.json without campaign and items taken for a campaign's")
	}
}

// The page reads summary.json as the campaign writes it: every field of every item, through one definition
// (package suite).
func TestSuiteReadsWhatTheCampaignWrites(t *testing.T) {
	dir := t.TempDir()
	want := &campaign.Summary{Campaign: "c", File: "c.yaml", Totals: map[string]int{"pass": 1, "error": 1}, Exit: 2,
		Items: []campaign.ItemSummary{
			{Index: 0, ID: "listing2/cx5/seed-7", Scenario: "/s/listing2.yaml", Profile: "cx5", Seed: 7, Verdict: "pass",
				Metrics: map[string]float64{"packets": 254}, Results: "items/0000"},
			{Index: 1, ID: "x/lab1/seed-1", Scenario: "/s/x.yaml", Testbed: "lab1", Seed: 1, Verdict: "error", Exit: 2,
				Reason: "no such host", Results: "lab1:/r/0001"},
		}}
	if err := campaign.WriteSummary(dir, want); err != nil {
		t.Fatal(err)
	}
	p, err := LoadSuite(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&p.Suite.Summary, want) {
		t.Errorf("the page's suite %+v; the campaign wrote %+v", p.Suite.Summary, *want)
	}
	// A summary a newer lumina wrote is refused, as the campaign refuses it.
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(`{"schema_version": 999, "campaign": "c", "items": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSuite(dir); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "schema_version 999") {
		t.Errorf("a newer summary: %v; want bad input naming its schema version", err)
	}
}
