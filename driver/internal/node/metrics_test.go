// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"liken.sh/per-node/driver/internal/metrics"
	"liken.sh/per-node/driver/internal/mounts"
)

// The metrics say what the node holds, as it is at scrape time: a copy's
// series goes with the copy; a refusal is counted by its reason; a
// removal's bytes are counted once the files are gone.
func TestMetricsFollowTheCopies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("node tests make real bind mounts and must run as root")
	}
	dir := t.TempDir()
	m := metrics.New()
	s, err := New(Config{NodeID: "worker-a", Version: "test", Root: filepath.Join(dir, "root"),
		Mounter: mounts.NewKernel(), Metrics: m, StatsTTL: -1})
	assert.NilError(t, err)
	ctx := context.Background()
	first, second := podTarget(dir, "1111", "store"), podTarget(dir, "2222", "store")
	_, err = s.NodePublishVolume(ctx, publishReq("store", first, "store-a"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(first, "data"), make([]byte, 5000), 0o644))
	_, err = s.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
	assertCode(t, err, codes.FailedPrecondition)

	copyDir, err := s.layout.CopyDir("store")
	assert.NilError(t, err)
	used, err := usage(copyDir) // what NodeGetVolumeStats reports: allocated bytes
	assert.NilError(t, err)
	assert.Assert(t, used.Bytes >= 5000, "usage %d", used.Bytes)

	assertMetrics(t, m, `
# HELP per_node_copies Copies of per-node volumes on this node's disk.
# TYPE per_node_copies gauge
per_node_copies 1
# HELP per_node_copies_held Copies mounted into a pod on this node.
# TYPE per_node_copies_held gauge
per_node_copies_held 1
# HELP per_node_copy_used_bytes Bytes a copy uses on this node, measured at most once per --stats-ttl (shared with kubelet's volume stats).
# TYPE per_node_copy_used_bytes gauge
per_node_copy_used_bytes{volume_id="store"} `+fmt.Sprint(used.Bytes)+`
# HELP per_node_mount_refusals_total Publishes refused on purpose, by reason: held (another pod on this node holds the copy), deleting (the PersistentVolume is being deleted), not_ours.
# TYPE per_node_mount_refusals_total counter
per_node_mount_refusals_total{reason="held"} 1
`, "per_node_copies", "per_node_copies_held", "per_node_copy_used_bytes", "per_node_mount_refusals_total")

	unpublish(t, s, "store", first)
	removed, err := s.RemoveCopy("store", "")
	assert.NilError(t, err)
	assert.Assert(t, removed)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		freed := gatheredValue(t, m, "per_node_removed_bytes_total")
		if freed < float64(used.Bytes) {
			return poll.Continue("per_node_removed_bytes_total is %v, want %d", freed, used.Bytes)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(20*time.Millisecond))
	assertMetrics(t, m, `
# HELP per_node_copies Copies of per-node volumes on this node's disk.
# TYPE per_node_copies gauge
per_node_copies 0
# HELP per_node_copies_being_removed Removed copies whose files are still being deleted from this node's disk.
# TYPE per_node_copies_being_removed gauge
per_node_copies_being_removed 0
`, "per_node_copies", "per_node_copy_used_bytes", "per_node_copies_being_removed")
}

// gatheredValue is the sum of a gathered counter or gauge family's values.
func gatheredValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	assert.NilError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, x := range f.GetMetric() {
			sum += x.GetCounter().GetValue() + x.GetGauge().GetValue()
		}
	}
	return sum
}

func assertMetrics(t *testing.T, m *metrics.Metrics, want string, names ...string) {
	t.Helper()
	err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), names...)
	assert.NilError(t, err, "metrics differ (- want, + seen)")
}
