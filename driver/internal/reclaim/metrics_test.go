// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gotest.tools/v3/assert"

	"liken.sh/per-node/driver/internal/metrics"
)

// The controller reports the records this node holds (once its cache is
// synced) and counts each removal by its reason.
func TestControllerMetrics(t *testing.T) {
	m := metrics.New()
	copies := &fakeCopies{uids: map[string]string{"gone": "u1", "deleted": "u2"}, held: map[string]bool{}}
	ctl := newController(t, me, copies, []string{me},
		pv("kept", "u0", rec(me)), pv("other", "u3", rec("worker-b")), deleting(pv("deleted", "u2", rec(me))))
	ctl.metrics = m
	m.Register(recordsCollector{ctl.Controller})
	assert.Equal(t, testutil.CollectAndCount(recordsCollector{ctl.Controller}), 0, "no figure before the cache syncs")
	ctl.synced.Store(true)

	assert.NilError(t, ctl.sync(context.Background(), "deleted"))
	assert.NilError(t, ctl.sync(context.Background(), "gone")) // its PV is not in the API: an orphan
	err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP per_node_copy_removals_total Copies this node removed, by reason: deleted (their PersistentVolume was deleted), orphan (it went without this node's record, or was replaced).
# TYPE per_node_copy_removals_total counter
per_node_copy_removals_total{reason="deleted"} 1
per_node_copy_removals_total{reason="orphan"} 1
# HELP per_node_records PersistentVolumes that record this node as holding a copy (its Copy objects), from the controller's cache.
# TYPE per_node_records gauge
per_node_records 2
`), "per_node_copy_removals_total", "per_node_records")
	assert.NilError(t, err, "metrics differ (- want, + seen)")
}
