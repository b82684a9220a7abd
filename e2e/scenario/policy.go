// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"liken.sh/per-node/e2e/internal/harness"
)

// stepPolicyOff takes an admission policy's binding away, as on a cluster
// where the policy was never installed, and puts it back when the scenario
// ends, whatever its outcome. It returns once the API server lets through
// what the handle policy refuses (a dry run of a PV whose handle is not its
// name).
func stepPolicyOff(ctx context.Context, r *Run, a args) error {
	var b admissionv1.ValidatingAdmissionPolicyBinding
	if err := r.env.R.Get(ctx, a["name"], "", &b); err != nil {
		return fmt.Errorf("the binding of admission policy %s: %w", a["name"], err)
	}
	saved := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: b.Labels, Annotations: b.Annotations},
		Spec:       b.Spec,
	}
	if err := r.env.R.Delete(ctx, &b); err != nil {
		return err
	}
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.env.R.Create(ctx, saved); err != nil && !apierrors.IsAlreadyExists(err) {
			r.t.Errorf("put the binding of admission policy %s back: %v", saved.Name, err)
			return
		}
		r.t.Logf("the binding of admission policy %s is back", saved.Name)
	})
	cs, err := r.clientset()
	if err != nil {
		return err
	}
	probe := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: r.vars["pv"] + "-policy-probe"},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "per-node.liken.sh", VolumeHandle: r.vars["pv"] + "-not-its-name"}},
		},
	}
	what := fmt.Sprintf("the API server to stop enforcing admission policy %s", a["name"])
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().PersistentVolumes().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, "a dry run of a PV whose handle is not its name: " + err.Error(), nil
		}
		return true, "", nil
	})
}
