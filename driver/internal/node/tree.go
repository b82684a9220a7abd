// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// batch is how many directory entries are read at a time: a directory of a
// million files costs the driver one batch of names, not a million.
const batch = 1024

// ErrMountInside means a directory to measure or remove has a mount point
// inside: the driver never crosses into another filesystem.
var ErrMountInside = errors.New("a mount point is inside the copy")

type usedSpace struct{ bytes, inodes int64 }

func (u *usedSpace) add(st *unix.Statx_t) {
	u.inodes++
	u.bytes += int64(st.Blocks) * 512
}

// lstat is statx without following symlinks; it also says whether path is
// the root of a mount.
func lstat(path string) (unix.Statx_t, bool, error) {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_BLOCKS, &st)
	if err != nil {
		return st, false, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	mountRoot := st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	return st, mountRoot, nil
}

func isDir(st *unix.Statx_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// usage adds up the blocks and inodes under dir, reading directories in
// batches and skipping what is mounted inside (it is not the copy's).
func usage(dir string) (usedSpace, error) {
	var u usedSpace
	if err := measure(dir, true, &u); err != nil {
		return usedSpace{}, fmt.Errorf("measure copy: %w", err)
	}
	return u, nil
}

func measure(path string, top bool, u *usedSpace) error {
	st, mountRoot, err := lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed while we walked
	}
	if err != nil {
		return err
	}
	if mountRoot && !top {
		return nil
	}
	u.add(&st)
	if !isDir(&st) {
		return nil
	}
	d, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	for {
		names, err := d.Readdirnames(batch)
		for _, name := range names {
			if err := measure(filepath.Join(path, name), false, u); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// removeTree removes path and everything under it, reading directories in
// batches. It refuses to descend into a mount point (ErrMountInside) and
// reports what it removed.
func removeTree(path string) (usedSpace, error) {
	var u usedSpace
	err := remove(path, &u)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return u, err
}

func remove(path string, u *usedSpace) error {
	st, mountRoot, err := lstat(path)
	if err != nil {
		return err
	}
	if !isDir(&st) {
		if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
			return &fs.PathError{Op: "unlink", Path: path, Err: err}
		}
		u.add(&st)
		return nil
	}
	if mountRoot {
		return fmt.Errorf("%w: %s", ErrMountInside, path)
	}
	for {
		names, err := readBatch(path)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			break
		}
		for _, name := range names {
			if err := remove(filepath.Join(path, name), u); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := unix.Rmdir(path); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "rmdir", Path: path, Err: err}
	}
	u.add(&st)
	return nil
}

// readBatch reads up to batch names from the start of dir. Removing them
// before the next call makes the next call read the following ones.
func readBatch(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(batch)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	return names, err
}
