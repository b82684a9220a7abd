// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	mountutils "k8s.io/mount-utils"

	"liken.sh/per-node/driver/internal/holders"
	"liken.sh/per-node/driver/internal/mounts"
)

// publication is one validated NodePublishVolume request.
type publication struct {
	handle, target, pod string
	flags               uintptr // mount flags: the PV's mountOptions, MS_RDONLY when read-only
}

func (p publication) readonly() bool { return p.flags&unix.MS_RDONLY != 0 }

// publish mounts the copy for p.pod unless another pod holds it. The caller
// holds the handle's lock.
func (s *Server) publish(ctx context.Context, p publication) error {
	copyDir, err := s.layout.CopyDir(p.handle)
	if err != nil {
		return err
	}
	h, ok, err := s.confirmedHolder(p.handle, copyDir)
	if err != nil {
		return err
	}
	if ok {
		if h.Target == p.target {
			return sameRequest(p) // kubelet retried a publish
		}
		return &HeldError{Handle: p.handle, Holder: h}
	}
	if err := s.ensureTrackedCopy(ctx, p.handle, copyDir); err != nil {
		return err
	}
	fresh, err := makeTarget(p.target)
	if err != nil {
		return err
	}
	shows := false
	if !fresh { // a target that existed may already show the copy
		if shows, err = s.shows(p.target, copyDir); err != nil {
			return err
		}
	}
	if shows {
		if err := sameRequest(p); err != nil {
			return err
		}
	} else if err := s.mounter.Bind(copyDir, p.target, p.flags); err != nil {
		return err
	}
	s.setHolder(p.handle, holders.Holder{Target: p.target, Pod: p.pod})
	return nil
}

// setHolder records the holder of handle; its name is saved next to the
// copy a moment later, for a driver that starts again (holders.Names).
func (s *Server) setHolder(handle string, h holders.Holder) {
	s.holders.Set(handle, h)
	s.names.Mark(handle)
}

// forgetHolder drops the record of handle's holder; its saved name goes a
// moment later.
func (s *Server) forgetHolder(handle string) {
	s.holders.Forget(handle)
	s.names.Mark(handle)
}

func (s *Server) holderFile(handle string) string {
	dir, _ := s.layout.VolumeDir(handle) // handles here passed Validate
	return filepath.Join(dir, holderFile)
}

// sameRequest accepts a publish at a target that already shows the copy
// only if it asks for what is mounted there.
func sameRequest(p publication) error {
	ro, err := mounts.ReadOnly(p.target)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUncertain, err)
	}
	if ro != p.readonly() {
		return fmt.Errorf("%w: %s is mounted read-only=%v, this request asks read-only=%v",
			ErrMismatch, p.target, ro, p.readonly())
	}
	return nil
}

// makeTarget creates the target directory and reports whether it is new.
func makeTarget(target string) (bool, error) {
	err := os.Mkdir(target, 0o750)
	if errors.Is(err, fs.ErrNotExist) { // kubelet had not created the parent
		err = os.MkdirAll(target, 0o750)
	}
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create target: %w", err)
	}
	return true, nil
}

// confirmedHolder returns the recorded holder of handle if the kernel still
// shows the copy mounted there, and forgets a record the kernel disowns.
// When the kernel cannot answer, the copy counts as held: the record stays
// and the error (wrapping ErrUncertain) tells the caller to retry.
func (s *Server) confirmedHolder(handle, copyDir string) (holders.Holder, bool, error) {
	h, ok := s.holders.Get(handle)
	if !ok {
		return holders.Holder{}, false, nil
	}
	shows, err := s.shows(h.Target, copyDir)
	if err != nil {
		klog.ErrorS(err, "Cannot confirm the holder of a copy; it stays held",
			"volume_id", handle, "target_path", h.Target, "pod", h.Pod)
		return h, true, fmt.Errorf("%w (pod %s at %s): %w", ErrUncertain, h.Pod, h.Target, err)
	}
	if !shows {
		klog.InfoS("Recorded holder no longer has the copy mounted; forgetting it",
			"volume_id", handle, "target_path", h.Target, "pod", h.Pod)
		s.forgetHolder(handle)
		return holders.Holder{}, false, nil
	}
	return h, true, nil
}

// shows reports whether target is a mount point that shows copyDir.
func (s *Server) shows(target, copyDir string) (bool, error) {
	mounted, err := s.mounter.IsMountPoint(target)
	if err != nil || !mounted {
		return false, err
	}
	same, err := mounts.SameDir(target, copyDir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return same, err
}

// ensureCopy creates the node's empty copy on first use.
func (s *Server) ensureCopy(handle, copyDir string) error {
	if _, err := os.Stat(copyDir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("inspect copy: %w", err)
	}
	if err := os.MkdirAll(copyDir, 0o777); err != nil {
		return fmt.Errorf("create copy: %w", err)
	}
	// Pods run as any user; the copy is theirs to restrict.
	if err := os.Chmod(copyDir, 0o777); err != nil {
		return fmt.Errorf("open up copy: %w", err)
	}
	klog.InfoS("Created an empty copy", "volume_id", handle, "path", copyDir)
	s.notifyCopies()
	return nil
}

// unpublish unmounts target if it shows handle's copy, and removes it; a
// target that shows anything else is refused and left as it is. The
// caller holds the handle's lock.
func (s *Server) unpublish(handle, target string) error {
	if err := s.checkMounted(handle, target); err != nil {
		return err
	}
	if err := s.mounter.Unmount(target); err != nil {
		return err
	}
	if h, ok := s.holders.Get(handle); ok && h.Target == target {
		s.forgetHolder(handle)
	}
	return removeTarget(target)
}

// checkMounted refuses an unpublish of a target where something else than
// handle's copy is mounted. A target that is not a directory (a symlink
// left there is never followed), that shows the copy, or that is not a
// mount point passes; the usual case costs two stats.
func (s *Server) checkMounted(handle, target string) error {
	var st, cp unix.Stat_t
	if err := unix.Lstat(target, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	copyDir, err := s.layout.CopyDir(handle)
	if err != nil {
		return err
	}
	if unix.Stat(copyDir, &cp) == nil && cp.Dev == st.Dev && cp.Ino == st.Ino {
		return nil
	}
	mounted, err := s.mounter.IsMountPoint(target)
	if err != nil {
		return fmt.Errorf("inspect target %s: %w", target, err)
	}
	if !mounted {
		return nil
	}
	// The copy may have been removed from under its holder (by hand, while
	// the pod ran): the target still shows the removed directory, and
	// only the mount table can say it was the copy.
	table, err := mountutils.ParseMountInfo(mounts.ProcSelfMountInfo)
	if err != nil {
		return fmt.Errorf("inspect target %s: read the mount table: %w", target, err)
	}
	if mounts.Shows(table, target, copyDir) {
		return nil
	}
	return fmt.Errorf("%w: %s is a mount point that does not show this node's copy of it", ErrNotTheCopy, target)
}

// removeTarget removes the empty directory kubelet's target is, if it is
// there: rmdir(2) alone, where os.Remove would unlink(2) first.
func removeTarget(target string) error {
	err := unix.Rmdir(target)
	if errors.Is(err, unix.ENOTDIR) {
		err = os.Remove(target)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove target: %w", err)
	}
	return nil
}
