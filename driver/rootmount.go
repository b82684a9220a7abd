// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/healthserver"
)

// mountPointer says whether a path is a mount point (mounts.Kernel does).
type mountPointer interface {
	IsMountPoint(path string) (bool, error)
}

// waitForRootMount returns once root is a mount point, and until then
// touches nothing under it: with copies on a filesystem of their own that
// mounts after the driver starts, a driver that went ahead would make its
// lock, its trash and new copies on the empty directory below, and take a
// PV being deleted for one it has no copy of. Meanwhile health (if
// address is set) answers /healthz 200 and /readyz 503 saying why.
func waitForRootMount(ctx context.Context, m mountPointer, root, address string, every time.Duration) error {
	why := fmt.Sprintf("the copies root %s is not a mount point yet (--copies-root-must-be-mount-point)", root)
	if address != "" {
		notMounted := []check{{"copies root", func() error { return errors.New(why) }}}
		h := healthserver.New(address, endpoints(nil, notMounted, http.NotFoundHandler()))
		healthserver.Start(h)
		defer func() { _ = h.Close() }()
	}
	logged := time.Time{}
	return wait.PollUntilContextCancel(ctx, every, true, func(context.Context) (bool, error) {
		ok, err := m.IsMountPoint(root)
		if ok && err == nil {
			klog.InfoS("The copies root is a mount point", "root", root)
			return true, nil
		}
		if time.Since(logged) >= 30*time.Second {
			klog.InfoS("Waiting for the copies root to be a mount point; touching nothing until then", "root", root, "err", err)
			logged = time.Now()
		}
		return false, nil
	})
}
