// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/internal/harness"
)

// quickstartImage is the image docs/examples/quickstart runs, and the
// stand-in this test builds from the host's static busybox: the cluster
// pulls nothing.
const (
	quickstartImage = "busybox:1.37"
	standIn         = "per-node.liken.sh/busybox:quickstart"
)

// TestQuickstart applies docs/examples/quickstart as README tells a user
// to, with busybox replaced by a local stand-in, and checks what it says:
// three pods on three nodes, each appending to its node's copy; after a
// rollout restart, each new pod finds the lines of the pods that ran on its
// node before; deleting the example removes the PV and every copy.
func TestQuickstart(t *testing.T) {
	f := features.New("quickstart").Assess("docs/examples/quickstart does what its comments say",
		func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
			loadStandIn(ctx, t, lanes[0].cluster)
			objs, err := harness.RenderKustomization(filepath.Join(hcfg.Repo, "docs", "examples", "quickstart"), "")
			assert.NilError(t, err)
			r := client(t, c)
			for _, o := range objs {
				substituteImage(t, o)
				assert.NilError(t, r.Create(ctx, o), "create %s/%s", o.GetKind(), o.GetName())
			}
			t.Cleanup(func() { deleteQuickstart(t, r, objs) })

			first := readyLogPods(t, r, nil)
			for _, p := range first {
				assert.Equal(t, logOf(t, r, p), p.Name+" started on "+p.Spec.NodeName+"\n", "a node that never held the volume starts with an empty copy")
			}
			var d appsv1.Deployment
			assert.NilError(t, r.Get(ctx, "log", "quickstart", &d))
			if d.Spec.Template.Annotations == nil {
				d.Spec.Template.Annotations = map[string]string{}
			}
			d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
			assert.NilError(t, r.Update(ctx, &d))
			second := readyLogPods(t, r, first)
			before := map[string][]string{}
			for _, p := range first {
				before[p.Spec.NodeName] = append(before[p.Spec.NodeName], p.Name+" started on "+p.Spec.NodeName)
			}
			for _, p := range second {
				want := strings.Join(append(before[p.Spec.NodeName], p.Name+" started on "+p.Spec.NodeName), "\n") + "\n"
				assert.Equal(t, logOf(t, r, p), want, "a pod finds the lines its node's copy holds, and adds its own")
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// loadStandIn builds an image from the host's static busybox (Debian's
// busybox-static, which e2e/run.sh installs) and loads it on the cluster.
func loadStandIn(ctx context.Context, t *testing.T, cluster string) {
	t.Helper()
	busybox, err := osexec.LookPath("busybox")
	assert.NilError(t, err, "the quickstart's stand-in needs a static busybox on the host (apt-get install busybox-static; e2e/run.sh installs it)")
	dir := t.TempDir()
	bin, err := os.ReadFile(busybox)
	assert.NilError(t, err)
	f, err := elf.NewFile(bytes.NewReader(bin))
	assert.NilError(t, err, "%s", busybox)
	assert.Assert(t, !slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }),
		"%s asks for a dynamic loader: the stand-in image is scratch and needs Debian's busybox-static", busybox)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "busybox"), bin, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(
		"FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n"), 0o644))
	_, err = harness.Run(ctx, dir, "docker", "build", "-q", "-t", standIn, ".")
	assert.NilError(t, err)
	_, err = harness.Run(ctx, hcfg.Repo, "kind", "load", "docker-image", "--name", cluster, standIn)
	assert.NilError(t, err)
}

// substituteImage replaces the example's busybox with the stand-in, and
// fails if the example runs any other image.
func substituteImage(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	if o.GetKind() != "Deployment" {
		return
	}
	containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	assert.NilError(t, err)
	for i, c := range containers {
		cm := c.(map[string]any)
		assert.Equal(t, cm["image"], quickstartImage, "the example's container %d", i)
		cm["image"] = standIn
	}
	assert.NilError(t, unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"))
}

// readyLogPods waits until the Deployment has 3 ready pods, none of them in
// old, on 3 distinct nodes, and returns them.
func readyLogPods(t *testing.T, r *resources.Resources, old []corev1.Pod) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		var list corev1.PodList
		if err := r.WithNamespace("quickstart").List(context.Background(), &list, resources.WithLabelSelector("app=log")); err != nil {
			return poll.Continue("list pods: %v", err)
		}
		pods = pods[:0]
		nodes := map[string]bool{}
		var seen []string
		for _, p := range list.Items {
			ready := p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			isOld := slices.ContainsFunc(old, func(o corev1.Pod) bool { return o.UID == p.UID })
			seen = append(seen, fmt.Sprintf("%s on %s ready=%v old=%v", p.Name, p.Spec.NodeName, ready, isOld))
			if ready && !isOld {
				pods = append(pods, p)
				nodes[p.Spec.NodeName] = true
			}
		}
		if len(pods) == 3 && len(nodes) == 3 && len(list.Items) == 3 {
			return poll.Success()
		}
		return poll.Continue("expected 3 new ready pods on 3 nodes and no other; seen %s", strings.Join(seen, "; "))
	}, poll.WithTimeout(4*time.Minute), poll.WithDelay(2*time.Second))
	return pods
}

func logOf(t *testing.T, r *resources.Resources, p corev1.Pod) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := r.ExecInPod(context.Background(), p.Namespace, p.Name, "log", []string{"cat", "/data/log"}, &stdout, &stderr)
	assert.NilError(t, err, "cat /data/log in %s: %s", p.Name, stderr.String())
	return stdout.String()
}

// deleteQuickstart deletes what the example made, as kubectl delete -k
// would, and waits until the PV is gone: its copies are removed with it.
func deleteQuickstart(t *testing.T, r *resources.Resources, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, o := range slices.Backward(objs) {
		if err := r.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		var pv corev1.PersistentVolume
		err := r.Get(ctx, "quickstart-log", "", &pv)
		if apierrors.IsNotFound(err) {
			return poll.Success()
		}
		return poll.Continue("persistentvolume quickstart-log still there (finalizers %v, err %v)", pv.Finalizers, err)
	}, poll.WithTimeout(3*time.Minute), poll.WithDelay(2*time.Second))
}
