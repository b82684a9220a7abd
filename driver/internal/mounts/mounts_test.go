// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package mounts

import (
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	mountutils "k8s.io/mount-utils"
)

func TestBindTargetsFromTable(t *testing.T) {
	table, err := mountutils.ParseMountInfo("testdata/mountinfo")
	assert.NilError(t, err)
	store := "/var/lib/per-node.liken.sh/volumes/example-store/data"
	other := "/var/lib/per-node.liken.sh/volumes/other/data"
	unused := "/var/lib/per-node.liken.sh/volumes/unused/data"

	got := BindTargets(table, []string{store, other, unused})

	assert.DeepEqual(t, got, map[string][]string{
		// listed twice in the table (propagation), reported once
		store: {"/var/lib/kubelet/pods/0b6f/volumes/kubernetes.io~csi/example-store/mount"},
		// the tmpfs entry has the same root but another device: not ours
		other: {"/var/lib/kubelet/pods/88bb/volumes/kubernetes.io~csi/other/mount"},
	})
}

// requireRoot stops a test that needs mount(2). It fails rather than skips:
// these tests are the proof that the real mounts work, and CI runs as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes real bind mounts and must run as root (make test runs as root in CI)")
	}
}

func TestKernelBind(t *testing.T) {
	requireRoot(t)
	k := NewKernel()
	for _, tc := range []struct {
		name     string
		readonly bool
	}{{"read-write", false}, {"read-only", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			assert.NilError(t, os.Mkdir(src, 0o755))
			assert.NilError(t, os.Mkdir(dst, 0o755))

			assert.NilError(t, k.Bind(src, dst, tc.readonly))
			t.Cleanup(func() { _ = k.Unmount(dst) })

			mounted, err := k.IsMountPoint(dst)
			assert.NilError(t, err)
			assert.Assert(t, mounted, "a bind mount within one filesystem must be seen")
			same, err := SameDir(src, dst)
			assert.NilError(t, err)
			assert.Assert(t, same)

			err = os.WriteFile(filepath.Join(dst, "f"), []byte("x"), 0o644)
			if tc.readonly {
				assert.ErrorContains(t, err, "read-only file system")
			} else {
				assert.NilError(t, err)
			}

			table, err := mountutils.ParseMountInfo(ProcSelfMountInfo)
			assert.NilError(t, err)
			assert.DeepEqual(t, BindTargets(table, []string{src}), map[string][]string{src: {dst}})

			assert.NilError(t, k.Unmount(dst))
			mounted, err = k.IsMountPoint(dst)
			assert.NilError(t, err)
			assert.Assert(t, !mounted)
		})
	}
}

func TestIsMountPointMissingPath(t *testing.T) {
	mounted, err := NewKernel().IsMountPoint(filepath.Join(t.TempDir(), "missing"))
	assert.NilError(t, err)
	assert.Assert(t, !mounted)
}
