// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle string
		ok     bool
	}{
		{"guide handle", "example-store", true},
		{"dotted", "store.v2", true},
		{"max length", strings.Repeat("a", 253), true},
		{"empty", "", false},
		{"dot", ".", false},
		{"dot dot", "..", false},
		{"slash", "a/b", false},
		{"absolute", "/abs", false},
		{"upper case", "Store", false},
		{"space", "a b", false},
		{"NUL", "a\x00b", false},
		{"over-long", strings.Repeat("a", 254), false},
		{"leading dash", "-a", false},
		{"traversal", "../etc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.handle)
			if tc.ok {
				assert.NilError(t, err)
				return
			}
			assert.Assert(t, errors.Is(err, ErrInvalidHandle), "got %v", err)
		})
	}
}

func TestNewRefusesRelativeRoot(t *testing.T) {
	_, err := New("relative/root")
	assert.ErrorContains(t, err, "absolute")
}

func TestCopyDir(t *testing.T) {
	l, err := New("/var/lib/per-node.liken.sh/")
	assert.NilError(t, err)
	dir, err := l.CopyDir("example-store")
	assert.NilError(t, err)
	assert.Equal(t, dir, "/var/lib/per-node.liken.sh/volumes/example-store/data")

	_, err = l.CopyDir("../x")
	assert.Assert(t, errors.Is(err, ErrInvalidHandle))
}

// FuzzCopyDir checks that no handle, accepted or not, panics or yields a path
// outside the volumes directory. The seed corpus runs in every `go test`.
func FuzzCopyDir(f *testing.F) {
	for _, seed := range []string{"example-store", "", ".", "..", "a/b", "/abs", "A", "a b", "a\x00b",
		strings.Repeat("a", 254), "a..b", "a/../../b", "a.-b", "-", "a\\b", "é"} {
		f.Add(seed)
	}
	l, err := New("/root/of/copies")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, handle string) {
		dir, err := l.CopyDir(handle)
		if err != nil {
			if !errors.Is(err, ErrInvalidHandle) {
				t.Fatalf("handle %q: error %v does not wrap ErrInvalidHandle", handle, err)
			}
			return
		}
		rel, err := filepath.Rel(l.VolumesDir(), dir)
		if err != nil || rel != filepath.Join(handle, "data") || strings.HasPrefix(rel, "..") {
			t.Fatalf("handle %q escaped the volumes directory: %q", handle, dir)
		}
		if filepath.Dir(filepath.Dir(dir)) != l.VolumesDir() {
			t.Fatalf("handle %q is not one level below the volumes directory: %q", handle, dir)
		}
	})
}

// A trash entry's name fits a file name for every valid handle, starts
// with as much of the handle as fits, and differs by the time it was made.
func TestTrashNameFitsEveryValidHandle(t *testing.T) {
	for _, n := range []int{1, 63, 64, 235, 236, 253} {
		handle := strings.Repeat("a", n)
		name := TrashName(handle, 1_765_000_000_000_000_000)
		assert.Assert(t, len(name) <= 255, "%d-character handle: a %d-byte trash name", n, len(name))
		assert.Assert(t, strings.HasPrefix(name, handle[:min(n, 235)]+"."), "%d-character handle: %q", n, name)
		assert.Assert(t, name != TrashName(handle, 1_765_000_000_000_000_001))
	}
}
