// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"
)

// TestTheReleaseImageIsNamedInOnePlace: the chart's values name the image
// each release pushes; the chart's default, deploy/ (so install.yaml), make
// release and the release workflow use that name, and every document that
// names a published image or chart names it.
func TestTheReleaseImageIsNamedInOnePlace(t *testing.T) {
	repo := repoRoot(t)
	name, err := ReleaseRepository(repo)
	assert.NilError(t, err)

	raw, err := os.ReadFile(filepath.Join(repo, "charts/per-node/Chart.yaml"))
	assert.NilError(t, err)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	assert.NilError(t, yaml.Unmarshal(raw, &chart))
	manifest, err := RenderChart(context.Background(), repo)
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(manifest, "image: "+name+":"+chart.AppVersion+"\n"),
		"the chart's default image is not %s:%s (its appVersion)", name, chart.AppVersion)
	objs, err := RenderDeploy(repo, "")
	assert.NilError(t, err)
	var images []string
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			images = append(images, driverImage(t, o.Object))
		}
	}
	assert.DeepEqual(t, images, []string{name + ":" + chart.AppVersion})

	// make release and the workflow ask for the name; neither writes one.
	for _, f := range []string{"e2e/host/release-install.sh", ".github/workflows/release.yaml"} {
		b, err := os.ReadFile(filepath.Join(repo, f))
		assert.NilError(t, err)
		assert.Assert(t, strings.Contains(string(b), "go run ./e2e/cmd/release-image"), "%s does not take the image's name from e2e/cmd/release-image", f)
		assert.Assert(t, !strings.Contains(string(b), "ghcr.io/") && !strings.Contains(string(b), "per-node.liken.sh/driver"),
			"%s writes an image's name of its own", f)
	}

	// Every published image or chart a tracked file names is this one.
	registry := path.Dir(name)
	published := regexp.MustCompile(`ghcr\.io/[\w./${}-]*\w`)
	for _, f := range repoFiles(t, repo) {
		if f == "e2e/internal/harness/image_test.go" || strings.HasPrefix(f, "e2e/mutants/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			continue
		}
		for _, m := range published.FindAllString(string(b), -1) {
			assert.Check(t, m == name || m == registry+"/charts/per-node", "%s names %s; the release's image is %s (%s), its chart %s/charts/per-node",
				f, m, name, ChartValues, registry)
		}
	}
}

// driverImage is the image of the container named driver in a DaemonSet.
func driverImage(t *testing.T, ds map[string]any) string {
	t.Helper()
	spec := ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, c := range spec["containers"].([]any) {
		if c := c.(map[string]any); c["name"] == "driver" {
			return c["image"].(string)
		}
	}
	t.Fatalf("no container named driver in DaemonSet %v", ds["metadata"])
	return ""
}
