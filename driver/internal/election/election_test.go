// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package election

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"liken.sh/per-node/driver/internal/kube/kubefake"
)

func quick(leases *kubefake.Leases, id string) Config {
	return Config{Leases: leases, Name: "janitor", Identity: id,
		Duration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond}
}

// candidates runs Run for each id; leading[id] is set while it leads, and
// most is the most that ever led at once.
type candidates struct {
	mu      sync.Mutex
	leading map[string]bool
	most    atomic.Int32
	stop    map[string]func()
}

func run(t *testing.T, leases *kubefake.Leases, ids ...string) *candidates {
	c := &candidates{leading: map[string]bool{}, stop: map[string]func(){}}
	var now atomic.Int32
	for _, id := range ids {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, quick(leases, id), func(ctx context.Context) {
				n := now.Add(1)
				for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
				}
				c.set(id, true)
				<-ctx.Done()
				c.set(id, false)
				now.Add(-1)
			})
		}()
		var once sync.Once
		c.stop[id] = func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(c.stop[id])
	}
	return c
}

func (c *candidates) set(id string, v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading[id] = v
}

func (c *candidates) leader() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id, v := range c.leading {
		if v {
			out = append(out, id)
		}
	}
	if len(out) == 1 {
		return out[0], fmt.Sprint(out)
	}
	return "", fmt.Sprint(out)
}

func holder(t *testing.T, leases *kubefake.Leases) *coordinationv1.Lease {
	l, err := leases.Get(context.Background(), "janitor", metav1.GetOptions{})
	assert.NilError(t, err)
	return l
}

// Of candidates that start at once, one leads, and no other while it
// renews; when it stops it gives the Lease up and another leads at its
// next try, never two at once.
func TestOneCandidateLeadsAtATime(t *testing.T) {
	leases := kubefake.NewLeases("ns")
	c := run(t, leases, "a", "b", "c")
	var first string
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if first, _ = c.leader(); first != "" {
			return poll.Success()
		}
		_, seen := c.leader()
		return poll.Continue("one leader, seen %s", seen)
	}, poll.WithTimeout(10*time.Second))
	// Twenty renewals (twice the duration): the live holder keeps it.
	renewed := holder(t, leases).Spec.RenewTime.Time
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		l := holder(t, leases)
		if *l.Spec.HolderIdentity != first || *l.Spec.LeaseTransitions != 0 {
			return poll.Error(fmt.Errorf("the Lease went from %s, which renews it, to %s (%d transitions)", first, *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions))
		}
		if l.Spec.RenewTime.Sub(renewed) >= 20*quick(leases, "").RetryPeriod {
			return poll.Success()
		}
		return poll.Continue("twenty renewals by %s, seen renewed %v after the first", first, l.Spec.RenewTime.Sub(renewed))
	}, poll.WithTimeout(10*time.Second))
	c.stop[first]()
	// Given up: no holder, or already another candidate (it takes a Lease
	// given up at its next try); kept, it would still name first until
	// it expired.
	assert.Assert(t, *holder(t, leases).Spec.HolderIdentity != first, "a candidate that stops gives the Lease up; it still names %s", first)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if l, _ := c.leader(); l != "" && l != first {
			return poll.Success()
		}
		_, seen := c.leader()
		return poll.Continue("another leader than %s, seen %s", first, seen)
	}, poll.WithTimeout(10*time.Second))
	assert.Equal(t, c.most.Load(), int32(1), "candidates led at once")
}

// A Lease whose holder stopped without giving it up (its node gone, its
// process killed) is taken once it has not changed for the election's
// duration as the candidate watched it, and not before; whatever duration
// the Lease itself claims (a node's account may write any: a year would
// keep the janitor's place for a node that stopped).
func TestALeaseNobodyRenewsIsTakenAfterItsDuration(t *testing.T) {
	leases := kubefake.NewLeases("ns")
	dead, secs := "dead", int32(365*24*3600)
	long := metav1.NewMicroTime(time.Now().Add(time.Hour)) // a clock ahead: never compared
	_, err := leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "janitor"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &dead, LeaseDurationSeconds: &secs, RenewTime: &long}}, metav1.CreateOptions{})
	assert.NilError(t, err)
	start := time.Now()
	c := run(t, leases, "b")
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if l, _ := c.leader(); l == "b" {
			return poll.Success()
		}
		return poll.Continue("b to take the Lease of %s, held by %s", dead, *holder(t, leases).Spec.HolderIdentity)
	}, poll.WithTimeout(10*time.Second))
	d := quick(leases, "").Duration
	assert.Assert(t, time.Since(start) >= d, "taken %v after b started, before the election's %v", time.Since(start), d)
	assert.Equal(t, *holder(t, leases).Spec.LeaseTransitions, int32(1))
}
