// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// TestTheDocumentedUpgradeIsTheOneScenario26Runs: README, docs/upgrading.md
// and scenario 26 give one upgrade command, UpgradeArgs, the one the
// scenario's steps run.
func TestTheDocumentedUpgradeIsTheOneScenario26Runs(t *testing.T) {
	repo := repoRoot(t)
	want := "helm " + strings.Join(UpgradeArgs("charts/per-node", "<new>"), " ")
	command := regexp.MustCompile("helm upgrade per-node charts/per-node[^`]*")
	for _, f := range []string{"README.md", "docs/upgrading.md", "scenarios/26-driver-upgrade.md"} {
		b, err := os.ReadFile(filepath.Join(repo, f))
		assert.NilError(t, err)
		found := command.FindAllString(strings.Join(strings.Fields(string(b)), " "), -1)
		assert.Assert(t, len(found) > 0, "%s gives no upgrade command; want %s", f, want)
		for _, got := range found {
			assert.Equal(t, got, want, "%s's upgrade command", f)
		}
	}
}

// TestAnUpgradeFromAChartWithOneValueFewer: the older chart scenario 26
// installs first renders the same driver, and of the two ways to keep a
// user's values, only --reset-then-reuse-values renders the new chart:
// --reuse-values takes the older chart's values for the new chart's own,
// and the value the new chart adds is missing.
func TestAnUpgradeFromAChartWithOneValueFewer(t *testing.T) {
	ctx := context.Background()
	repo := repoRoot(t)
	const value = "networkPolicy" // the value scenario 26's older chart lacks
	old, err := OlderChart(repo, t.TempDir(), value)
	assert.NilError(t, err)
	oldValues, err := os.ReadFile(filepath.Join(old, "values.yaml"))
	assert.NilError(t, err)
	assert.Assert(t, !regexp.MustCompile(`(?m)^`+value+`:`).Match(oldValues), "the older chart's values.yaml still sets %s", value)

	user := []string{"--set", "statsTTL=20s", "--set-string", "image.tag=v1"}
	fromOld, err := Helm(ctx, repo, append([]string{"template", "per-node", old, "-n", DriverNamespace}, user...)...)
	assert.NilError(t, err)
	fromNew, err := RenderChart(ctx, repo, user...)
	assert.NilError(t, err)
	assert.DeepEqual(t, daemonSetOf(t, fromOld), daemonSetOf(t, fromNew))

	// --reuse-values: the new chart's templates with the older chart's values.
	reused := filepath.Join(t.TempDir(), "per-node")
	assert.NilError(t, os.CopyFS(reused, os.DirFS(Chart(repo))))
	assert.NilError(t, os.WriteFile(filepath.Join(reused, "values.yaml"), oldValues, 0o644))
	_, err = Helm(ctx, repo, append([]string{"template", "per-node", reused, "-n", DriverNamespace}, user...)...)
	assert.ErrorContains(t, err, value, "the new chart rendered with the older chart's values; the case --reuse-values gets wrong is not made")
}

// daemonSetOf is the DaemonSet of a rendered manifest.
func daemonSetOf(t *testing.T, manifest string) map[string]any {
	t.Helper()
	objs, err := Objects(manifest)
	assert.NilError(t, err)
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			return o.Object
		}
	}
	t.Fatalf("no DaemonSet rendered")
	return nil
}
