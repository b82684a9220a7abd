// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e && e2ebench

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// benchFlow is a FlowSchema that catches every request of the driver's
// service account, so that the API server's own APF metrics count them.
const benchFlow = "per-node-bench"

// TestAPILoad measures, for `make bench-api`, the driver's requests to the
// API server in steady state: 50 per-node PVs, each with a copy on every
// worker, then API_IDLE (default 10m) of nothing happening. The figure comes
// from the API server (apiserver_flowcontrol_dispatched_requests_total of a
// FlowSchema that matches only the driver's account; a watch counts once,
// when it starts). Target: at most 1 request per minute per node.
func TestAPILoad(t *testing.T) {
	idle := 10 * time.Minute
	if v := os.Getenv("API_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		assert.NilError(t, err)
		idle = d
	}
	const volumes = 50
	f := features.New("api load").Assess("idle requests", func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
		r := client(t, c)
		cs, err := kubernetes.NewForConfig(r.GetConfig())
		assert.NilError(t, err)
		fs := &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: benchFlow},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
				MatchingPrecedence:         500,
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
						ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "per-node-system", Name: "per-node-node"}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"},
						Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}},
				}},
			},
		}
		_, err = cs.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
		assert.NilError(t, err)
		t.Cleanup(func() {
			_ = cs.FlowcontrolV1().FlowSchemas().Delete(context.Background(), benchFlow, metav1.DeleteOptions{})
		})

		w := workers(t, r)
		ns := newNamespace(t, r)
		var volumesSrc []corev1.Volume
		for i := range volumes {
			claim := fmt.Sprintf("v%02d", i)
			createPerNodeVolume(t, r, ns, ns+"-"+claim, claim)
			volumesSrc = append(volumesSrc, corev1.Volume{Name: claim, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		}
		for _, v := range volumesSrc {
			waitBound(t, r, ns, v.Name)
		}
		var pods []*corev1.Pod
		for i, node := range w {
			p := probePod(ns, fmt.Sprintf("holder-%d", i), node)
			p.Spec.Volumes = volumesSrc
			p.Spec.Containers[0].VolumeMounts = nil
			for _, v := range volumesSrc {
				p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
					corev1.VolumeMount{Name: v.Name, MountPath: "/data/" + v.Name})
			}
			assert.NilError(t, r.Create(ctx, p))
			pods = append(pods, p)
		}
		for _, p := range pods {
			waitRunning(t, r, p, 5*time.Minute)
		}
		// The publish burst's events and retries drain first: the count
		// must hold still for 20 s.
		var before float64
		last := driverRequests(t, cs)
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			before = driverRequests(t, cs)
			if before != last {
				last = before
				return poll.Continue("the driver's request count still moves: %.0f", before)
			}
			return poll.Success()
		}, poll.WithTimeout(5*time.Minute), poll.WithDelay(20*time.Second))
		start := time.Now()
		time.Sleep(idle) // the measurement window: nothing happens on purpose
		after := driverRequests(t, cs)
		minutes := time.Since(start).Minutes()
		n := after - before
		fmt.Printf("api-load: %.0f requests from %d drivers in %.1f idle minutes with %d PVs x %d nodes = %.2f requests/min/node (target <= 1)\n",
			n, len(w), minutes, volumes, len(w), n/minutes/float64(len(w)))
		return ctx
	}).Feature()
	testenv.Test(t, f)
}

// driverRequests is the number of requests the API server has dispatched
// for the driver's account so far.
func driverRequests(t *testing.T, cs kubernetes.Interface) float64 {
	t.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	assert.NilError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	assert.NilError(t, err)
	fam, ok := families["apiserver_flowcontrol_dispatched_requests_total"]
	assert.Assert(t, ok, "the API server exports no apiserver_flowcontrol_dispatched_requests_total")
	total := 0.0
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "flow_schema" && l.GetValue() == benchFlow {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
