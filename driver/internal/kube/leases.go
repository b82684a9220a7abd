// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
)

// Leases is what the driver asks of the API server about the Leases of one
// namespace (the one the drivers choose their janitor by). client-go's
// typed client (and its fake) has these methods too.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// NewLeases is a client of the Leases of namespace with cfg's credentials
// and rate limit: coordination.k8s.io/v1, the one API group beside core/v1
// that the driver links (its types only).
func NewLeases(cfg *rest.Config, namespace string) (Leases, error) {
	rc, err := groupClient(cfg, coordinationv1.SchemeGroupVersion, "/apis", "")
	if err != nil {
		return nil, err
	}
	return gentype.NewClient[*coordinationv1.Lease]("leases", rc, parameterCodec, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, gentype.PrefersProtobuf[*coordinationv1.Lease]()), nil
}
