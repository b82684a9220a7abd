// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// A pod makes a tree deeper than PATH_MAX with relative mkdir in a loop:
// measuring and removing it must still work.
func TestTreeWalksATreeDeeperThanPathMax(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "copy")
	assert.NilError(t, os.Mkdir(dir, 0o750))
	const depth = 600 // 600 × 16 bytes: more than twice PATH_MAX
	name := strings.Repeat("d", 15)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	assert.NilError(t, err)
	for range depth {
		assert.NilError(t, unix.Mkdirat(fd, name, 0o750))
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		assert.NilError(t, err)
		_ = unix.Close(fd)
		fd = next
	}
	f, err := unix.Openat(fd, "bottom", unix.O_CREAT|unix.O_WRONLY, 0o644)
	assert.NilError(t, err)
	_ = unix.Close(f)
	_ = unix.Close(fd)

	u, err := usage(dir)
	assert.NilError(t, err, "measuring a tree %d directories deep", depth)
	assert.Equal(t, u.inodes, int64(depth+2), "the copy, %d directories and the file at the bottom", depth)
	removed, err := removeTree(dir)
	assert.NilError(t, err, "removing a tree %d directories deep", depth)
	assert.Equal(t, removed.inodes, int64(depth+2))
	_, err = os.Lstat(dir)
	assert.Assert(t, errors.Is(err, os.ErrNotExist), "the copy is still there: %v", err)
}

// swapper swaps dir/name between a real directory and what swap makes in
// its place, in a loop, until stop: a pod racing the driver's walk.
func swapper(t *testing.T, dir, name string, swap func(path string) error) (stop func()) {
	t.Helper()
	var done atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		path, real := filepath.Join(dir, name), filepath.Join(dir, name+".real")
		for !done.Load() {
			if os.Rename(path, real) != nil {
				_ = os.MkdirAll(real, 0o750)
			}
			_ = swap(path)
			_ = os.Remove(path)
			_ = os.Rename(real, path)
		}
	}()
	return func() { done.Store(true); <-finished }
}

// A pod swaps a directory of its copy for a symlink to a directory outside
// the copy, in a loop, while the copy is removed: nothing outside the copy
// may go.
func TestTreeRemovalNeverFollowsASymlinkSwappedIn(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	assert.NilError(t, os.Mkdir(outside, 0o750))
	const canaries = 20
	for i := range canaries {
		assert.NilError(t, os.WriteFile(filepath.Join(outside, "canary-"+strconv.Itoa(i)), []byte("keep"), 0o644))
	}
	for round := range 300 {
		copyDir := filepath.Join(base, "copy-"+strconv.Itoa(round))
		d := filepath.Join(copyDir, "d")
		assert.NilError(t, os.MkdirAll(d, 0o750))
		for i := range 20 {
			assert.NilError(t, os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)), nil, 0o644))
		}
		stop := swapper(t, copyDir, "d", func(path string) error { return os.Symlink(outside, path) })
		for range 5 {
			_, _ = removeTree(copyDir)
		}
		stop()
		left, err := os.ReadDir(outside)
		assert.NilError(t, err)
		assert.Equal(t, len(left), canaries, "round %d: removing a copy deleted %d files outside it", round, canaries-len(left))
	}
}

// A pod swaps a directory of its copy for a FIFO in a loop while the copy
// is measured: a measurement must never open the FIFO (and hang there).
func TestTreeMeasurementNeverOpensAFIFOSwappedIn(t *testing.T) {
	copyDir := filepath.Join(t.TempDir(), "copy")
	assert.NilError(t, os.MkdirAll(filepath.Join(copyDir, "d"), 0o750))
	for i := range 50 {
		assert.NilError(t, os.WriteFile(filepath.Join(copyDir, "d", "f"+strconv.Itoa(i)), nil, 0o644))
	}
	stop := swapper(t, copyDir, "d", func(path string) error { return unix.Mkfifo(path, 0o644) })
	var rounds atomic.Int64
	measured := make(chan struct{})
	go func() {
		defer close(measured)
		for range 3000 {
			_, _ = usage(copyDir)
			rounds.Add(1)
		}
	}()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		select {
		case <-measured:
			return poll.Success()
		default:
			return poll.Continue("%d of 3000 measurements done; the last one has not returned", rounds.Load())
		}
	}, poll.WithTimeout(60*time.Second), poll.WithDelay(100*time.Millisecond))
	stop()
}
