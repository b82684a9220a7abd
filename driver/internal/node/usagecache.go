// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultStatsTTL is how long a copy's measured usage is reused. kubelet
// asks every minute; walking a copy of a million files costs seconds of
// I/O, and the figure is a report, not a quota.
const DefaultStatsTTL = 5 * time.Minute

// usageCache remembers each copy's last measured usage, and makes
// concurrent requests for one copy share a single walk.
type usageCache struct {
	ttl    time.Duration
	flight singleflight.Group
	mu     sync.Mutex
	m      map[string]measured
}

type measured struct {
	at   time.Time
	used usedSpace
}

func newUsageCache(ttl time.Duration) *usageCache {
	return &usageCache{ttl: ttl, m: map[string]measured{}}
}

// get returns the usage of dir, keyed by handle, measuring it at most once
// per ttl.
func (c *usageCache) get(handle, dir string) (usedSpace, error) {
	c.mu.Lock()
	m, ok := c.m[handle]
	c.mu.Unlock()
	if ok && time.Since(m.at) < c.ttl {
		return m.used, nil
	}
	v, err, _ := c.flight.Do(handle, func() (any, error) {
		u, err := usage(dir)
		if err != nil {
			return usedSpace{}, err
		}
		c.mu.Lock()
		c.m[handle] = measured{at: time.Now(), used: u}
		c.mu.Unlock()
		return u, nil
	})
	return v.(usedSpace), err
}

// forget drops what is known of handle (its copy went).
func (c *usageCache) forget(handle string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, handle)
}
