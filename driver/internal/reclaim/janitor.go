// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// janitorEvery is how often each driver asks whether it is the janitor:
// the driver of the first Node by name, the one node that looks for PVs
// being deleted that no live node holds a copy of (their every holder is
// gone, so no watch of a holder sees them). Each driver asks with one list
// of a single Node's metadata; only the janitor lists PVs.
const janitorEvery = 10 * time.Minute

var pvsResource = corev1.SchemeGroupVersion.WithResource("persistentvolumes")

// janitor runs until ctx ends: every janitorEvery (and a random share of
// it, so that not every driver asks at once), if this node is the first
// Node by name, it deletes the Copies of gone nodes of each PV that has
// been being deleted for orphanedAfter and carries this driver's
// finalizer, and releases it.
func (c *Controller) janitor(ctx context.Context) {
	for {
		wait := janitorEvery + rand.N(janitorEvery/2) // #nosec G404 -- a spread, not a secret
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := c.sweep(ctx); err != nil {
			klog.InfoS("The janitor's sweep of PersistentVolumes being deleted failed; it tries again later", "err", err.Error())
		}
	}
}

// sweep is one look of the janitor.
func (c *Controller) sweep(ctx context.Context) error {
	first, err := c.firstNode(ctx)
	if err != nil || first != c.node {
		return err
	}
	names, err := c.orphanCandidates(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		pv, err := getPVFresh(ctx, c.client, name)
		if err != nil {
			continue // gone meanwhile, or asked again at the next sweep
		}
		if !ours(pv) || pv.DeletionTimestamp == nil || time.Since(pv.DeletionTimestamp.Time) < orphanedAfter+spread(c.node) {
			continue
		}
		if err := c.forgetGoneNodes(ctx, pv); err != nil {
			klog.InfoS("Cannot release a PersistentVolume no live node holds; the next sweep tries again", "volume_id", name, "err", err.Error())
		}
	}
	return nil
}

// firstNode is the name of the first Node by name (the API server lists
// them in that order): one list of one Node's metadata.
func (c *Controller) firstNode(ctx context.Context) (string, error) {
	lctx, cancel := context.WithTimeout(ctx, APITimeout)
	defer cancel()
	l, err := c.meta.Resource(nodesResource).List(lctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", apiError(err, "list the first Node")
	}
	if len(l.Items) == 0 {
		return "", nil
	}
	return l.Items[0].Name, nil
}

// orphanCandidates lists, from a paged list of every PV's metadata, those
// being deleted that carry Finalizer.
func (c *Controller) orphanCandidates(ctx context.Context) ([]string, error) {
	var out []string
	err := c.eachMetadata(ctx, pvsResource, func(p *metav1.PartialObjectMetadata) {
		if p.DeletionTimestamp != nil && slices.Contains(p.Finalizers, Finalizer) {
			out = append(out, p.Name)
		}
	})
	if err != nil {
		return nil, apiError(err, "list the PersistentVolumes being deleted")
	}
	return out, nil
}
