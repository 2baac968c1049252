package htmlreport

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// campaignSummary is a lumina campaign directory's summary file; its items' results directories are beside it.
const campaignSummary = "summary.json"

// Suite is a lumina campaign's summary: per item its verdict, exit status, key metrics and results directory.
// The page reads summary.json as the campaign wrote it (package campaign defines it; the fields the page shows
// are repeated here so that the report does not depend on the queue).
type Suite struct {
	Dir      string         `json:"dir"`
	Campaign string         `json:"campaign"`
	File     string         `json:"file"`
	Items    []SuiteItem    `json:"items"`
	Totals   map[string]int `json:"totals"`
	Exit     int            `json:"exit_status"`
	// Reports says, per item, whether its results directory holds a report.html to link to.
	Reports []bool `json:"reports"`
}

// SuiteItem is one run of a campaign.
type SuiteItem struct {
	Index    int                `json:"index"`
	ID       string             `json:"id"`
	Scenario string             `json:"scenario"`
	Profile  string             `json:"profile,omitempty"`
	Testbed  string             `json:"testbed,omitempty"`
	Seed     uint64             `json:"seed"`
	Verdict  string             `json:"verdict"`
	Exit     int                `json:"exit_status"`
	Reason   string             `json:"reason,omitempty"`
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	Results  string             `json:"results,omitempty"`
}

// isCampaignDir reports whether dir holds a lumina campaign's summary.
func isCampaignDir(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, campaignSummary))
	if err != nil {
		return false
	}
	var probe struct {
		Campaign *string          `json:"campaign"`
		Items    *json.RawMessage `json:"items"`
	}
	return json.Unmarshal(b, &probe) == nil && probe.Campaign != nil && probe.Items != nil
}

// LoadSuite reads a campaign directory's summary.json: the suite page.
func LoadSuite(dir string) (*Page, error) {
	b, err := os.ReadFile(filepath.Join(dir, campaignSummary))
	if err != nil {
		return nil, badInput("%v", err)
	}
	s := &Suite{Dir: dir}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, badInput("%s: not a lumina campaign summary: %v", filepath.Join(dir, campaignSummary), err)
	}
	s.Dir = dir
	s.Reports = make([]bool, len(s.Items))
	for i, it := range s.Items {
		if it.Results == "" || !filepath.IsLocal(it.Results) {
			continue // did not run, or its results are on another machine (host:/path)
		}
		if _, err := os.Stat(filepath.Join(dir, it.Results, "report.html")); err == nil {
			s.Reports[i] = true
		}
	}
	return &Page{Kind: KindSuite, Title: "lumina report: campaign " + s.Campaign, MaxPoints: DefaultMaxPoints, Suite: s}, nil
}
