// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"os"
	"testing"

	"gotest.tools/v3/assert"

	"liken.sh/per-node/e2e/internal/harness"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	return string(b)
}

func TestParseMetricsKeysSeriesBySortedLabels(t *testing.T) {
	m, err := harness.ParseMetrics([]byte(`# TYPE per_node_mount_refusals_total counter
per_node_mount_refusals_total{reason="held"} 3
# TYPE per_node_copy_used_bytes gauge
per_node_copy_used_bytes{volume_id="v",b="x"} 4096
# TYPE per_node_rpc_duration_seconds histogram
per_node_rpc_duration_seconds_bucket{code="OK",method="NodePublishVolume",le="+Inf"} 1
per_node_rpc_duration_seconds_sum{code="OK",method="NodePublishVolume"} 0.1
per_node_rpc_duration_seconds_count{code="OK",method="NodePublishVolume"} 1
# TYPE per_node_copies gauge
per_node_copies 2
`))
	assert.NilError(t, err)
	assert.DeepEqual(t, m, map[string]float64{
		`per_node_mount_refusals_total{reason="held"}`:  3,
		`per_node_copy_used_bytes{b="x",volume_id="v"}`: 4096,
		`per_node_copies`: 2,
		// a histogram as Prometheus names its series: _count and _sum
		`per_node_rpc_duration_seconds_count{code="OK",method="NodePublishVolume"}`: 1,
		`per_node_rpc_duration_seconds_sum{code="OK",method="NodePublishVolume"}`:   0.1,
	})
	assert.Equal(t, seriesOf(m, `per_node_copy_used_bytes{volume_id="w"}`), `per_node_copy_used_bytes{b="x",volume_id="v"} 4096`)
	assert.Equal(t, seriesOf(m, `per_node_workqueue_depth`), "no per_node_workqueue_depth series")
}
