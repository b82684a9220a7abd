// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/drain"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps about evictions and drains. Drains run kubectl's own drain code
// (k8s.io/kubectl/pkg/drain): cordon, then evict every pod but DaemonSet
// pods, retrying while a PodDisruptionBudget refuses, and wait until the
// evicted pods are gone.

// evict asks for an eviction, as kubectl drain does; dryRun asks the API
// server to judge it (the PodDisruptionBudget included) without evicting.
func (r *Run) evict(ctx context.Context, pod string, dryRun bool) error {
	cs, err := r.clientset()
	if err != nil {
		return err
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: r.ns()}}
	if dryRun {
		ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return cs.PolicyV1().Evictions(r.ns()).Evict(ctx, ev)
}

// evictUntilAllowed retries while the PodDisruptionBudget refuses.
func (r *Run) evictUntilAllowed(ctx context.Context, pod string) error {
	return harness.Until(ctx, "the eviction of "+pod+" to be allowed", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		err := r.evict(ctx, pod, false)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return true, "", nil
		case apierrors.IsTooManyRequests(err):
			return false, "refused: " + err.Error() + "; pods: " + r.podsReport(ctx), nil
		}
		return false, "", err
	})
}

func stepEvict(ctx context.Context, r *Run, a args) error { return r.evictUntilAllowed(ctx, a["pod"]) }

func stepEvictRefused(ctx context.Context, r *Run, a args) error {
	err := r.evict(ctx, a["pod"], false)
	if apierrors.IsTooManyRequests(err) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%w: the eviction of %s was allowed; pods: %s", harness.ErrNotSeen, a["pod"], r.podsReport(ctx))
	}
	return fmt.Errorf("expected the PodDisruptionBudget to refuse the eviction of %s (429), got: %w", a["pod"], err)
}

// stepEvictRefusedUntil asks, every second and as a dry run, to evict the
// pod until the Deployment has n ready pods again: every ask made while it
// has fewer must be refused. Readiness only grows in this window, so an
// ask allowed while the count seen right after it is short is a breach.
func stepEvictRefusedUntil(ctx context.Context, r *Run, a args) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	refused := 0
	for {
		err := r.evict(ctx, a["pod"], true)
		ready, report, rerr := r.readyStorePods(ctx)
		if rerr != nil {
			return rerr
		}
		switch {
		case ready >= want:
			if refused == 0 {
				return fmt.Errorf("deployment %s had %d ready pods before the first ask: nothing was waited for (%s)", a["name"], ready, report)
			}
			r.t.Logf("the eviction of %s was refused %d times, until %d pods were ready", a["pod"], refused, ready)
			return nil
		case err == nil:
			return fmt.Errorf("%w: the eviction of %s was allowed while %d of %d store pods were ready: %s", harness.ErrNotSeen, a["pod"], ready, want, report)
		case !apierrors.IsTooManyRequests(err):
			return fmt.Errorf("asking to evict %s: expected 429 from the PodDisruptionBudget, got: %w", a["pod"], err)
		}
		refused++
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("still %d of %d store pods ready after %d refusals: %s", ready, want, refused, report)
		}
	}
}

// readyStorePods counts the store pods that are ready and not terminating.
func (r *Run) readyStorePods(ctx context.Context) (int, string, error) {
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return 0, "", err
	}
	return len(pods), r.podsReport(ctx), nil
}

func (r *Run) drainer(ctx context.Context) (*drain.Helper, *strings.Builder, error) {
	cs, err := r.clientset()
	if err != nil {
		return nil, nil, err
	}
	out := &strings.Builder{}
	// The settings of `kubectl drain --ignore-daemonsets --delete-emptydir-data`,
	// including its 5 s between refused evictions (the library's zero
	// value would retry without pause).
	return &drain.Helper{Ctx: ctx, Client: cs, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true,
		DeleteEmptyDirData: true, Timeout: deadline(ctx), EvictErrorRetryDelay: 5 * time.Second,
		Out: out, ErrOut: out}, out, nil
}

// drainNode cordons node and evicts its pods as kubectl drain does.
func (r *Run) drainNode(ctx context.Context, node string) error {
	r.lists["_cordoned"] = append(r.lists["_cordoned"], node)
	return r.cordonAndDrain(ctx, node)
}

// cordonAndDrain is drainNode for a node its caller has already listed as
// cordoned (for the cleanup): it touches nothing of r but the cluster, so
// two may run at once.
func (r *Run) cordonAndDrain(ctx context.Context, node string) error {
	h, out, err := r.drainer(ctx)
	if err != nil {
		return err
	}
	var n corev1.Node
	if err := r.env.R.Get(ctx, node, "", &n); err != nil {
		return err
	}
	if err := drain.RunCordonOrUncordon(h, &n, true); err != nil {
		return fmt.Errorf("cordon %s: %w", node, err)
	}
	start := time.Now()
	if err := drain.RunNodeDrain(h, node); err != nil {
		return fmt.Errorf("drain %s: %w\n%s\npods: %s", node, err, out, r.podsReport(ctx))
	}
	r.t.Logf("drained %s in %s", node, time.Since(start).Round(100*time.Millisecond))
	return nil
}

func stepDrain(ctx context.Context, r *Run, a args) error { return r.drainNode(ctx, a["node"]) }

// stepDrainBoth starts two drains at the same moment and waits for both.
// Both nodes are listed for the cleanup before either starts: the two
// goroutines share no map (they once wrote r.lists at once, a fatal
// "concurrent map writes" in scenario 08).
func stepDrainBoth(ctx context.Context, r *Run, a args) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	nodes := []string{a["node"], a["other"]}
	r.lists["_cordoned"] = append(r.lists["_cordoned"], nodes...)
	for i, node := range nodes {
		wg.Go(func() { errs[i] = r.cordonAndDrain(ctx, node) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stepDrainEachWorker is a rolling node upgrade: every worker in turn is
// cordoned and drained with kubectl's drain, then uncordoned, and the next
// one waits until the deployment has n ready pods again, each of which, if
// it started during the upgrade, held the list when it turned ready
// (checked at every turn: a pod that started on a fresh node is drained
// away again later).
func stepDrainEachWorker(ctx context.Context, r *Run, a args) error {
	workers, err := r.workers(ctx)
	if err != nil {
		return err
	}
	before, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	old := map[string]bool{}
	for _, p := range before {
		old[p.Name] = true
	}
	for _, w := range workers {
		if err := r.drainNode(ctx, w.Name); err != nil {
			return err
		}
		if err := r.cordon(ctx, w.Name, false); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := stepDeploymentReady(wctx, r, args{"name": a["name"], "n": a["n"]})
		cancel()
		if err == nil {
			err = r.newPodsHeldWhenReady(ctx, old, a)
		}
		if err != nil {
			return fmt.Errorf("after draining %s: %w", w.Name, err)
		}
		r.t.Logf("%s drained and back; deployment %s has %s ready pods, each started since held %s when it turned ready", w.Name, a["name"], a["n"], a["raw:list"])
	}
	return nil
}

// newPodsHeldWhenReady checks every store pod not in old: it held the list
// when it turned ready.
func (r *Run) newPodsHeldWhenReady(ctx context.Context, old map[string]bool, a args) error {
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if old[p.Name] {
			continue
		}
		if err := stepHeldWhenReady(ctx, r, args{"pod": p.Name, "raw:list": a["raw:list"]}); err != nil {
			return err
		}
	}
	return nil
}
