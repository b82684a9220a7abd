// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/internal/harness"
)

// TestClusterServesAStore checks what a replicated store needs of the
// cluster: every node Ready, CoreDNS Ready, pod-to-pod traffic across nodes,
// and per-pod DNS names under a headless Service.
func TestClusterServesAStore(t *testing.T) {
	f := features.New("cluster").Assess("nodes, DNS and pod network", func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
		r := client(t, c)
		var nodes corev1.NodeList
		assert.NilError(t, r.List(ctx, &nodes))
		assert.Assert(t, len(nodes.Items) >= 5, "1 control plane + 4 workers, have %d nodes", len(nodes.Items))
		for i := range nodes.Items {
			assert.Assert(t, harness.NodeReady(&nodes.Items[i]), "node %s is not Ready", nodes.Items[i].Name)
		}
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			var d appsv1.Deployment
			if err := r.Get(ctx, "coredns", "kube-system", &d); err != nil {
				return poll.Continue("get coredns: %v", err)
			}
			if d.Status.ReadyReplicas > 0 && d.Status.ReadyReplicas == d.Status.Replicas {
				return poll.Success()
			}
			return poll.Continue("coredns ready %d of %d", d.Status.ReadyReplicas, d.Status.Replicas)
		}, poll.WithTimeout(2*time.Minute), poll.WithDelay(time.Second))

		ns := newNamespace(t, r)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peers"},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "peer"},
				Ports:                    []corev1.ServicePort{{Name: "http", Port: 8080}},
				PublishNotReadyAddresses: true,
			},
		}
		assert.NilError(t, r.Create(ctx, svc))
		w := workers(t, r)
		var pods []*corev1.Pod
		for i, node := range w[:2] {
			p := peerPod(ns, fmt.Sprintf("peer-%d", i), node)
			assert.NilError(t, r.Create(ctx, p))
			pods = append(pods, p)
		}
		for _, p := range pods {
			waitRunning(t, r, p, 2*time.Minute)
		}
		from, to := pods[0], pods[1]
		byIP := exec(t, r, from, "get", "http://"+to.Status.PodIP+":8080/hostname")
		assert.Equal(t, byIP, "peer-1", "pod-to-pod across nodes by IP")
		name := fmt.Sprintf("peer-1.peers.%s.svc.cluster.local", ns)
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			got, err := tryExec(r, from, "get", "http://"+name+":8080/hostname")
			if err != nil {
				return poll.Continue("GET via %s: %v", name, err)
			}
			if got != "peer-1" {
				return poll.Continue("GET via %s answered %q", name, got)
			}
			return poll.Success()
		}, poll.WithTimeout(time.Minute), poll.WithDelay(time.Second))
		return ctx
	}).Feature()
	testenv.Test(t, f)
}

// peerPod serves HTTP on 8080 under the headless Service "peers".
func peerPod(ns, name, node string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "peer"}},
		Spec: corev1.PodSpec{
			Hostname: name, Subdomain: "peers",
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, Args: []string{"serve", ":8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intstr.FromInt32(8080),
				}}},
			}},
		},
	}
}
