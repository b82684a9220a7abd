// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"liken.sh/per-node/driver/internal/metrics"
	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/tree"
)

// After a restart every copy is unmeasured: a scrape asks for all of them
// at once, and no more than maxMeasuring walks run together.
func TestMeasurementsRunAtMostSomeAtOnce(t *testing.T) {
	m := &stuckMeasure{release: make(chan struct{})}
	c := newUsageCache(time.Minute)
	c.measure = m.measure
	t.Cleanup(func() { close(m.release) })
	const copies = 10
	for i := range copies {
		_, _ = c.get("pv"+strconv.Itoa(i), t.TempDir(), time.Millisecond)
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := m.calls.Load(); n != maxMeasuring {
			return poll.Continue("%d measurements running for %d copies, want %d", n, copies, maxMeasuring)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(10*time.Millisecond))
	// Still no more, a while after.
	deadline := time.Now().Add(200 * time.Millisecond)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := m.calls.Load(); n > maxMeasuring {
			return poll.Error(fmt.Errorf("%d measurements running at once, the bound is %d", n, maxMeasuring))
		}
		if time.Now().Before(deadline) {
			return poll.Continue("watching")
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(10*time.Millisecond))
}

// A copy the walk gives up on is reported as not measured (never as a
// figure), counted by its reason and told on the PV, and not walked again
// until its figure is due.
func TestACopyTooDeepToMeasureIsToldNotGuessed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("node tests make real bind mounts and must run as root")
	}
	dir := t.TempDir()
	m, tr := metrics.New(), &fakeTracker{uid: "uid-1"}
	s, err := New(Config{NodeID: "worker-a", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel(),
		Tracker: tr, Metrics: m})
	assert.NilError(t, err)
	target := podTarget(dir, "1111", "store")
	_, err = s.NodePublishVolume(context.Background(), publishReq("store", target, "store-a"))
	assert.NilError(t, err)
	t.Cleanup(func() { _, _ = s.NodeUnpublishVolume(context.Background(), unpublishRequest("store", target)) })
	fd, err := unix.Open(target, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	assert.NilError(t, err)
	for range tree.MaxDepth + 1 {
		assert.NilError(t, unix.Mkdirat(fd, "d", 0o750))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		assert.NilError(t, err)
		_ = unix.Close(fd)
		fd = next
	}
	_ = unix.Close(fd)

	stats := func() error {
		_, err := s.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: "store", VolumePath: target})
		return err
	}
	assertCode(t, stats(), codes.ResourceExhausted)
	assertCode(t, stats(), codes.ResourceExhausted)
	assertMetrics(t, m, `
# HELP per_node_copy_measurements_abandoned_total Measurements of a copy that gave up, by reason: too_deep (deeper than the walk goes), too_many_entries (--measure-max-entries), too_slow (--measure-timeout).
# TYPE per_node_copy_measurements_abandoned_total counter
per_node_copy_measurements_abandoned_total{reason="too_deep"} 1
`, "per_node_copy_measurements_abandoned_total")
	assert.DeepEqual(t, countOf(tr.reasons(), "CopyNotMeasured"), 1)
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
