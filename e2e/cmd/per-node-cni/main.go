// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command per-node-cni is the pod network of the offline kind clusters, in
// place of kind's kindnetd (whose image cannot be had without a registry).
// It runs on every node with the host's network and:
//
//   - writes a ptp + host-local CNI config over its own node's podCIDR;
//   - routes every other node's podCIDR via that node's InternalIP.
//
// kind injects CONTROL_PLANE_ENDPOINT into its first container, so it talks
// to the API server directly and does not wait for kube-proxy.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"liken.sh/per-node/e2e/internal/podnet"
)

func main() {
	klog.InitFlags(nil)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		klog.ErrorS(err, "per-node-cni stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	node := os.Getenv("NODE_NAME")
	if node == "" {
		return fmt.Errorf("NODE_NAME is not set")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster config: %w", err)
	}
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	conf := os.Getenv("CNI_CONFIG")
	if conf == "" {
		conf = "/etc/cni/net.d/10-per-node.conflist"
	}
	return podnet.Run(ctx, client, podnet.Config{Node: node, ConfigPath: conf, Routes: podnet.IPRoute{}})
}
