// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzRecorded: whatever finalizers and annotations a PV carries (anyone
// can write them), every node Recorded names is one whose own finalizer is
// on the PV, so a record is never read as a node it does not spell.
func FuzzRecorded(f *testing.F) {
	f.Add("per-node.liken.sh/worker-a", "", "")
	f.Add(Finalizer(name64), Finalizer(name64), name64)
	f.Add(Finalizer(name253), Finalizer(name253), name253+"x")
	f.Add(Finalizer(name64), Finalizer(name64), "")
	f.Add("per-node.liken.sh/"+strings.Repeat("a", 50)+"-0123456789ab", "", "")
	f.Fuzz(func(t *testing.T, finalizer, annotationKey, annotationValue string) {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{
			Finalizers:  []string{finalizer},
			Annotations: map[string]string{annotationKey: annotationValue},
		}}
		for _, n := range Recorded(pv) {
			if !slices.Contains(pv.Finalizers, Finalizer(n)) {
				t.Fatalf("Recorded named %q, whose finalizer %q is not on the PV (%q)", n, Finalizer(n), pv.Finalizers)
			}
		}
	})
}
