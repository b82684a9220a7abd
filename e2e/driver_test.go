// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// TestEveryNodeItsOwnCopyOneHolderPerNode is the first end-to-end proof: the
// guide's PV and claim bind; a pod on worker A writes a file; a pod on worker
// B sees an empty copy; a second pod on A waits, with a FailedMount event
// naming the first, and starts once the first is gone, seeing A's file.
func TestEveryNodeItsOwnCopyOneHolderPerNode(t *testing.T) {
	f := features.New("per-node copies").Assess("one copy per node, one holder per node",
		func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
			r := client(t, c)
			w := workers(t, r)
			assert.Assert(t, len(w) >= 2, "need two workers, have %v", w)
			a, b := w[0], w[1]
			ns := newNamespace(t, r)
			guideVolume(t, r, ns)

			first := probePod(ns, "first-on-a", a)
			assert.NilError(t, r.Create(ctx, first))
			waitRunning(t, r, first, 2*time.Minute)
			exec(t, r, first, "write", "/data/hello", "written on "+a)

			onB := probePod(ns, "on-b", b)
			assert.NilError(t, r.Create(ctx, onB))
			waitRunning(t, r, onB, 2*time.Minute)
			assert.Equal(t, exec(t, r, onB, "ls", "/data"), "", "a node that never held the volume starts with an empty copy")

			second := probePod(ns, "second-on-a", a)
			assert.NilError(t, r.Create(ctx, second))
			poll.WaitOn(t, func(poll.LogT) poll.Result {
				events := eventsOf(r, second)
				if strings.Contains(events, "FailedMount") && strings.Contains(events, ns+"/first-on-a") {
					return poll.Success()
				}
				return poll.Continue("events of %s: %s", second.Name, events)
			}, poll.WithTimeout(time.Minute), poll.WithDelay(time.Second))
			assert.NilError(t, r.Get(ctx, second.Name, ns, second))
			assert.Equal(t, second.Status.Phase, corev1.PodPending, "the second pod waits while the first holds the copy")

			assert.NilError(t, r.Delete(ctx, first))
			waitRunning(t, r, second, 3*time.Minute)
			assert.Equal(t, exec(t, r, second, "cat", "/data/hello"), "written on "+a, "the node's copy outlives the pod")
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
