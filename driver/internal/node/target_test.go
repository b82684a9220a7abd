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

// tmpfsAt mounts a tmpfs holding one file at dir, as kubelet mounts a
// secret or another driver a volume, and unmounts it at the end.
func tmpfsAt(t *testing.T, dir string) {
	t.Helper()
	assert.NilError(t, os.MkdirAll(dir, 0o750))
	assert.NilError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("secret"), 0o600))
}

// Publish and unpublish act only on kubelet's target for the volume they
// name; on anything else they answer an error and leave it as it was.
func TestOnlyKubeletsTargetForTheVolumeIsTouched(t *testing.T) {
	_, dir := newTestServer(t)
	kubelet := filepath.Join(dir, "kubelet")
	s, err := New(Config{NodeID: "worker-a", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel(), KubeletDir: kubelet})
	assert.NilError(t, err)
	ctx := context.Background()
	pods := filepath.Join(kubelet, "pods")
	held := filepath.Join(pods, "1111/volumes/kubernetes.io~csi/store/mount")
	_, err = s.NodePublishVolume(ctx, publishReq("store", held, "store-a"))
	assert.NilError(t, err)
	t.Cleanup(func() { _, _ = s.NodeUnpublishVolume(ctx, unpublishRequest("store", held)) })

	etcHosts := filepath.Join(pods, "2222/etc-hosts")
	assert.NilError(t, os.MkdirAll(filepath.Dir(etcHosts), 0o750))
	assert.NilError(t, os.WriteFile(etcHosts, []byte("127.0.0.1 localhost\n"), 0o644))
	secret := filepath.Join(pods, "2222/volumes/kubernetes.io~secret/token")
	tmpfsAt(t, secret)
	otherCSI := filepath.Join(pods, "2222/volumes/kubernetes.io~csi/other/mount")
	tmpfsAt(t, otherCSI)
	notTheCopy := filepath.Join(pods, "3333/volumes/kubernetes.io~csi/store/mount")
	tmpfsAt(t, notTheCopy)
	emptyDir := filepath.Join(pods, "2222/volumes/kubernetes.io~empty-dir/cache")
	assert.NilError(t, os.MkdirAll(emptyDir, 0o750))

	k := mounts.NewKernel()
	for _, tc := range []struct {
		name, target string
		code         codes.Code
		mounted      bool // what is at target is a mount and stays one
	}{
		{"a pod's file", etcHosts, codes.InvalidArgument, false},
		{"another plugin's volume", secret, codes.InvalidArgument, true},
		{"another CSI volume's target", otherCSI, codes.FailedPrecondition, true},
		{"this volume's target with something else mounted", notTheCopy, codes.FailedPrecondition, true},
		{"kubelet's volume directory", filepath.Dir(held), codes.InvalidArgument, false},
	} {
		t.Run("unpublish "+tc.name, func(t *testing.T) {
			_, err := s.NodeUnpublishVolume(ctx, unpublishRequest("store", tc.target))
			assertCode(t, err, tc.code)
			_, err = os.Lstat(tc.target)
			assert.NilError(t, err, "the refused target is gone")
			mounted, err := k.IsMountPoint(tc.target)
			assert.NilError(t, err)
			assert.Equal(t, mounted, tc.mounted, "%s was unmounted", tc.target)
		})
	}
	for _, tc := range []struct{ name, target string }{
		{"over an emptyDir", emptyDir},
		{"over a pod's file", etcHosts},
		{"at a pod's directory", filepath.Join(pods, "2222")},
	} {
		t.Run("publish "+tc.name, func(t *testing.T) {
			_, err := s.NodePublishVolume(ctx, publishReq("store2", tc.target, "p"))
			assertCode(t, err, codes.InvalidArgument)
			mounted, err := k.IsMountPoint(tc.target)
			assert.NilError(t, err)
			assert.Assert(t, !mounted, "a copy was mounted at %s", tc.target)
		})
	}
	content, err := os.ReadFile(etcHosts)
	assert.NilError(t, err)
	assert.Equal(t, string(content), "127.0.0.1 localhost\n")
	mounted, err := k.IsMountPoint(held)
	assert.NilError(t, err)
	assert.Assert(t, mounted, "the copy's own holder was unmounted")
}

// A target whose copy was removed from under it (by hand, or by a test's
// cleanup, while the pod still ran) still shows that copy's directory, now
// deleted: unpublish unmounts it, or the pod could never terminate.
func TestATargetWhoseCopyWasRemovedIsUnmounted(t *testing.T) {
	_, dir := newTestServer(t)
	kubelet := filepath.Join(dir, "kubelet")
	s, err := New(Config{NodeID: "worker-a", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel(), KubeletDir: kubelet})
	assert.NilError(t, err)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, copyDir string)
	}{
		{"removed", func(t *testing.T, copyDir string) { assert.NilError(t, os.RemoveAll(copyDir)) }},
		{"removed and made again", func(t *testing.T, copyDir string) {
			assert.NilError(t, os.RemoveAll(copyDir))
			assert.NilError(t, os.MkdirAll(copyDir, 0o750))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(kubelet, "pods/1111/volumes/kubernetes.io~csi/store/mount")
			_, err := s.NodePublishVolume(ctx, publishReq("store", target, "store-a"))
			assert.NilError(t, err)
			t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
			copyDir, err := s.layout.CopyDir("store")
			assert.NilError(t, err)
			tc.after(t, copyDir)

			_, err = s.NodeUnpublishVolume(ctx, unpublishRequest("store", target))
			assert.NilError(t, err)
			_, err = os.Lstat(target)
			assert.Assert(t, os.IsNotExist(err), "the target is still there: %v", err)
		})
	}
}
