// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package mounts

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

			var flags uintptr
			if tc.readonly {
				flags = unix.MS_RDONLY
			}
			assert.NilError(t, k.Bind(src, dst, flags))
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

// The driver mounts in its container's mount namespace, under kubelet's pod
// directory (Bidirectional: a shared mount); kubelet and the container
// runtime see a propagated copy of each mount, and the pod gets that copy.
// A remount changes the flags of the one mount remounted, never of its
// copies: the flags must be on the mount when it is made. (Seen in scenario
// 38: the node's mount table showed a read-only publish as rw,relatime.)
func TestFlagsReachTheMountsCopyInAnotherNamespace(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	shared, src := filepath.Join(dir, "kubelet"), filepath.Join(dir, "volumes", "v", "data")
	target := filepath.Join(shared, "target")
	assert.NilError(t, os.MkdirAll(src, 0o755))
	assert.NilError(t, os.Mkdir(shared, 0o755))
	assert.NilError(t, unix.Mount("tmpfs", shared, "tmpfs", 0, ""))
	t.Cleanup(func() { _ = unix.Unmount(shared, unix.MNT_DETACH) })
	assert.NilError(t, unix.Mount("", shared, "", unix.MS_SHARED, ""))
	assert.NilError(t, os.Mkdir(target, 0o755))

	const flags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	errc := make(chan error)
	go func() {
		// A thread of its own in a mount namespace of its own, as the
		// driver's container is; never unlocked, so the thread ends with
		// the goroutine and its namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		errc <- NewKernel().Bind(src, target, flags)
	}()
	assert.NilError(t, <-errc)
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })

	var st unix.Statfs_t
	assert.NilError(t, unix.Statfs(target, &st))
	for _, f := range []struct {
		name string
		flag int64
	}{{"ro", unix.ST_RDONLY}, {"nosuid", unix.ST_NOSUID}, {"nodev", unix.ST_NODEV}, {"noexec", unix.ST_NOEXEC}} {
		assert.Assert(t, st.Flags&f.flag != 0, "the copy of the mount in the namespace that did not make it is not %s (flags %#x)", f.name, st.Flags)
	}
	err := os.WriteFile(filepath.Join(target, "f"), []byte("x"), 0o644)
	assert.ErrorContains(t, err, "read-only file system")
}

func TestIsMountPointMissingPath(t *testing.T) {
	mounted, err := NewKernel().IsMountPoint(filepath.Join(t.TempDir(), "missing"))
	assert.NilError(t, err)
	assert.Assert(t, !mounted)
}

// A PV's mountOptions are accepted when they restate the defaults; any
// other is refused, named: those a bind mount could set because they would
// not reach the pod, the rest because they mean nothing here.
func TestOptionsThatWouldNotReachThePodAreRefused(t *testing.T) {
	for _, tc := range []struct {
		opts  []string
		want  error
		names string
	}{
		{nil, nil, ""},
		{[]string{"rw", "relatime", "suid", "dev", "exec"}, nil, ""},
		{[]string{"ro"}, ErrNotInPod, "ro (for a read-only volume, set readOnly: true"},
		{[]string{"rw", "nosuid", "nodev", "noexec"}, ErrNotInPod, "nosuid, nodev, noexec"},
		{[]string{"noatime", "discard"}, ErrNotInPod, "noatime"},
		{[]string{"discard", "vers=4.1"}, ErrUnknownOption, "discard, vers=4.1"},
		{[]string{""}, ErrUnknownOption, ""},
	} {
		err := CheckOptions(tc.opts)
		if tc.want == nil {
			assert.NilError(t, err, "%v", tc.opts)
			continue
		}
		assert.Assert(t, errors.Is(err, tc.want), "%v: got %v", tc.opts, err)
		assert.ErrorContains(t, err, tc.names)
	}
}

func FuzzCheckOptions(f *testing.F) {
	f.Add("ro,nosuid")
	f.Add("rw,relatime")
	f.Add("discard")
	f.Fuzz(func(t *testing.T, joined string) {
		opts := strings.Split(joined, ",")
		err := CheckOptions(opts)
		for _, o := range opts {
			if err == nil && !slices.Contains(defaults, o) {
				t.Fatalf("%q accepted", o)
			}
		}
		if err != nil && !errors.Is(err, ErrNotInPod) && !errors.Is(err, ErrUnknownOption) {
			t.Fatalf("refused with no known error: %v", err)
		}
	})
}

// An unmount the kernel refuses because the mount is busy (a process of
// the pod still has a file of the copy open) fails: a lazy detach would
// hide the mount from the mount table while that process still writes to
// the copy, and the next pod on the node would get it at the same time.
func TestABusyMountIsNotDetached(t *testing.T) {
	requireRoot(t)
	k := NewKernel()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	assert.NilError(t, os.Mkdir(src, 0o755))
	assert.NilError(t, os.Mkdir(dst, 0o755))
	assert.NilError(t, k.Bind(src, dst, 0))
	t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
	f, err := os.Create(filepath.Join(dst, "open"))
	assert.NilError(t, err)

	err = k.Unmount(dst)
	assert.Assert(t, errors.Is(err, unix.EBUSY), "unmount of a busy mount: want EBUSY, got %v", err)
	mounted, err := k.IsMountPoint(dst)
	assert.NilError(t, err)
	assert.Assert(t, mounted, "the busy mount is gone from the mount table: it was detached")

	assert.NilError(t, f.Close())
	assert.NilError(t, k.Unmount(dst), "once nothing is open in it, the mount goes")
	mounted, err = k.IsMountPoint(dst)
	assert.NilError(t, err)
	assert.Assert(t, !mounted)
}

// Unmount detaches what is mounted at the target, and nothing else: a
// target with nothing mounted, or none, is not an error, and a symlink at
// the target is never followed.
func TestUnmountDetachesOnlyTheTargetItself(t *testing.T) {
	k := NewKernel()
	dir := t.TempDir()
	src, mounted := filepath.Join(dir, "src"), filepath.Join(dir, "mounted")
	assert.NilError(t, os.Mkdir(src, 0o755))
	assert.NilError(t, os.Mkdir(mounted, 0o755))
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "plain"), 0o755))
	assert.NilError(t, os.Symlink(mounted, filepath.Join(dir, "link")))
	assert.NilError(t, k.Bind(src, mounted, 0))
	t.Cleanup(func() { _ = unix.Unmount(mounted, unix.MNT_DETACH) })

	for _, tc := range []struct {
		target     string
		stillThere bool // whether "mounted" is still a mount point after
	}{
		{"plain", true},   // a directory that is not a mount point
		{"missing", true}, // nothing there
		{"link", true},    // a symlink to a mount point: the link is no mount
		{"mounted", false},
		{"mounted", false}, // again: already gone
	} {
		assert.NilError(t, k.Unmount(filepath.Join(dir, tc.target)), tc.target)
		still, err := k.IsMountPoint(mounted)
		assert.NilError(t, err)
		assert.Equal(t, still, tc.stillThere, "after Unmount(%s), is %s a mount point", tc.target, mounted)
	}
}
