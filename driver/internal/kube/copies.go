// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"liken.sh/per-node/driver/internal/copyapi"
)

// Copies is what the driver asks of the API server about Copies. gentype's
// client (and its fake) has these methods.
type Copies interface {
	List(ctx context.Context, opts metav1.ListOptions) (*copyapi.CopyList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, c *copyapi.Copy, opts metav1.CreateOptions) (*copyapi.Copy, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// NewCopies is a client of Copies with cfg's credentials and rate limit.
func NewCopies(cfg *rest.Config) (Copies, error) {
	rc, err := groupClient(cfg, copyapi.SchemeGroupVersion, "/apis", runtime.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	return gentype.NewClientWithList[*copyapi.Copy, *copyapi.CopyList](
		copyapi.Resource, rc, parameterCodec, "",
		func() *copyapi.Copy { return &copyapi.Copy{} },
		func() *copyapi.CopyList { return &copyapi.CopyList{} }), nil
}

// CopyInformer watches the Copies that selector selects (a label selector).
func CopyInformer(copies Copies, resync time.Duration, selector string) cache.SharedIndexInformer {
	narrow := func(o *metav1.ListOptions) { o.LabelSelector = selector }
	return cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				narrow(&o)
				return copies.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				narrow(&o)
				return copies.Watch(ctx, o)
			},
		}, copies),
		&copyapi.Copy{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}})
}
