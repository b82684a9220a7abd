// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package keylock is a mutex per key: work on one volume never waits for
// work on another (as it would behind a hashed bucket it shares), and a
// key's mutex is freed when nobody holds or waits for it.
package keylock

import (
	"fmt"
	"sync"
)

// Locks is a set of mutexes, one per key in use. Its zero value is ready.
type Locks struct {
	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	sync.Mutex
	refs int // holders and waiters
}

// LockKey locks key, waiting while another holds it.
func (l *Locks) LockKey(key string) {
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[string]*entry{}
	}
	e := l.keys[key]
	if e == nil {
		e = &entry{}
		l.keys[key] = e
	}
	e.refs++
	l.mu.Unlock()
	e.Lock()
}

// UnlockKey unlocks key; unlocking a key that is not locked is an error.
func (l *Locks) UnlockKey(key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		return fmt.Errorf("keylock: unlock of %q, which is not locked", key)
	}
	e.refs--
	if e.refs == 0 {
		delete(l.keys, key)
	}
	e.Unlock()
	return nil
}

// Len is how many keys are held or waited for.
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
