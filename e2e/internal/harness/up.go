// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/conf"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/e2e-framework/support/kind"
)

// Env is a cluster ready for tests: the driver installed and registered on
// every node, the test images loaded.
type Env struct {
	// Kubeconfig is the path of the cluster's kubeconfig.
	Kubeconfig string
	// DriverImage, ProbeImage and StoreImage are the images built for this run.
	DriverImage, ProbeImage, StoreImage string
}

// Up creates (or reuses) the kind cluster, builds and loads the images, and
// installs the driver. It prints how long each phase took.
func Up(ctx context.Context, c Config) (Env, error) {
	var e Env
	var err error
	phase := func(name string, f func() error) error {
		start := time.Now()
		err := f()
		fmt.Printf("e2e: %s in %s\n", name, time.Since(start).Round(time.Second))
		return err
	}
	if err = phase("cluster up", func() error {
		var opts []support.ClusterOpts
		if c.NodeImage != "" {
			opts = append(opts, kind.WithImage(c.NodeImage))
		}
		p := kind.NewProvider().SetDefaults().WithName(c.Cluster).WithOpts(opts...)
		if e.Kubeconfig, err = p.CreateWithConfig(ctx, c.KindConfig()); err != nil {
			return err
		}
		return checkVersion(ctx, e.Kubeconfig, c.Cluster, c.KubernetesVersion)
	}); err != nil {
		return e, err
	}
	if err = phase("images built and loaded", func() error {
		for _, img := range []struct {
			dockerfile, repository string
			name                   *string
		}{
			{"Dockerfile", "per-node.liken.sh/driver", &e.DriverImage},
			{"fixtures/probe/Dockerfile", "per-node.liken.sh/probe", &e.ProbeImage},
			{"fixtures/store/Dockerfile", "per-node.liken.sh/store", &e.StoreImage},
		} {
			if *img.name, err = c.BuildImage(ctx, img.dockerfile, img.repository); err != nil {
				return err
			}
			if _, err = Run(ctx, c.Repo, "kind", "load", "docker-image", "--name", c.Cluster, *img.name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return e, err
	}
	err = phase("driver installed and registered", func() error { return e.installDriver(ctx, c) })
	return e, err
}

func (e Env) installDriver(ctx context.Context, c Config) error {
	rc, err := conf.New(e.Kubeconfig)
	if err != nil {
		return err
	}
	r, err := resources.New(rc)
	if err != nil {
		return err
	}
	// As README's Install says: the namespace, labelled for privileged
	// pods, then the chart.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DriverNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}
	if err := r.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := HelmUpgrade(ctx, c.Repo, e.Kubeconfig, e.DriverImage); err != nil {
		return err
	}
	if err := WaitRolledOut(ctx, r, "per-node-system", "per-node-node", 3*time.Minute); err != nil {
		return err
	}
	return WaitRegistered(ctx, r, 2*time.Minute)
}

// ErrWrongVersion: a node of the cluster runs another Kubernetes version than
// the run asks for (a cluster left by an earlier run of another minor).
var ErrWrongVersion = errors.New("the cluster runs another Kubernetes version")

// checkVersion fails unless every node's kubelet reports want (empty: any).
func checkVersion(ctx context.Context, kubeconfig, cluster, want string) error {
	if want == "" {
		return nil
	}
	rc, err := conf.New(kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	return checkNodes(ctx, cs, cluster, want)
}

func checkNodes(ctx context.Context, cs kubernetes.Interface, cluster, want string) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the nodes of %s: %w", cluster, err)
	}
	for _, n := range nodes.Items {
		if got := n.Status.NodeInfo.KubeletVersion; got != want {
			return fmt.Errorf("%w: node %s of cluster %s runs %s, this run asks for %s: delete it (make down, or kind delete cluster --name %s) or give E2E_CLUSTER another name",
				ErrWrongVersion, n.Name, cluster, got, want, cluster)
		}
	}
	return nil
}

// ExportLogs writes the cluster's logs under dir and returns where.
func ExportLogs(ctx context.Context, c Config, dir string) error {
	_, err := Run(ctx, c.Repo, "kind", "export", "logs", dir, "--name", c.Cluster)
	return err
}

// Exists reports whether the kind cluster is already there (make up left it).
func Exists(ctx context.Context, c Config) (bool, error) {
	out, err := Run(ctx, c.Repo, "kind", "get", "clusters")
	if err != nil {
		return false, err
	}
	return slices.Contains(strings.Fields(out), c.Cluster), nil
}

// Down deletes the cluster.
func Down(ctx context.Context, c Config) error {
	_, err := Run(ctx, c.Repo, "kind", "delete", "cluster", "--name", c.Cluster)
	return err
}
