// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

// Package e2e proves per-node on a multi-node kind cluster. Run it with
// `make e2e`, which picks the node image (building the offline one when no
// registry answers) and sets the environment that harness.FromEnv reads.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"liken.sh/per-node/e2e/internal/harness"
)

var (
	testenv env.Environment
	hcfg    harness.Config
	// probeImage and storeImage are the images built for this run.
	probeImage, storeImage string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if hcfg, err = harness.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	// A cluster this run did not create (make up, E2E_KEEP) is reused and
	// left running.
	existed, err := harness.Exists(ctx, hcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	up, err := harness.Up(ctx, hcfg)
	code := 1
	if err == nil {
		probeImage, storeImage = up.ProbeImage, up.StoreImage
		testenv = env.NewWithConfig(envconf.NewWithKubeConfig(up.Kubeconfig))
		start := time.Now()
		code = testenv.Run(m)
		fmt.Printf("e2e: tests in %s\n", time.Since(start).Round(time.Second))
	} else {
		fmt.Fprintln(os.Stderr, "e2e setup failed:", err)
	}
	if code != 0 {
		dir := filepath.Join(hcfg.Repo, "_out", "e2e-logs", time.Now().UTC().Format("20060102-150405"))
		if err := harness.ExportLogs(ctx, hcfg, dir); err != nil {
			fmt.Fprintln(os.Stderr, "exporting the cluster's logs:", err)
		} else {
			fmt.Printf("e2e failed: the cluster's logs are in %s\n", dir)
		}
	}
	if existed {
		fmt.Printf("e2e: the cluster %s was there before this run; it is left running (make down deletes it)\n", hcfg.Cluster)
	} else if !hcfg.Keep {
		if err := harness.Down(ctx, hcfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}
