// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// Every Go file and shell script in the repository carries the license
// header near its top (Apache-2.0, see LICENSE).
func TestEverySourceFileHasTheLicenseHeader(t *testing.T) {
	repo := repoRoot(t)
	files := repoFiles(t, repo, "*.go", "*.sh", ".ci/run")
	assert.Assert(t, len(files) > 50, "git listed only %d source files", len(files))
	var missing []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repo, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		assert.NilError(t, err)
		head := string(b[:min(len(b), 400)])
		if !strings.Contains(head, "SPDX-License-Identifier: Apache-2.0") {
			missing = append(missing, f)
		}
	}
	assert.Assert(t, len(missing) == 0, "files without the license header (see CONTRIBUTING.md): %v", missing)
}

// repoFiles lists the files git tracks or would add (those .gitignore does
// not exclude), matching patterns (every file when none).
func repoFiles(t *testing.T, repo string, patterns ...string) []string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard"}, patterns...)...).Output()
	assert.NilError(t, err)
	return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
}
