// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"

	"liken.sh/per-node/driver/internal/tree"
)

// ErrMountInside means a directory to measure or remove has a mount point
// inside: the driver never crosses into another filesystem.
var ErrMountInside = tree.ErrMountInside

type usedSpace struct{ bytes, inodes int64 }

// usage adds up the blocks and inodes under dir, skipping what is mounted
// inside (it is not the copy's); see package tree for how a tree that its
// pod changes meanwhile is walked.
func usage(dir string) (usedSpace, error) {
	u, err := tree.Usage(dir)
	if err != nil {
		return usedSpace{}, fmt.Errorf("measure copy: %w", err)
	}
	return usedSpace{bytes: u.Bytes, inodes: u.Inodes}, nil
}

// removeTree removes path and everything under it, refusing to descend into
// a mount point (ErrMountInside), and reports what it removed.
func removeTree(path string) (usedSpace, error) {
	u, err := tree.Remove(path)
	return usedSpace{bytes: u.Bytes, inodes: u.Inodes}, err
}
