// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kindInfo is what the runner needs to know of a kind a document may use.
type kindInfo struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	// newObj returns an empty typed object, used to reject unknown fields.
	newObj func() runtime.Object
}

var kinds = map[string]kindInfo{
	"Pod":                   {corev1.SchemeGroupVersion.WithKind("Pod"), true, func() runtime.Object { return &corev1.Pod{} }},
	"Service":               {corev1.SchemeGroupVersion.WithKind("Service"), true, func() runtime.Object { return &corev1.Service{} }},
	"PersistentVolumeClaim": {corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), true, func() runtime.Object { return &corev1.PersistentVolumeClaim{} }},
	"PersistentVolume":      {corev1.SchemeGroupVersion.WithKind("PersistentVolume"), false, func() runtime.Object { return &corev1.PersistentVolume{} }},
	"Node":                  {corev1.SchemeGroupVersion.WithKind("Node"), false, func() runtime.Object { return &corev1.Node{} }},
	"Deployment":            {appsv1.SchemeGroupVersion.WithKind("Deployment"), true, func() runtime.Object { return &appsv1.Deployment{} }},
	"PodDisruptionBudget":   {policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), true, func() runtime.Object { return &policyv1.PodDisruptionBudget{} }},
}

func kindNames() string {
	var n []string
	for k := range kinds {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// checkObject refuses an unknown kind, a wrong apiVersion, or a field the
// kind does not have (a misspelling would otherwise be silently ignored).
func checkObject(obj map[string]any) error {
	kind, _ := obj["kind"].(string)
	info, ok := kinds[kind]
	if !ok {
		return fmt.Errorf("unknown kind %q; documents may use %s", kind, kindNames())
	}
	if av, ok := obj["apiVersion"].(string); ok && av != info.gvk.GroupVersion().String() {
		return fmt.Errorf("%s has apiVersion %s, not %q", kind, info.gvk.GroupVersion(), av)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(info.newObj()); err != nil {
		return fmt.Errorf("%s: %v", kind, err)
	}
	return nil
}
