// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package copylabels keeps one label on this node's Node object for each
// volume the node holds a copy of, copy.per-node.liken.sh/<pv-name>, so that
// a pod can prefer the nodes that hold its data (a preferred node affinity
// on the label): a replica that starts beside its old copy catches up only
// what it missed, one on a fresh node copies the whole data set.
//
// The copies on disk decide; the labels follow. They are set again after a
// driver restart, a Node that registers again and a hand edit, and a label
// for a volume the node no longer holds is dropped. A label is a hint for
// the scheduler, never a fact the driver acts on.
package copylabels

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/kube"
	"liken.sh/per-node/driver/internal/metrics"
	"liken.sh/per-node/driver/internal/namepart"
)

// Prefix starts every copy label.
const Prefix = "copy.per-node.liken.sh/"

// Key is the label that says a node holds a copy of the PersistentVolume
// pv: Prefix and the name, or for a name longer than a label's 63-character
// name part, its first 50 characters, a dash and the first 12 hex digits of
// its SHA-256 (the form of the records' finalizers).
func Key(pv string) string { return Prefix + namepart.Of(pv) }

// resync re-reads the copies on disk against the cached Node as a safety
// net; the Node's events and Changed do the real work.
const resync = 10 * time.Minute

var nodes = corev1.SchemeGroupVersion.WithResource("nodes")

// Copies lists the volumes this node holds a copy of.
type Copies interface {
	Handles() ([]string, error)
}

// Labeller keeps this node's copy labels.
type Labeller struct {
	meta   metadata.Interface
	node   string
	copies Copies
	queue  workqueue.TypedRateLimitingInterface[string]
	lister cache.GenericLister
	// metrics counts what the Node watch delivers (nil: nothing).
	metrics *metrics.Metrics
}

// New returns the labeller of node; meta reads and patches Nodes as
// metadata; m (may be nil) counts what its watch delivers.
func New(meta metadata.Interface, node string, copies Copies, m *metrics.Metrics) *Labeller {
	return &Labeller{meta: meta, node: node, copies: copies, metrics: m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "copy-labels"})}
}

// batch is how long the labels wait after a copy is made or removed: the
// copies a burst makes or removes meanwhile (a node starting many pods of
// new volumes, the deletion of many PVs) go in one PATCH. Every PATCH of a
// Node reaches every watcher of Nodes in the cluster; a label is a hint for
// the scheduler, and a second late.
const batch = time.Second

// Changed says the copies on disk changed (one made, one removed).
func (l *Labeller) Changed() { l.queue.AddAfter(l.node, batch) }

// nodeChanged: the Node changed (a hand edit, registered again); labels
// it at once.
func (l *Labeller) nodeChanged() { l.queue.Add(l.node) }

// Run keeps the labels until ctx ends. It returns an error if its cache of
// this node's Node never syncs.
func (l *Labeller) Run(ctx context.Context) error {
	informer := kube.MetadataInformer(l.meta, nodes, resync, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", l.node).String()
	})
	l.lister = cache.NewGenericLister(informer.GetIndexer(), nodes.GroupResource())
	if _, err := informer.AddEventHandler(l.metrics.Receiving("nodes")); err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { l.nodeChanged() },
		UpdateFunc: func(any, any) { l.nodeChanged() },
	}); err != nil {
		return err
	}
	stop, err := kube.Start(ctx, informer)
	defer stop()
	if err != nil {
		return fmt.Errorf("this node's Node: %w", err)
	}
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	for l.next(ctx) {
	}
	return nil
}

func (l *Labeller) next(ctx context.Context) bool {
	key, shutdown := l.queue.Get()
	if shutdown {
		return false
	}
	defer l.queue.Done(key)
	if err := l.sync(ctx); err != nil {
		klog.ErrorS(err, "Cannot label this node with the copies it holds; retrying", "node", l.node)
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	return true
}

// sync makes the Node's copy labels say what the disk holds.
func (l *Labeller) sync(ctx context.Context) error {
	obj, err := l.lister.Get(l.node)
	if apierrors.IsNotFound(err) {
		return nil // labelled when it registers again (its Add event)
	} else if err != nil {
		return err
	}
	node, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("node %s: unexpected cache object %T", l.node, obj)
	}
	handles, err := l.copies.Handles()
	if err != nil {
		return err
	}
	patch := Patch(node.Labels, handles)
	if patch == nil {
		return nil
	}
	if _, err := l.meta.Resource(nodes).Patch(ctx, l.node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch node %s's copy labels: %w", l.node, err)
	}
	klog.InfoS("Labelled this node with the copies it holds", "node", l.node, "copies", len(handles))
	return nil
}

// Patch is the JSON merge patch that makes labels carry exactly one copy
// label per handle (value ""), touching no other label; nil when they
// already do.
func Patch(labels map[string]string, handles []string) []byte {
	want := map[string]bool{}
	for _, h := range handles {
		want[Key(h)] = true
	}
	change := map[string]any{}
	for k := range want {
		if v, ok := labels[k]; !ok || v != "" {
			change[k] = ""
		}
	}
	for k := range labels {
		if strings.HasPrefix(k, Prefix) && !want[k] {
			change[k] = nil
		}
	}
	if len(change) == 0 {
		return nil
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": change}})
	if err != nil {
		panic(fmt.Sprintf("marshal a label patch: %v", err)) // maps of strings always marshal
	}
	return b
}
