package htmlreport

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/lumina-go/lumina/campaign/suite"
)

// Suite is a lumina campaign's summary (package suite, as the campaign wrote it): per item its verdict, exit
// status, key metrics and results directory; and per item whether the page can link its report.
type Suite struct {
	Dir string `json:"dir"`
	suite.Summary
	// Reports says, per item, whether its results directory holds a report.html to link to.
	Reports []bool `json:"reports"`
}

// isCampaignDir reports whether dir holds a lumina campaign's summary.
func isCampaignDir(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, suite.File))
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
	sum, err := suite.Load(dir)
	if err != nil {
		return nil, badInput("%s: not a lumina campaign summary: %v", filepath.Join(dir, suite.File), err)
	}
	s := &Suite{Dir: dir, Summary: *sum}
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
