// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podnet keeps a kind node's pod network: a CNI config over the
// node's podCIDR, and a route to every other node's podCIDR.
package podnet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Routes sets kernel routes.
type Routes interface {
	// Replace routes cidr via gateway.
	Replace(cidr, gateway string) error
}

// IPRoute sets routes with iproute2's `ip route replace`.
type IPRoute struct{}

// Replace implements Routes.
func (IPRoute) Replace(cidr, gateway string) error {
	out, err := exec.Command("ip", "route", "replace", cidr, "via", gateway).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route replace %s via %s: %w: %s", cidr, gateway, err, out)
	}
	return nil
}

// Config says which node this is and where its CNI config goes.
type Config struct {
	Node       string
	ConfigPath string
	Routes     Routes
}

// Run reconciles on every Node change until ctx ends.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	nodes := factory.Core().V1().Nodes()
	handle := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			if err := Reconcile(cfg, n); err != nil {
				klog.ErrorS(err, "Reconcile failed", "node", n.Name)
			}
		}
	}
	_, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, n any) { handle(n) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// Reconcile writes this node's CNI config or routes another node's podCIDR.
func Reconcile(cfg Config, n *corev1.Node) error {
	if n.Spec.PodCIDR == "" {
		return nil // not allocated yet; the next update brings it
	}
	if n.Name == cfg.Node {
		return WriteConfig(cfg.ConfigPath, n.Spec.PodCIDR)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return cfg.Routes.Replace(n.Spec.PodCIDR, a.Address)
		}
	}
	return nil
}

// WriteConfig atomically writes a ptp + host-local + portmap conflist.
func WriteConfig(path, podCIDR string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "per-node-kind",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    1500,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"ranges":  []any{[]any{map[string]any{"subnet": podCIDR}}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	raw, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil && string(old) == string(raw) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	klog.InfoS("Writing CNI config", "path", path, "podCIDR", podCIDR)
	return os.Rename(tmp, path)
}
