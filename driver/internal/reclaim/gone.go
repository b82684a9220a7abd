// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"sync"
	"time"
)

// goneClock remembers, for each live PV this node holds, when this driver
// last asked which of its recorded nodes exist, and since when each of them
// has been found missing at every look. A record of a node goes from a live
// PV only once the node has been missing for the whole grace period: found
// so at the look that starts it, at every look since (four per period) and
// by the fresh read that drops it. A node found live, or not recorded at a
// look, starts again. It is memory only: a restart starts every grace
// period again, which only delays.
//
// It holds an entry per held PV and per missing node recorded on one:
// what this node holds, never the cluster's size.
type goneClock struct {
	after time.Duration // the grace period; 0: records of live PVs are never dropped
	now   func() time.Time
	mu    sync.Mutex
	pvs   map[string]*pvClock
}

// pvClock is what the clock knows of one PV.
type pvClock struct {
	looked  time.Time            // when its recorded nodes were last asked about
	missing map[string]time.Time // since when each recorded node has been found missing
}

func newGoneClock(after time.Duration) *goneClock {
	return &goneClock{after: after, now: time.Now, pvs: map[string]*pvClock{}}
}

// every is how often a held PV's recorded nodes are asked about: four times
// per grace period, so a gone node's record goes at most a quarter late.
func (g *goneClock) every() time.Duration { return max(g.after/4, time.Second) }

// wait says how long until pv's recorded nodes may be asked about again (0:
// now).
func (g *goneClock) wait(pv string, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	pc, ok := g.pvs[pv]
	if !ok {
		return 0
	}
	return max(0, g.every()-now.Sub(pc.looked))
}

// seen notes what one look at pv found of the nodes it asked about (the
// others recorded on it: nil when another holder drops them), and returns
// the nodes missing for the whole grace period (their records go) and how
// long until the next look (the next due, or the next regular look).
func (g *goneClock) seen(pv string, now time.Time, live map[string]bool, asked []string) (due []string, next time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pc, ok := g.pvs[pv]
	if !ok {
		pc = &pvClock{}
		g.pvs[pv] = pc
	}
	pc.looked = now
	next = g.every()
	missing := make(map[string]time.Time)
	for _, n := range asked {
		if live[n] {
			continue
		}
		since, ok := pc.missing[n]
		if !ok {
			since = now
		}
		missing[n] = since
		if left := g.after - now.Sub(since); left > 0 {
			next = min(next, left)
		} else {
			due = append(due, n)
		}
	}
	pc.missing = missing // a node live or not recorded at this look starts again
	return due, next
}

// dropped forgets, of pv, nodes whose records went; with no nodes, all of
// pv (this node no longer holds it, or it is gone).
func (g *goneClock) dropped(pv string, nodes ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pc, ok := g.pvs[pv]
	if !ok {
		return
	}
	if len(nodes) == 0 {
		delete(g.pvs, pv)
		return
	}
	for _, n := range nodes {
		delete(pc.missing, n)
	}
}

// size is how many PVs and missing nodes the clock holds.
func (g *goneClock) size() (pvs, nodes int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, pc := range g.pvs {
		nodes += len(pc.missing)
	}
	return len(g.pvs), nodes
}
