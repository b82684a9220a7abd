// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// uidCache maps PV names to the UID last seen, for events.
type uidCache struct {
	mu sync.Mutex
	m  map[string]types.UID
}

func newUIDCache() *uidCache { return &uidCache{m: map[string]types.UID{}} }

func (c *uidCache) set(name string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = uid
}

func (c *uidCache) get(name string) types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}
