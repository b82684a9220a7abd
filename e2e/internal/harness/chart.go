// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	yamlv3 "go.yaml.in/yaml/v3"
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

// UpgradeArgs is the upgrade the documents tell a user to run (README,
// docs/upgrading.md, scenario 26 runs it): chart's release upgraded to the
// driver image's tag, keeping the values the user set and taking the new
// chart's defaults for every other (--reuse-values would take the old
// chart's, and a value the new chart adds would be missing). A tag of
// digits stays a string (--set-string).
func UpgradeArgs(chart, tag string) []string {
	return []string{"upgrade", DriverRelease, chart, "-n", DriverNamespace, "--reset-then-reuse-values", "--set-string", "image.tag=" + tag}
}

// ImageValues are the helm flags that set the chart's driver image to image
// (repository:tag). The tag is always a string, also when it is all digits.
func ImageValues(image string) ([]string, error) {
	repository, tag, err := SplitImage(image)
	if err != nil {
		return nil, err
	}
	return []string{"--set", "image.repository=" + repository, "--set-string", "image.tag=" + tag}, nil
}

// SplitImage splits repository:tag.
func SplitImage(image string) (repository, tag string, err error) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return "", "", fmt.Errorf("image %q has no tag", image)
	}
	return image[:i], image[i+1:], nil
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

// OlderChart writes into dir a copy of the chart as a release before the
// one that added value would have shipped it: without value in values.yaml
// and its schema, and without the templates that read it. It returns the
// copy's path. Upgrading a release of it to the chart is an upgrade to a
// chart with one value more, the case --reuse-values gets wrong.
func OlderChart(repo, dir, value string) (string, error) {
	old := filepath.Join(dir, "per-node")
	if err := os.CopyFS(old, os.DirFS(Chart(repo))); err != nil {
		return "", err
	}
	values := filepath.Join(old, "values.yaml")
	raw, err := os.ReadFile(values)
	if err != nil {
		return "", err
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", values, err)
	}
	top := doc.Content[0]
	i := slices.IndexFunc(top.Content, func(n *yamlv3.Node) bool { return n.Value == value })
	if i < 0 || i%2 != 0 {
		return "", fmt.Errorf("the chart has no value %q", value)
	}
	top.Content = slices.Delete(top.Content, i, i+2)
	if raw, err = yamlv3.Marshal(&doc); err != nil {
		return "", err
	}
	if err := os.WriteFile(values, raw, 0o644); err != nil {
		return "", err
	}
	if err := dropFromSchema(filepath.Join(old, "values.schema.json"), value); err != nil {
		return "", err
	}
	templates, err := filepath.Glob(filepath.Join(old, "templates", "*"))
	if err != nil {
		return "", err
	}
	for _, f := range templates {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if strings.Contains(string(b), ".Values."+value) {
			if err := os.Remove(f); err != nil {
				return "", err
			}
		}
	}
	return old, nil
}

// dropFromSchema removes value from the schema's top-level properties.
func dropFromSchema(file, value string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		delete(props, value)
	}
	if raw, err = json.MarshalIndent(schema, "", "  "); err != nil {
		return err
	}
	return os.WriteFile(file, raw, 0o644)
}
