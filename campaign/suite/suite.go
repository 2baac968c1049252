// Package suite is a lumina campaign directory's summary (summary.json): the document the campaign writes and
// the HTML report's suite page reads, defined once for both (the report does not import package campaign,
// which runs tests).
package suite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lumina-go/lumina/version"
)

// File is the summary's name in a campaign directory; the items' results directories are beside it.
const File = "summary.json"

// Item is one run of the suite in the summary.
type Item struct {
	Index    int                `json:"index"`
	ID       string             `json:"id"`
	Scenario string             `json:"scenario"`
	Profile  string             `json:"profile,omitempty"`
	Testbed  string             `json:"testbed,omitempty"`
	Seed     uint64             `json:"seed"`
	Verdict  string             `json:"verdict"` // pass | fail | invalid | error | timeout | lost
	Exit     int                `json:"exit_status"`
	Reason   string             `json:"reason,omitempty"`
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	Results  string             `json:"results,omitempty"`
}

// Summary is summary.json: the suite's items in matrix order, the count per verdict and the campaign's exit
// status (2 if an item could not run, else 3 if one was invalid, else 1 if one failed, else 0).
type Summary struct {
	Campaign string         `json:"campaign"`
	File     string         `json:"file"`
	Items    []Item         `json:"items"`
	Totals   map[string]int `json:"totals"`
	Exit     int            `json:"exit_status"`
}

// Load reads a campaign directory's summary.json, refusing one a newer lumina wrote.
func Load(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return nil, err
	}
	if _, err := version.CheckSchema(b); err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	return &s, nil
}
