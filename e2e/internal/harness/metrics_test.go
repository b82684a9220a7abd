// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"testing"

	"gotest.tools/v3/assert"
)

// A kubelet scrape cut to what the bench reads: one CSI and one hostPath
// plugin, a histogram per operation and status, and a counter.
const kubeletBefore = `# HELP storage_operation_duration_seconds Storage operation duration
# TYPE storage_operation_duration_seconds histogram
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh",le="+Inf"} 2
storage_operation_duration_seconds_sum{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 0.5
storage_operation_duration_seconds_count{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 2
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/host-path",le="+Inf"} 1
storage_operation_duration_seconds_sum{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/host-path"} 0.002
storage_operation_duration_seconds_count{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/host-path"} 1
# HELP kubelet_running_pods Number of pods
# TYPE kubelet_running_pods gauge
kubelet_running_pods 3
`

const kubeletAfter = `# HELP storage_operation_duration_seconds Storage operation duration
# TYPE storage_operation_duration_seconds histogram
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh",le="+Inf"} 6
storage_operation_duration_seconds_sum{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 1.7
storage_operation_duration_seconds_count{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 6
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_mount",status="fail-unknown",volume_plugin="kubernetes.io/csi:per-node.liken.sh",le="+Inf"} 3
storage_operation_duration_seconds_sum{migrated="false",operation_name="volume_mount",status="fail-unknown",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 9
storage_operation_duration_seconds_count{migrated="false",operation_name="volume_mount",status="fail-unknown",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 3
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_unmount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh",le="+Inf"} 0
storage_operation_duration_seconds_sum{migrated="false",operation_name="volume_unmount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 0
storage_operation_duration_seconds_count{migrated="false",operation_name="volume_unmount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh"} 0
storage_operation_duration_seconds_bucket{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/host-path",le="+Inf"} 1
storage_operation_duration_seconds_sum{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/host-path"} 0.002
storage_operation_duration_seconds_count{migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/host-path"} 1
# HELP kubelet_running_pods Number of pods
# TYPE kubelet_running_pods gauge
kubelet_running_pods 7
`

func TestParseMetricsGivesAHistogramItsSumAndCount(t *testing.T) {
	m, err := ParseMetrics([]byte(kubeletAfter))
	assert.NilError(t, err)
	csi := `migrated="false",operation_name="volume_mount",status="success",volume_plugin="kubernetes.io/csi:per-node.liken.sh"`
	assert.Equal(t, m["storage_operation_duration_seconds_sum{"+csi+"}"], 1.7)
	assert.Equal(t, m["storage_operation_duration_seconds_count{"+csi+"}"], 6.0)
	assert.Equal(t, m["kubelet_running_pods"], 7.0)
	_, bucket := m["storage_operation_duration_seconds_bucket{"+csi+`,le="+Inf"}`]
	assert.Assert(t, !bucket, "buckets are left out")
}

func TestVolumeOpsCountsOnlyWhatHappenedBetweenScrapes(t *testing.T) {
	before, err := ParseMetrics([]byte(kubeletBefore))
	assert.NilError(t, err)
	after, err := ParseMetrics([]byte(kubeletAfter))
	assert.NilError(t, err)
	for _, tc := range []struct {
		name, plugin, want string
	}{
		// 4 new successes taking 1.2 s in all; 3 failures (first seen
		// in the second scrape); volume_unmount never ran.
		{"csi", "kubernetes.io/csi:per-node.liken.sh", "volume_mount 4 ok (mean 300ms), 3 failed"},
		{"hostPath idle between scrapes", "kubernetes.io/host-path", "none"},
		{"a plugin never seen", "kubernetes.io/nfs", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, VolumeOps(before, after, tc.plugin), tc.want)
		})
	}
}

const csiBefore = `# HELP csi_operations_seconds Container Storage Interface operation duration
# TYPE csi_operations_seconds histogram
csi_operations_seconds_bucket{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false",le="+Inf"} 2
csi_operations_seconds_sum{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 0.04
csi_operations_seconds_count{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 2
`

const csiAfter = `# HELP csi_operations_seconds Container Storage Interface operation duration
# TYPE csi_operations_seconds histogram
csi_operations_seconds_bucket{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false",le="+Inf"} 6
csi_operations_seconds_sum{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 0.12
csi_operations_seconds_count{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 6
csi_operations_seconds_bucket{driver_name="per-node.liken.sh",grpc_status_code="FailedPrecondition",method_name="/csi.v1.Node/NodePublishVolume",migrated="false",le="+Inf"} 1
csi_operations_seconds_sum{driver_name="per-node.liken.sh",grpc_status_code="FailedPrecondition",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 0.02
csi_operations_seconds_count{driver_name="per-node.liken.sh",grpc_status_code="FailedPrecondition",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 1
csi_operations_seconds_bucket{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodeGetCapabilities",migrated="false",le="+Inf"} 10
csi_operations_seconds_sum{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodeGetCapabilities",migrated="false"} 0.01
csi_operations_seconds_count{driver_name="per-node.liken.sh",grpc_status_code="OK",method_name="/csi.v1.Node/NodeGetCapabilities",migrated="false"} 10
csi_operations_seconds_bucket{driver_name="other.example.com",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false",le="+Inf"} 5
csi_operations_seconds_sum{driver_name="other.example.com",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 5
csi_operations_seconds_count{driver_name="other.example.com",grpc_status_code="OK",method_name="/csi.v1.Node/NodePublishVolume",migrated="false"} 5
`

func TestCSICallsCountsOneDriversCallsBetweenScrapes(t *testing.T) {
	before, err := ParseMetrics([]byte(csiBefore))
	assert.NilError(t, err)
	after, err := ParseMetrics([]byte(csiAfter))
	assert.NilError(t, err)
	for _, tc := range []struct {
		name, driver, want string
	}{
		// Publish: 4 new OK in 80 ms and 1 refusal in 20 ms; capabilities
		// first seen in the second scrape; the other driver left out.
		{"ours", "per-node.liken.sh", "NodeGetCapabilities 10 (mean 1ms, 0 not OK); NodePublishVolume 5 (mean 20ms, 1 not OK)"},
		{"a driver never seen", "nfs.csi.k8s.io", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, CSICalls(before, after, tc.driver), tc.want)
		})
	}
	assert.Equal(t, CSICalls(after, after, "per-node.liken.sh"), "none", "nothing between two equal scrapes")
}
