// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command e2e-up brings up the e2e cluster with the driver installed and
// leaves it running for a person to use (make up; E2E_LANES=2 brings up
// two). It prints the kubeconfig of each.
package main

import (
	"context"
	"fmt"
	"os"

	"liken.sh/per-node/e2e/internal/harness"
)

func main() {
	ctx := context.Background()
	c, err := harness.FromEnv()
	var existing []string
	if err == nil {
		existing, err = harness.Existing(ctx, c)
	}
	if err == nil {
		var envs []harness.Env
		if envs, err = harness.Up(ctx, c, existing); err == nil {
			for _, e := range envs {
				fmt.Printf("cluster %q is up with the driver installed.\nexport KUBECONFIG=%s\n", e.Cluster, e.Kubeconfig)
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "e2e-up:", err)
	os.Exit(1)
}
