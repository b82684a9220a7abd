// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/scenario"
)

// TestScenarios runs the documents in scenarios/, one at a time, in order.
// E2E_SCENARIO (make e2e SCENARIO=...) keeps those whose name starts with
// one of its comma-separated prefixes.
func TestScenarios(t *testing.T) {
	docs, err := scenario.ParseDir(filepath.Join(hcfg.Repo, "scenarios"))
	assert.NilError(t, err)
	var run []scenario.Doc
	for _, d := range docs {
		for _, prefix := range strings.Split(hcfg.Scenario, ",") {
			if strings.HasPrefix(d.Name, strings.TrimSpace(prefix)) {
				run = append(run, d)
				break
			}
		}
	}
	assert.Assert(t, len(run) > 0, "no scenario matches %q", hcfg.Scenario)
	times := map[string]time.Duration{}
	timings := &scenario.Timings{}
	for _, d := range run {
		f := features.New(d.Name).Assess(d.Title, func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
			start := time.Now()
			defer func() { times[d.Name] = time.Since(start) }()
			env := scenario.Env{Repo: hcfg.Repo, Cluster: hcfg.Cluster, Kubeconfig: c.KubeconfigFile(), R: client(t, c),
				Images: map[string]string{"store_image": storeImage, "probe_image": probeImage}, Timings: timings}
			env.RunDoc(ctx, t, d)
			return ctx
		}).Feature()
		testenv.Test(t, f)
	}
	for _, d := range run {
		t.Logf("scenario %-28s %s", d.Name, times[d.Name].Round(time.Second))
	}
	t.Logf("steps that passed, by kind:\n%s", timings.Report())
}
