// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"liken.sh/per-node/driver/internal/mounts"
)

// stats measures the copy of handle mounted at path.
func (s *Server) stats(handle, path string) ([]*csi.VolumeUsage, error) {
	copyDir, err := s.layout.CopyDir(handle)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(copyDir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: this node has no copy of it", ErrNotFound)
	}
	same, err := mounts.SameDir(path, copyDir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !same) {
		return nil, fmt.Errorf("%w: it is not mounted at %s", ErrNotFound, path)
	}
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", path, err)
	}
	var fsStat unix.Statfs_t
	if err := unix.Statfs(copyDir, &fsStat); err != nil {
		return nil, fmt.Errorf("statfs: %w", err)
	}
	used, err := s.usage.get(handle, copyDir, statsWait)
	if err != nil {
		return nil, err
	}
	bsize := uint64(fsStat.Bsize)
	return []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(fsStat.Blocks * bsize),
			Available: int64(fsStat.Bavail * bsize), Used: used.Bytes},
		{Unit: csi.VolumeUsage_INODES, Total: int64(fsStat.Files),
			Available: int64(fsStat.Ffree), Used: used.Inodes},
	}, nil
}
