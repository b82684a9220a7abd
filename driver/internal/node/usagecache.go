// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/klog/v2"
)

// DefaultStatsTTL is how long a copy's measured usage is reused. kubelet
// asks every minute; walking a copy of a million files costs seconds of
// I/O, and the figure is a report, not a quota.
const DefaultStatsTTL = 5 * time.Minute

// How long a caller waits for a measurement before it answers without it:
// kubelet's volume stats, and a /metrics scrape (which walks every copy
// and must fit Prometheus' scrape timeout).
const (
	statsWait   = 5 * time.Second
	metricsWait = 500 * time.Millisecond
)

// ErrMeasuring: the copy is being measured and the measurement did not
// finish in time; it goes on, and a later call gets its result.
var ErrMeasuring = errors.New("the copy is still being measured")

// usageCache remembers each copy's last measured usage, makes concurrent
// requests for one copy share a single walk, and answers every request
// within the time its caller gives, with the last value if the walk takes
// longer.
type usageCache struct {
	ttl     time.Duration
	measure func(dir string) (usedSpace, error)
	flight  singleflight.Group
	mu      sync.Mutex
	m       map[string]measured
	gen     map[string]uint64 // bumped when a copy goes: older walks are not kept
}

type measured struct {
	at   time.Time
	used usedSpace
}

func newUsageCache(ttl time.Duration) *usageCache {
	return &usageCache{ttl: ttl, measure: usage, m: map[string]measured{}, gen: map[string]uint64{}}
}

// get returns the usage of dir, keyed by handle, measuring it at most once
// per ttl and waiting at most wait for the measurement: then it returns
// the last value, or ErrMeasuring when there is none.
func (c *usageCache) get(handle, dir string, wait time.Duration) (usedSpace, error) {
	c.mu.Lock()
	m, ok := c.m[handle]
	gen := c.gen[handle]
	c.mu.Unlock()
	if ok && time.Since(m.at) < c.ttl {
		return m.used, nil
	}
	measure := c.measure
	ch := c.flight.DoChan(handle, func() (any, error) {
		u, err := measure(dir)
		if err != nil {
			return usedSpace{}, err
		}
		c.mu.Lock()
		if c.gen[handle] == gen { // the copy measured is still the one
			c.m[handle] = measured{at: time.Now(), used: u}
		}
		c.mu.Unlock()
		return u, nil
	})
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.Val.(usedSpace), r.Err
	case <-timer.C:
	}
	if ok {
		klog.V(2).InfoS("A copy's measurement takes long; answering with its last value", "volume_id", handle, "measured", m.at)
		return m.used, nil
	}
	return usedSpace{}, fmt.Errorf("%w (waited %s)", ErrMeasuring, wait)
}

// forget drops what is known of handle (its copy went); a measurement of
// it still running is not kept.
func (c *usageCache) forget(handle string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, handle)
	c.gen[handle]++
	c.flight.Forget(handle)
}
