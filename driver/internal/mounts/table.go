// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package mounts

import (
	"path/filepath"
	"strings"

	mountutils "k8s.io/mount-utils"
)

// ProcSelfMountInfo is this process's view of the mount table.
const ProcSelfMountInfo = "/proc/self/mountinfo"

// BindTargets returns, for each of the given directories, the mount points at
// which the kernel shows that directory bind-mounted (the directory's own
// mount, if it is one, is left out). It reads the mount table once, so it is
// meant for start-up, not for every request.
func BindTargets(table []mountutils.MountInfo, dirs []string) map[string][]string {
	out := map[string][]string{}
	type key struct {
		major, minor int
		root         string
	}
	wanted := map[key]string{}
	for _, dir := range dirs {
		m, ok := containingMount(table, dir)
		if !ok {
			continue
		}
		rel := strings.TrimPrefix(dir, m.MountPoint)
		wanted[key{m.Major, m.Minor, filepath.Join(m.Root, rel)}] = dir
	}
	seen := map[string]bool{}
	for _, m := range table {
		dir, ok := wanted[key{m.Major, m.Minor, m.Root}]
		if !ok || m.MountPoint == dir || seen[m.MountPoint] {
			continue
		}
		seen[m.MountPoint] = true
		out[dir] = append(out[dir], m.MountPoint)
	}
	return out
}

// containingMount is the mount with the longest mount point that is dir or
// one of its parents; later entries shadow earlier ones at the same point.
func containingMount(table []mountutils.MountInfo, dir string) (mountutils.MountInfo, bool) {
	var best mountutils.MountInfo
	found := false
	for _, m := range table {
		if !within(dir, m.MountPoint) {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

func within(path, base string) bool {
	if base == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == base || strings.HasPrefix(path, base+"/")
}

// Shows reports whether the mount the table lists last at target is a bind
// of dir, or of the directory that was at dir before it was removed (the
// kernel shows such a root with "//deleted" appended). It reads no file:
// callers pass the table they read.
func Shows(table []mountutils.MountInfo, target, dir string) bool {
	m, ok := containingMount(table, dir)
	if !ok {
		return false
	}
	want := filepath.Join(m.Root, strings.TrimPrefix(dir, m.MountPoint))
	var at mountutils.MountInfo
	found := false
	for _, e := range table {
		if e.MountPoint == target {
			at, found = e, true
		}
	}
	if !found || at.Major != m.Major || at.Minor != m.Minor {
		return false
	}
	return at.Root == want || at.Root == want+"//deleted"
}
