// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"liken.sh/per-node/driver/internal/layout"
	"liken.sh/per-node/driver/internal/reclaim"
	"liken.sh/per-node/driver/internal/tree"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Tracker records on the PersistentVolume that this node holds a copy, and
// tells the story in events. Without a cluster (csi-sanity, unit tests)
// there is none and copies are not tracked.
type Tracker interface {
	// Record returns the PV's UID once the PV lists this node as a holder.
	Record(ctx context.Context, handle string) (uid string, err error)
	// Event records an event on the PV named handle of UID uid ("" for
	// the one the tracker read last: an event about a publish).
	Event(ctx context.Context, handle, uid, eventType, reason, message string)
}

// uidFile, next to a copy, holds the UID of the PersistentVolume the copy
// belongs to: a PV deleted and created again under the same name gets a
// new UID, and never sees the old copy.
const uidFile = "pv-uid"

// holderFile, next to a copy, names the pod that has it mounted, so a
// driver that starts again (an upgrade, a crash) names the holder it finds
// in the mount table. Only a name: the kernel says whether a copy is held.
const holderFile = "holder"

// CopyUID returns the PV UID a copy is bound to ("" if it is not bound).
func (s *Server) CopyUID(handle string) (string, error) {
	dir, err := s.layout.VolumeDir(handle)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, uidFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// ensureTrackedCopy records the holder on the PV before the copy exists,
// and replaces a copy that is not this PV's: bound to an older PV of the
// same name, or to none.
func (s *Server) ensureTrackedCopy(ctx context.Context, handle, copyDir string) error {
	if s.tracker == nil {
		return s.ensureCopy(handle, copyDir)
	}
	uid, err := s.tracker.Record(ctx, handle)
	if err != nil {
		return fmt.Errorf("record this node on the PersistentVolume: %w", err)
	}
	old, err := s.CopyUID(handle)
	if err != nil {
		return fmt.Errorf("read the copy's PV UID: %w", err)
	}
	has, err := s.HasCopy(handle)
	if err != nil {
		return err
	}
	// A copy bound to another PV is that PV's; one bound to none (a crash
	// between making and binding it, or standalone mode) is no PV's. Either
	// way this PV's pod starts from an empty copy.
	fresh := !has
	if has && old != uid {
		klog.InfoS("Copy is not this PersistentVolume's (an earlier PV of the same name, or none); replacing it",
			"volume_id", handle, "old_uid", old, "uid", uid)
		if _, err := s.trash(handle); err != nil {
			return err
		}
		fresh = true
	}
	if err := s.ensureCopy(handle, copyDir); err != nil {
		return err
	}
	if old != uid {
		dir, _ := s.layout.VolumeDir(handle)
		if err := writeFileAtomic(filepath.Join(dir, uidFile), []byte(uid+"\n")); err != nil {
			return fmt.Errorf("bind the copy to its PV: %w", err)
		}
	}
	if fresh {
		s.tracker.Event(ctx, handle, uid, "Normal", "CopyCreated", "node "+s.nodeID+" created its copy")
	}
	return nil
}

// writeFileAtomic replaces path with data so that a crash leaves either the
// old file or the new one, never a partial one: a temporary file is written
// and synced, renamed over path, and the directory is synced.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a directory's entries (a rename, a new file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// RemoveCopy makes the copy of handle unreachable at once (a rename into the
// trash) and empties the trash in the background. uid names the copy the
// caller decided to remove (the PV UID it is bound to, "" for a copy bound
// to none): a copy bound to another is not that one, and is refused with
// reclaim.ErrCopyChanged. It refuses while a pod on this node holds the copy,
// and reports false when there was no copy. Both checks are made under the
// volume's lock, where the removal is made.
func (s *Server) RemoveCopy(handle, uid string) (bool, error) {
	s.locks.LockKey(handle)
	defer func() { _ = s.locks.UnlockKey(handle) }()
	copyDir, err := s.layout.CopyDir(handle)
	if err != nil {
		return false, err
	}
	if has, err := s.HasCopy(handle); err != nil || !has {
		return false, err
	}
	h, ok, err := s.confirmedHolder(handle, copyDir)
	if err != nil {
		return false, err
	}
	if ok {
		return false, &HeldError{Handle: handle, Holder: h}
	}
	if now, err := s.CopyUID(handle); err != nil {
		return false, fmt.Errorf("read the copy's PV UID: %w", err)
	} else if now != uid {
		return false, fmt.Errorf("%w: volume %s: the removal was decided for the copy of PV UID %q, the copy is now of %q",
			reclaim.ErrCopyChanged, handle, uid, now)
	}
	return s.trash(handle)
}

// trash renames the handle's directory into the trash. The caller holds the
// handle's lock (or owns the handle exclusively, at start).
func (s *Server) trash(handle string) (bool, error) {
	dir, err := s.layout.VolumeDir(handle)
	if err != nil {
		return false, err
	}
	dst := filepath.Join(s.layout.TrashDir(), layout.TrashName(handle, time.Now().UnixNano()))
	err = os.Rename(dir, dst)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		// After the rename: a measurement that ends later sees another
		// directory (or none) at the copy's path, and is not kept.
		s.usage.forget(handle)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("move the copy to the trash: %w", err)
	}
	s.notifyCopies()
	go s.emptyTrashEntry(dst, handle, trashedUID(dst))
	return true, nil
}

// trashedUID is the UID of the PV the copy moved to the trash at dir was
// bound to, read before it is removed: its events name that PV, whatever
// PV of the same name the driver read since. "" if it was bound to none.
func trashedUID(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, uidFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// HasCopy reports whether this node holds a copy of handle.
func (s *Server) HasCopy(handle string) (bool, error) {
	dir, err := s.layout.VolumeDir(handle)
	if err != nil {
		return false, err
	}
	_, err = os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// trashBatch is how many trash entries are read at a time.
const trashBatch = 1024

// EmptyTrash removes what an earlier run left in the trash. It returns the
// first error; the caller retries.
func (s *Server) EmptyTrash() error {
	dir, err := os.Open(s.layout.TrashDir())
	if err != nil {
		return fmt.Errorf("open the trash: %w", err)
	}
	defer func() { _ = dir.Close() }()
	var first error
	for {
		names, err := dir.Readdirnames(trashBatch)
		for _, name := range names {
			if err := s.removeTrashEntry(filepath.Join(s.layout.TrashDir(), name), "", ""); err != nil && first == nil {
				first = err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
			return first
		}
		if err != nil {
			return fmt.Errorf("read the trash: %w", err)
		}
	}
}

// emptyTrashEntry removes one copy from the trash in the background,
// retrying with backoff until it is gone or the server stops.
func (s *Server) emptyTrashEntry(path, handle, uid string) {
	s.trashWorkers.Add(1)
	defer s.trashWorkers.Add(-1)
	backoff := time.Second
	for {
		err := s.removeTrashEntry(path, handle, uid)
		if err == nil {
			return
		}
		if handle != "" && s.tracker != nil {
			s.tracker.Event(context.Background(), handle, uid, "Warning", "CopyRemovalFailed",
				fmt.Sprintf("node %s could not finish removing its copy (will retry in %s): %v", s.nodeID, backoff, err))
		}
		select {
		case <-s.stop:
			klog.InfoS("Stopping; the trash entry is removed at the next start", "volume_id", handle, "path", path)
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Minute)
	}
}

// removeTrashEntry removes one entry of the trash, never crossing into a
// mount point, and tells the story.
func (s *Server) removeTrashEntry(path, handle, uid string) error {
	used, err := tree.Remove(path)
	if err != nil {
		klog.ErrorS(err, "Cannot empty the trash", "volume_id", handle, "path", path)
		return err
	}
	klog.InfoS("Removed a copy", "volume_id", handle, "bytes", used.Bytes, "files", used.Inodes)
	s.metrics.Freed(used.Bytes)
	if handle != "" && s.tracker != nil {
		s.tracker.Event(context.Background(), handle, uid, "Normal", "CopyRemoved",
			fmt.Sprintf("node %s removed its copy (%d bytes)", s.nodeID, used.Bytes))
	}
	return nil
}
