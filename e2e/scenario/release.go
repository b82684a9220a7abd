// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps of a release installed as an operator installs it: the files
// e2e/host/release-install.sh writes for make release (the image archive,
// install.yaml, the chart), installed in place of the suite's driver, which
// comes back at the end (or in cleanup).

// stepWriteRelease writes the release version's files and loads its image
// archive on every node of the cluster. The archive must name the image
// the release's name (the chart's image.repository, tagged version); no
// image of that name is left on a node from before, so a pod of it runs
// what this archive holds.
func stepWriteRelease(ctx context.Context, r *Run, a args) error {
	version := a["version"]
	repository, err := harness.ReleaseRepository(r.env.Repo)
	if err != nil {
		return err
	}
	image := repository + ":" + version
	if err := r.removeImageFromNodes(ctx, image); err != nil {
		return err
	}
	dir := r.t.TempDir()
	if _, err := harness.Run(ctx, r.env.Repo, "bash", "e2e/host/release-install.sh", version, dir); err != nil {
		return err
	}
	archive := filepath.Join(dir, "image.tar")
	if err := gunzip(filepath.Join(dir, "per-node-driver-"+version+".tar.gz"), archive); err != nil {
		return err
	}
	tags, err := archiveTags(archive)
	if err != nil {
		return err
	}
	if !slices.Contains(tags, image) {
		return fmt.Errorf("%w: expected the release's image archive to hold %s (the chart's image.repository, tagged %s); seen %q",
			harness.ErrNotSeen, image, version, tags)
	}
	if _, err := harness.Run(ctx, r.env.Repo, "kind", "load", "image-archive", "--name", r.env.Cluster, archive); err != nil {
		return err
	}
	charts, err := filepath.Glob(filepath.Join(dir, "per-node-*.tgz"))
	if err != nil || len(charts) != 1 {
		return fmt.Errorf("the release in %s holds %d charts, want 1", dir, len(charts))
	}
	install, err := os.ReadFile(filepath.Join(dir, "install.yaml"))
	if err != nil {
		return err
	}
	r.vars["_release_image"] = image
	r.vars["_release_install"] = filepath.Join(dir, "install.yaml")
	// Cleanup runs after the directory is gone: it reads the objects here.
	r.vars["_release_install_yaml"] = string(install)
	r.vars["_release_chart"] = charts[0]
	r.t.Logf("release %s: image %s loaded, %s", version, image, dir)
	return nil
}

// removeImageFromNodes removes image from every node's containerd, if there.
func (r *Run) removeImageFromNodes(ctx context.Context, image string) error {
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		out, err := r.onNode(ctx, n.Name, "ctr", "-n", "k8s.io", "images", "ls", "-q", "name=="+image)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			continue
		}
		if _, err := r.onNode(ctx, n.Name, "ctr", "-n", "k8s.io", "images", "rm", "--sync", image); err != nil {
			return fmt.Errorf("remove %s from %s: %w", image, n.Name, err)
		}
	}
	return nil
}

// archiveTags are the names an image archive (docker save) gives its
// images.
func archiveTags(archive string) ([]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: no manifest.json: %w", archive, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var manifest []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
			return nil, fmt.Errorf("%s: manifest.json: %w", archive, err)
		}
		var tags []string
		for _, m := range manifest {
			tags = append(tags, m.RepoTags...)
		}
		return tags, nil
	}
}

func gunzip(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	z, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, z); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// stepUninstallDriver uninstalls the driver's Helm release (its CRD and
// every Copy stay) and waits until no driver pod is left.
func stepUninstallDriver(ctx context.Context, r *Run, _ args) error {
	if _, current, err := r.driverDaemonSet(ctx); err == nil && r.vars["_suite_driver_image"] == "" {
		r.vars["_suite_driver_image"] = current
	}
	r.vars["_suite_driver_gone"] = "yes"
	if _, err := harness.Helm(ctx, r.env.Repo, "uninstall", harness.DriverRelease, "-n", harness.DriverNamespace,
		"--kubeconfig", r.env.Kubeconfig, "--wait"); err != nil {
		return err
	}
	return r.untilNoDriverPod(ctx)
}

func (r *Run) untilNoDriverPod(ctx context.Context) error {
	return harness.Until(ctx, "no driver pod to be left", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := r.listIn(ctx, driverNamespace, &pods, "app.kubernetes.io/name=per-node", ""); err != nil {
			return false, "", harness.Unobserved(err)
		}
		return len(pods.Items) == 0, r.driverPodsReport(pods.Items), nil
	})
}

// stepInstallReleaseChart installs the release's packaged chart with no
// value but its namespace, and waits for the release's image on every node.
func stepInstallReleaseChart(ctx context.Context, r *Run, _ args) error {
	if r.vars["_release_chart"] == "" {
		return fmt.Errorf("no release was written in this scenario")
	}
	if _, err := harness.Helm(ctx, r.env.Repo, "install", harness.DriverRelease, r.vars["_release_chart"],
		"-n", harness.DriverNamespace, "--kubeconfig", r.env.Kubeconfig); err != nil {
		return err
	}
	return r.waitDriverOn(ctx, r.vars["_release_image"], "installed from the release's chart")
}

// stepApplyReleaseInstall runs `kubectl apply -f install.yaml` (the
// control plane node's kubectl) and waits for the release's image on every
// node.
func stepApplyReleaseInstall(ctx context.Context, r *Run, _ args) error {
	if r.vars["_release_install"] == "" {
		return fmt.Errorf("no release was written in this scenario")
	}
	node := r.env.Cluster + "-control-plane"
	if _, err := harness.Run(ctx, r.env.Repo, "docker", "cp", r.vars["_release_install"], node+":/root/install.yaml"); err != nil {
		return err
	}
	if _, err := r.onNode(ctx, node, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "apply", "-f", "/root/install.yaml"); err != nil {
		return err
	}
	return r.waitDriverOn(ctx, r.vars["_release_image"], "installed from install.yaml")
}

// stepReinstallSuiteDriver puts the suite's driver back as the suite
// installs it: install.yaml's objects (but its Namespace and CRD, which
// hold no driver and every Copy) deleted, then the chart of the tree with
// the suite's image and values.
func stepReinstallSuiteDriver(ctx context.Context, r *Run, _ args) error {
	if r.vars["_suite_driver_gone"] == "" {
		return nil
	}
	if err := r.deleteInstallYAML(ctx); err != nil {
		return err
	}
	if err := harness.HelmUpgrade(ctx, r.env.Repo, r.env.Kubeconfig, r.vars["_suite_driver_image"],
		append(harness.SuiteValues, "maxUnavailable=100%")...); err != nil {
		return err
	}
	if err := r.waitDriverOn(ctx, r.vars["_suite_driver_image"], "installed again"); err != nil {
		return err
	}
	delete(r.vars, "_suite_driver_gone")
	return nil
}

// deleteInstallYAML deletes the objects install.yaml creates, but its
// Namespace and CRD, if its DaemonSet is not Helm's.
func (r *Run) deleteInstallYAML(ctx context.Context) error {
	ds, _, err := r.driverDaemonSet(ctx)
	if apierrors.IsNotFound(err) || err == nil && ds.Labels["app.kubernetes.io/managed-by"] == "Helm" {
		return nil
	}
	if err != nil {
		return err
	}
	objs, err := harness.Objects(r.vars["_release_install_yaml"])
	if err != nil {
		return err
	}
	for _, o := range objs {
		if k := o.GetKind(); k == "Namespace" || k == "CustomResourceDefinition" {
			continue
		}
		if err := r.env.R.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return r.untilNoDriverPod(ctx)
}
