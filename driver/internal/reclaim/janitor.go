// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/election"
	"liken.sh/per-node/driver/internal/kube"
)

// JanitorLease is the name of the Lease, in the driver's namespace, whose
// holder is the janitor: the one driver that looks for PVs being deleted
// that no live node holds a copy of (their every holder is gone, so no
// watch of a holder sees them). Only a driver that runs, and whose
// controller has started, asks for it; one that stops renewing it (its
// node gone, its driver crash-looping or cut off from the API server)
// loses it to another once it expires, and one that stops cleanly (a
// rollout, a drain) gives it up at once. No Node's name decides: a node
// that runs no driver (Windows, a pool the chart leaves out) is never
// the janitor.
const JanitorLease = "per-node-janitor"

// janitorTiming is how the drivers choose the janitor and how often it
// looks. A driver that is not the janitor reads the Lease every retry (and
// up to 1.2 times as much again, at random): at 5 to 11 minutes, 5,000
// drivers ask about 10 times a second. The janitor renews it every retry;
// the others take it once it has not changed for lease. The janitor lists
// the PVs' metadata every every.
type janitorTiming struct {
	lease, renew, retry, every time.Duration
}

var defaultJanitorTiming = janitorTiming{lease: 15 * time.Minute, renew: 10 * time.Minute, retry: 5 * time.Minute, every: time.Minute}

var pvsResource = corev1.SchemeGroupVersion.WithResource("persistentvolumes")

// ElectJanitor makes this driver a candidate for the janitor once Run has
// started the controller: the Lease JanitorLease of leases (the driver's
// own namespace's). Without it the driver is never the janitor. Call it
// before Run.
func (c *Controller) ElectJanitor(leases kube.Leases) { c.leases = leases }

// campaign runs until ctx ends: it asks for the janitor's Lease, looks
// for orphaned PVs while it holds it, and asks again when it loses it.
func (c *Controller) campaign(ctx context.Context) {
	t := c.janitorTiming
	election.Run(ctx, election.Config{Leases: c.leases, Name: JanitorLease, Identity: c.node,
		Duration: t.lease, RenewDeadline: t.renew, RetryPeriod: t.retry}, func(ctx context.Context) {
		klog.InfoS("This node's driver is the janitor: it looks for PersistentVolumes being deleted that no live node holds",
			"lease", JanitorLease, "every", t.every)
		c.janitor(ctx)
		klog.InfoS("This node's driver is no longer the janitor", "lease", JanitorLease)
	})
}

// janitor looks at once, then every janitorTiming.every, until ctx ends
// (the Lease lost, or the driver stopping).
func (c *Controller) janitor(ctx context.Context) {
	for {
		if err := c.sweep(ctx); err != nil && ctx.Err() == nil {
			klog.InfoS("The janitor's sweep of PersistentVolumes being deleted failed; it tries again later", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.janitorTiming.every):
		}
	}
}

// sweep is one look of the janitor: of each PV that has been being
// deleted for orphanedAfter and carries this driver's finalizer, it
// deletes the Copies of gone nodes and releases it.
func (c *Controller) sweep(ctx context.Context) error {
	names, err := c.orphanCandidates(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		pv, err := getPVFresh(ctx, c.client, name)
		if err != nil {
			continue // gone meanwhile, or asked again at the next sweep
		}
		if !ours(pv) || pv.DeletionTimestamp == nil || time.Since(pv.DeletionTimestamp.Time) < orphanedAfter {
			continue
		}
		if err := c.forgetGoneNodes(ctx, pv); err != nil {
			klog.InfoS("Cannot release a PersistentVolume no live node holds; the next sweep tries again", "volume_id", name, "err", err.Error())
		}
	}
	return nil
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
