// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"os"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

func TestOutsidePodCIDR(t *testing.T) {
	pod := func(name, ip string, host bool) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{HostNetwork: host}, Status: corev1.PodStatus{PodIP: ip}}
	}
	for _, tc := range []struct {
		name string
		cidr string
		pods []corev1.Pod
		want []string
	}{
		{"inside", "10.244.5.0/24", []corev1.Pod{pod("d", "10.244.5.7", false)}, nil},
		{"the podCIDR the deleted Node had", "10.244.5.0/24", []corev1.Pod{pod("d", "10.244.2.7", false)}, []string{"pod d is at 10.244.2.7"}},
		{"host network", "10.244.5.0/24", []corev1.Pod{pod("cni", "172.19.0.5", true)}, nil},
		{"no address yet", "10.244.5.0/24", []corev1.Pod{pod("d", "", false)}, nil},
		{"node without a podCIDR", "", []corev1.Pod{pod("d", "10.244.5.7", false)}, []string{"pod d is at 10.244.5.7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.DeepEqual(t, outsidePodCIDR(tc.cidr, tc.pods), tc.want)
		})
	}
}

func TestStaleReady(t *testing.T) {
	restart := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	pod := func(name string, ready bool, started time.Time, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: restart}
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: "store", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: started}}}},
		}
		return p
	}
	before, after := restart.Add(-time.Minute), restart.Add(time.Second)
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"Ready from before the restart", []corev1.Pod{pod("s", true, before, false)}, []string{"pod ns/s (container store started 06:59:00)"}},
		{"Ready, started again", []corev1.Pod{pod("s", true, after, false)}, nil},
		{"not Ready yet", []corev1.Pod{pod("s", false, before, false)}, nil},
		{"terminating", []corev1.Pod{pod("s", true, before, true)}, nil},
		{"one of two", []corev1.Pod{pod("a", true, after, false), pod("b", true, before, false)}, []string{"pod ns/b (container store started 06:59:00)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.DeepEqual(t, staleReady(tc.pods, restart), tc.want)
		})
	}
}
