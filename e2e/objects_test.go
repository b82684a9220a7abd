// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"liken.sh/per-node/e2e/internal/harness"
)

// The guide's objects and the small helpers the Go e2e tests share.

func client(t *testing.T, c *envconf.Config) *resources.Resources {
	t.Helper()
	r, err := resources.New(c.Client().RESTConfig())
	assert.NilError(t, err)
	return r
}

// workers lists the nodes that are not control planes, sorted by name.
func workers(t *testing.T, r *resources.Resources) []string {
	t.Helper()
	var nodes corev1.NodeList
	assert.NilError(t, r.List(context.Background(), &nodes))
	var out []string
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T, r *resources.Resources) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + rand.String(6)}}
	assert.NilError(t, r.Create(context.Background(), ns))
	t.Cleanup(func() { _ = r.Delete(context.Background(), ns) })
	return ns.Name
}

// guideVolume creates the guide's PersistentVolume and claim in ns. The
// PV's copies are removed from every node when the test ends.
func guideVolume(t *testing.T, r *resources.Resources, ns string) (pv string) {
	t.Helper()
	pv = ns + "-store"
	perNodeVolume(t, r, ns, pv, "store")
	return pv
}

// perNodeVolume creates a per-node PersistentVolume pv bound to the claim
// ns/claimName, and the claim, and waits until they are bound. The PV's
// copies are removed from every node when the test ends.
func perNodeVolume(t *testing.T, r *resources.Resources, ns, pv, claimName string) {
	t.Helper()
	createPerNodeVolume(t, r, ns, pv, claimName)
	waitBound(t, r, ns, claimName)
}

// createPerNodeVolume creates the PV and its claim without waiting.
func createPerNodeVolume(t *testing.T, r *resources.Resources, ns, pv, claimName string) {
	t.Helper()
	ctx := context.Background()
	vol, claim := perNodeObjects(ns, pv, claimName)
	assert.NilError(t, r.Create(ctx, vol))
	t.Cleanup(func() {
		podsGone(t, r, ns) // cleanups run last in, first out: the namespace is still there
		_ = r.Delete(ctx, vol)
		removeCopies(t, pv)
	})
	assert.NilError(t, r.Create(ctx, claim))
}

// podsGone deletes the pods of ns and waits until they are gone, so that
// their copies are unmounted before anything removes them.
func podsGone(t *testing.T, r *resources.Resources, ns string) {
	t.Helper()
	ctx := context.Background()
	var pods corev1.PodList
	if err := r.WithNamespace(ns).List(ctx, &pods); err != nil {
		t.Logf("listing the pods of %s: %v", ns, err)
		return
	}
	for i := range pods.Items {
		_ = r.Delete(ctx, &pods.Items[i])
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		var left corev1.PodList
		if err := r.WithNamespace(ns).List(ctx, &left); err != nil {
			return poll.Continue("listing the pods of %s: %v", ns, err)
		}
		if len(left.Items) > 0 {
			return poll.Continue("%d pods of %s left, first %s (%s)", len(left.Items), ns, left.Items[0].Name, left.Items[0].Status.Phase)
		}
		return poll.Success()
	}, poll.WithTimeout(3*time.Minute), poll.WithDelay(time.Second))
}

// perNodeObjects are a per-node PV and the claim its claimRef names.
func perNodeObjects(ns, pv, claimName string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	vol := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "per-node",
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claimName},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: harness.DriverName, VolumeHandle: pv,
			}},
		},
	}
	sc := "per-node"
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:       pv,
		},
	}
	return vol, claim
}

// waitBound waits until the claim ns/claimName is bound.
func waitBound(t *testing.T, r *resources.Resources, ns, claimName string) {
	t.Helper()
	ctx := context.Background()
	claim := &corev1.PersistentVolumeClaim{}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if err := r.Get(ctx, claimName, ns, claim); err != nil {
			return poll.Continue("get claim: %v", err)
		}
		if claim.Status.Phase != corev1.ClaimBound {
			return poll.Continue("claim %s/%s is %s", ns, claimName, claim.Status.Phase)
		}
		return poll.Success()
	}, poll.WithTimeout(time.Minute), poll.WithDelay(250*time.Millisecond))
}

// removeCopies deletes a test PV's copies on every node.
func removeCopies(t *testing.T, pv string) {
	out, err := harness.Run(context.Background(), hcfg.Repo, "kind", "get", "nodes", "--name", hcfg.Cluster)
	if err != nil {
		t.Logf("listing nodes to remove copies of %s: %v", pv, err)
		return
	}
	for _, node := range strings.Fields(out) {
		if _, err := harness.Run(context.Background(), hcfg.Repo, "docker", "exec", node,
			"rm", "-rf", "/var/lib/per-node.liken.sh/volumes/"+pv); err != nil {
			t.Logf("removing the copy of %s on %s: %v", pv, node, err)
		}
	}
}

// probePod is a pod on node that mounts the claim at /data and holds it.
func probePod(ns, name, node string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "probe"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, Args: []string{"hold"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "store"},
			}}},
		},
	}
}

// waitRunning waits until the pod runs and is ready.
func waitRunning(t *testing.T, r *resources.Resources, pod *corev1.Pod, timeout time.Duration) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if err := r.Get(context.Background(), pod.Name, pod.Namespace, pod); err != nil {
			return poll.Continue("get pod: %v", err)
		}
		if pod.Status.Phase == corev1.PodRunning && harness.PodReady(pod) {
			return poll.Success()
		}
		return poll.Continue("pod %s/%s is %s: %s; events: %s", pod.Namespace, pod.Name, pod.Status.Phase,
			containerStates(pod), eventsOf(r, pod))
	}, poll.WithTimeout(timeout), poll.WithDelay(500*time.Millisecond))
}

func containerStates(p *corev1.Pod) string {
	var s []string
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s = append(s, c.Name+" waiting: "+c.State.Waiting.Reason)
		case c.State.Terminated != nil:
			s = append(s, c.Name+" terminated: "+c.State.Terminated.Reason)
		default:
			s = append(s, c.Name+" running")
		}
	}
	return strings.Join(s, ", ")
}

// eventsOf lists the events about an object, oldest first.
func eventsOf(r *resources.Resources, pod *corev1.Pod) string {
	var events corev1.EventList
	if err := r.WithNamespace(pod.Namespace).List(context.Background(), &events,
		resources.WithFieldSelector("involvedObject.name="+pod.Name)); err != nil {
		return "(listing events: " + err.Error() + ")"
	}
	var s []string
	for _, e := range events.Items {
		s = append(s, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return strings.Join(s, " | ")
}

// exec runs the probe in a pod and returns what it printed.
func exec(t *testing.T, r *resources.Resources, pod *corev1.Pod, args ...string) string {
	t.Helper()
	out, err := tryExec(r, pod, args...)
	assert.NilError(t, err)
	return out
}

// tryExec is exec for a caller that polls.
func tryExec(r *resources.Resources, pod *corev1.Pod, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	err := r.ExecInPod(context.Background(), pod.Namespace, pod.Name, "probe", append([]string{"/probe"}, args...), &stdout, &stderr)
	if err != nil {
		return "", fmt.Errorf("exec probe %v in %s/%s: %w: %s", args, pod.Namespace, pod.Name, err, stderr.String())
	}
	return stdout.String(), nil
}
