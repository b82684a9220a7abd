// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package mounts bind-mounts a node's copies into pods and reads the kernel's
// mount table to tell who holds a copy.
//
// Binding is two mount(2) calls (bind, then a read-only remount when asked),
// done directly rather than by exec'ing mount(8): it is what mount(8) would
// do, it costs microseconds instead of milliseconds, and the image needs no
// mount binary. Mount-point checks and mount-table parsing come from
// k8s.io/mount-utils.
package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	mountutils "k8s.io/mount-utils"
)

// Mounter is what the node server needs from the kernel.
type Mounter interface {
	// Bind mounts source at target (an existing directory) with flags
	// (MS_RDONLY, MS_NOSUID, ...; see Flags), 0 for none.
	Bind(source, target string, flags uintptr) error
	// Unmount detaches the mount at target; a target that is not a mount
	// point, or is missing, has nothing to detach. A symlink at target is
	// not followed.
	Unmount(target string) error
	// IsMountPoint reports whether path is a mount point; a missing path is not.
	IsMountPoint(path string) (bool, error)
}

// Kernel is the Mounter that talks to the running kernel.
type Kernel struct {
	utils *mountutils.Mounter
}

// NewKernel returns the real Mounter.
func NewKernel() *Kernel {
	return &Kernel{utils: mountutils.New("").(*mountutils.Mounter)}
}

// Bind implements Mounter.
//
// With flags, the mount at target must carry them from the moment it is
// made: target is under kubelet's pod directory, which the driver's
// container shares with the node (Bidirectional), so kubelet and the
// container runtime see a copy of each mount made there, and the pod gets
// that copy. A remount changes the one mount remounted, never its copies.
// So the flags go on a staging mount of source first (next to source, in
// the copies root, which the node does not see: its propagation is
// HostToContainer), and target is a bind of that mount, which starts with
// its flags wherever it is copied.
func (k *Kernel) Bind(source, target string, flags uintptr) error {
	if flags == 0 {
		if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind mount %s at %s: %w", source, target, err)
		}
		return nil
	}
	// A bind remount sets every per-mount flag at once: keep what the
	// source's mount forbids, or the remount would allow it.
	var src unix.Statfs_t
	if err := unix.Statfs(source, &src); err != nil {
		return fmt.Errorf("read the flags of %s: %w", source, err)
	}
	stage, err := os.MkdirTemp(filepath.Dir(source), ".bind-")
	if err != nil {
		return fmt.Errorf("make a staging directory for %s: %w", source, err)
	}
	defer func() { _ = os.Remove(stage) }()
	if err := unix.Mount(source, stage, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s at %s: %w", source, stage, err)
	}
	defer func() { _ = unix.Unmount(stage, 0) }()
	if err := unix.Mount("", stage, "", unix.MS_BIND|unix.MS_REMOUNT|flags|kept(src.Flags), ""); err != nil {
		return fmt.Errorf("remount %s with the asked flags: %w", stage, err)
	}
	if err := unix.Mount(stage, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s at %s: %w", source, target, err)
	}
	return nil
}

// ErrUnknownOption: a mount option that means nothing for a bind mount of a
// directory.
var ErrUnknownOption = errors.New("mount options that mean nothing for a per-node volume (a bind mount of a directory)")

// ErrNotInPod: a mount option a bind mount could set, but that would never
// reach the pod. The container runtime bind-mounts the volume into the
// container with only rw or ro (all the CRI can say) and sets every other
// flag of that mount to its default (runc since 1.2, crun), so a
// PersistentVolume's nosuid, noexec or ro would hold on the node's mount and
// not in the pod.
var ErrNotInPod = errors.New("mount options that would not reach the pod: the container runtime mounts a volume into a container with only rw or ro, and clears every other flag")

// defaults restate what every mount into a pod gets: accepted, they change
// nothing. notInPod are refused with ErrNotInPod.
var (
	defaults = []string{"rw", "suid", "dev", "exec", "relatime"}
	notInPod = []string{"ro", "nosuid", "nodev", "noexec", "noatime", "nodiratime", "strictatime"}
)

// CheckOptions accepts a PersistentVolume's mountOptions when each restates
// a default, and otherwise refuses them, naming every one refused.
func CheckOptions(opts []string) error {
	var lost, unknown []string
	for _, o := range opts {
		switch {
		case slices.Contains(defaults, o):
		case slices.Contains(notInPod, o):
			lost = append(lost, o)
		default:
			unknown = append(unknown, o)
		}
	}
	switch {
	case len(lost) > 0 && slices.Contains(lost, "ro"):
		return fmt.Errorf("%w: %s (for a read-only volume, set readOnly: true on the pod's persistentVolumeClaim or volumeMount)", ErrNotInPod, strings.Join(lost, ", "))
	case len(lost) > 0:
		return fmt.Errorf("%w: %s", ErrNotInPod, strings.Join(lost, ", "))
	case len(unknown) > 0:
		return fmt.Errorf("%w: %s (a per-node volume takes only %s)", ErrUnknownOption, strings.Join(unknown, ", "), strings.Join(defaults, ", "))
	}
	return nil
}

// kept maps the statfs flags a bind remount must carry over to mount flags.
func kept(st int64) uintptr {
	var flags uintptr
	for stFlag, msFlag := range map[int64]uintptr{
		unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC,
		unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME,
	} {
		if st&stFlag != 0 {
			flags |= msFlag
		}
	}
	return flags
}

// ReadOnly reports whether the mount that holds path is read-only.
func ReadOnly(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Flags&unix.ST_RDONLY != 0, nil
}

// Unmount implements Mounter with one umount2(2), which answers "not a
// mount point" (EINVAL) or "missing" (ENOENT) itself: asking first would
// walk the path for a check the kernel makes anyway, and cost more than the
// unmount among few mounts (make bench).
func (k *Kernel) Unmount(target string) error {
	err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", target, err)
}

// IsMountPoint implements Mounter with mount-utils' fast check (statx and
// openat2 on current kernels), which also sees bind mounts within one
// filesystem.
func (k *Kernel) IsMountPoint(path string) (bool, error) {
	mounted, err := k.utils.IsMountPoint(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return mounted, err
}

// SameDir reports whether a and b are the same directory, which for a bind
// mount target means "this target shows that copy".
func SameDir(a, b string) (bool, error) {
	ai, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	bi, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(ai, bi), nil
}
