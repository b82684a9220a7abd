// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package holders

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestPodName(t *testing.T) {
	const target = "/var/lib/kubelet/pods/0b6f1c2e-8d3a-4a59-9d2e-5a1f2b3c4d5e/volumes/kubernetes.io~csi/example-store/mount"
	for _, tc := range []struct {
		name string
		ctx  map[string]string
		want string
	}{
		{"pod info", map[string]string{
			"csi.storage.k8s.io/pod.namespace": "example",
			"csi.storage.k8s.io/pod.name":      "store-7d9c-x2x",
		}, "example/store-7d9c-x2x"},
		{"no pod info", nil, "pod uid 0b6f1c2e-8d3a-4a59-9d2e-5a1f2b3c4d5e"},
		{"namespace only", map[string]string{"csi.storage.k8s.io/pod.namespace": "example"},
			"pod uid 0b6f1c2e-8d3a-4a59-9d2e-5a1f2b3c4d5e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, PodName(tc.ctx, target), tc.want)
		})
	}
	assert.Equal(t, PodName(nil, "/tmp/x"), "the pod using /tmp/x")
}

func TestIndex(t *testing.T) {
	i := NewIndex()
	_, ok := i.Get("a")
	assert.Assert(t, !ok)
	i.Set("a", Holder{Target: "/t", Pod: "ns/p"})
	h, ok := i.Get("a")
	assert.Assert(t, ok)
	assert.Equal(t, h, Holder{Target: "/t", Pod: "ns/p"})
	assert.Equal(t, i.Len(), 1)
	i.Forget("a")
	assert.Equal(t, i.Len(), 0)
}
