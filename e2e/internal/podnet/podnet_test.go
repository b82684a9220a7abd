// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package podnet

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type recordedRoutes map[string]string

func (r recordedRoutes) Replace(cidr, gw string) error { r[cidr] = gw; return nil }

func node(name, cidr, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDR: cidr},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

func TestReconcile(t *testing.T) {
	routes := recordedRoutes{}
	cfg := Config{Node: "kind-worker", ConfigPath: filepath.Join(t.TempDir(), "net.d", "10.conflist"), Routes: routes}

	assert.NilError(t, Reconcile(cfg, node("kind-worker", "10.244.1.0/24", "172.18.0.3")))
	assert.NilError(t, Reconcile(cfg, node("kind-worker2", "10.244.2.0/24", "172.18.0.4")))
	assert.NilError(t, Reconcile(cfg, node("kind-worker3", "", "172.18.0.5")))

	assert.DeepEqual(t, routes, recordedRoutes{"10.244.2.0/24": "172.18.0.4"})
	raw, err := os.ReadFile(cfg.ConfigPath)
	assert.NilError(t, err)
	var conf struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Ranges [][]struct{ Subnet string } `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	assert.NilError(t, json.Unmarshal(raw, &conf))
	assert.Equal(t, conf.Plugins[0].Type, "ptp")
	assert.Equal(t, conf.Plugins[0].IPAM.Ranges[0][0].Subnet, "10.244.1.0/24")
}
