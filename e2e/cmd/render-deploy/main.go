// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command render-deploy prints the install YAML of deploy/ (the kustomize
// base) with the driver image set, as `kubectl kustomize` would render an
// overlay that sets it: make release writes it as install.yaml.
package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"liken.sh/per-node/e2e/internal/harness"
)

func main() {
	image := flag.String("image", "", "the driver image (repository:tag or repository@digest)")
	repo := flag.String("repo", ".", "the repository root")
	flag.Parse()
	if *image == "" {
		fmt.Fprintln(os.Stderr, "render-deploy: --image is required")
		os.Exit(2)
	}
	objs, err := harness.RenderDeploy(*repo, *image)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render-deploy:", err)
		os.Exit(1)
	}
	for _, o := range objs {
		out, err := yaml.Marshal(o.Object)
		if err != nil {
			fmt.Fprintln(os.Stderr, "render-deploy:", err)
			os.Exit(1)
		}
		fmt.Printf("---\n%s", out)
	}
}
