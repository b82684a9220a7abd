// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"liken.sh/per-node/e2e/internal/harness"
)

// TestRestartedNodesKeepTheirAddresses stops a worker of every lane, then
// starts them again highest address first: each must come back at the
// address it had. The scenarios stop and start nodes on every lane at once,
// and a node that came back at another's address is unreachable to its own
// cluster (its routes and Service rules name the old address), so every
// later scenario on that lane would fail for a reason that is not the
// driver's. On a Docker network the lanes shared, the first node started
// takes the lowest address freed, another lane's.
func TestRestartedNodesKeepTheirAddresses(t *testing.T) {
	ctx := context.Background()
	type node struct {
		lane       lane
		name, addr string
	}
	var nodes []node
	for _, l := range lanes {
		n := node{lane: l, name: l.cluster + "-worker4"}
		var err error
		n.addr, err = harness.NodeAddress(ctx, hcfg.Repo, n.name)
		assert.NilError(t, err)
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		_, err := harness.Run(ctx, hcfg.Repo, "docker", "stop", "-t", "10", n.name)
		assert.NilError(t, err)
	}
	since := time.Now()
	slices.SortFunc(nodes, func(a, b node) int { return compareAddr(b.addr, a.addr) })
	for _, n := range nodes {
		_, err := harness.Run(ctx, hcfg.Repo, "docker", "start", n.name)
		assert.NilError(t, err)
	}
	var moved []string
	for _, n := range nodes {
		got, err := harness.NodeAddress(ctx, hcfg.Repo, n.name)
		assert.NilError(t, err)
		if got != n.addr {
			moved = append(moved, fmt.Sprintf("%s came back at %s, had %s", n.name, got, n.addr))
		}
	}
	// Back to Ready either way: the scenarios run on these clusters next.
	for _, n := range nodes {
		waitRestarted(t, n.lane, n.name, since)
	}
	assert.Assert(t, len(moved) == 0, "restarted nodes moved: %v", moved)
}

// compareAddr orders addresses numerically (unparsable ones first).
func compareAddr(a, b string) int {
	x, _ := netip.ParseAddr(a)
	y, _ := netip.ParseAddr(b)
	return x.Compare(y)
}

// waitRestarted waits until node's kubelet, started after since, has renewed
// its lease and reports Ready, and the driver's pod there runs again.
func waitRestarted(t *testing.T, l lane, node string, since time.Time) {
	t.Helper()
	r := client(t, l.env.EnvConf())
	err := harness.Until(context.Background(), "node "+node+" back Ready with its driver", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		var lease coordinationv1.Lease
		if err := r.Get(ctx, node, "kube-node-lease", &lease); err != nil {
			return false, "", harness.Unobserved(err)
		}
		var n corev1.Node
		if err := r.Get(ctx, node, "", &n); err != nil {
			return false, "", harness.Unobserved(err)
		}
		renewed := lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(since)
		var pods corev1.PodList
		if err := r.WithNamespace("per-node-system").List(ctx, &pods, resources.WithFieldSelector("spec.nodeName="+node)); err != nil {
			return false, "", harness.Unobserved(err)
		}
		driver := false
		for i := range pods.Items {
			for _, cs := range pods.Items[i].Status.ContainerStatuses {
				driver = driver || harness.PodReady(&pods.Items[i]) && cs.State.Running != nil && cs.State.Running.StartedAt.After(since)
			}
		}
		seen := fmt.Sprintf("lease renewed: %v, Ready: %v, driver pod restarted and Ready: %v", renewed, harness.NodeReady(&n), driver)
		return renewed && harness.NodeReady(&n) && driver, seen, nil
	})
	assert.NilError(t, err)
}
