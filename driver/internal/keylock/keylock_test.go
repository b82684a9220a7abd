// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package keylock

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// One key's holder blocks that key only, and a key nobody uses costs
// nothing.
func TestALockBlocksItsKeyOnly(t *testing.T) {
	var l Locks
	l.LockKey("a")
	got := make(chan struct{})
	go func() { l.LockKey("a"); close(got) }()
	l.LockKey("b") // another key: not blocked
	assert.NilError(t, l.UnlockKey("b"))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if l.Len() == 1 {
			return poll.Success()
		}
		return poll.Continue("%d keys in use, want 1 (a, held and waited for)", l.Len())
	}, poll.WithTimeout(5*time.Second))
	select {
	case <-got:
		t.Fatal("a second LockKey of a held key did not wait")
	default:
	}
	assert.NilError(t, l.UnlockKey("a"))
	<-got
	assert.NilError(t, l.UnlockKey("a"))
	assert.Equal(t, l.Len(), 0, "keys nobody holds are freed")
	assert.ErrorContains(t, l.UnlockKey("a"), "not locked")
}

// Many goroutines on a few keys: each key is held by one at a time.
func TestALockIsExclusivePerKey(t *testing.T) {
	var l Locks
	var inside [4]atomic.Int32
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			k := i % 4
			l.LockKey(strconv.Itoa(k))
			if n := inside[k].Add(1); n != 1 {
				t.Errorf("key %d held by %d at once", k, n)
			}
			inside[k].Add(-1)
			_ = l.UnlockKey(strconv.Itoa(k))
		})
	}
	wg.Wait()
	assert.Equal(t, l.Len(), 0)
}
