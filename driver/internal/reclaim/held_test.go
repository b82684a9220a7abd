// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// pvSelectors lists the field selectors of every list and watch of PVs c
// was asked.
func pvSelectors(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource != "persistentvolumes" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.ListAction:
			out = append(out, a.GetListRestrictions().Fields.String())
		case clienttesting.WatchAction:
			out = append(out, a.GetWatchRestrictions().Fields.String())
		}
	}
	return out
}

// A node watches the PVs it holds, one watch each, and no other: the PVs of
// the cluster never reach it, and a PV it no longer holds is forgotten.
func TestTheControllerWatchesOnlyThePVsItHolds(t *testing.T) {
	var others []*corev1.PersistentVolume
	for i := range 50 {
		others = append(others, pv(fmt.Sprintf("other-%02d", i), "u"))
	}
	disk := &fakeCopies{uids: map[string]string{"held": "uid-h"}}
	ctl := newController(t, me, disk, []string{me}, append(others, recorded(pv("held", "uid-h", pvProtection), me), recorded(pv("copy-only", "uid-c"), me))...)
	ctl.held = ctl.watches
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ctl.live()
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NilError(t, <-done) })
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		_, held := ctl.Cached("held")
		_, copyOnly := ctl.Cached("copy-only")
		if held && copyOnly {
			return poll.Success()
		}
		return poll.Continue("cached: held %v, copy-only %v (watched %v)", held, copyOnly, ctl.watches.names())
	}, poll.WithTimeout(10*time.Second))
	_, ok := ctl.Cached("other-00")
	assert.Assert(t, !ok, "a PV this node does not hold is cached")
	assert.DeepEqual(t, ctl.watches.names(), []string{"copy-only", "held"})
	for _, s := range pvSelectors(ctl.world.client) {
		assert.Assert(t, s == "metadata.name=held" || s == "metadata.name=copy-only", "a PV list or watch not narrowed to one held PV: %q (all: %v)", s, pvSelectors(ctl.world.client))
	}

	// Its copy gone and its Copy deleted, a PV is no longer watched.
	disk.mu.Lock()
	delete(disk.uids, "held")
	disk.mu.Unlock()
	for _, c := range ctl.allCopies(t) {
		if c.Spec.Volume == "held" {
			assert.NilError(t, ctl.world.copies.Delete(ctx, c.Name, metav1.DeleteOptions{}))
		}
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, ok := ctl.Cached("held"); !ok {
			return poll.Success()
		}
		return poll.Continue("still watched: %v", ctl.watches.names())
	}, poll.WithTimeout(10*time.Second))
}
