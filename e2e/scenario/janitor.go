// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps about the janitor: the one driver, chosen by the Lease
// janitorLease, that releases PVs no live node holds.

const janitorLease = "per-node-janitor"

// stepAddDriverlessNode creates, as an administrator, a Node that sorts
// before every other and runs no driver (a Windows node: the chart's
// nodeSelector leaves it out; no kubelet stands behind it here), and
// deletes it when the scenario ends.
func stepAddDriverlessNode(ctx context.Context, r *Run, a args) error {
	name := "a-" + r.ns() + "-windows"
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/os": "windows"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/no-kubelet", Effect: corev1.TaintEffectNoExecute}}}}
	if err := r.env.R.Create(ctx, n); err != nil {
		return fmt.Errorf("create Node %s: %w", name, err)
	}
	r.t.Cleanup(func() {
		if err := r.env.R.Delete(context.Background(), n); err != nil && !apierrors.IsNotFound(err) {
			r.t.Errorf("cleanup: delete Node %s: %v", name, err)
		}
	})
	ws, err := r.workers(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
	}
	slices.Sort(names)
	if names[0] != name {
		return fmt.Errorf("the new Node %s does not sort first of %v: this run proves nothing about it", name, names)
	}
	r.vars[a["as"]] = name
	return nil
}

// stepJanitorIsARunningDriver: the janitor's Lease names a node whose
// driver pod is ready, never one that runs none.
func stepJanitorIsARunningDriver(ctx context.Context, r *Run, _ args) error {
	return harness.Until(ctx, "the janitor's Lease to name a node with a ready driver", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var l coordinationv1.Lease
		if err := r.env.R.Get(ctx, janitorLease, driverNamespace, &l); err != nil {
			return false, "", harness.Unobserved(err)
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		pods, err := r.driverPodsOn(ctx, holder)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		for _, p := range pods {
			if harness.PodReady(&p) {
				r.t.Logf("the janitor is node %s (its driver %s is ready)", holder, p.Name)
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("Lease %s/%s held by %q, whose driver pods are: %s", driverNamespace, janitorLease, holder, r.driverPodsReport(pods)), nil
	})
}

// stepDriverTakesJanitorAsOther: the driver on node may not write the
// janitor's Lease as another node's, nor write another Lease.
func stepDriverTakesJanitorAsOther(ctx context.Context, r *Run, a args) error {
	c, err := kubernetes.NewForConfig(r.driverConfig(a["node"]))
	if err != nil {
		return err
	}
	leases := c.CoordinationV1().Leases(driverNamespace)
	l, err := leases.Get(ctx, janitorLease, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the driver's account on %s reads the janitor's Lease: %w", a["node"], err)
	}
	other := a["other"]
	l.Spec.HolderIdentity = &other
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	if err := r.refusedByPolicy(err, a["node"], "make "+other+" the janitor", "Lease "+driverNamespace+"/"+janitorLease, ""); err != nil {
		return err
	}
	own := a["node"]
	made, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "per-node-other"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &own}}, metav1.CreateOptions{})
	if err == nil {
		_ = r.env.R.Delete(ctx, made)
	}
	return r.refusedByPolicy(err, a["node"], "create a Lease of its own", "Lease "+driverNamespace+"/per-node-other", "")
}
