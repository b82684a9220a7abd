// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// ChartValues is the chart's values file, relative to the repository root:
// the one place the name of the driver image each release pushes is set.
const ChartValues = "charts/per-node/values.yaml"

// ReleaseRepository is the repository of the driver image each release
// pushes, as the chart's values name it: the release's install.yaml, the
// release workflow, deploy/ and the documents use this name, and a test
// keeps them equal.
func ReleaseRepository(repo string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(repo, ChartValues))
	if err != nil {
		return "", err
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%s: %w", ChartValues, err)
	}
	if v.Image.Repository == "" {
		return "", fmt.Errorf("%s: image.repository is empty: name the repository each release's image is pushed to", ChartValues)
	}
	return v.Image.Repository, nil
}
