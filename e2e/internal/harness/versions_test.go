// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// readEnv reads a versions file's KEY=VALUE lines.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	assert.NilError(t, err)
	defer f.Close()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		assert.Assert(t, ok, "%s: not KEY=VALUE: %q", path, line)
		env[k] = v
	}
	assert.NilError(t, s.Err())
	return env
}

func readMod(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err, "pin.sh writes it: e2e/nodeimage/pin.sh MINOR")
	f, err := modfile.Parse(path, data, nil)
	assert.NilError(t, err)
	return f
}

// required is the version f requires of module ("" if none).
func required(f *modfile.File, module string) string {
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version
		}
	}
	return ""
}

// supportedMinors lists the minors with a versions file.
func supportedMinors(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "1.*.env"))
	assert.NilError(t, err)
	var minors []string
	for _, f := range files {
		minors = append(minors, strings.TrimSuffix(filepath.Base(f), ".env"))
	}
	return minors
}

// Every supported minor's versions file agrees with itself and with the
// module files pin.sh wrote from it: editing a version without running pin.sh
// (or the reverse) fails here, not 20 minutes into a node image build.
func TestNodeImageVersionsArePinned(t *testing.T) {
	root := filepath.Join(repoRoot(t), "e2e", "nodeimage")
	minors := supportedMinors(t, filepath.Join(root, "versions"))
	assert.Assert(t, len(minors) >= 4, "the newest three minors and the oldest claimed: %v", minors)
	def, err := os.ReadFile(filepath.Join(root, "versions", "default"))
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(minors, strings.TrimSpace(string(def))), "versions/default names no versions file")

	for _, minor := range minors {
		t.Run(minor, func(t *testing.T) {
			env := readEnv(t, filepath.Join(root, "versions", minor+".env"))
			k8s := env["KUBERNETES_VERSION"]
			assert.Assert(t, strings.HasPrefix(k8s, "v"+minor+"."), "KUBERNETES_VERSION %q is not a %s release", k8s, minor)
			staging := "v0." + strings.TrimPrefix(k8s, "v1.")
			assert.Equal(t, env["KUBERNETES_STAGING_VERSION"], staging)
			assert.Assert(t, strings.HasPrefix(env["ETCD_IMAGE_TAG"], strings.TrimPrefix(env["ETCD_VERSION"], "v")+"-"),
				"ETCD_IMAGE_TAG %q is not a build of ETCD_VERSION %q", env["ETCD_IMAGE_TAG"], env["ETCD_VERSION"])
			for _, k := range []string{"COREDNS_VERSION", "PAUSE_IMAGE_TAG", "CNI_PLUGINS_VERSION", "CRI_TOOLS_VERSION", "CONTAINERD_VERSION", "RUNC_VERSION"} {
				assert.Assert(t, env[k] != "", "%s.env has no %s", minor, k)
			}
			assert.Assert(t, strings.HasPrefix(env["CONTAINERD_VERSION"], "v2."), "the nodes run containerd 2: %q", env["CONTAINERD_VERSION"])

			kube := readMod(t, filepath.Join(root, "kubernetes", minor+".mod"))
			assert.Equal(t, required(kube, "k8s.io/kubernetes"), k8s, "kubernetes/%s.mod: run e2e/nodeimage/pin.sh %s", minor, minor)
			assert.Assert(t, len(kube.Replace) > 20, "kubernetes/%s.mod replaces %d staging modules", minor, len(kube.Replace))
			for _, r := range kube.Replace {
				assert.Equal(t, r.New.Version, staging, "kubernetes/%s.mod replaces %s", minor, r.Old.Path)
			}
			var tools []string
			for _, tl := range kube.Tool {
				tools = append(tools, tl.Path)
			}
			for _, cmd := range []string{"kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
				assert.Assert(t, slices.Contains(tools, "k8s.io/kubernetes/cmd/"+cmd), "kubernetes/%s.mod has no tool %s", minor, cmd)
			}

			etcd := readMod(t, filepath.Join(root, "etcd", minor+".mod"))
			assert.Equal(t, required(etcd, "go.etcd.io/etcd/server/v3"), env["ETCD_VERSION"], "etcd/%s.mod: run e2e/nodeimage/pin.sh %s", minor, minor)
			for _, r := range etcd.Replace {
				want := env["ETCD_VERSION"]
				if strings.HasSuffix(r.Old.Path, "/v2") { // etcd 3.5.N's v2 client is v2.305.N
					want = "v2.30" + strings.TrimPrefix(want, "v3.")
				}
				assert.Equal(t, r.New.Version, want, "etcd/%s.mod replaces %s", minor, r.Old.Path)
			}

			coredns := readMod(t, filepath.Join(root, "coredns", minor+".mod"))
			assert.Equal(t, required(coredns, "github.com/coredns/coredns"), env["COREDNS_VERSION"], "coredns/%s.mod: run e2e/nodeimage/pin.sh %s", minor, minor)
		})
	}
}
