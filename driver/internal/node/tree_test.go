// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"fmt"
	"liken.sh/per-node/driver/internal/tree"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
)

// A mount inside a copy is somebody else's: measuring skips it, removing
// refuses to descend into it, and what it shows survives.
func TestTreeNeverCrossesAMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a real bind mount and must run as root")
	}
	dir := t.TempDir()
	copyDir, other := filepath.Join(dir, "copy"), filepath.Join(dir, "other")
	for _, d := range []string{filepath.Join(copyDir, "sub/mnt"), other} {
		assert.NilError(t, os.MkdirAll(d, 0o750))
	}
	assert.NilError(t, os.WriteFile(filepath.Join(copyDir, "sub/own"), make([]byte, 4096), 0o644))
	precious := filepath.Join(other, "precious")
	assert.NilError(t, os.WriteFile(precious, make([]byte, 1<<20), 0o644))
	assert.NilError(t, unix.Mount(other, filepath.Join(copyDir, "sub/mnt"), "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(copyDir, "sub/mnt"), unix.MNT_DETACH) })

	u, err := usage(copyDir)
	assert.NilError(t, err)
	assert.Equal(t, u.Inodes, int64(3), "copy, sub, own: the mount is not counted")
	assert.Assert(t, u.Bytes < 1<<20, "the mounted file was counted: %d bytes", u.Bytes)

	_, err = tree.Remove(copyDir)
	assert.Assert(t, errors.Is(err, ErrMountInside), "got %v", err)
	_, err = os.Stat(precious)
	assert.NilError(t, err, "a file behind a mount inside the copy was removed")

	assert.NilError(t, unix.Unmount(filepath.Join(copyDir, "sub/mnt"), 0))
	_, err = tree.Remove(copyDir)
	assert.NilError(t, err)
	_, err = os.Stat(copyDir)
	assert.Assert(t, errors.Is(err, os.ErrNotExist))
}

func TestTreeRemovesManyEntriesInBatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "copy")
	assert.NilError(t, os.MkdirAll(filepath.Join(dir, "deep/er"), 0o750))
	const files = 3*1024 + 7 // more than three batches of names
	for i := range files {
		assert.NilError(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o644))
	}
	u, err := usage(dir)
	assert.NilError(t, err)
	assert.Equal(t, u.Inodes, int64(files+3))
	removed, err := tree.Remove(dir)
	assert.NilError(t, err)
	assert.Equal(t, removed.Inodes, int64(files+3))
}

// BenchmarkTreeMillionFiles measures the driver's peak memory while it
// measures and then removes a copy of one directory with a million files
// (make bench-memory). The work runs in a child process (this test binary,
// TestTreeChild) so that the figure is that work's alone.
func BenchmarkTreeMillionFiles(b *testing.B) {
	const files = 1_000_000
	dir := b.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1g,nr_inodes=2000000"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	copyDir := filepath.Join(dir, "copy")
	if err := os.Mkdir(copyDir, 0o750); err != nil {
		b.Fatal(err)
	}
	for i := range files {
		fd, err := unix.Open(filepath.Join(copyDir, strconv.Itoa(i)), unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		_ = unix.Close(fd)
	}
	b.ResetTimer()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkTreeChild$", "-test.benchtime=1x")
	cmd.Env = append(os.Environ(), "PER_NODE_TREE_CHILD="+copyDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	b.StopTimer()
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
	fmt.Printf("tree-million-files: peak RSS %.1f MiB (target <= 64)\n", float64(peak)/1024)
}

// BenchmarkTreeChild is the child process of BenchmarkTreeMillionFiles.
func BenchmarkTreeChild(b *testing.B) {
	dir := os.Getenv("PER_NODE_TREE_CHILD")
	if dir == "" {
		b.Skip("only run by BenchmarkTreeMillionFiles")
	}
	u, err := usage(dir)
	if err != nil {
		b.Fatal(err)
	}
	removed, err := tree.Remove(dir)
	if err != nil {
		b.Fatal(err)
	}
	if removed.Inodes != u.Inodes {
		b.Fatalf("measured %d inodes, removed %d", u.Inodes, removed.Inodes)
	}
}
