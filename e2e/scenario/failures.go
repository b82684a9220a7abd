// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"fmt"
	"strings"
	"sync"
)

// Failures collects the step that failed in each scenario, for a summary
// printed after every test has run: the end of a run's log is what a CI
// system keeps, and the test tree printed before it would push a failure's
// message out of view.
type Failures struct {
	mu   sync.Mutex
	list []string
}

// summaryLines and summaryWidth bound one failure in the summary.
const (
	summaryLines = 8
	summaryWidth = 1000
)

func (f *Failures) add(doc string, s Step, err error) {
	if f == nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) > summaryLines {
		lines = append(lines[:summaryLines], fmt.Sprintf("… %d more lines in the test log", len(lines)-summaryLines))
	}
	for i, l := range lines {
		if len(l) > summaryWidth {
			lines[i] = l[:summaryWidth] + "…"
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, fmt.Sprintf("%s — %s: %s\n    %s", doc, s.Where(), s.Text, strings.Join(lines, "\n    ")))
}

// Report is every failed step with the start of its message, or "" when
// none failed.
func (f *Failures) Report() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.list, "\n")
}
