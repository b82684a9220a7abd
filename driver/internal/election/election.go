// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package election chooses one of many candidates by a coordination.k8s.io
// Lease, as client-go's tools/leaderelection does with a LeaseLock: a
// candidate takes the Lease when it is missing, given up, or has not
// changed for its duration as this candidate has watched it (never by
// comparing clocks), renews it while it holds it, stops acting once it
// cannot renew within the renew deadline, and gives it up when it stops.
// Every write carries the resourceVersion read, so of candidates that try
// at once one wins.
//
// It is not client-go's package because that one links client-go's
// clientset and informer factories of every API group (its LeaseCandidate
// does), which the driver does without on every node (driver/internal/kube
// says why); what it does is these few requests.
package election

import (
	"context"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/kube"
)

// Config is one candidate's election.
type Config struct {
	// Leases holds the Lease, in the namespace of the election.
	Leases kube.Leases
	// Name is the Lease's; Identity is this candidate's, what the Lease's
	// holderIdentity says while it holds it.
	Name, Identity string
	// Duration is how long the Lease holds without a renewal; RenewDeadline
	// how long the holder tries to renew it before it stops acting (less
	// than Duration, so that it stops before another may take it);
	// RetryPeriod how often the holder renews it and, up to 1.2 times as
	// much again at random, how often the others try to take it.
	Duration, RenewDeadline, RetryPeriod time.Duration
}

// requestTimeout bounds each request.
const requestTimeout = 30 * time.Second

// Run campaigns until ctx ends. While this candidate holds the Lease, lead
// runs with a context that ends when it stops holding it (it could not
// renew it in time, another took it, or ctx ended); Run gives the Lease up
// and waits for lead to return before it campaigns again or returns.
func Run(ctx context.Context, cfg Config, lead func(ctx context.Context)) {
	e := &elector{cfg: cfg}
	for {
		if !e.acquire(ctx) {
			return
		}
		e.hold(ctx, lead)
		if ctx.Err() != nil {
			return
		}
	}
}

// elector is one candidate's view of the Lease: the resourceVersion it
// last saw (every write, a renewal too, makes a new one) and when it first
// saw it.
type elector struct {
	cfg        Config
	observedRV string
	observedAt time.Time
}

// acquire tries until it holds the Lease (true) or ctx ends (false).
func (e *elector) acquire(ctx context.Context) bool {
	for {
		held, err := e.try(ctx)
		if held {
			return true
		}
		if err != nil && ctx.Err() == nil {
			klog.V(2).InfoS("Cannot ask for the Lease; trying again later", "lease", e.cfg.Name, "err", err.Error())
		}
		wait := e.cfg.RetryPeriod + rand.N(e.cfg.RetryPeriod*6/5+1) // #nosec G404 -- a spread, not a secret
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// hold runs lead while the Lease is this candidate's, renewing it every
// RetryPeriod, and gives it up once ctx ends.
func (e *elector) hold(ctx context.Context, lead func(ctx context.Context)) {
	leadCtx, stop := context.WithCancel(ctx)
	led := make(chan struct{})
	go func() {
		defer close(led)
		lead(leadCtx)
	}()
	defer func() {
		stop()
		<-led
		if ctx.Err() != nil {
			e.release()
		}
	}()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.cfg.RetryPeriod):
		}
		held, err := e.try(ctx)
		switch {
		case held:
			renewed = time.Now()
		case err == nil:
			klog.InfoS("Another candidate holds the Lease now", "lease", e.cfg.Name)
			return
		case time.Since(renewed) > e.cfg.RenewDeadline:
			klog.InfoS("Could not renew the Lease within its deadline; stopping", "lease", e.cfg.Name, "deadline", e.cfg.RenewDeadline, "err", err.Error())
			return
		}
	}
}

// try takes or renews the Lease: held is whether it is this candidate's
// now. A Lease another candidate holds, seen changing within the
// election's Duration, is left alone (held false, err nil). The Lease's
// own leaseDurationSeconds is written for readers, never trusted: any
// node's account may write it, and a year would keep the place of a
// holder that stopped.
func (e *elector) try(ctx context.Context) (held bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	now := time.Now()
	l, err := e.cfg.Leases.Get(rctx, e.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		made, err := e.cfg.Leases.Create(rctx, e.record(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Name}}, now), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		e.observe(made, now)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if e.observedAt.IsZero() || l.ResourceVersion != e.observedRV {
		e.observe(l, now)
	}
	if holder := holderOf(l); holder != e.cfg.Identity && holder != "" && now.Before(e.observedAt.Add(e.cfg.Duration)) {
		return false, nil
	}
	u, err := e.cfg.Leases.Update(rctx, e.record(l.DeepCopy(), now), metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return false, nil // another candidate wrote it first
	}
	if err != nil {
		return false, err
	}
	e.observe(u, now)
	return true, nil
}

// record makes l this candidate's at now.
func (e *elector) record(l *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(now)
	if holderOf(l) != e.cfg.Identity {
		l.Spec.AcquireTime = &t
		n := int32(0) // a Lease this candidate creates
		if l.ResourceVersion != "" {
			if l.Spec.LeaseTransitions != nil {
				n = *l.Spec.LeaseTransitions
			}
			n++
		}
		l.Spec.LeaseTransitions = &n
	}
	id := e.cfg.Identity
	secs := int32(e.cfg.Duration / time.Second)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &secs, &t
	return l
}

// observe notes l as seen at now.
func (e *elector) observe(l *coordinationv1.Lease, now time.Time) {
	e.observedRV, e.observedAt = l.ResourceVersion, now
}

// release gives the Lease up, if it is still this candidate's, so that
// another takes it at its next try: no holder, a duration of one second.
func (e *elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	l, err := e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if err != nil || holderOf(l) != e.cfg.Identity {
		return
	}
	l = l.DeepCopy()
	none, one := "", int32(1)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &none, &one
	if _, err := e.cfg.Leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		klog.InfoS("Could not give the Lease up; another candidate takes it once it expires", "lease", e.cfg.Name, "err", err.Error())
	}
}

// holderOf is l's holder ("" for none).
func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
