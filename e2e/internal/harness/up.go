// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/conf"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
)

// Env is a cluster ready for tests: the driver installed and registered on
// every node, the test images loaded.
type Env struct {
	// Cluster is the kind cluster's name.
	Cluster string
	// Kubeconfig is the path of the cluster's kubeconfig.
	Kubeconfig string
	// DriverImage, ProbeImage and StoreImage are the images built for this run.
	DriverImage, ProbeImage, StoreImage string
	// NatsImage is NATS for docs/examples/nats, under the name the example
	// uses (NatsImageName).
	NatsImage string
}

// NatsImageName is the image docs/examples/nats runs: built here from
// fixtures/nats (nats-server from the Go module proxy) and loaded under
// this name, so the example applies as it is.
const NatsImageName = "nats:2.15.3"

// Up creates the run's kind clusters, one per lane (c.Clusters), reusing
// those in existing (what Existing returned), and at the same time builds
// the test images, once for all of them; then it loads the images into
// every cluster and installs the driver there. It prints how long each
// phase took.
func Up(ctx context.Context, c Config, existing []string) ([]Env, error) {
	names := c.Clusters()
	envs := make([]Env, len(names))
	var images Env
	if err := phase(fmt.Sprintf("%d cluster(s) up, images built", len(names)), func() error {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return images.build(gctx, c) })
		for i, name := range names {
			g.Go(func() error {
				envs[i].Cluster = name
				return envs[i].createCluster(gctx, c, slices.Contains(existing, name))
			})
		}
		return g.Wait()
	}); err != nil {
		return nil, err
	}
	err := phase("images loaded, driver installed and registered", func() error {
		g, gctx := errgroup.WithContext(ctx)
		for i := range envs {
			envs[i].DriverImage, envs[i].ProbeImage, envs[i].StoreImage = images.DriverImage, images.ProbeImage, images.StoreImage
			envs[i].NatsImage = images.NatsImage
			g.Go(func() error {
				if err := envs[i].load(gctx, c); err != nil {
					return err
				}
				return envs[i].installDriver(gctx, c)
			})
		}
		return g.Wait()
	})
	return envs, err
}

func phase(name string, f func() error) error {
	start := time.Now()
	err := f()
	fmt.Printf("e2e: %s in %s\n", name, time.Since(start).Round(time.Second))
	return err
}

func (e *Env) createCluster(ctx context.Context, c Config, reuse bool) error {
	e.Kubeconfig = c.KubeconfigPath(e.Cluster)
	if err := os.MkdirAll(filepath.Dir(e.Kubeconfig), 0o755); err != nil {
		return err
	}
	var err error
	if reuse {
		_, err = Run(ctx, c.Repo, "kind", "export", "kubeconfig", "--name", e.Cluster, "--kubeconfig", e.Kubeconfig)
	} else {
		err = e.create(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("creating cluster %s: %w", e.Cluster, err)
	}
	out, err := Run(ctx, c.Repo, "kind", "get", "nodes", "--name", e.Cluster)
	if err != nil {
		return err
	}
	if err := checkNetwork(ctx, c, e.Cluster, strings.Fields(out)); err != nil {
		return err
	}
	cs, err := clientset(e.Kubeconfig)
	if err != nil {
		return err
	}
	// kind can return while a node's kubelet never registered (seen here
	// with the host's inotify limits too low): a cluster short of a node is
	// a broken cluster, not a smaller one.
	if err := waitNodesReady(ctx, cs, e.Cluster, strings.Fields(out), 3*time.Minute); err != nil {
		return err
	}
	if err := checkNodes(ctx, cs, e.Cluster, c.KubernetesVersion); err != nil {
		return err
	}
	return dnsOnControlPlane(ctx, cs, e.Cluster)
}

// create runs kind create cluster on the cluster's own Docker network
// (kind reads the network's name from its environment only).
func (e *Env) create(ctx context.Context, c Config) error {
	args := []string{"create", "cluster", "--name", e.Cluster, "--config", c.KindConfig(), "--kubeconfig", e.Kubeconfig}
	if c.NodeImage != "" {
		args = append(args, "--image", c.NodeImage)
	}
	_, err := RunEnv(ctx, c.Repo, []string{"KIND_EXPERIMENTAL_DOCKER_NETWORK=" + c.Network(e.Cluster)}, "kind", args...)
	return err
}

// ErrNodesNotReady: a node of the cluster never became a Ready Node.
var ErrNodesNotReady = errors.New("not every node of the cluster is Ready")

// waitNodesReady waits until every one of names is a Node whose Ready
// condition is True.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, cluster string, names []string, timeout time.Duration) error {
	err := Until(ctx, fmt.Sprintf("the %d nodes of cluster %s to be Ready", len(names), cluster), timeout, func(ctx context.Context) (bool, string, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", Unobserved(err)
		}
		ready := map[string]bool{}
		for i := range nodes.Items {
			ready[nodes.Items[i].Name] = NodeReady(&nodes.Items[i])
		}
		var missing []string
		for _, name := range names {
			if !ready[name] {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not Ready or not registered: %s", strings.Join(missing, ", ")), nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w (kubelet's log: docker exec NODE journalctl -u kubelet)", ErrNodesNotReady, err)
	}
	return nil
}

// build compiles the driver, probe and store on the host, then builds their
// images, each a scratch image holding its binary.
func (e *Env) build(ctx context.Context, c Config) error {
	start := time.Now()
	if err := c.BuildBinaries(ctx); err != nil {
		return err
	}
	fmt.Printf("e2e: binaries built on the host in %s\n", time.Since(start).Round(time.Second))
	for _, img := range []struct {
		dockerfile, repository string
		name                   *string
	}{
		{"Dockerfile", "per-node.liken.sh/driver", &e.DriverImage},
		{"fixtures/probe/Dockerfile", "per-node.liken.sh/probe", &e.ProbeImage},
		{"fixtures/store/Dockerfile", "per-node.liken.sh/store", &e.StoreImage},
		{"fixtures/nats/Dockerfile", "per-node.liken.sh/nats", &e.NatsImage},
	} {
		start := time.Now()
		var err error
		if *img.name, err = c.BuildImage(ctx, img.dockerfile, img.repository); err != nil {
			return err
		}
		fmt.Printf("e2e: image %s built in %s\n", *img.name, time.Since(start).Round(time.Second))
	}
	if _, err := Run(ctx, c.Repo, "docker", "tag", e.NatsImage, NatsImageName); err != nil {
		return err
	}
	e.NatsImage = NatsImageName
	return nil
}

// load puts the test images on every node of the cluster in one call: kind
// saves what some node lacks into one archive and imports it on the nodes
// at once (a node that holds an image's ID already is skipped).
func (e Env) load(ctx context.Context, c Config) error {
	start := time.Now()
	if _, err := Run(ctx, c.Repo, "kind", "load", "docker-image", "--name", e.Cluster, e.DriverImage, e.ProbeImage, e.StoreImage, e.NatsImage); err != nil {
		return err
	}
	fmt.Printf("e2e: %s: images loaded in %s\n", e.Cluster, time.Since(start).Round(100*time.Millisecond))
	return nil
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
	// A kept cluster's drivers are all replaced at once: the run owns it.
	start := time.Now()
	if err := HelmUpgrade(ctx, c.Repo, e.Kubeconfig, e.DriverImage, append(SuiteValues, "maxUnavailable=100%")...); err != nil {
		return err
	}
	installed := time.Now()
	if err := WaitRolledOut(ctx, r, "per-node-system", "per-node-node", 3*time.Minute); err != nil {
		return err
	}
	rolled := time.Now()
	if err := WaitRegistered(ctx, r, 2*time.Minute); err != nil {
		return err
	}
	fmt.Printf("e2e: %s: helm %s, driver rolled out %s, registered %s\n", e.Cluster, installed.Sub(start).Round(100*time.Millisecond),
		rolled.Sub(installed).Round(100*time.Millisecond), time.Since(rolled).Round(100*time.Millisecond))
	return nil
}

// ErrWrongVersion: a node of the cluster runs another Kubernetes version than
// the run asks for (a cluster left by an earlier run of another minor).
var ErrWrongVersion = errors.New("the cluster runs another Kubernetes version")

func clientset(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := conf.New(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// checkNodes fails unless every node's kubelet reports want (empty: any).
func checkNodes(ctx context.Context, cs kubernetes.Interface, cluster, want string) error {
	if want == "" {
		return nil
	}
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

// ExportLogs writes the logs of the cluster under dir.
func ExportLogs(ctx context.Context, c Config, cluster, dir string) error {
	_, err := Run(ctx, c.Repo, "kind", "export", "logs", dir, "--name", cluster)
	return err
}

// Existing returns those of the run's clusters that are already there (make
// up, or E2E_KEEP, left them).
func Existing(ctx context.Context, c Config) ([]string, error) {
	out, err := Run(ctx, c.Repo, "kind", "get", "clusters")
	if err != nil {
		return nil, err
	}
	var there []string
	for _, name := range c.Clusters() {
		if slices.Contains(strings.Fields(out), name) {
			there = append(there, name)
		}
	}
	return there, nil
}

// Down deletes the cluster, then its Docker network (kind leaves it).
func Down(ctx context.Context, c Config, cluster string) error {
	if _, err := Run(ctx, c.Repo, "kind", "delete", "cluster", "--name", cluster); err != nil {
		return err
	}
	net := c.Network(cluster)
	ids, err := Run(ctx, c.Repo, "docker", "network", "ls", "--quiet", "--filter", "name=^"+net+"$")
	if err != nil || strings.TrimSpace(ids) == "" {
		return err // nil: never created, or already gone
	}
	_, err = Run(ctx, c.Repo, "docker", "network", "rm", net)
	return err
}
