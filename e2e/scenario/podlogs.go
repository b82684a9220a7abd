// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// tailLines is how much of each container's log a failed scenario prints
// into the test log; the whole log goes to a file.
const tailLines = 25

// exportPodLogs keeps what the scenario's pods said before cleanup deletes
// their namespace: every container's log (and the log of the container
// before it, if it restarted) goes to _out/e2e-logs/scenarios/<doc>-<ns>/,
// and the last lines of each into the test log, so that a failure seen
// only in CI can still be read.
func (r *Run) exportPodLogs(ctx context.Context) {
	cs, err := r.clientset()
	if err != nil {
		r.t.Logf("pod logs: %v", err)
		return
	}
	pods, err := cs.CoreV1().Pods(r.ns()).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Logf("pod logs: list pods in %s: %v", r.ns(), err)
		return
	}
	dir := filepath.Join(r.env.Repo, "_out", "e2e-logs", "scenarios", r.doc.Name+"-"+r.ns())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Logf("pod logs: %v", err)
		return
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount > 0 {
				r.exportLog(ctx, cs, dir, p, c.Name, true)
			}
			r.exportLog(ctx, cs, dir, p, c.Name, false)
		}
	}
	r.t.Logf("pod logs of %s (%d pods) are in %s", r.ns(), len(pods.Items), dir)
}

func (r *Run) exportLog(ctx context.Context, cs kubernetes.Interface, dir string, p corev1.Pod, container string, previous bool) {
	name := p.Name + "_" + container
	if previous {
		name += "_previous"
	}
	opts := &corev1.PodLogOptions{Container: container, Previous: previous, Timestamps: true}
	raw, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).DoRaw(ctx)
	if err != nil {
		r.t.Logf("pod logs: %s on %s: %v", name, p.Spec.NodeName, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".log"), raw, 0o644); err != nil {
		r.t.Logf("pod logs: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	r.t.Logf("last %d lines of %s on %s:\n%s", len(lines), name, p.Spec.NodeName, indent(strings.Join(lines, "\n")))
}
