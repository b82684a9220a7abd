// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package layout maps volume handles to the directories that hold a node's
// copies, and refuses every handle that is not a PersistentVolume name.
//
// A node's root directory looks like this:
//
//	<root>/volumes/<handle>/data   the copy, bind-mounted into the holder pod
//	<root>/volumes/<handle>/...    bookkeeping next to the copy (never mounted):
//	                               the PV's UID, the holder pod's name
//	<root>/trash/<name>            copies being removed in the background; the
//	                               name is TrashName's: the handle (its first
//	                               235 characters when longer), a dot and the
//	                               time it was trashed in nanoseconds
//
// The handle is the only caller-controlled part of any path, so Validate is
// the single gate that keeps every path inside the root.
package layout

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidHandle is wrapped by every error Validate returns.
var ErrInvalidHandle = errors.New("invalid volume handle")

// Validate accepts exactly the names Kubernetes accepts for a
// PersistentVolume: a DNS-1123 subdomain of at most 253 characters.
func Validate(handle string) error {
	if handle == "" {
		return fmt.Errorf("%w: empty", ErrInvalidHandle)
	}
	if msgs := validation.IsDNS1123Subdomain(handle); len(msgs) > 0 {
		return fmt.Errorf("%w %q: must be a PersistentVolume name (%s)", ErrInvalidHandle, handle, msgs[0])
	}
	return nil
}

// Layout is the directory tree under one node's root.
type Layout struct {
	root string
}

// New returns the layout under root, which must be an absolute path.
func New(root string) (Layout, error) {
	if !filepath.IsAbs(root) {
		return Layout{}, fmt.Errorf("root %q is not an absolute path", root)
	}
	return Layout{root: filepath.Clean(root)}, nil
}

// Root is the node's root directory.
func (l Layout) Root() string { return l.root }

// VolumesDir holds one directory per handle this node has a copy of.
func (l Layout) VolumesDir() string { return filepath.Join(l.root, "volumes") }

// TrashDir holds copies that were made unreachable and are being removed.
func (l Layout) TrashDir() string { return filepath.Join(l.root, "trash") }

// VolumeDir is the directory of one handle: the copy and its bookkeeping.
func (l Layout) VolumeDir(handle string) (string, error) {
	if err := Validate(handle); err != nil {
		return "", err
	}
	return filepath.Join(l.VolumesDir(), handle), nil
}

// CopyDir is the directory bind-mounted into the pod that holds the copy.
func (l Layout) CopyDir(handle string) (string, error) {
	dir, err := l.VolumeDir(handle)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "data"), nil
}

// maxName is the longest file name the filesystems a root lives on take.
const maxName = 255

// TrashName is the name of a handle's copy in the trash, unique by the time
// it was trashed, and never longer than a file name may be: a handle of up
// to 253 characters plus a suffix would not fit, so a long handle is cut.
// An operator reads the PV's name from it (or its start), and nothing is
// decided from it.
func TrashName(handle string, nanos int64) string {
	suffix := "." + strconv.FormatInt(nanos, 10)
	return handle[:min(len(handle), maxName-len(suffix))] + suffix
}
