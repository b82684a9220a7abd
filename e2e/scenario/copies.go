// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// A node's record of a PersistentVolume is a Copy (copies.per-node.liken.sh,
// deploy/crd.yaml); the PV carries one finalizer while any remains.
var copyGVR = schema.GroupVersionResource{Group: "per-node.liken.sh", Version: "v1alpha1", Resource: "copies"}

// copiesFinalizer is on a per-node PV while any Copy of it remains.
const copiesFinalizer = "per-node.liken.sh/copies"

// Labels of a Copy (a name longer than 63 characters is shortened in them;
// the scenarios' names are shorter).
const (
	copyVolumeLabel    = "per-node.liken.sh/volume"
	copyVolumeUIDLabel = "per-node.liken.sh/volume-uid"
	copyNodeLabel      = "per-node.liken.sh/node"
)

// aCopy is what a scenario reads of a Copy.
type aCopy struct {
	name, volume, uid, node string
	created                 time.Time
}

func copiesClient(cfg *rest.Config) (dynamic.NamespaceableResourceInterface, error) {
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return d.Resource(copyGVR), nil
}

// copiesOf lists the Copies of the PersistentVolume named volume, of any
// UID, as an administrator.
func (r *Run) copiesOf(ctx context.Context, volume string) ([]aCopy, error) {
	c, err := copiesClient(r.env.R.GetConfig())
	if err != nil {
		return nil, err
	}
	var out []aCopy
	opts := metav1.ListOptions{LabelSelector: copyVolumeLabel + "=" + volume, Limit: 1000}
	for {
		l, err := c.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list the Copies of PersistentVolume %s: %w", volume, err)
		}
		for _, u := range l.Items {
			cp := readCopy(u)
			if cp.volume == volume {
				out = append(out, cp)
			}
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

func readCopy(u unstructured.Unstructured) aCopy {
	s := func(f string) string { v, _, _ := unstructured.NestedString(u.Object, "spec", f); return v }
	return aCopy{name: u.GetName(), volume: s("volume"), uid: s("volumeUID"), node: s("node"), created: u.GetCreationTimestamp().Time}
}

// recorded is the PV named name and the nodes that hold a Copy of it (of
// its UID), sorted: the nodes it records, if it carries the finalizer.
func (r *Run) recorded(ctx context.Context, name string) (*corev1.PersistentVolume, []string, error) {
	pv, err := r.pv(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	cs, err := r.copiesOf(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	var nodes []string
	for _, c := range cs {
		if c.uid == string(pv.UID) {
			nodes = append(nodes, c.node)
		}
	}
	slices.Sort(nodes)
	return pv, slices.Compact(nodes), nil
}

// copyOwned is the Copy of the PersistentVolume named volume (of its UID
// now) on node, owned by the Node named owner as the driver writes it, or
// by nothing if owner is "".
func (r *Run) copyOwned(ctx context.Context, volume, node, owner string) (*unstructured.Unstructured, error) {
	pv, err := r.pv(ctx, volume)
	if err != nil {
		return nil, err
	}
	c := copyObject(pv, node)
	if owner == "" {
		return c, nil
	}
	var n corev1.Node
	if err := r.env.R.Get(ctx, owner, "", &n); err != nil {
		return nil, fmt.Errorf("read Node %s: %w", owner, err)
	}
	c.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner, UID: n.UID}})
	return c, nil
}

// copyObject is the Copy of pv on node, to be created, owned by nothing (as
// an administrator or a restore writes it).
func copyObject(pv *corev1.PersistentVolume, node string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": copyGVR.GroupVersion().String(), "kind": "Copy",
		"metadata": map[string]any{"generateName": "e2e-" + pv.Name + "-",
			"labels": map[string]any{copyVolumeLabel: pv.Name, copyVolumeUIDLabel: string(pv.UID), copyNodeLabel: node}},
		"spec": map[string]any{"volume": pv.Name, "volumeUID": string(pv.UID), "node": node},
	}}
	return u
}

// createCopies creates, as an administrator, the Copies of pv on nodes,
// workers at once (thousands in seconds, not one round trip each).
func (r *Run) createCopies(ctx context.Context, pv *corev1.PersistentVolume, nodes []string) error {
	cfg := rest.CopyConfig(r.env.R.GetConfig())
	cfg.QPS, cfg.Burst = -1, 0 // the API server's own fairness paces them
	c, err := copiesClient(cfg)
	if err != nil {
		return err
	}
	const workers = 16
	work := make(chan string)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := range work {
				if _, err := c.Create(ctx, copyObject(pv, n), metav1.CreateOptions{}); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("create the Copy of PersistentVolume %s on %s: %w", pv.Name, n, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	return first
}
