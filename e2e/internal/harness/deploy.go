// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// DriverName is the CSI driver under test.
const DriverName = "per-node.liken.sh"

// RenderDeploy renders the kustomize base in deploy/ with the driver image
// replaced by image (unless empty), as `kubectl kustomize` would.
func RenderDeploy(repo, image string) ([]*unstructured.Unstructured, error) {
	return RenderKustomization(filepath.Join(repo, "deploy"), image)
}

// RenderKustomization renders the kustomization in dir, with the driver
// image replaced by image (unless empty).
func RenderKustomization(dir, image string) ([]*unstructured.Unstructured, error) {
	fs := filesys.MakeFsOnDisk()
	opts := krusty.MakeDefaultOptions()
	resMap, err := krusty.MakeKustomizer(opts).Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		if u.GetKind() == "DaemonSet" && image != "" {
			if err := setImage(u, "driver", image); err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// setImage sets the image of ds's container named name to image.
func setImage(ds *unstructured.Unstructured, name, image string) error {
	containers, _, err := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return err
	}
	for _, c := range containers {
		m := c.(map[string]any)
		if m["name"] == name {
			m["image"] = image
		}
	}
	return unstructured.SetNestedSlice(ds.Object, containers, "spec", "template", "spec", "containers")
}

// Apply creates each object, or replaces it if it exists.
func Apply(ctx context.Context, r *resources.Resources, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		err := r.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			// A controller may write the object between our read and our
			// update (a PodDisruptionBudget's status): read again and retry.
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := &unstructured.Unstructured{}
				cur.SetGroupVersionKind(o.GroupVersionKind())
				if err := r.Get(ctx, o.GetName(), o.GetNamespace(), cur); err != nil {
					return err
				}
				o.SetResourceVersion(cur.GetResourceVersion())
				return r.Update(ctx, o)
			})
		}
		if err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// WaitRegistered waits until every node's CSINode lists the driver and the
// driver's DaemonSet has rolled out.
func WaitRegistered(ctx context.Context, r *resources.Resources, timeout time.Duration) error {
	return Until(ctx, "every node's CSINode to list "+DriverName, timeout, func(ctx context.Context) (bool, string, error) {
		var nodes corev1.NodeList
		if err := r.List(ctx, &nodes); err != nil {
			return false, "", err
		}
		var missing []string
		for _, n := range nodes.Items {
			var cn storagev1.CSINode
			if err := r.Get(ctx, n.Name, "", &cn); err != nil {
				missing = append(missing, n.Name+" (no CSINode)")
				continue
			}
			found := false
			for _, d := range cn.Spec.Drivers {
				found = found || d.Name == DriverName
			}
			if !found {
				missing = append(missing, n.Name)
			}
		}
		sort.Strings(missing)
		if len(nodes.Items) == 0 {
			return false, "no nodes", nil
		}
		return len(missing) == 0, fmt.Sprintf("%d nodes, without the driver: %v", len(nodes.Items), missing), nil
	})
}

// WaitRolledOut waits until a DaemonSet runs its current template, ready, on
// every node it wants.
func WaitRolledOut(ctx context.Context, r *resources.Resources, namespace, name string, timeout time.Duration) error {
	return Until(ctx, "DaemonSet "+namespace+"/"+name+" to roll out", timeout, func(ctx context.Context) (bool, string, error) {
		var ds appsv1.DaemonSet
		if err := r.Get(ctx, name, namespace, &ds); err != nil {
			return false, "", Unobserved(err)
		}
		st := ds.Status
		seen := fmt.Sprintf("generation %d observed %d, desired %d, updated %d, ready %d",
			ds.Generation, st.ObservedGeneration, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady)
		done := st.ObservedGeneration >= ds.Generation && st.DesiredNumberScheduled > 0 &&
			st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled
		return done, seen, nil
	})
}

// NodeReady reports whether a node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodReady reports whether a pod is Ready and not being deleted.
func PodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
