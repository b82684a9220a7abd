// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
)

// maxUIDs bounds the PV UIDs kept for events: a node that held many PVs
// over its life keeps the most recent ones. An event about a PV whose UID
// was dropped names the PV only.
const maxUIDs = 4096

// uidCache maps PV names to the UID last seen, for events.
type uidCache struct{ c *lru.Cache }

func newUIDCache() *uidCache { return &uidCache{c: lru.New(maxUIDs)} }

func (c *uidCache) set(name string, uid types.UID) { c.c.Add(name, uid) }

func (c *uidCache) get(name string) types.UID {
	if v, ok := c.c.Get(name); ok {
		return v.(types.UID)
	}
	return ""
}

func (c *uidCache) len() int { return c.c.Len() }
