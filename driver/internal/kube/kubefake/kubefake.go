// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubefake is an in-memory kube.Copies for tests: client-go's
// object tracker behind gentype's fake client, plus what the tracker lacks
// and the API server does (a generated name, a UID, a creation time).
package kubefake

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	clienttesting "k8s.io/client-go/testing"

	"liken.sh/per-node/driver/internal/copyapi"
	"liken.sh/per-node/driver/internal/kube"
)

// Copies is a fake kube.Copies; Fake is where tests add reactors and read
// the actions it was asked.
type Copies struct {
	*gentype.FakeClientWithList[*copyapi.Copy, *copyapi.CopyList]
	Fake    *clienttesting.Fake
	Tracker clienttesting.ObjectTracker
	// Refuse, if set, is asked before each Copy is deleted, as the API
	// server's admission is: an error refuses that deletion. A
	// DeleteCollection deletes in name order and stops at the first
	// refusal, as the API server's does.
	Refuse func(c *copyapi.Copy) error
}

// NewCopies is a fake holding objs.
func NewCopies(objs ...*copyapi.Copy) *Copies {
	tracker := clienttesting.NewObjectTracker(kube.Scheme, serializer.NewCodecFactory(kube.Scheme).UniversalDecoder())
	for _, o := range objs {
		if err := tracker.Add(o.DeepCopy()); err != nil {
			panic(fmt.Sprintf("kubefake: add %s: %v", o.Name, err))
		}
	}
	f := &clienttesting.Fake{}
	out := &Copies{Fake: f, Tracker: tracker}
	gvr := copyapi.SchemeGroupVersion.WithResource(copyapi.Resource)
	refused := func(name string) error {
		if out.Refuse == nil {
			return nil
		}
		obj, err := tracker.Get(gvr, "", name)
		if err != nil {
			return nil // the tracker answers NotFound itself
		}
		return out.Refuse(obj.(*copyapi.Copy))
	}
	var n atomic.Int64
	f.AddReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		c, ok := a.(clienttesting.CreateAction).GetObject().(*copyapi.Copy)
		if ok && c.Name == "" && c.GenerateName != "" {
			i := n.Add(1)
			c.Name = fmt.Sprintf("%s%05d", c.GenerateName, i)
			c.UID = types.UID(fmt.Sprintf("copy-uid-%d", i))
			c.CreationTimestamp = metav1.NewTime(time.Now())
		}
		return false, nil, nil
	})
	f.AddReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if err := refused(a.(clienttesting.DeleteAction).GetName()); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	f.AddReactor("delete-collection", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sel, err := labels.Parse(a.(clienttesting.DeleteCollectionAction).GetListRestrictions().Labels.String())
		if err != nil {
			return true, nil, err
		}
		obj, err := tracker.List(gvr, copyapi.SchemeGroupVersion.WithKind("Copy"), "")
		if err != nil {
			return true, nil, err
		}
		items := obj.(*copyapi.CopyList).Items
		slices.SortFunc(items, func(a, b copyapi.Copy) int { return strings.Compare(a.Name, b.Name) })
		for _, c := range items {
			if sel.Matches(labels.Set(c.Labels)) {
				if err := refused(c.Name); err != nil {
					return true, nil, err
				}
				if err := tracker.Delete(gvr, "", c.Name); err != nil {
					return true, nil, err
				}
			}
		}
		return true, nil, nil
	})
	f.AddReactor("*", "*", clienttesting.ObjectReaction(tracker))
	f.AddWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace())
		return true, w, err
	})
	client := gentype.NewFakeClientWithList[*copyapi.Copy, *copyapi.CopyList](f, "", gvr,
		copyapi.SchemeGroupVersion.WithKind("Copy"),
		func() *copyapi.Copy { return &copyapi.Copy{} },
		func() *copyapi.CopyList { return &copyapi.CopyList{} },
		func(dst, src *copyapi.CopyList) { dst.ListMeta = src.ListMeta },
		func(l *copyapi.CopyList) []*copyapi.Copy {
			out := make([]*copyapi.Copy, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out
		},
		func(l *copyapi.CopyList, items []*copyapi.Copy) {
			l.Items = make([]copyapi.Copy, len(items))
			for i, c := range items {
				l.Items[i] = *c
			}
		})
	out.FakeClientWithList = client
	return out
}

var _ kube.Copies = (*Copies)(nil)

// IsWatchListSemanticsUnSupported says, as client-go's own fakes do, that
// the fake's watch cannot stream the initial list (an informer lists, then
// watches).
func (*Copies) IsWatchListSemanticsUnSupported() bool { return true }
