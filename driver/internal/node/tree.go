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

// usage adds up the blocks and inodes under dir, skipping what is mounted
// inside (it is not the copy's); see package tree for how a tree that its
// pod changes meanwhile is walked.
func usage(dir string) (tree.Used, error) {
	return usageWithin(dir, tree.Limits{})
}

// usageWithin is usage that gives up past lim (a *tree.LimitError).
func usageWithin(dir string, lim tree.Limits) (tree.Used, error) {
	u, err := tree.UsageWithin(dir, lim)
	if err != nil {
		return tree.Used{}, fmt.Errorf("measure copy: %w", err)
	}
	return u, nil
}
