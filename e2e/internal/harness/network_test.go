// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestOffNetworkFindsANodeNotOnItsClustersNetworkAlone(t *testing.T) {
	for _, tc := range []struct {
		name, inspect string
		node          string
		networks      []string
	}{
		{"every node on the cluster's network", "/c-control-plane c\n/c-worker c\n", "", nil},
		{"one on the shared network", "/c-control-plane c\n/c-worker kind\n", "c-worker", []string{"kind"}},
		{"one on two", "/c-worker c kind\n", "c-worker", []string{"c", "kind"}},
		{"one on none (stopped)", "/c-control-plane c\n/c-worker\n", "c-worker", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, networks := offNetwork(tc.inspect, "c")
			assert.Equal(t, node, tc.node)
			if tc.node != "" {
				assert.DeepEqual(t, networks, tc.networks)
			}
		})
	}
}
