// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gotest.tools/v3/assert"
	"k8s.io/client-go/util/workqueue"
)

func TestANilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	m.RPC("NodePublishVolume", "OK", time.Millisecond)
	m.Refused(RefusedHeld)
	m.Removed(RemovedOrphan)
	m.Freed(10)
	m.Register(nil)
}

func TestCountsByLabel(t *testing.T) {
	m := New()
	m.RPC("NodePublishVolume", "OK", 3*time.Millisecond)
	m.RPC("NodePublishVolume", "FailedPrecondition", time.Millisecond)
	m.Refused(RefusedHeld)
	m.Removed(RemovedDeleted)
	m.Removed(RemovedOrphan)
	m.Removed(RemovedOrphan)
	m.Freed(4096)
	m.Freed(-1) // an unknown size adds nothing
	assert.Equal(t, testutil.ToFloat64(m.refusals.WithLabelValues(RefusedHeld)), 1.0)
	assert.Equal(t, testutil.ToFloat64(m.removals.WithLabelValues(RemovedOrphan)), 2.0)
	assert.Equal(t, testutil.ToFloat64(m.removedBytes), 4096.0)
	assert.Equal(t, testutil.CollectAndCount(m.rpcs), 2, "one series per method and code")
	err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP per_node_copy_removals_total Copies this node removed, by reason: deleted (their PersistentVolume was deleted), orphan (it went without this node's record, or was replaced).
# TYPE per_node_copy_removals_total counter
per_node_copy_removals_total{reason="deleted"} 1
per_node_copy_removals_total{reason="orphan"} 2
`), "per_node_copy_removals_total")
	assert.NilError(t, err)
}

// A named workqueue reports its depth and retries; two queues share the
// series by their name label.
func TestWorkqueueSeries(t *testing.T) {
	m := New()
	p := queueMetrics{m.registry}
	for _, name := range []string{"reclaim", "other"} {
		depth := p.NewDepthMetric(name)
		depth.Inc()
		depth.Inc()
		depth.Dec()
		p.NewRetriesMetric(name).Inc()
	}
	err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP per_node_workqueue_depth Volumes waiting in the reclaim queue.
# TYPE per_node_workqueue_depth gauge
per_node_workqueue_depth{name="other"} 1
per_node_workqueue_depth{name="reclaim"} 1
# HELP per_node_workqueue_retries_total Volumes retried (a copy still held, the API not answering).
# TYPE per_node_workqueue_retries_total counter
per_node_workqueue_retries_total{name="other"} 1
per_node_workqueue_retries_total{name="reclaim"} 1
`), "per_node_workqueue_depth", "per_node_workqueue_retries_total")
	assert.NilError(t, err)
	var _ workqueue.MetricsProvider = p
}
