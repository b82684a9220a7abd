// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// controlPlaneLabel marks kind's control-plane node.
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// dnsOnControlPlane runs the cluster's DNS (CoreDNS) on the control-plane
// node. The scenarios stop, freeze, drain and delete workers; a DNS whose
// replicas happened to sit on the worker a scenario stopped left the
// store's new pods unable to resolve their peers for minutes (seen: scenario
// 32, "lookup store-peers on 10.96.0.10:53: connection refused"), a fault of
// the test cluster and not of the driver. kubeadm's CoreDNS already
// tolerates the control plane's taint. The API server's outage (34) stops
// only the API server, not the node.
func dnsOnControlPlane(ctx context.Context, cs kubernetes.Interface, cluster string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{%q:""}}}}}`, controlPlaneLabel)
	if _, err := cs.AppsV1().Deployments("kube-system").Patch(ctx, "coredns", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cluster %s: moving CoreDNS to the control plane: %w", cluster, err)
	}
	return Until(ctx, "cluster "+cluster+"'s CoreDNS to run on the control plane only", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return false, "", Unobserved(err)
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		done := d.Generation == s.ObservedGeneration && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
		return done, fmt.Sprintf("generation %d observed %d, %d updated, %d available, %d in all, of %d", d.Generation, s.ObservedGeneration,
			s.UpdatedReplicas, s.AvailableReplicas, s.Replicas, want), nil
	})
}
