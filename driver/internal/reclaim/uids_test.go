// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"strconv"
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/types"
)

// The UIDs kept for events are bounded, whatever the number of PVs a node
// ever held: the most recent are kept.
func TestTheUIDsKeptForEventsAreBounded(t *testing.T) {
	c := newUIDCache()
	for i := range 3 * maxUIDs {
		c.set("pv-"+strconv.Itoa(i), types.UID("uid-"+strconv.Itoa(i)))
	}
	assert.Assert(t, c.len() <= maxUIDs, "%d UIDs kept for %d PVs; at most %d", c.len(), 3*maxUIDs, maxUIDs)
	last := 3*maxUIDs - 1
	assert.Equal(t, c.get("pv-"+strconv.Itoa(last)), types.UID("uid-"+strconv.Itoa(last)))
	assert.Equal(t, c.get("pv-0"), types.UID(""))
}
