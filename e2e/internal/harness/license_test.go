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
	out, err := exec.Command("git", "-C", repo, "ls-files", "--cached", "--others", "--exclude-standard", "*.go", "*.sh", ".ci/run").Output()
	assert.NilError(t, err)
	files := strings.Fields(string(out))
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
