// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package rootlock

import (
	"errors"
	"testing"

	"gotest.tools/v3/assert"
)

func TestASecondHolderIsRefusedUntilTheFirstReleases(t *testing.T) {
	root := t.TempDir()
	first, err := Acquire(root)
	assert.NilError(t, err)

	_, err = Acquire(root)
	assert.Assert(t, errors.Is(err, ErrLocked), "second Acquire: want ErrLocked, got %v", err)

	assert.NilError(t, first.Release())
	again, err := Acquire(root)
	assert.NilError(t, err, "the lock is free once released")
	assert.NilError(t, again.Release())
}
