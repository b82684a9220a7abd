// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestParseMetrics(t *testing.T) {
	raw := []byte(`# TYPE per_node_copies gauge
per_node_copies 3
# TYPE per_node_mount_refusals_total counter
per_node_mount_refusals_total{reason="held"} 2
# TYPE per_node_rpc_duration_seconds histogram
per_node_rpc_duration_seconds_bucket{code="OK",method="NodePublishVolume",le="0.1"} 4
per_node_rpc_duration_seconds_bucket{code="OK",method="NodePublishVolume",le="+Inf"} 5
per_node_rpc_duration_seconds_sum{code="OK",method="NodePublishVolume"} 0.75
per_node_rpc_duration_seconds_count{code="OK",method="NodePublishVolume"} 5
per_node_rpc_duration_seconds_bucket{code="Aborted",method="NodePublishVolume",le="+Inf"} 1
per_node_rpc_duration_seconds_sum{code="Aborted",method="NodePublishVolume"} 0.5
per_node_rpc_duration_seconds_count{code="Aborted",method="NodePublishVolume"} 1
`)
	m, err := ParseMetrics(raw)
	assert.NilError(t, err)
	assert.DeepEqual(t, m, map[string]float64{
		`per_node_copies`: 3,
		`per_node_mount_refusals_total{reason="held"}`:                                   2,
		`per_node_rpc_duration_seconds_count{code="OK",method="NodePublishVolume"}`:      5,
		`per_node_rpc_duration_seconds_sum{code="OK",method="NodePublishVolume"}`:        0.75,
		`per_node_rpc_duration_seconds_count{code="Aborted",method="NodePublishVolume"}`: 1,
		`per_node_rpc_duration_seconds_sum{code="Aborted",method="NodePublishVolume"}`:   0.5,
	})
	assert.Equal(t, SumOf(m, "per_node_rpc_duration_seconds_count"), 6.0)
}
