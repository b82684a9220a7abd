// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"liken.sh/per-node/driver/internal/mounts"
)

// With --copies-root-must-be-mount-point, a driver whose copies root has
// not mounted yet is not ready, touches nothing under it, and goes on once
// the filesystem is mounted there.
func TestTheDriverWaitsForTheCopiesRootToMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a tmpfs and must run as root")
	}
	root := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	address := l.Addr().String()
	assert.NilError(t, l.Close())

	done := make(chan error, 1)
	go func() {
		done <- waitForRootMount(context.Background(), mounts.NewKernel(), root, address, 10*time.Millisecond)
	}()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		resp, err := http.Get("http://" + address + "/readyz")
		if err != nil {
			return poll.Continue("readyz: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			return poll.Error(fmt.Errorf("readyz answered %d while the root is not mounted; want 503", resp.StatusCode))
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second))
	select {
	case err := <-done:
		t.Fatalf("returned before the root was a mount point: %v", err)
	default:
	}
	entries, err := os.ReadDir(root)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 0, "something was made under the root before it was mounted")

	assert.NilError(t, unix.Mount("tmpfs", root, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		select {
		case err := <-done:
			if err != nil {
				return poll.Error(err)
			}
			return poll.Success()
		default:
			return poll.Continue("still waiting although %s is a mount point", root)
		}
	}, poll.WithTimeout(10*time.Second))
}
