// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/e2e/scenario"
)

// failures are the steps the scenarios failed at, printed once every test has run.
var failures scenario.Failures

// TestScenarios runs the documents in scenarios/, each alone on a cluster:
// with one lane one after another, in order; with more (E2E_LANES), each
// lane takes the next document in order as soon as its last one is done, so
// the last document still runs after every other on its cluster.
// E2E_SCENARIO (make e2e SCENARIO=...) keeps those whose name starts with
// one of its comma-separated prefixes.
func TestScenarios(t *testing.T) {
	docs, err := scenario.ParseDir(filepath.Join(hcfg.Repo, "scenarios"))
	assert.NilError(t, err)
	var run []scenario.Doc
	for _, d := range docs {
		if harness.Selects(hcfg.Scenario, d.Name) {
			run = append(run, d)
		}
	}
	assert.Assert(t, len(run) > 0, "no scenario matches %q", hcfg.Scenario)
	var mu sync.Mutex
	times := map[string]time.Duration{}
	ranOn := map[string]string{}
	timings := &scenario.Timings{}
	next := make(chan scenario.Doc, len(run))
	for _, d := range run {
		next <- d
	}
	close(next)
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Go(func() {
			for d := range next {
				f := features.New(d.Name).Assess(d.Title, func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
					start := time.Now()
					defer func() {
						mu.Lock()
						defer mu.Unlock()
						times[d.Name], ranOn[d.Name] = time.Since(start), l.cluster
					}()
					t.Logf("scenario %s on cluster %s", d.Name, l.cluster)
					env := scenario.Env{Repo: hcfg.Repo, Cluster: l.cluster, Kubeconfig: c.KubeconfigFile(), R: client(t, c),
						Images: map[string]string{"store_image": storeImage, "probe_image": probeImage}, Timings: timings, Failures: &failures}
					env.RunDoc(ctx, t, d)
					return ctx
				}).Feature()
				l.env.Test(t, f)
			}
		})
	}
	wg.Wait()
	for _, d := range run {
		t.Logf("scenario %-28s %8s  on %s", d.Name, times[d.Name].Round(time.Second), ranOn[d.Name])
	}
	t.Logf("steps that passed, by kind:\n%s", timings.Report())
}
