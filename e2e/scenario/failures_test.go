// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/golden"

	"liken.sh/per-node/e2e/internal/harness"
)

// The summary keeps each failed step to a few short lines, so that the end
// of a run's log — what a CI system keeps — holds every failure's message.
func TestFailuresSummariseEachFailedStep(t *testing.T) {
	var f Failures
	assert.Equal(t, f.Report(), "", "no failure, no summary")

	var long []string
	for i := range 12 {
		long = append(long, fmt.Sprintf("line %d", i))
	}
	long[1] = strings.Repeat("x", 1200)
	f.add("28-node-killed-mid-write", Step{File: "scenarios/28.md", Line: 40, Text: "wait deployment store ready 3"},
		errors.New(strings.Join(long, "\n")))
	f.add("34-api-server-away", Step{File: "scenarios/34.md", Line: 44, Text: "wait deployment store ready 4 within 3m"},
		fmt.Errorf("%w: timed out after 3m0s waiting for 4 ready pods; last seen: 3 of 4 ready\n", harness.ErrNotSeen))
	f.add("07-a-pod-moves-to-a-node-with-a-copy", Step{File: "scenarios/07.md", Line: 30, Text: "every store pod holds $written"},
		fmt.Errorf("%w: every store pod to hold the 20 written records within 1m0s: the last 2 read(s) failed", harness.ErrUnobserved))
	golden.Assert(t, f.Report(), "failures.golden")

	var none *Failures
	none.add("01", Step{}, errors.New("a run without a collector records nothing"))
}
