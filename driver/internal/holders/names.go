// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package holders

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Names keeps the saved names (Save, Remove) in step with an Index, off the
// request path: a publish or an unpublish marks its handle, and Run writes
// what the index then holds for every marked handle, a moment later and all
// at once. A name written late, or lost in a crash, costs only the name: a
// driver that starts again names the holder by its pod UID.
type Names struct {
	index *Index
	path  func(handle string) string

	mu    sync.Mutex
	dirty map[string]struct{}
	wake  chan struct{}
	// stopped is set when Run has returned: Mark then writes at once.
	stopped atomic.Bool
	// writing serialises Flush, so that the last write of a handle is of
	// the index's last state.
	writing sync.Mutex
}

// NewNames returns the writer of index's names, saved at path(handle).
func NewNames(index *Index, path func(handle string) string) *Names {
	return &Names{index: index, path: path, dirty: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// Mark says that handle's holder changed in the index: call it after the
// change.
func (n *Names) Mark(handle string) {
	n.mu.Lock()
	n.dirty[handle] = struct{}{}
	n.mu.Unlock()
	if n.stopped.Load() {
		n.Flush()
		return
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Run writes the marked names delay after the first mark of a burst, until
// stop is closed; it then writes what is still marked and returns.
func (n *Names) Run(stop <-chan struct{}, delay time.Duration) {
	defer func() {
		n.stopped.Store(true)
		n.Flush()
	}()
	for {
		select {
		case <-stop:
			return
		case <-n.wake:
		}
		t := time.NewTimer(delay)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		n.Flush()
	}
}

// Flush writes the name of every marked handle now: the holder the index
// has for it, or no record when it has none.
func (n *Names) Flush() {
	n.writing.Lock()
	defer n.writing.Unlock()
	n.mu.Lock()
	dirty := n.dirty
	n.dirty = map[string]struct{}{}
	n.mu.Unlock()
	for handle := range dirty {
		if h, ok := n.index.Get(handle); ok {
			if err := Save(n.path(handle), h); err != nil {
				klog.ErrorS(err, "Cannot save the holder's name; after a driver restart it is named by pod UID",
					"volume_id", handle, "target_path", h.Target, "pod", h.Pod)
			}
		} else if err := Remove(n.path(handle)); err != nil {
			klog.ErrorS(err, "Cannot remove the former holder's name", "volume_id", handle)
		}
	}
}
