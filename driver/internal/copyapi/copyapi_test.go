// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package copyapi

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzNew: for every PersistentVolume name and node name the API server
// accepts (DNS subdomains), a Copy's generated name (its prefix and the
// five characters the API server adds) is a valid object name, and its
// labels are valid label values that select it.
func FuzzNew(f *testing.F) {
	f.Add("data", "kind-worker")
	f.Add(strings.Repeat("a", 49)+".b", "ip-10-0-0-1.ec2.internal")
	f.Add(strings.Repeat("c", 61)+"."+strings.Repeat("d", 63)+"."+strings.Repeat("e", 63)+"."+strings.Repeat("f", 63), strings.Repeat("x", 253))
	f.Fuzz(func(t *testing.T, volume, node string) {
		if len(validation.IsDNS1123Subdomain(volume)) > 0 || len(validation.IsDNS1123Subdomain(node)) > 0 {
			return
		}
		c := New(volume, "0b5c3a1e-6f0e-4c1b-9a53-1d2f3e4a5b6c", node, "n-uid")
		name := c.GenerateName + "x7k2p"
		assert.Assert(t, len(validation.IsDNS1123Subdomain(name)) == 0, "name %q: %v", name, validation.IsDNS1123Subdomain(name))
		for k, v := range c.Labels {
			assert.Assert(t, len(validation.IsValidLabelValue(v)) == 0, "label %s=%q: %v", k, v, validation.IsValidLabelValue(v))
		}
		assert.Equal(t, VolumeSelector(volume), VolumeLabel+"="+c.Labels[VolumeLabel])
		assert.Equal(t, NodeSelector(node), NodeLabel+"="+c.Labels[NodeLabel])
		assert.Assert(t, c.Of(volume, c.Spec.VolumeUID))
	})
}

func TestDeepCopy(t *testing.T) {
	c := New("data", "u", "n", "n-uid")
	c.Finalizers = []string{"x"}
	d := c.DeepCopy()
	d.Labels[NodeLabel] = "changed"
	d.Finalizers[0] = "y"
	assert.Equal(t, c.Labels[NodeLabel], "n")
	assert.Equal(t, c.Finalizers[0], "x")
	l := &CopyList{Items: []Copy{*c}}
	dl := l.DeepCopyObject().(*CopyList)
	dl.Items[0].Spec.Node = "m"
	assert.Equal(t, l.Items[0].Spec.Node, "n")
}
