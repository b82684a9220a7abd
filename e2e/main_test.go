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
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"liken.sh/per-node/e2e/internal/harness"
)

var (
	// testenv is the first lane's environment: the tests other than the
	// scenarios run there.
	testenv env.Environment
	// lanes are every cluster of the run; the scenarios are shared among them.
	lanes []lane
	hcfg  harness.Config
	// probeImage and storeImage are the images built for this run.
	probeImage, storeImage string
)

// lane is one cluster of the run and the environment that tests it.
type lane struct {
	cluster string
	env     env.Environment
}

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
	existed, err := harness.Existing(ctx, hcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	envs, err := harness.Up(ctx, hcfg, existed)
	code := 1
	if err == nil {
		probeImage, storeImage = envs[0].ProbeImage, envs[0].StoreImage
		for _, e := range envs {
			lanes = append(lanes, lane{cluster: e.Cluster, env: env.NewWithConfig(envconf.NewWithKubeConfig(e.Kubeconfig))})
		}
		testenv = lanes[0].env
		start := time.Now()
		code = testenv.Run(m)
		fmt.Printf("e2e: tests in %s\n", time.Since(start).Round(time.Second))
		if r := failures.Report(); r != "" {
			fmt.Printf("e2e: the steps that failed (the whole messages are in the log above):\n%s\n", r)
		}
	} else {
		fmt.Fprintln(os.Stderr, "e2e setup failed:", err)
	}
	for _, cluster := range hcfg.Clusters() {
		finish(ctx, cluster, code != 0, slices.Contains(existed, cluster))
	}
	return code
}

// finish exports a cluster's logs when the run failed, and deletes the
// cluster unless it was there before the run or E2E_KEEP keeps it.
func finish(ctx context.Context, cluster string, failed, existed bool) {
	if failed {
		dir := filepath.Join(hcfg.Repo, "_out", "e2e-logs", time.Now().UTC().Format("20060102-150405"), cluster)
		if err := harness.ExportLogs(ctx, hcfg, cluster, dir); err != nil {
			fmt.Fprintf(os.Stderr, "exporting the logs of %s: %v\n", cluster, err)
		} else {
			fmt.Printf("e2e failed: the logs of cluster %s are in %s\n", cluster, dir)
		}
	}
	switch {
	case existed:
		fmt.Printf("e2e: the cluster %s was there before this run; it is left running (make down deletes it)\n", cluster)
	case hcfg.Keep:
		fmt.Printf("e2e: E2E_KEEP=1: the cluster %s is left running\n", cluster)
	default:
		if err := harness.Down(ctx, hcfg, cluster); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}
