// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// client-go's request and rate-limit latencies land in one series per verb.
func TestAPILatencyByVerb(t *testing.T) {
	m := New()
	req, wait := latency{m.apiLatency}, latency{m.apiWait}
	req.Observe(context.Background(), "GET", url.URL{Path: "/api/v1/persistentvolumes/a"}, 4*time.Millisecond)
	req.Observe(context.Background(), "GET", url.URL{Path: "/api/v1/persistentvolumes/b"}, 6*time.Millisecond)
	req.Observe(context.Background(), "PATCH", url.URL{Path: "/api/v1/persistentvolumes/a"}, 10*time.Millisecond)
	wait.Observe(context.Background(), "PATCH", url.URL{}, 0)
	assert.Equal(t, testutil.CollectAndCount(m.apiLatency), 2, "one series per verb, whatever the URL")
	assert.Equal(t, testutil.CollectAndCount(m.apiWait), 1)
	got, err := m.Gatherer().Gather()
	assert.NilError(t, err)
	for _, f := range got {
		if f.GetName() != "per_node_api_request_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			if s.GetLabel()[0].GetValue() == "GET" {
				assert.Equal(t, s.GetHistogram().GetSampleCount(), uint64(2))
				assert.Assert(t, math.Abs(s.GetHistogram().GetSampleSum()-0.010) < 1e-9, "sum %v", s.GetHistogram().GetSampleSum())
			}
		}
	}
}

// per_node_build_info says which driver answers: its version and Go's.
func TestBuildInfo(t *testing.T) {
	m := New()
	m.BuildInfo("v0.1.0")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	want := fmt.Sprintf(`per_node_build_info{go_version=%q,revision=`, runtime.Version())
	body := rec.Body.String()
	assert.Assert(t, strings.Contains(body, want), "no %s in:\n%s", want, body)
	assert.Assert(t, strings.Contains(body, `version="v0.1.0"} 1`), "body:\n%s", body)
}

// docs/operating.md lists every metric the registry serves of its own (the
// node's and the reclaim controller's collectors are checked where they are
// made).
func TestOperatingDocListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/operating.md")
	assert.NilError(t, err)
	m := New()
	m.BuildInfo("dev")
	m.RPC("/csi.v1.Node/NodePublishVolume", "OK", time.Millisecond)
	m.Refused(RefusedHeld)
	families, err := m.registry.Gather()
	assert.NilError(t, err)
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, namespace+"_") {
			continue
		}
		assert.Check(t, strings.Contains(string(doc), "`"+name+"`"), "docs/operating.md does not list the metric %s", name)
	}
}

// What the watches deliver is counted by resource: each listed object and
// each change, but not an informer's resync of what it already holds.
func TestReceivingCountsWhatTheWatchesDeliver(t *testing.T) {
	m := New()
	pvs, nodes := m.Receiving("persistentvolumes"), m.Receiving("nodes")
	at := func(rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: rv}}
	}
	pvs.OnAdd(at("1"), true)
	pvs.OnUpdate(at("1"), at("2"))
	pvs.OnUpdate(at("2"), at("2")) // a resync
	pvs.OnDelete(at("2"))
	nodes.OnAdd(at("7"), false)
	assert.Equal(t, testutil.ToFloat64(m.received.WithLabelValues("persistentvolumes")), 3.0)
	assert.Equal(t, testutil.ToFloat64(m.received.WithLabelValues("nodes")), 1.0)

	var none *Metrics
	none.Receiving("nodes").OnAdd(at("1"), false) // a nil Metrics counts nothing, and does not panic
}
