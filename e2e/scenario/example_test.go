// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// natsExample is docs/examples/nats as kubectl apply -k renders it, by
// kind and name.
func natsExample(t *testing.T) map[string][]byte {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "docs", "examples", "nats"))
	assert.NilError(t, err)
	raw, err := m.AsYaml()
	assert.NilError(t, err)
	out := map[string][]byte{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var u runtime.RawExtension
		if err := dec.Decode(&u); err != nil {
			break
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		assert.NilError(t, utilyaml.Unmarshal(u.Raw, &meta))
		out[meta.Kind+"/"+meta.Metadata.Name] = u.Raw
	}
	return out
}

func decodeAs[T any](t *testing.T, raw []byte) *T {
	t.Helper()
	assert.Assert(t, raw != nil, "the example renders no such object")
	var v T
	assert.NilError(t, utilyaml.Unmarshal(raw, &v))
	return &v
}

// The NATS example is the guide's shape, and what NATS needs on a per-node
// copy: readiness that names the stream (a plain /healthz is 200 on a
// server that holds nothing), JetStream's store on the claim, one route per
// server, an fsync per write, and the per-node volume written by the admin.
func TestTheNATSExampleIsTheGuidesShape(t *testing.T) {
	objs := natsExample(t)

	d := decodeAs[appsv1.Deployment](t, objs["Deployment/nats"])
	assert.Equal(t, *d.Spec.Replicas, int32(3))
	assert.Equal(t, d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue(), 0, "a new pod cannot share a node with an old one: maxSurge 0")
	anti := d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	assert.Assert(t, len(anti) == 1 && anti[0].TopologyKey == corev1.LabelHostname, "required anti-affinity across nodes: %v", anti)
	c := d.Spec.Template.Spec.Containers[0]
	ready := c.ReadinessProbe.HTTPGet.Path
	assert.Assert(t, strings.Contains(ready, "stream="+natsStream) && strings.Contains(ready, "account=APP"),
		"readiness %q does not name the stream: a plain /healthz is 200 on a server that holds no replica", ready)
	var claimMount string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "nats" {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					claimMount = m.MountPath
				}
			}
		}
	}
	assert.Assert(t, claimMount != "", "no mount of the claim nats in %v", c.VolumeMounts)
	// The routes of a server that restarts on its node's copy do not wait
	// for every other server: the init container reads the copy to know.
	init := d.Spec.Template.Spec.InitContainers
	assert.Assert(t, len(init) == 1 && len(init[0].Command) == 6 && init[0].Command[1] == "routes" && init[0].Command[5] == claimMount,
		"the routes init container is not given the copy (%s): a restarted server would wait for every other one: %v", claimMount, init)

	var conf string
	for k, raw := range objs {
		if strings.HasPrefix(k, "ConfigMap/nats-config") {
			conf = decodeAs[corev1.ConfigMap](t, raw).Data["nats.conf"]
		}
	}
	store := regexp.MustCompile(`(?m)^\s*store_dir:\s*(\S+)`).FindStringSubmatch(conf)
	assert.Assert(t, store != nil && store[1] == claimMount, "JetStream's store_dir %v is not the claim's mount %s", store, claimMount)
	assert.Assert(t, regexp.MustCompile(`(?m)^\s*sync_interval:\s*always`).MatchString(conf), "no fsync per write (sync_interval: always)")
	assert.Assert(t, regexp.MustCompile(`(?m)^\s*include\s+"\.\./nats-routes/routes\.conf"`).MatchString(conf),
		"routes are not one per server, written at start (include of the init container's routes.conf)")
	assert.Assert(t, regexp.MustCompile(`(?m)^\s*server_name:\s*\$NODE_NAME`).MatchString(conf), "server_name is not the node's name")

	peers := decodeAs[corev1.Service](t, objs["Service/nats-cluster"])
	assert.Assert(t, peers.Spec.ClusterIP == corev1.ClusterIPNone && peers.Spec.PublishNotReadyAddresses,
		"the peers' Service must be headless and list servers before they are Ready")

	pdb := decodeAs[policyv1.PodDisruptionBudget](t, objs["PodDisruptionBudget/nats"])
	assert.Equal(t, pdb.Spec.MaxUnavailable.IntValue(), 1)

	pv := decodeAs[corev1.PersistentVolume](t, objs["PersistentVolume/nats"])
	assert.Equal(t, pv.Spec.CSI.Driver, "per-node.liken.sh")
	assert.Equal(t, pv.Spec.CSI.VolumeHandle, pv.Name, "volumeHandle must be the PV's own name")
	assert.DeepEqual(t, pv.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany})
	assert.Equal(t, pv.Spec.ClaimRef.Name, "nats")
}
