// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Chart is the Helm chart's directory in the repository.
func Chart(repo string) string { return filepath.Join(repo, "charts", "per-node") }

// Helm runs the Helm that tools.mod pins, from HelmBinary, in the repository.
func Helm(ctx context.Context, repo string, args ...string) (string, error) {
	helm, err := HelmBinary(ctx, repo)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Dir = repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 20))
	}
	return stdout.String(), nil
}

var helmBuilt struct {
	sync.Mutex
	path string
}

// HelmBinary builds Helm (`make helm`: _out/bin/helm) once per process and
// returns its path. Lanes that each ran `go tool -modfile=tools.mod helm`
// compiled Helm once per lane at the same moment on a cold machine (17
// minutes on 2 cores); `go tool` also checks the build on every call. make
// serialises nothing between processes, so a lock file does: two test
// processes side by side do not write the binary at once.
func HelmBinary(ctx context.Context, repo string) (string, error) {
	helmBuilt.Lock()
	defer helmBuilt.Unlock()
	if helmBuilt.path != "" {
		return helmBuilt.path, nil
	}
	bin := filepath.Join(repo, "_out", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("build helm: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(bin, ".helm.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("build helm: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("build helm: lock %s: %w", lock.Name(), err)
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "helm")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build helm (make helm): %w\n%s", err, tail(string(out), 20))
	}
	helmBuilt.path = filepath.Join(bin, "helm")
	return helmBuilt.path, nil
}

// DriverNamespace and DriverRelease are where e2e installs the chart.
const (
	DriverNamespace = "per-node-system"
	DriverRelease   = "per-node"
)

// SuiteValues are the chart values every install and upgrade of the suite
// sets. statsTTL: a copy's usage is measured again at each of kubelet's
// asks (every 1 to 2 minutes), so a figure taken while a pod was still
// writing is not served for the default 5 minutes. forgetGoneNodesAfter: a
// scenario (17) watches a gone node's record go from a live PV, which the
// default would make an hour.
var SuiteValues = []string{"statsTTL=20s", "forgetGoneNodesAfter=60s"}

// HelmUpgrade installs the chart, or upgrades the release, with the driver
// image image (repository:tag), as a user would: `helm upgrade --install`,
// with more values (sets: key=value) if given.
func HelmUpgrade(ctx context.Context, repo, kubeconfig, image string, sets ...string) error {
	imageFlags, err := ImageValues(image)
	if err != nil {
		return err
	}
	args := append([]string{"upgrade", "--install", DriverRelease, Chart(repo),
		"--kubeconfig", kubeconfig, "--namespace", DriverNamespace}, imageFlags...)
	for _, v := range sets {
		args = append(args, "--set", v)
	}
	_, err = Helm(ctx, repo, args...)
	return err
}

// ImageValues are the helm flags that set the chart's driver image to image
// (repository:tag). The tag is always a string, also when it is all digits.
func ImageValues(image string) ([]string, error) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return nil, fmt.Errorf("image %q has no tag", image)
	}
	return []string{"--set", "image.repository=" + image[:i], "--set-string", "image.tag=" + image[i+1:]}, nil
}

// RenderChart renders the chart as release per-node in namespace
// per-node-system, as `helm template` does, with extra helm flags (--set,
// --values).
func RenderChart(ctx context.Context, repo string, flags ...string) (string, error) {
	args := append([]string{"template", "per-node", Chart(repo), "--namespace", "per-node-system"}, flags...)
	return Helm(ctx, repo, args...)
}

// Objects decodes a multi-document YAML stream, skipping empty documents.
// Numbers decode as the API server reads them (int64 where whole).
func Objects(manifest string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
}
