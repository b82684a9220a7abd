// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"liken.sh/per-node/driver/internal/tree"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// stuckMeasure is a measurement that does not finish until release: a copy
// on a disk that stopped answering, or a walk of a very large tree.
type stuckMeasure struct {
	calls   atomic.Int32
	release chan struct{}
	result  tree.Used
}

func (m *stuckMeasure) measure(string) (tree.Used, error) {
	m.calls.Add(1)
	<-m.release
	return m.result, nil
}

// A copy that cannot be measured in time never holds up a stats call or a
// scrape: the caller gets the last value (or ErrMeasuring) within the
// bound, and later calls join the one measurement instead of starting more.
func TestAStuckMeasurementAnswersWithinTheBound(t *testing.T) {
	m := &stuckMeasure{release: make(chan struct{}), result: tree.Used{Bytes: 2, Inodes: 2}}
	copyDir := t.TempDir()
	c := newUsageCache(time.Nanosecond)
	c.measure = m.measure
	t.Cleanup(func() { close(m.release) })

	answered := make(chan error, 5)
	go func() {
		for range 5 {
			_, err := c.get("pv", copyDir, 20*time.Millisecond)
			answered <- err
		}
	}()
	for i := range 5 {
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			select {
			case err := <-answered:
				if !errors.Is(err, ErrMeasuring) {
					return poll.Error(fmt.Errorf("call %d: want ErrMeasuring, got %v", i, err))
				}
				return poll.Success()
			default:
				return poll.Continue("call %d has not answered while its copy's measurement is stuck", i)
			}
		}, poll.WithTimeout(10*time.Second))
	}
	assert.Equal(t, m.calls.Load(), int32(1), "every call started a walk of its own")
}

// Once a copy was measured, a stuck measurement answers with that value.
func TestAStuckMeasurementAnswersWithTheLastValue(t *testing.T) {
	copyDir := t.TempDir()
	c := newUsageCache(time.Nanosecond)
	c.measure = func(string) (tree.Used, error) { return tree.Used{Bytes: 1, Inodes: 1}, nil }
	u, err := c.get("pv", copyDir, time.Second)
	assert.NilError(t, err)
	m := &stuckMeasure{release: make(chan struct{})}
	c.measure = m.measure
	t.Cleanup(func() { close(m.release) })
	u2, err := c.get("pv", copyDir, 20*time.Millisecond)
	assert.NilError(t, err)
	assert.Equal(t, u2, u)
}

// A measurement still running when its copy is trashed does not write its
// result back: the next copy of that name is measured anew.
func TestAMeasurementOfATrashedCopyIsNotKept(t *testing.T) {
	m := &stuckMeasure{release: make(chan struct{}), result: tree.Used{Bytes: 99, Inodes: 9}}
	base := t.TempDir()
	copyDir := filepath.Join(base, "copy")
	assert.NilError(t, os.Mkdir(copyDir, 0o750))
	c := newUsageCache(time.Hour)
	c.measure = m.measure
	first := make(chan struct{})
	go func() {
		_, _ = c.get("pv", copyDir, time.Hour) // returns once the walk is done and kept (or not)
		close(first)
	}()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if m.calls.Load() == 1 {
			return poll.Success()
		}
		return poll.Continue("the first measurement has not started")
	}, poll.WithTimeout(10*time.Second))
	// The copy goes to the trash while it is measured (as Server.trash
	// does: rename, then forget), and the PV's next pod makes a new one.
	assert.NilError(t, os.Rename(copyDir, filepath.Join(base, "trashed")))
	c.forget("pv")
	assert.NilError(t, os.Mkdir(copyDir, 0o750))
	close(m.release)
	<-first
	c.measure = func(string) (tree.Used, error) { return tree.Used{Bytes: 1, Inodes: 1}, nil }
	u, err := c.get("pv", copyDir, time.Second)
	assert.NilError(t, err)
	assert.Equal(t, u, tree.Used{Bytes: 1, Inodes: 1}, "the trashed copy's measurement was kept for the new copy")
}

// A measurement that fails (a pod moving a deep directory under the walk
// makes it end in tree.ErrChanged) is not walked again on every stats call
// and scrape: it waits for the copy's next figure like any other, and the
// last figure measured, if any, answers meanwhile. Else two such copies
// would hold both measuring slots for good.
func TestAFailedMeasurementIsNotWalkedAgainUntilItIsDue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		measured bool // a figure was measured before the failure
	}{{"never measured", false}, {"measured before", true}} {
		t.Run(tc.name, func(t *testing.T) {
			copyDir := t.TempDir()
			var calls atomic.Int32
			fail := atomic.Bool{}
			c := newUsageCache(time.Hour)
			c.measure = func(string) (tree.Used, error) {
				calls.Add(1)
				if fail.Load() {
					return tree.Used{}, fmt.Errorf("walk %s: %w", copyDir, tree.ErrChanged)
				}
				return tree.Used{Bytes: 7, Inodes: 1}, nil
			}
			if tc.measured {
				_, err := c.get("pv", copyDir, time.Second)
				assert.NilError(t, err)
				c.mu.Lock()
				m := c.m["pv"]
				m.at = time.Now().Add(-2 * time.Hour) // its figure is due
				c.m["pv"] = m
				c.mu.Unlock()
			}
			fail.Store(true)
			before := calls.Load()
			for i := range 5 {
				used, err := c.get("pv", copyDir, time.Second)
				if tc.measured {
					assert.NilError(t, err, "call %d", i)
					assert.Equal(t, used.Bytes, int64(7), "call %d: the last figure measured", i)
				} else {
					assert.Assert(t, errors.Is(err, tree.ErrChanged), "call %d: want the walk's error, got %v", i, err)
				}
			}
			assert.Equal(t, calls.Load()-before, int32(1), "walks for 5 calls after a failure")
		})
	}
}
