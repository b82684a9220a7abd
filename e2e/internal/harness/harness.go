// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package harness brings up what the e2e suite runs against: a kind cluster
// from the repository's config (reused when it exists), the images the tests
// run (built here, loaded into every node), and the driver installed from
// deploy/ and registered with every kubelet.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config is read from the environment that `make e2e` sets.
type Config struct {
	// Repo is the repository root.
	Repo string
	// Cluster is the kind cluster's name (E2E_CLUSTER, default per-node-e2e);
	// with more than one lane, the first lane's.
	Cluster string
	// Lanes is how many clusters the scenarios are shared among, each
	// running one scenario at a time (E2E_LANES, default 1).
	Lanes int
	// NodeImage is the kind node image (KIND_NODE_IMAGE; empty: kind's default).
	NodeImage string
	// Keep leaves the cluster running after the tests (E2E_KEEP=1).
	Keep bool
	// Scenario keeps the scenarios whose name starts with it (E2E_SCENARIO).
	Scenario string
	// KubernetesVersion is the version every node must run
	// (E2E_KUBERNETES_VERSION; empty: any).
	KubernetesVersion string
}

// FromEnv reads the Config.
func FromEnv() (Config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return Config{}, err
	}
	repo := wd
	for !exists(filepath.Join(repo, "go.mod")) {
		parent := filepath.Dir(repo)
		if parent == repo {
			return Config{}, fmt.Errorf("no go.mod above %s", wd)
		}
		repo = parent
	}
	lanes := 1
	if v := os.Getenv("E2E_LANES"); v != "" {
		if lanes, err = strconv.Atoi(v); err != nil || lanes < 1 || lanes > maxLanes {
			return Config{}, fmt.Errorf("%w: E2E_LANES=%q: want a number of clusters from 1 to %d", ErrLanes, v, maxLanes)
		}
	}
	c := Config{
		Lanes:     lanes,
		Repo:      repo,
		Cluster:   envOr("E2E_CLUSTER", "per-node-e2e"),
		NodeImage: os.Getenv("KIND_NODE_IMAGE"),
		Keep:      os.Getenv("E2E_KEEP") == "1",
		Scenario:  os.Getenv("E2E_SCENARIO"),

		KubernetesVersion: os.Getenv("E2E_KUBERNETES_VERSION"),
	}
	// A run of fewer scenarios than lanes brings up one cluster for each:
	// the inner loop (make e2e SCENARIO=07) waits for one cluster, not two.
	if c.Scenario != "" {
		n, err := matchingScenarios(filepath.Join(repo, "scenarios"), c.Scenario)
		if err != nil {
			return Config{}, err
		}
		c.Lanes = max(1, min(c.Lanes, n))
	}
	return c, nil
}

// matchingScenarios counts the scenario documents in dir whose name starts
// with one of spec's comma-separated prefixes, as TestScenarios picks them.
func matchingScenarios(dir, spec string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return 0, fmt.Errorf("list scenarios: %w", err)
	}
	n := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".md")
		if name == "README" || strings.HasPrefix(name, "_") {
			continue
		}
		if Selects(spec, name) {
			n++
		}
	}
	return n, nil
}

// Selects says whether the scenario named name is one E2E_SCENARIO's spec
// runs: its name starts with one of spec's comma-separated prefixes (an
// empty spec runs every scenario).
func Selects(spec, name string) bool {
	for _, prefix := range strings.Split(spec, ",") {
		if strings.HasPrefix(name, strings.TrimSpace(prefix)) {
			return true
		}
	}
	return false
}

// ErrLanes: E2E_LANES is not a number of clusters the harness runs.
var ErrLanes = errors.New("bad number of lanes")

// maxLanes bounds E2E_LANES: each lane is a 5-node cluster.
const maxLanes = 4

// Clusters names the run's clusters, one per lane: Cluster, then Cluster-2,
// Cluster-3, ...
func (c Config) Clusters() []string {
	names := []string{c.Cluster}
	for i := 2; i <= c.Lanes; i++ {
		names = append(names, fmt.Sprintf("%s-%d", c.Cluster, i))
	}
	return names
}

// KubeconfigPath is where the kubeconfig of cluster is written.
func (c Config) KubeconfigPath(cluster string) string {
	return filepath.Join(c.Repo, "_out", "kubeconfig", cluster)
}

// KindConfig is the cluster's kind configuration file.
func (c Config) KindConfig() string { return filepath.Join(c.Repo, "e2e", "kind-config.yaml") }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Run runs a command and returns its output; its error carries the command
// line (to paste) and what it printed.
func Run(ctx context.Context, dir, name string, args ...string) (string, error) {
	return RunEnv(ctx, dir, nil, name, args...)
}

// RunEnv is Run with env (NAME=value) added to the environment.
func RunEnv(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s%s %s (in %s, after %s): %w\n%s", strings.Join(append(env, ""), " "), name, strings.Join(args, " "), dir,
			time.Since(start).Round(time.Millisecond), err, tail(out.String(), 40))
	}
	return out.String(), nil
}

// BuildBinaries compiles the binaries the test images hold, on the host
// with its Go build cache (make build build-fixtures: bin/per-node,
// bin/probe, bin/store), so nothing is compiled twice.
func (c Config) BuildBinaries(ctx context.Context) error {
	_, err := Run(ctx, c.Repo, "make", "--no-print-directory", "build", "build-fixtures", "build-nats")
	return err
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// BuildImage builds dockerfile (relative to the repository; it copies
// binaries that BuildBinaries made) and tags it repository:<content id>, so
// a changed image gets a new name and a reused cluster rolls out what was
// just built. It returns that name.
func (c Config) BuildImage(ctx context.Context, dockerfile, repository string) (string, error) {
	args := []string{"build", "-q", "-f", dockerfile, "-t", repository + ":latest", "."}
	if _, err := Run(ctx, c.Repo, "docker", args...); err != nil {
		return "", err
	}
	out, err := Run(ctx, c.Repo, "docker", "image", "inspect", "-f", "{{.Id}}", repository+":latest")
	if err != nil {
		return "", err
	}
	id := strings.TrimPrefix(strings.TrimSpace(out), "sha256:")
	if len(id) < 12 {
		return "", fmt.Errorf("docker image inspect printed no image id: %q", out)
	}
	name := repository + ":" + id[:12]
	if _, err := Run(ctx, c.Repo, "docker", "tag", repository+":latest", name); err != nil {
		return "", err
	}
	return name, nil
}
