// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/klient/k8s"

	"liken.sh/per-node/e2e/internal/harness"
)

// --- cleanup ----------------------------------------------------------------

func (r *Run) createNamespace(ctx context.Context) error {
	return r.env.R.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns()}})
}

// cleanup undoes what the scenario did, pass or fail: the API server
// started and frozen drivers thawed, writers and watches stopped, kubelets
// and stopped nodes started and waited for, the driver rolled back to its
// image, nodes uncordoned, the namespace deleted, copies given a small
// filesystem put back on their disks. Then it deletes the
// scenario's PersistentVolumes and checks the promise itself: deleting a
// PV removes every copy on every node, trash included. A PV that does not go, or a copy left behind, fails the
// scenario; only then is it removed by hand, as a backstop.
func (r *Run) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if r.t.Failed() {
		r.exportPodLogs(ctx)
	}
	r.restoreControlPlane(ctx)
	for _, w := range r.writers {
		w.stop()
	}
	for _, w := range r.watches {
		w.stop()
	}
	for _, n := range r.lists["_kubelet_stopped"] {
		if err := stepStartKubelet(ctx, r, args{"node": n}); err != nil {
			r.t.Errorf("cleanup: starting kubelet on %s: %v", n, err)
		}
	}
	for _, n := range r.lists["_stopped"] {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		if err := stepStartNode(sctx, r, args{"node": n}); err != nil {
			r.t.Errorf("cleanup: starting node %s: %v", n, err)
		}
		cancel()
	}
	if r.vars["_suite_driver_gone"] != "" {
		if err := stepReinstallSuiteDriver(ctx, r, nil); err != nil {
			r.t.Errorf("cleanup: installing the suite's driver again: %v", err)
		}
	}
	r.restoreDriver(ctx)
	for _, n := range r.lists["_cordoned"] {
		if err := r.cordon(ctx, n, false); err != nil {
			r.t.Errorf("cleanup: uncordon %s: %v", n, err)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns()}}
	_ = r.env.R.Delete(ctx, ns)
	err := harness.Until(ctx, "namespace "+r.ns()+" to be gone", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := r.env.R.Get(ctx, r.ns(), "", &corev1.Namespace{})
		return apierrors.IsNotFound(err), r.podsReport(ctx), nil
	})
	if err != nil {
		r.t.Errorf("cleanup: %v", err)
	}
	r.restoreDisks(ctx)
	r.removeCanaries(ctx)
	for _, pv := range r.lists["_pvs"] {
		r.deletePVAndCheckCopies(ctx, pv)
	}
}

// deletePVAndCheckCopies deletes a PV, fails the scenario unless the PV
// goes and no worker keeps a copy of it, and then removes what is left.
func (r *Run) deletePVAndCheckCopies(ctx context.Context, pv string) {
	obj := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}}
	if err := r.env.R.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		r.t.Errorf("cleanup: delete PersistentVolume %s: %v", pv, err)
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := stepPVGone(gctx, r, args{"name": pv})
	cancel()
	if err != nil {
		r.t.Errorf("cleanup: deleting PersistentVolume %s: %v; its finalizers are removed by hand", pv, err)
		patch := k8s.Patch{PatchType: types.MergePatchType, Data: []byte(`{"metadata":{"finalizers":null}}`)}
		_ = r.env.R.Patch(ctx, obj, patch)
	}
	nodes, err := r.workers(ctx)
	if err != nil {
		r.t.Errorf("cleanup: list workers: %v", err)
		return
	}
	for _, n := range nodes {
		err := r.untilNoCopy(ctx, n.Name, pv, time.Minute)
		if err == nil {
			continue
		}
		r.t.Errorf("cleanup: PersistentVolume %s was deleted, but %v; removed by hand", pv, err)
		script := fmt.Sprintf("rm -rf %s/volumes/%s %s/trash/%s.*", copiesRoot, pv, copiesRoot, trashPrefix(pv))
		if _, err := r.onNode(ctx, n.Name, "sh", "-c", script); err != nil {
			r.t.Logf("cleanup: removing the copy of %s on %s: %v", pv, n.Name, err)
		}
	}
}
