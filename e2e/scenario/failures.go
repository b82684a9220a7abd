// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"liken.sh/per-node/e2e/internal/harness"
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
	f.list = append(f.list, fmt.Sprintf("%s — %s: %s\n    [%s]\n    %s", doc, s.Where(), s.Text, Verdict(err), strings.Join(lines, "\n    ")))
}

// Verdict says what a step's error means: the promise broke (the check
// looked and saw it not kept), the observation failed (the check could not
// look: the promise may well hold), or neither is known.
func Verdict(err error) string {
	switch {
	case errors.Is(err, harness.ErrNotSeen):
		return "PROMISE BROKEN: the check looked and did not see what the document promises"
	case errors.Is(err, harness.ErrUnobserved), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "OBSERVATION FAILED: the check could not look (a read, an exec or an API call failed or timed out); the promise may hold"
	default:
		return "STEP FAILED: an action of the step failed (see its message)"
	}
}

// Report is every failed step with the start of its message, or "" when
// none failed.
func (f *Failures) Report() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.list, "\n")
}
