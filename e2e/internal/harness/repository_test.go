// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// executableMagic are the first bytes of the executable formats Go builds:
// ELF, Mach-O (32 and 64 bit, both byte orders, and universal) and PE.
var executableMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	[]byte("MZ"),
}

// isExecutable says whether b begins as a compiled executable does.
func isExecutable(b []byte) bool {
	for _, m := range executableMagic {
		if bytes.HasPrefix(b, m) {
			return true
		}
	}
	return false
}

// No file git tracks (or would add) is a compiled executable: build
// outputs are ignored (.gitignore), never committed (a 9.8 MB test binary
// named store once was).
func TestNoTrackedFileIsAnExecutable(t *testing.T) {
	repo := repoRoot(t)
	files := repoFiles(t, repo)
	assert.Assert(t, len(files) > 100, "git listed only %d files", len(files))
	var binaries []string
	for _, f := range files {
		fh, err := os.Open(filepath.Join(repo, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		assert.NilError(t, err)
		head := make([]byte, 4)
		n, _ := fh.Read(head)
		fh.Close()
		if isExecutable(head[:n]) {
			binaries = append(binaries, f)
		}
	}
	assert.Assert(t, len(binaries) == 0, "compiled executables in the repository (remove them, and ignore where they are built): %v", binaries)
}

func TestExecutablesAreRecognised(t *testing.T) {
	self, err := os.Executable()
	assert.NilError(t, err)
	b, err := os.ReadFile(self)
	assert.NilError(t, err)
	assert.Assert(t, isExecutable(b[:4]), "this test's own binary is not taken for an executable")
	assert.Assert(t, !isExecutable([]byte("// Copyright")), "Go source taken for an executable")
}

// Each release of CHANGELOG.md has each kind of entry (### Added, ###
// Changed, ...) once.
func TestChangelogHasEachHeadingOncePerRelease(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "CHANGELOG.md"))
	assert.NilError(t, err)
	release, seen := "", map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			release, seen = line, map[string]bool{}
		case strings.HasPrefix(line, "### "):
			assert.Assert(t, !seen[line], "CHANGELOG.md: %q twice under %q: one section of each kind per release", line, release)
			seen[line] = true
		}
	}
}

// No document tells an operator to upgrade with --reuse-values: it keeps
// only the old release's values, so a value the new chart adds is missing
// and the upgrade fails.
func TestNoDocumentUpgradesWithReuseValues(t *testing.T) {
	repo := repoRoot(t)
	for _, f := range repoFiles(t, repo, "*.md", "*.txt") {
		b, err := os.ReadFile(filepath.Join(repo, f))
		if os.IsNotExist(err) {
			continue
		}
		assert.NilError(t, err)
		// A command may be wrapped over lines: look at each upgrade with
		// the two lines after it.
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if !strings.Contains(l, "helm upgrade") {
				continue
			}
			cmd := strings.Join(lines[i:min(i+3, len(lines))], " ")
			cmd, _, _ = strings.Cut(cmd, "never `--reuse-values`")
			assert.Assert(t, !strings.Contains(cmd, "--reuse-values "), "%s:%d upgrades with --reuse-values (use --reset-then-reuse-values or -f): %s", f, i+1, l)
		}
	}
}
