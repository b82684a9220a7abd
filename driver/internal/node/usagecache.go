// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/tree"
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

// maxMeasuring is how many copies are measured at once: after a restart a
// scrape asks for every copy, and walks compete for the same disk.
const maxMeasuring = 2

// Default limits of one measurement (--measure-timeout and
// --measure-max-entries): past them it gives up, and the copy is reported
// as not measured until its next measurement is due.
const (
	DefaultMeasureTimeout    = 2 * time.Minute
	DefaultMeasureMaxEntries = 20_000_000
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
	measure func(dir string) (tree.Used, error)
	// slots holds one token per measurement running (maxMeasuring).
	slots  chan struct{}
	gaveUp func(handle string, err *tree.LimitError)
	flight singleflight.Group
	mu     sync.Mutex
	m      map[string]measured
}

// measured is a copy's last measurement: its usage, or why it gave up or
// failed (then the usage measured before, if any, with no error).
type measured struct {
	at   time.Time
	used tree.Used
	err  error // a *tree.LimitError, or why the walk failed
}

func newUsageCache(ttl time.Duration) *usageCache {
	return &usageCache{ttl: ttl, measure: usage, slots: make(chan struct{}, maxMeasuring),
		gaveUp: func(string, *tree.LimitError) {}, m: map[string]measured{}}
}

// get returns the usage of dir, keyed by handle, measuring it at most once
// per ttl and waiting at most wait for the measurement: then it returns
// the last value, or ErrMeasuring when there is none.
func (c *usageCache) get(handle, dir string, wait time.Duration) (tree.Used, error) {
	c.mu.Lock()
	m, ok := c.m[handle]
	c.mu.Unlock()
	if ok && time.Since(m.at) < c.ttl {
		return m.used, m.err
	}
	measure := c.measure
	ch := c.flight.DoChan(handle, func() (any, error) {
		c.slots <- struct{}{}
		defer func() { <-c.slots }()
		before, _ := dirID(dir)
		u, err := measure(dir)
		var limit *tree.LimitError
		result := measured{at: time.Now(), used: u, err: err}
		switch {
		case errors.As(err, &limit):
			result.used = tree.Used{}
			c.gaveUp(handle, limit)
		case err != nil:
			// Failed (a tree changed under the walk, an I/O error): walked
			// again when its figure is due, not at every call; the last
			// figure measured, if any, answers meanwhile.
			klog.InfoS("Cannot measure a copy; it is measured again when its figure is due", "volume_id", handle, "in", c.ttl, "err", err.Error())
			if ok && m.err == nil {
				result.used, result.err = m.used, nil
			}
		}
		u, err = result.used, result.err
		c.mu.Lock()
		// Kept only if the copy measured is still the one at dir: a copy
		// trashed meanwhile (and perhaps made again) is forgotten after
		// its rename, so this check and forget cannot miss each other.
		// A measurement that gave up or failed is kept too: the copy is
		// not walked again before its figure is due.
		if now, err := dirID(dir); err == nil && now == before {
			c.m[handle] = result
		}
		c.mu.Unlock()
		return u, err
	})
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.Val.(tree.Used), r.Err
	case <-timer.C:
	}
	if ok && m.err == nil {
		klog.V(2).InfoS("A copy's measurement takes long; answering with its last value", "volume_id", handle, "measured", m.at)
		return m.used, nil
	}
	return tree.Used{}, fmt.Errorf("%w (waited %s)", ErrMeasuring, wait)
}

// forget drops what is known of handle, once its copy has left its path;
// a measurement of it still running is not kept (see get).
func (c *usageCache) forget(handle string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, handle)
	c.flight.Forget(handle)
}

// dirID identifies the directory at path (device and inode), "" if none.
func dirID(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}
