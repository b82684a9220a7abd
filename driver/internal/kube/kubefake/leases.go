// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package kubefake

import (
	"strconv"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"liken.sh/per-node/driver/internal/kube"
)

// Leases is a fake of the Leases of one namespace that keeps the API
// server's rule client-go's fake leaves out: an update must carry the
// resourceVersion stored (else Conflict), and each write makes a new one.
type Leases struct {
	kube.Leases
	Clientset *fake.Clientset
}

// NewLeases is an empty fake of namespace's Leases.
func NewLeases(namespace string) *Leases {
	c := fake.NewClientset()
	var mu sync.Mutex
	rv := 0
	next := func() string { rv++; return strconv.Itoa(rv) }
	c.PrependReactor("create", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		a.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease).ResourceVersion = next()
		return false, nil, nil
	})
	c.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		stored, err := c.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if stored.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), l.Name, nil)
		}
		l.ResourceVersion = next()
		return false, nil, nil
	})
	return &Leases{Leases: c.CoordinationV1().Leases(namespace), Clientset: c}
}
