// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestUnrecoveredCallsAreTheLastErrorsPerTarget(t *testing.T) {
	log := `I1130 15:46:50.000001       1 rpcserver.go:88] "RPC" method="/csi.v1.Node/NodeGetCapabilities" duration="20µs" code="OK"
E1130 15:46:57.902039       1 rpcserver.go:86] "RPC failed" err="rpc error: code = Unavailable desc = publish volume \"v\": the API server did not answer" method="/csi.v1.Node/NodePublishVolume" volume_id="v" target_path="/t/a" pod="ns/a" duration="3ms" code="Unavailable"
E1130 15:46:58.000000       1 rpcserver.go:86] "RPC failed" err="held by pod ns/a" method="/csi.v1.Node/NodePublishVolume" volume_id="v" target_path="/t/b" pod="ns/b" duration="1ms" code="FailedPrecondition"
I1130 15:47:10.000000       1 rpcserver.go:88] "RPC" method="/csi.v1.Node/NodePublishVolume" volume_id="v" target_path="/t/a" pod="ns/a" duration="9ms" code="OK"
E1130 15:47:11.000000       1 rpcserver.go:86] "RPC failed" err="x" method="/csi.v1.Node/NodePublishVolume" volume_id="other" target_path="/t/c" duration="1ms" code="Internal"
E1130 15:47:12.000000       1 rpcserver.go:86] "RPC failed" err="x" method="/csi.v1.Node/NodeGetVolumeStats" volume_id="v" target_path="/t/a" duration="1ms" code="Internal"
`
	calls := parseRPCLines(log, "v")
	assert.Equal(t, len(calls), 4, "calls about v: %+v", calls)
	// Stats are not mount calls; the failed publish was retried to success;
	// the refusal is an answer.
	assert.Equal(t, len(unrecovered(calls)), 0, "%+v", unrecovered(calls))

	// Once the publish that failed is the last word, it is stuck.
	stuck := unrecovered(calls[:2])
	assert.Equal(t, len(stuck), 1)
	assert.Equal(t, stuck[0].code, "Unavailable")
}

func TestPodsMountingReadsPodUIDsFromTheMountTable(t *testing.T) {
	table := `1380 1200 254:0 /lib/per-node.liken.sh/volumes/pv1/data /var/lib/kubelet/pods/aaa/volumes/kubernetes.io~csi/pv1/mount rw - ext4 /dev/vda rw
1381 1200 254:0 /lib/per-node.liken.sh/volumes/pv1/data /var/lib/kubelet/pods/bbb/volumes/kubernetes.io~csi/pv1/mount rw - ext4 /dev/vda rw
1382 1200 254:0 /lib/per-node.liken.sh/volumes/pv2/data /var/lib/kubelet/pods/ccc/volumes/kubernetes.io~csi/pv2/mount rw - ext4 /dev/vda rw
1383 1380 254:0 /lib/per-node.liken.sh/volumes/pv1/data /var/lib/kubelet/pods/aaa/volumes/kubernetes.io~csi/pv1/mount rw - ext4 /dev/vda rw
`
	assert.DeepEqual(t, podsMounting(table, "pv1"), []string{"aaa", "bbb"})
	assert.Equal(t, len(podsMounting(table, "pv3")), 0)
}

func TestOneDriverPerNodeRefusesASurge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		surge *intstr.IntOrString
		ok    bool
	}{
		{"unset", nil, true},
		{"zero", ptr(intstr.FromInt32(0)), true},
		{"zero percent", ptr(intstr.FromString("0%")), true},
		{"one", ptr(intstr.FromInt32(1)), false},
		{"ten percent", ptr(intstr.FromString("10%")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: tc.surge}}}}
			assert.Equal(t, oneDriverPerNode(ds) == nil, tc.ok, "%v", oneDriverPerNode(ds))
		})
	}
}

func TestRunningTwiceNamesANodeWithTwoRunningDrivers(t *testing.T) {
	pod := func(name, node string, running bool) corev1.Pod {
		st := corev1.ContainerState{}
		if running {
			st.Running = &corev1.ContainerStateRunning{}
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: driverContainer, State: st}}}}
	}
	assert.Equal(t, runningTwice([]corev1.Pod{pod("a", "n1", true), pod("b", "n2", true), pod("c", "n1", false)}), "")
	assert.Equal(t, runningTwice([]corev1.Pod{pod("a", "n1", true), pod("b", "n1", true)}), "node n1: a, b")
}

func ptr[T any](v T) *T { return &v }

// errorsT records a cleanup's errors instead of failing the test.
type errorsT struct {
	testing.TB
	errs []string
}

func (e *errorsT) Errorf(format string, a ...any) { e.errs = append(e.errs, fmt.Sprintf(format, a...)) }

// A cleanup whose first thaw fails (the node's container is gone) says so
// and still thaws the next frozen driver.
func TestCleanupThawsEveryFrozenDriverWhenOneThawFails(t *testing.T) {
	for _, frozen := range [][]string{{"gone 11"}, {"gone 11", "here 12"}} {
		t.Run(strings.Join(frozen, ","), func(t *testing.T) {
			et := &errorsT{TB: t}
			var thawed []string
			r := &Run{t: et, vars: map[string]string{}, lists: map[string][]string{"_frozen": slices.Clone(frozen)},
				exec: func(_ context.Context, node string, cmd ...string) (string, error) {
					if node == "gone" {
						return "", errors.New("no such container: gone")
					}
					thawed = append(thawed, node+": "+strings.Join(cmd, " "))
					return "", nil
				}}
			r.restoreControlPlane(context.Background())
			assert.Equal(t, len(et.errs), 1, "cleanup errors: %q", et.errs)
			assert.Assert(t, strings.Contains(et.errs[0], "gone"), "the error names the node: %q", et.errs[0])
			assert.Equal(t, len(thawed), len(frozen)-1, "thawed: %q", thawed)
			assert.Equal(t, len(r.lists["_frozen"]), 0, "left frozen: %q", r.lists["_frozen"])
		})
	}
}
