// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package tree

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
)

// comb makes a tree depth levels deep whose every level holds files
// files beside the next level, and returns how many inodes it holds.
func comb(t *testing.T, dir string, depth, files int) int64 {
	t.Helper()
	assert.NilError(t, os.Mkdir(dir, 0o750))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	assert.NilError(t, err)
	for range depth {
		// Files before and after the next level, whatever order the
		// filesystem lists them in: the walk goes down with names of
		// this level still to walk.
		for i := range files {
			if i == files/2 {
				assert.NilError(t, unix.Mkdirat(fd, "next", 0o750))
			}
			f, err := unix.Openat(fd, "f"+strconv.Itoa(i), unix.O_CREAT|unix.O_WRONLY, 0o644)
			assert.NilError(t, err)
			_ = unix.Close(f)
		}
		if files == 0 {
			assert.NilError(t, unix.Mkdirat(fd, "next", 0o750))
		}
		next, err := unix.Openat(fd, "next", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		assert.NilError(t, err)
		_ = unix.Close(fd)
		fd = next
	}
	_ = unix.Close(fd)
	return int64(1 + depth*(files+1))
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	assert.NilError(t, err)
	return len(entries)
}

// Deeper than MaxOpen, every level is counted once, wherever the walk had
// to close and open a directory again, and the descriptors stay bounded.
func TestAWalkDeeperThanMaxOpenCountsEveryEntryOnce(t *testing.T) {
	for _, tc := range []struct{ depth, files int }{
		{1, 0}, {MaxOpen - 1, 2}, {MaxOpen + 1, 2}, {5 * MaxOpen, 3}, {3, 1029}, {2 * MaxOpen, 40},
	} {
		t.Run(strconv.Itoa(tc.depth)+"x"+strconv.Itoa(tc.files), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			want := comb(t, dir, tc.depth, tc.files)
			before := openFDs(t)
			u, err := Usage(dir)
			assert.NilError(t, err)
			assert.Equal(t, u.Inodes, want)
			assert.Equal(t, openFDs(t), before, "a measurement left descriptors open")
			r, err := Remove(dir)
			assert.NilError(t, err)
			assert.Equal(t, r.Inodes, want)
			assert.Equal(t, openFDs(t), before, "a removal left descriptors open")
			_, err = os.Lstat(dir)
			assert.Assert(t, errors.Is(err, os.ErrNotExist), "%v", err)
		})
	}
}

// On a kernel without statx's mount ID and mount-root attribute (before
// 5.8), a bind mount of the same filesystem inside a copy is still seen.
func TestAMountInsideIsSeenWithoutStatxMountInfo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a real bind mount and must run as root")
	}
	for _, withStatx := range []bool{true, false} {
		t.Run("statx="+strconv.FormatBool(withStatx), func(t *testing.T) {
			statxMount = withStatx
			t.Cleanup(func() { statxMount = true })
			base := t.TempDir()
			copyDir, other := filepath.Join(base, "copy"), filepath.Join(base, "other")
			assert.NilError(t, os.MkdirAll(filepath.Join(copyDir, "sub", "mnt"), 0o750))
			assert.NilError(t, os.MkdirAll(other, 0o750))
			precious := filepath.Join(other, "precious")
			assert.NilError(t, os.WriteFile(precious, []byte("keep"), 0o644))
			mnt := filepath.Join(copyDir, "sub", "mnt")
			assert.NilError(t, unix.Mount(other, mnt, "", unix.MS_BIND, ""))
			t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })

			u, err := Usage(copyDir)
			assert.NilError(t, err)
			assert.Equal(t, u.Inodes, int64(2), "copy and sub: the mount and what it shows are not counted")
			_, err = Remove(copyDir)
			assert.Assert(t, errors.Is(err, ErrMountInside), "got %v", err)
			_, err = os.Stat(precious)
			assert.NilError(t, err, "a file behind a mount inside the copy was removed")
		})
	}
}

// Symlinks, FIFOs and sockets inside a copy are removed as entries and
// never followed or opened; what they point to stays.
func TestSpecialEntriesAreRemovedNotFollowed(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	assert.NilError(t, os.Mkdir(outside, 0o750))
	assert.NilError(t, os.WriteFile(filepath.Join(outside, "canary"), []byte("keep"), 0o644))
	for i := range 3 { // what a walk that followed the symlink would count
		assert.NilError(t, os.WriteFile(filepath.Join(outside, "big"+strconv.Itoa(i)), make([]byte, 1<<20), 0o644))
	}
	copyDir := filepath.Join(base, "copy")
	assert.NilError(t, os.MkdirAll(filepath.Join(copyDir, "d"), 0o750))
	assert.NilError(t, os.Symlink(outside, filepath.Join(copyDir, "to-outside")))
	// A symlink to a file: a walk whose fstatat follows it counts the file
	// (a symlink to a directory is then refused by openat's O_NOFOLLOW).
	assert.NilError(t, os.Symlink(filepath.Join(outside, "big0"), filepath.Join(copyDir, "to-big")))
	assert.NilError(t, os.Symlink("/", filepath.Join(copyDir, "d", "to-root")))
	assert.NilError(t, unix.Mkfifo(filepath.Join(copyDir, "d", "fifo"), 0o644))
	assert.NilError(t, unix.Mknod(filepath.Join(copyDir, "sock"), unix.S_IFSOCK|0o644, 0))

	u, err := Usage(copyDir)
	assert.NilError(t, err)
	assert.Equal(t, u.Inodes, int64(7))
	assert.Assert(t, u.Bytes < 1<<20, "%d bytes counted: a symlink was followed", u.Bytes)
	r, err := Remove(copyDir)
	assert.NilError(t, err)
	assert.Equal(t, r.Inodes, int64(7))
	assert.Assert(t, r.Bytes < 1<<20, "%d bytes counted as removed: a symlink was followed", r.Bytes)
	_, err = os.Stat(filepath.Join(outside, "big0"))
	assert.NilError(t, err, "the file a symlink pointed to was removed")
	_, err = os.Stat(filepath.Join(outside, "canary"))
	assert.NilError(t, err)
}

// A top that is not a directory (or a symlink to one) is refused, and a
// missing top is nothing to remove.
func TestTheTopMustBeADirectory(t *testing.T) {
	base := t.TempDir()
	assert.NilError(t, os.Symlink(base, filepath.Join(base, "link")))
	_, err := Usage(filepath.Join(base, "link"))
	assert.Assert(t, errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR), "got %v", err)
	_, err = Remove(filepath.Join(base, "link"))
	assert.Assert(t, err != nil, "a symlink given as the top was walked")
	_, err = os.Lstat(filepath.Join(base, "link"))
	assert.NilError(t, err, "the symlink given as the top was removed")
	r, err := Remove(filepath.Join(base, "missing"))
	assert.NilError(t, err)
	assert.Equal(t, r, Used{})
}

// A pod swaps a directory for a FIFO or a symlink to outside at the worst
// moment: after the walk's fstatat saw a directory, before it opens it.
// The walk must open what is there now without following or blocking: a
// swap loop hits that moment only by chance, the hook every time.
func TestASwapBetweenStatAndOpenIsNeverFollowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(dirFD int, outside string) error
	}{
		{"a FIFO", func(dirFD int, _ string) error { return unix.Mkfifoat(dirFD, "d", 0o644) }},
		{"a symlink to outside", func(dirFD int, outside string) error { return unix.Symlinkat(outside, dirFD, "d") }},
	} {
		for _, op := range []struct {
			name string
			walk func(string) (Used, error)
		}{{"measure", Usage}, {"remove", Remove}} {
			t.Run(tc.name+"/"+op.name, func(t *testing.T) {
				base := t.TempDir()
				outside := filepath.Join(base, "outside")
				assert.NilError(t, os.Mkdir(outside, 0o750))
				assert.NilError(t, os.WriteFile(filepath.Join(outside, "big"), make([]byte, 1<<20), 0o644))
				copyDir := filepath.Join(base, "copy")
				assert.NilError(t, os.MkdirAll(filepath.Join(copyDir, "d"), 0o750))
				swapped := false
				afterStat = func(dirFD int, name string) {
					if name != "d" || swapped {
						return
					}
					swapped = true
					assert.NilError(t, unix.Renameat(dirFD, "d", dirFD, "d.real"))
					assert.NilError(t, tc.swap(dirFD, outside))
				}
				t.Cleanup(func() { afterStat = nil })

				done := make(chan Used, 1)
				go func() {
					u, _ := op.walk(copyDir)
					done <- u
				}()
				var u Used
				select {
				case u = <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s has not returned 10 s after %s was swapped in: it opened it for reading", op.name, tc.name)
				}
				assert.Assert(t, swapped, "the walk never reached d")
				assert.Assert(t, u.Bytes < 1<<20, "%s counted %d bytes: it followed %s out of the copy", op.name, u.Bytes, tc.name)
				_, err := os.Stat(filepath.Join(outside, "big"))
				assert.NilError(t, err, "%s removed a file outside the copy", op.name)
			})
		}
	}
}
