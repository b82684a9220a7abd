// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e && e2ebench

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/internal/harness"
)

// TestDeletePVTiming measures, for `make bench-delete`, the time from
// deleting a PersistentVolume to its disappearance, with three nodes each
// holding a copy of 10,000 small files. Target: at most 3 s.
func TestDeletePVTiming(t *testing.T) {
	f := features.New("delete timing").Assess("delete pv to gone", func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
		r := client(t, c)
		w := workers(t, r)
		assert.Assert(t, len(w) >= 3, "need three workers, have %v", w)
		ns := newNamespace(t, r)
		pvName := guideVolume(t, r, ns)
		var pods []*corev1.Pod
		for i, node := range w[:3] {
			p := probePod(ns, fmt.Sprintf("holder-%d", i), node)
			assert.NilError(t, r.Create(ctx, p))
			pods = append(pods, p)
		}
		for i, p := range pods {
			waitRunning(t, r, p, 2*time.Minute)
			// 10,000 files of 1,000 bytes each, written straight into the node's copy.
			dir := "/var/lib/per-node.liken.sh/volumes/" + pvName + "/data"
			_, err := harness.Run(ctx, hcfg.Repo, "docker", "exec", w[i], "sh", "-c",
				"cd "+dir+" && head -c 10000000 /dev/zero | split -b 1000 -a 5 - f && ls | wc -l")
			assert.NilError(t, err)
		}
		for _, p := range pods {
			assert.NilError(t, r.Delete(ctx, p))
		}
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			var list corev1.PodList
			if err := r.WithNamespace(ns).List(ctx, &list); err != nil {
				return poll.Error(err)
			}
			if len(list.Items) > 0 {
				return poll.Continue("%d pods left", len(list.Items))
			}
			return poll.Success()
		}, poll.WithTimeout(2*time.Minute), poll.WithDelay(250*time.Millisecond))

		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "store", Namespace: ns}}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}}
		start := time.Now()
		assert.NilError(t, r.Delete(ctx, claim))
		assert.NilError(t, r.Delete(ctx, pv))
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			err := r.Get(ctx, pvName, "", &corev1.PersistentVolume{})
			if apierrors.IsNotFound(err) {
				return poll.Success()
			}
			return poll.Continue("PersistentVolume %s still there (%v)", pvName, err)
		}, poll.WithTimeout(2*time.Minute), poll.WithDelay(50*time.Millisecond))
		fmt.Printf("delete-pv-to-gone %.2fs (3 nodes x 10,000 files of 1,000 bytes; target <= 3s)\n", time.Since(start).Seconds())
		return ctx
	}).Feature()
	testenv.Test(t, f)
}
