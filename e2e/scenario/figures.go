// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Figures are what "note … as figure …" steps measured, for a bench to
// print: a scenario passes or fails on its promises, never on a figure.
type Figures struct {
	mu   sync.Mutex
	list []Figure
}

// Figure is one measurement: the document that noted it, its name there,
// and its value as the step printed it.
type Figure struct{ Doc, Name, Value string }

func (f *Figures) add(doc, name, value string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, Figure{doc, name, value})
}

// Values are the values noted under a name by every run of a document,
// in the order noted.
func (f *Figures) Values(doc, name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, g := range f.list {
		if g.Doc == doc && g.Name == name {
			out = append(out, g.Value)
		}
	}
	return out
}

func (r *Run) figure(name, value string) {
	r.t.Logf("figure %s: %s", name, value)
	r.env.Figures.add(r.doc.Name, name, value)
}

// restartMark is the moment "restart deployment" patched the Deployment.
func restartMark(name string) string { return "restart of deployment " + name }

// stepRolloutTime waits until the Deployment has n ready pods of its
// template and nothing else, and notes the time since it was restarted.
func stepRolloutTime(ctx context.Context, r *Run, a args) error {
	since, ok := r.marks[restartMark(a["name"])]
	if !ok {
		return fmt.Errorf("deployment %s was not restarted in this scenario", a["name"])
	}
	if err := stepDeploymentReady(ctx, r, a); err != nil {
		return err
	}
	r.figure(a["figure"], time.Since(since).Round(time.Second).String())
	return nil
}

// stepFoundNothing notes which store pods opened an empty copy (pods that
// started on a node that never held the volume) as figure, and how each
// started (noteStart).
func stepFoundNothing(ctx context.Context, r *Run, a args) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	var empty []string
	for _, p := range pods {
		found, err := r.noteStart(ctx, &p, a["figure"])
		if err != nil {
			return err
		}
		if !found {
			empty = append(empty, p.Name+" on "+p.Spec.NodeName)
		}
	}
	value := strconv.Itoa(len(empty)) + " of " + strconv.Itoa(len(pods))
	if len(empty) > 0 {
		value += " (" + strings.Join(empty, ", ") + ")"
	}
	r.figure(a["figure"], value)
	return nil
}

// stepNoteStart notes how one store pod started (noteStart).
func stepNoteStart(ctx context.Context, r *Run, a args) error {
	var p corev1.Pod
	if err := r.env.R.Get(ctx, a["pod"], r.ns(), &p); err != nil {
		return err
	}
	_, err := r.noteStart(ctx, &p, a["figure"])
	return err
}

// noteStart notes how long a store pod took from its container's start to
// its copy turning ready (figure-ready-empty when its copy was empty at
// start, figure-ready-copy when not), and how many records its peers
// streamed to it (figure-received-…). It says whether the pod found
// records on disk.
func (r *Run) noteStart(ctx context.Context, p *corev1.Pod, figure string) (bool, error) {
	st, err := r.answeringStatus(ctx, p.Name, func(st storeStatus) bool { return st.ReadyAt != nil }, "be ready")
	if err != nil {
		return false, err
	}
	took := "unknown"
	if started := containerStarted(p); !started.IsZero() {
		took = st.ReadyAt.Sub(started).Round(100 * time.Millisecond).String()
	}
	found := st.RecordsOnDiskAtStart > 0
	kind := "-empty"
	if found {
		kind = "-copy"
	}
	r.figure(figure+"-ready"+kind, took)
	r.figure(figure+"-received"+kind, strconv.FormatInt(st.Received, 10))
	return found, nil
}

// containerStarted is when a pod's running container started (zero if none
// runs).
func containerStarted(p *corev1.Pod) time.Time {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

// stepFill writes n MiB through a store pod in records of 64 KiB: a data
// set whose size, not its records, is what a step after it measures.
func stepFill(ctx context.Context, r *Run, a args) error {
	if err := stepPickStorePod(ctx, r, args{"as": "_writer"}); err != nil {
		return err
	}
	pod := r.vars["_writer"]
	start := time.Now()
	out, err := r.execStore(ctx, pod, "fill", r.writePrefix("fill"), a["n"])
	if err != nil {
		return fmt.Errorf("fill %s MiB through %s: %w", a["n"], pod, err)
	}
	r.t.Logf("%s: %s in %s", pod, strings.TrimSpace(out), time.Since(start).Round(time.Second))
	return nil
}
