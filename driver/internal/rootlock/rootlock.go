// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rootlock makes one driver process the only one that works on a
// node's root directory: a second process (a DaemonSet surge, a stray run)
// gets a clear error instead of taking over the first one's sockets and
// holder index.
package rootlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked means another process holds the root.
var ErrLocked = errors.New("another per-node driver process is running on this root")

// Lock is an exclusive lock on a root directory, held until Release or
// the process ends (the kernel drops it even after SIGKILL).
type Lock struct{ f *os.File }

// Acquire takes the lock on root, creating root if needed. It does not wait.
func Acquire(root string) (*Lock, error) {
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("create root: %w", err)
	}
	path := filepath.Join(root, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by pid %s; stop that process first",
				ErrLocked, path, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() error { return l.f.Close() }
