// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kube connects the driver to the API server with only the core/v1
// types linked in. client-go's kubernetes package (the clientset, its
// informer factory and the metadata informer factory) registers every API
// group in its scheme, which adds megabytes of generated code the driver
// never runs; and since the kernel maps a binary's pages as they are
// reached, a larger binary is a larger resident set on every node. The
// clients here are client-go's own generic typed clients (gentype) and
// informers (tools/cache) over a scheme of core/v1 and coordination/v1
// (Leases: the janitor's election) alone; `make test` checks that the
// driver links no other group (driver/build_test.go).
package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"liken.sh/per-node/driver/internal/copyapi"
)

// Scheme knows the core/v1 types, the driver's own Copy, and Lease: what
// the driver reads, writes and records events on.
var Scheme = runtime.NewScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	if err := corev1.AddToScheme(Scheme); err != nil {
		panic(err) // a registration conflict in k8s.io/api itself
	}
	if err := copyapi.AddToScheme(Scheme); err != nil {
		panic(err)
	}
	if err := coordinationv1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
}

// PersistentVolumes is what the driver asks of the API server about
// PersistentVolumes. client-go's typed client (and its fake) has these
// methods too, so tests can pass fake.NewClientset().CoreV1().PersistentVolumes().
type PersistentVolumes interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolume, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions,
		subresources ...string) (*corev1.PersistentVolume, error)
}

// NewPersistentVolumes is a client of PersistentVolumes with cfg's
// credentials and rate limit.
func NewPersistentVolumes(cfg *rest.Config) (PersistentVolumes, error) {
	rc, err := coreClient(cfg)
	if err != nil {
		return nil, err
	}
	return gentype.NewClientWithList[*corev1.PersistentVolume, *corev1.PersistentVolumeList](
		"persistentvolumes", rc, parameterCodec, "",
		func() *corev1.PersistentVolume { return &corev1.PersistentVolume{} },
		func() *corev1.PersistentVolumeList { return &corev1.PersistentVolumeList{} },
		gentype.PrefersProtobuf[*corev1.PersistentVolume]()), nil
}

// NewEventSink is where a record.EventBroadcaster sends events: created,
// updated and patched in each event's own namespace.
func NewEventSink(cfg *rest.Config) (record.EventSink, error) {
	rc, err := coreClient(cfg)
	if err != nil {
		return nil, err
	}
	return eventSink{rc}, nil
}

// coreClient is a REST client of the core/v1 API group, as client-go's
// generated CoreV1Client sets one up, over Scheme.
func coreClient(cfg *rest.Config) (*rest.RESTClient, error) {
	return groupClient(cfg, corev1.SchemeGroupVersion, "/api", "")
}

// groupClient is a REST client of gv under apiPath ("/api" for core,
// "/apis" for the others) with cfg's credentials and rate limit, as
// client-go's generated clients set one up, over Scheme; contentType, if
// set, is the only one it sends (a custom resource has no protobuf).
func groupClient(cfg *rest.Config, gv schema.GroupVersion, apiPath, contentType string) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = apiPath
	if contentType != "" {
		c.ContentType = contentType
	}
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		group := gv.Group
		if group == "" {
			group = "core"
		}
		return nil, fmt.Errorf("a client of the %s API group: %w", group, err)
	}
	return rc, nil
}

// eventSink sends each event through a generic typed client of its
// namespace (the sink's interface carries no context; an event is
// best-effort and the broadcaster retries).
type eventSink struct{ rc rest.Interface }

// GetClient is the REST client the events go through, as gentype's
// clients say theirs.
func (s eventSink) GetClient() rest.Interface { return s.rc }

func (s eventSink) in(namespace string) *gentype.Client[*corev1.Event] {
	return gentype.NewClient[*corev1.Event]("events", s.rc, parameterCodec, namespace,
		func() *corev1.Event { return &corev1.Event{} }, gentype.PrefersProtobuf[*corev1.Event]())
}

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.in(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{})
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.in(e.Namespace).Update(context.Background(), e, metav1.UpdateOptions{})
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.in(e.Namespace).Patch(context.Background(), e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// PersistentVolumeInformer watches every PersistentVolume through pvs.
func PersistentVolumeInformer(pvs PersistentVolumes, resync time.Duration) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return pvs.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return pvs.Watch(ctx, o)
			},
		}, pvs),
		&corev1.PersistentVolume{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}})
}

// MetadataInformer watches the metadata of the cluster-scoped resource gvr
// (tweak, if not nil, narrows the list and the watch: a field selector).
func MetadataInformer(meta metadata.Interface, gvr schema.GroupVersionResource, resync time.Duration,
	tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	narrow := func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
	}
	return cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				narrow(&o)
				return meta.Resource(gvr).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				narrow(&o)
				return meta.Resource(gvr).Watch(ctx, o)
			},
		}, meta),
		&metav1.PartialObjectMetadata{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}})
}

// ErrNotSynced: an informer's cache had not synced when its context ended.
var ErrNotSynced = errors.New("the API server's objects were not all listed before the driver stopped")

// Start runs the informers until ctx ends and waits until their caches have
// synced. stop ends them and waits for them to return: call it when done,
// whatever the error.
func Start(ctx context.Context, informers ...cache.SharedIndexInformer) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, i := range informers {
		wg.Go(func() { i.RunWithContext(ctx) })
		synced = append(synced, i.HasSynced)
	}
	stop = func() { cancel(); wg.Wait() }
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return stop, ErrNotSynced
	}
	return stop, nil
}
