// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// The report puts the longest run of a kind next to that step's own
// timeout (its "within"), not the timeout of whichever ran last: the pair is
// how close a step came to failing.
func TestTimingsReportTheLongestNextToItsOwnTimeout(t *testing.T) {
	var tm Timings
	long := Step{File: "14.md", Line: 49, Kind: "copy on {node} is absent", Timeout: 2 * time.Minute}
	short := Step{File: "09.md", Line: 20, Kind: "copy on {node} is absent", Timeout: 30 * time.Second}
	tm.observe(long, 23*time.Second)
	tm.observe(short, time.Second)
	var row string
	for _, line := range strings.Split(tm.Report(), "\n") {
		if strings.Contains(line, long.Kind) {
			row = line
		}
	}
	assert.Equal(t, strings.Join(strings.Fields(row), " "), "2 23s 2m0s copy on {node} is absent (14.md:49)")
}
