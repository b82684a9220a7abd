// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"gotest.tools/v3/assert"

	"liken.sh/per-node/driver/internal/mounts"
)

// A publish retried at the same target with another read-only flag is not
// the same request: AlreadyExists, and the mount is left as it was.
func TestSameTargetWithAnotherReadOnlyFlagIsAlreadyExists(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(map[bool]string{false: "rw then ro", true: "ro then rw"}[first], func(t *testing.T) {
			s, dir := newTestServer(t)
			ctx := context.Background()
			target := podTarget(dir, "1111", "store")
			req := publishReq("store", target, "store-a")
			req.Readonly = first
			_, err := s.NodePublishVolume(ctx, req)
			assert.NilError(t, err)
			t.Cleanup(func() { unpublish(t, s, "store", target) })

			req.Readonly = !first
			_, err = s.NodePublishVolume(ctx, req)
			assertCode(t, err, codes.AlreadyExists)
			assert.Equal(t, readOnly(t, target), first, "the existing mount was changed")

			// After a restart the answer comes from the kernel.
			restarted, err := New(Config{NodeID: "worker-a", Root: s.layout.Root(), Mounter: mounts.NewKernel()})
			assert.NilError(t, err)
			_, err = restarted.NodePublishVolume(ctx, req)
			assertCode(t, err, codes.AlreadyExists)
			req.Readonly = first
			_, err = restarted.NodePublishVolume(ctx, req)
			assert.NilError(t, err, "the same request again is a success")
		})
	}
}

func readOnly(t *testing.T, path string) bool {
	t.Helper()
	var st unix.Statfs_t
	assert.NilError(t, unix.Statfs(path, &st))
	return st.Flags&unix.ST_RDONLY != 0
}

// A read-only publish keeps what the copies' filesystem forbids: the
// remount must not drop nosuid, nodev or noexec.
func TestReadOnlyPublishKeepsTheSourcesRestrictions(t *testing.T) {
	_, dir := newTestServer(t)
	root := filepath.Join(dir, "restricted")
	assert.NilError(t, os.MkdirAll(root, 0o750))
	assert.NilError(t, unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=16m"))
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	s, err := New(Config{NodeID: "worker-a", Root: root, Mounter: mounts.NewKernel()})
	assert.NilError(t, err)
	target := podTarget(dir, "1111", "store")
	req := publishReq("store", target, "reader")
	req.Readonly = true
	_, err = s.NodePublishVolume(context.Background(), req)
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })
	var st unix.Statfs_t
	assert.NilError(t, unix.Statfs(target, &st))
	for flag, name := range map[int64]string{unix.ST_RDONLY: "ro", unix.ST_NOSUID: "nosuid", unix.ST_NODEV: "nodev", unix.ST_NOEXEC: "noexec"} {
		assert.Check(t, st.Flags&flag != 0, "the read-only mount lost %s (flags %#x)", name, st.Flags)
	}
}

// Target paths are cleaned, and with a kubelet directory set they must lie
// under its pods directory.
func TestTargetMustLieUnderKubeletsPodsDirectory(t *testing.T) {
	_, dir := newTestServer(t)
	kubelet := filepath.Join(dir, "kubelet")
	s, err := New(Config{NodeID: "worker-a", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel(), KubeletDir: kubelet})
	assert.NilError(t, err)
	ctx := context.Background()
	for _, target := range []string{
		filepath.Join(dir, "elsewhere/mount"),
		kubelet + "/pods/../plugins/x/mount",
		kubelet + "/pods",
		kubelet + "/podsX/1/mount",
	} {
		t.Run(target, func(t *testing.T) {
			_, err := s.NodePublishVolume(ctx, publishReq("store", target, "p"))
			assertCode(t, err, codes.InvalidArgument)
			_, err = os.Stat(filepath.Clean(target))
			assert.Assert(t, os.IsNotExist(err), "a refused target was created")
		})
	}
	good := kubelet + "/pods/1111/volumes/kubernetes.io~csi/store/./mount"
	_, err = s.NodePublishVolume(ctx, publishReq("store", good, "p"))
	assert.NilError(t, err)
	unpublish(t, s, "store", filepath.Clean(good))
}
