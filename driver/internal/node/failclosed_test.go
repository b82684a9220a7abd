// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"gotest.tools/v3/assert"

	"liken.sh/per-node/driver/internal/mounts"
)

// flakyMounter is the real kernel, except that mount-point checks fail with
// err while it is set (EMFILE, EIO: the kernel could not answer).
type flakyMounter struct {
	mounts.Mounter
	err error
}

func (f *flakyMounter) IsMountPoint(path string) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	return f.Mounter.IsMountPoint(path)
}

// An error while checking the holder is not "not mounted": the copy stays
// held, the record stays, and the caller gets a retryable error.
func TestAnUnansweredHolderCheckKeepsTheCopyHeld(t *testing.T) {
	for _, injected := range []error{syscall.EMFILE, syscall.EIO} {
		t.Run(injected.Error(), func(t *testing.T) {
			_, dir := newTestServer(t)
			m := &flakyMounter{Mounter: mounts.NewKernel()}
			s, err := New(Config{NodeID: "worker-a", Root: filepath.Join(dir, "root"), Mounter: m})
			assert.NilError(t, err)
			ctx := context.Background()
			first, second := podTarget(dir, "1111", "store"), podTarget(dir, "2222", "store")
			_, err = s.NodePublishVolume(ctx, publishReq("store", first, "store-a"))
			assert.NilError(t, err)
			t.Cleanup(func() { m.err = nil; unpublish(t, s, "store", first) })
			assert.NilError(t, os.WriteFile(filepath.Join(first, "record"), []byte("1"), 0o644))

			m.err = injected
			_, err = s.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
			assertCode(t, err, codes.Unavailable)
			removed, err := s.RemoveCopy("store", "")
			assert.Assert(t, errors.Is(err, ErrUncertain), "RemoveCopy on an unanswered check: removed=%v err=%v", removed, err)
			_, err = os.Stat(filepath.Join(first, "record"))
			assert.NilError(t, err, "the copy under the running pod must stay")

			m.err = nil
			_, err = s.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
			assertCode(t, err, codes.FailedPrecondition)
			assert.ErrorContains(t, err, "example/store-a", "the record of the holder must survive the error")
		})
	}
}
