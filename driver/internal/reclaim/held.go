// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"liken.sh/per-node/driver/internal/kube"
)

// pvView is where the controller reads PVs: heldPVs, or a fixed set in
// tests.
type pvView interface {
	watch(name string) error
	forget(name string)
	get(name string) (*corev1.PersistentVolume, bool)
	names() []string
}

// heldPVs watches the PersistentVolumes this node holds a copy or a Copy
// of, one watch each, narrowed to the PV's name by a field selector (as
// kubelet watches each Secret its pods use): no other PV of the cluster,
// of this driver or another, reaches this node. A node's cost follows
// what it holds, never the cluster's size.
type heldPVs struct {
	client kube.PersistentVolumes
	resync time.Duration
	// handlers are given every PV event, as an informer's are.
	handlers []cache.ResourceEventHandler
	ctx      context.Context

	mu      sync.Mutex
	watches map[string]*heldWatch
	wg      sync.WaitGroup
}

// heldWatch is the informer of one PV.
type heldWatch struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

func newHeldPVs(client kube.PersistentVolumes, resync time.Duration) *heldPVs {
	return &heldPVs{client: client, resync: resync, watches: map[string]*heldWatch{}}
}

// start makes watch start the informers it is asked for, until ctx ends.
func (h *heldPVs) start(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ctx = ctx
}

// watch starts watching the PV named name, if it is not watched yet.
func (h *heldPVs) watch(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watches[name]; ok || h.ctx == nil || h.ctx.Err() != nil {
		return nil
	}
	inf := cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = "metadata.name=" + name
				return h.client.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = "metadata.name=" + name
				return h.client.Watch(ctx, o)
			},
		}, h.client),
		&corev1.PersistentVolume{},
		cache.SharedIndexInformerOptions{ResyncPeriod: h.resync, Indexers: cache.Indexers{}})
	if err := inf.SetTransform(lean); err != nil {
		return err
	}
	for _, hd := range h.handlers {
		if _, err := inf.AddEventHandler(hd); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.watches[name] = &heldWatch{informer: inf, stop: cancel}
	h.wg.Go(func() { inf.RunWithContext(ctx) })
	return nil
}

// forget stops watching the PV named name.
func (h *heldPVs) forget(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.watches[name]; ok {
		w.stop()
		delete(h.watches, name)
	}
}

// get returns the PV named name as its watch last saw it: ok only once
// that watch has synced and the PV exists.
func (h *heldPVs) get(name string) (*corev1.PersistentVolume, bool) {
	h.mu.Lock()
	w, ok := h.watches[name]
	h.mu.Unlock()
	if !ok || !w.informer.HasSynced() {
		return nil, false
	}
	obj, exists, err := w.informer.GetStore().GetByKey(name)
	if err != nil || !exists {
		return nil, false
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	return pv, ok
}

// names lists the PVs watched, sorted.
func (h *heldPVs) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.watches))
	for n := range h.watches {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// wait waits until every watch has returned (after ctx ended).
func (h *heldPVs) wait() { h.wg.Wait() }
