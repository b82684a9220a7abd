// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package tree

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
)

// maxWalkHeap is what docs/security.md promises one walk holds at most,
// whatever the copy's shape.
const maxWalkHeap = 1 << 20

// chain makes depth directories named d, one in the other, under dir, and
// calls fill in each (its descriptor) before going down.
func chain(t testing.TB, dir string, depth int, fill func(fd, level int)) {
	t.Helper()
	chainOf(t, dir, "d", depth, fill)
}

// chainOf is chain with directories of another name.
func chainOf(t testing.TB, dir, name string, depth int, fill func(fd, level int)) {
	t.Helper()
	assert.NilError(t, os.MkdirAll(dir, 0o750))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	assert.NilError(t, err)
	for level := range depth {
		assert.NilError(t, unix.Mkdirat(fd, name, 0o750))
		if fill != nil {
			fill(fd, level)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		assert.NilError(t, err)
		_ = unix.Close(fd)
		fd = next
	}
	_ = unix.Close(fd)
}

// linksPerFile stays under ext4's limit of links to one inode.
const linksPerFile = 60_000

// links makes, in the directory open at fd, n names each nameLen
// characters long: hard links to one file per linksPerFile names. It
// returns how many files (inodes) it made.
func links(t testing.TB, fd, n, nameLen int) int {
	t.Helper()
	name := func(i int) string {
		s := strconv.Itoa(i) + "-"
		return s + strings.Repeat("l", nameLen-len(s))
	}
	files := 0
	for i := range n {
		first := i - i%linksPerFile
		if i == first {
			f, err := unix.Openat(fd, name(i), unix.O_CREAT|unix.O_WRONLY, 0o644)
			assert.NilError(t, err)
			_, err = unix.Write(f, make([]byte, 4096))
			assert.NilError(t, err)
			_ = unix.Close(f)
			files++
			continue
		}
		assert.NilError(t, unix.Linkat(fd, name(first), fd, name(i), 0))
	}
	return files
}

// peakHeap runs walk and returns how far the live heap rose above where it
// was before, sampled after a collection every every entries the walk
// examines.
func peakHeap(t *testing.T, every int, walk func()) uint64 {
	t.Helper()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak, n := ms.HeapAlloc, uint64(0), 0
	afterStat = func(int, string) {
		if n++; n%every != 0 {
			return
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			peak = max(peak, ms.HeapAlloc-base)
		}
	}
	defer func() { afterStat = nil }()
	walk()
	return peak
}

// The shapes a pod can give its copy to make a walk hold memory: many
// long names pending on every level of a deep tree, one huge directory,
// a tree as deep as a walk goes. A walk holds at most maxWalkHeap of them.
func TestAWalksMemoryDoesNotFollowTheCopysShape(t *testing.T) {
	if testing.Short() {
		t.Skip("builds trees of a few hundred thousand entries")
	}
	for _, tc := range []struct {
		name                   string
		depth, perLevel, nameL int
	}{
		{"300 levels of 1,100 hard links with 240-character names", 300, 1100, 240},
		{"one directory of 200,000 names", 1, 200_000, 200},
		{"MaxDepth levels", MaxDepth - 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			inodes := int64(1 + tc.depth) // the copy and its directories
			chain(t, dir, tc.depth, func(fd, _ int) {
				inodes += int64(links(t, fd, tc.perLevel, tc.nameL))
			})
			var err error
			var u Used
			peak := peakHeap(t, 2000, func() { u, err = Usage(dir) })
			assert.NilError(t, err)
			assert.Assert(t, peak <= maxWalkHeap, "measuring held %d KiB of heap; the bound is %d KiB", peak>>10, maxWalkHeap>>10)
			assert.Equal(t, u.Inodes, inodes)
			peak = peakHeap(t, 2000, func() { _, err = Remove(dir) })
			assert.NilError(t, err)
			assert.Assert(t, peak <= maxWalkHeap, "removing held %d KiB of heap; the bound is %d KiB", peak>>10, maxWalkHeap>>10)
			_, err = os.Lstat(dir)
			assert.Assert(t, errors.Is(err, os.ErrNotExist), "the copy is still there: %v", err)
		})
	}
}

// entriesRead counts the directory entries a walk reads, whatever it does
// with them; a walk that reads more than most stops the test there (one
// that reads a directory again from its start may never end).
func entriesRead(t *testing.T, most int64, walk func()) int64 {
	t.Helper()
	var n int64
	afterRead = func(entries int) {
		if n += int64(entries); n > most {
			t.Fatalf("the walk read %d entries, more than %d: it reads directories again", n, most)
		}
	}
	defer func() { afterRead = nil }()
	walk()
	return n
}

// A directory is read once, whatever the subtrees among its names: 60,000
// names with 300 subtrees deeper than the descriptor budget among them cost
// what the same names cost with those subtrees beside them.
func TestEachEntryIsReadAConstantNumberOfTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two trees of 70,000 entries")
	}
	const names, deep = 60_000, 300
	build := func(dir string, among bool) {
		assert.NilError(t, os.MkdirAll(filepath.Join(dir, "names"), 0o750))
		where := dir
		if among {
			where = filepath.Join(dir, "names")
		}
		for i := range names - deep {
			f, err := os.Create(filepath.Join(dir, "names", fmt.Sprintf("f%05d", i)))
			assert.NilError(t, err)
			_ = f.Close()
		}
		for i := range deep {
			chain(t, filepath.Join(where, fmt.Sprintf("deep%03d", i)), MaxOpen+2, nil)
		}
	}
	base := t.TempDir()
	beside, among := filepath.Join(base, "beside"), filepath.Join(base, "among")
	build(beside, false)
	build(among, true)
	measured := func(dir string) int64 {
		return entriesRead(t, 20*names, func() { _, err := Usage(dir); assert.NilError(t, err) })
	}
	b, a := measured(beside), measured(among)
	t.Logf("entries read measuring: %d with the deep subtrees beside the names, %d with them among", b, a)
	assert.Assert(t, a <= 2*b, "with the deep subtrees among the names the walk read %d entries, %d with them beside: "+
		"a directory was read again from its start", a, b)
	removed := func(dir string) int64 {
		return entriesRead(t, 20*names, func() { _, err := Remove(dir); assert.NilError(t, err) })
	}
	b, a = removed(beside), removed(among)
	t.Logf("entries read removing: %d beside, %d among", b, a)
	assert.Assert(t, a <= 2*b, "removing read %d entries with the deep subtrees among the names, %d beside", a, b)
}

// du counts what it finds at path as du(1) does (each inode once), in
// bytes and inodes.
func du(t *testing.T, path string) Used {
	t.Helper()
	field := func(args ...string) int64 {
		out, err := exec.Command("du", append(args, path)...).Output()
		assert.NilError(t, err, "du %v", args)
		n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
		assert.NilError(t, err)
		return n
	}
	return Used{Bytes: field("-s", "-B1"), Inodes: field("-s", "--inodes")}
}

// Hard links are counted once per inode, as du counts them: a file of
// 65,000 links is one file, not 65,000.
func TestHardLinksAreCountedOnceAsDuCountsThem(t *testing.T) {
	for _, tc := range []struct {
		name            string
		dirs, perDir, n int
	}{
		{"one file with 65,000 links", 1, 65_000, 1},
		{"a file per directory linked 70 times in 100 directories", 100, 70, 1},
		{"links of one file in many directories", 50, 0, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			chain(t, dir, tc.dirs, func(fd, _ int) { links(t, fd, tc.perDir, 40) })
			if tc.n > 1 { // one file, linked from every level
				first := filepath.Join(dir, "shared")
				assert.NilError(t, os.WriteFile(first, make([]byte, 1<<20), 0o644))
				level := dir
				for i := range tc.dirs {
					level = filepath.Join(level, "d")
					for j := range tc.n / tc.dirs {
						assert.NilError(t, os.Link(first, filepath.Join(level, fmt.Sprintf("s%d-%d", i, j))))
					}
				}
			}
			want := du(t, dir)
			u, err := Usage(dir)
			assert.NilError(t, err)
			assert.DeepEqual(t, u, want)
			r, err := Remove(dir)
			assert.NilError(t, err)
			assert.DeepEqual(t, r, want)
		})
	}
}

// Below MaxDepth a measurement gives up with a reason, and a removal
// still removes everything, within the same memory.
func TestATreeDeeperThanMaxDepthIsRemovedAndNotMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tree of 5,000 levels")
	}
	dir := filepath.Join(t.TempDir(), "copy")
	const depth = 2*MaxDepth + 100
	// Names of 255 bytes: a removal that kept every level's name would
	// hold more than maxWalkHeap.
	chainOf(t, dir, strings.Repeat("n", 255), depth, func(fd, level int) {
		if level%500 == 0 { // names like those the removal moves up
			assert.NilError(t, unix.Mkdirat(fd, ".per-node-deep-"+strconv.Itoa(level/500+1), 0o750))
		}
	})
	_, err := Usage(dir)
	var limit *LimitError
	assert.Assert(t, errors.As(err, &limit), "measuring %d levels: got %v", depth, err)
	assert.Equal(t, limit.Reason, ReasonDepth)
	assert.Assert(t, errors.Is(err, ErrLimit))
	var r Used
	peak := peakHeap(t, 500, func() { r, err = Remove(dir) })
	assert.NilError(t, err)
	assert.Equal(t, r.Inodes, int64(1+depth+depth/500+1))
	assert.Assert(t, peak <= maxWalkHeap, "removing held %d KiB of heap; the bound is %d KiB", peak>>10, maxWalkHeap>>10)
	_, err = os.Lstat(dir)
	assert.Assert(t, errors.Is(err, os.ErrNotExist), "the copy is still there: %v", err)
}

// A measurement that reads more entries than its limit, or takes longer,
// gives up and says which.
func TestAMeasurementGivesUpPastItsLimits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "copy")
	chain(t, dir, 3, func(fd, _ int) { links(t, fd, 5000, 20) })
	for _, tc := range []struct {
		lim    Limits
		reason string
	}{
		{Limits{Entries: 10_000}, ReasonEntries},
		{Limits{Time: time.Nanosecond}, ReasonTime},
	} {
		_, err := UsageWithin(dir, tc.lim)
		var limit *LimitError
		assert.Assert(t, errors.As(err, &limit), "limits %+v: got %v", tc.lim, err)
		assert.Equal(t, limit.Reason, tc.reason)
	}
	u, err := UsageWithin(dir, Limits{Entries: 20_000, Time: time.Minute})
	assert.NilError(t, err, "within its limits")
	assert.Equal(t, u.Inodes, int64(1+3+3))
}
