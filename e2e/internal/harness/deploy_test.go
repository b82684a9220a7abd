// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// repoRoot is relative to this package's folder, where go test runs (the
// build may trim source paths, so runtime.Caller would not say).
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	assert.NilError(t, err)
	return filepath.Join(wd, "..", "..", "..")
}

// TestDeployRenders checks the promises deploy/ makes, without a cluster.
func TestDeployRenders(t *testing.T) {
	objs, err := RenderDeploy(repoRoot(t), "per-node.liken.sh/driver:test")
	assert.NilError(t, err)
	byKind := map[string]*unstructured.Unstructured{}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = o
		byName[o.GetKind()+"/"+o.GetName()] = o
	}
	for _, k := range []string{"Namespace", "CSIDriver", "DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		assert.Assert(t, byKind[k] != nil, "deploy/ renders no %s", k)
	}
	for _, name := range []string{"per-node.liken.sh-records", "per-node.liken.sh-handle"} {
		assert.Assert(t, byName["ValidatingAdmissionPolicy/"+name] != nil, "deploy/ renders no policy %s", name)
		binding := byName["ValidatingAdmissionPolicyBinding/"+name]
		assert.Assert(t, binding != nil, "deploy/ renders no binding for %s", name)
		actions, _, _ := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions")
		assert.DeepEqual(t, actions, []string{"Deny"})
	}
	rules, _, _ := unstructured.NestedSlice(byKind["ClusterRole"].Object, "rules")
	for _, r := range rules {
		verbs, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "verbs")
		assert.Assert(t, !slices.Contains(verbs, "update"), "the driver needs no full-object update: %v", r)
	}

	driver := byKind["CSIDriver"].Object["spec"].(map[string]any)
	assert.Equal(t, byKind["CSIDriver"].GetName(), DriverName)
	assert.Equal(t, driver["attachRequired"], false)
	assert.Equal(t, driver["podInfoOnMount"], true)
	assert.DeepEqual(t, driver["volumeLifecycleModes"], []any{"Persistent"})
	assert.Equal(t, driver["fsGroupPolicy"], "None")

	ds := byKind["DaemonSet"]
	containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	assert.Equal(t, len(containers), 1, "one container, no sidecars")
	c := containers[0].(map[string]any)
	assert.Equal(t, c["image"], "per-node.liken.sh/driver:test")
	// An upgrade never runs two driver processes on one node, and moves to
	// the next node only once this one's driver is registered.
	surge, _, _ := unstructured.NestedFieldNoCopy(ds.Object, "spec", "updateStrategy", "rollingUpdate", "maxSurge")
	assert.Equal(t, surge, int64(0), "the DaemonSet's rolling update must surge by 0")
	readyz, _, _ := unstructured.NestedString(c, "readinessProbe", "httpGet", "path")
	assert.Equal(t, readyz, "/readyz")
	assert.Equal(t, c["securityContext"].(map[string]any)["privileged"], true)
	assert.Equal(t, c["securityContext"].(map[string]any)["readOnlyRootFilesystem"], true)
	propagation := map[string]any{}
	for _, m := range c["volumeMounts"].([]any) {
		mm := m.(map[string]any)
		propagation[mm["mountPath"].(string)] = mm["mountPropagation"]
	}
	// Only what the driver needs of kubelet's directory, never all of it.
	assert.DeepEqual(t, propagation, map[string]any{
		"/var/lib/kubelet/pods":                      "Bidirectional",
		"/var/lib/kubelet/plugins/per-node.liken.sh": nil,
		"/var/lib/kubelet/plugins_registry":          nil,
		"/var/lib/per-node.liken.sh":                 "HostToContainer",
	})
	selector, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "template", "spec", "nodeSelector")
	assert.DeepEqual(t, selector, map[string]string{"kubernetes.io/os": "linux"})
	tolerations, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "tolerations")
	assert.DeepEqual(t, tolerations, []any{map[string]any{"operator": "Exists"}})
	assert.Equal(t, ds.GetNamespace(), "per-node-system")
}

func TestUntilSaysWhatItSaw(t *testing.T) {
	err := Until(context.Background(), "the answer", 300*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "41", nil
	})
	assert.ErrorContains(t, err, "waiting for the answer; last seen: 41")

	boom := errors.New("boom")
	err = Until(context.Background(), "x", time.Second, func(context.Context) (bool, string, error) { return false, "", boom })
	assert.Assert(t, errors.Is(err, boom))
}

// The documented overlay renders deploy/ with the image it names, and
// nothing else changed.
func TestExampleOverlayPinsTheImage(t *testing.T) {
	base, err := RenderDeploy(repoRoot(t), "registry.example.com/storage/per-node:v0.1.0")
	assert.NilError(t, err)
	overlay, err := RenderKustomization(filepath.Join(repoRoot(t), "docs", "examples", "kustomize"), "")
	assert.NilError(t, err)
	assert.DeepEqual(t, byKindAndName(overlay), byKindAndName(base))
}
