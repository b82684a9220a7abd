// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/yaml"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/fixtures/store/kv"
)

// Env is what the runner needs of the e2e environment.
type Env struct {
	Repo    string
	Cluster string
	// Kubeconfig is the cluster's kubeconfig file (for helm).
	Kubeconfig string
	R          *resources.Resources
	// Images maps image variables (store_image, probe_image) to names.
	Images map[string]string
	// Timings, when set, collects how long each kind of step took.
	Timings *Timings
	// Failures, when set, collects the step each failed scenario failed at.
	Failures *Failures
	// Figures, when set, collects what the scenarios' "note" steps measured.
	Figures *Figures
}

// Run is one scenario being run.
type Run struct {
	env     Env
	doc     Doc
	vars    map[string]string
	lists   map[string][]string
	records map[string][]kv.Record
	writers map[string]*writer
	watches map[string]*mountWatch
	// metrics are the driver metrics noted per node.
	metrics map[string]map[string]float64
	// marks are moments steps noted (a kubelet restarted) for later steps.
	marks map[string]time.Time
	// addresses are the addresses nodes had when a step stopped them.
	addresses map[string]string
	// store selects the store's pods when the scenario applied an example
	// (its Deployment's selector); the guide's store when empty.
	store string
	// gone notes when the gone records a step added began to go.
	gone goneRecords
	// exec runs a command in a node's container (docker exec when nil).
	exec func(ctx context.Context, node string, cmd ...string) (string, error)
	t    testing.TB
}

// RunDoc runs a document's steps in order in a fresh namespace, and cleans
// up (namespace, PersistentVolumes, node copies, cordons, stopped nodes)
// whether it passes or fails.
func (e Env) RunDoc(ctx context.Context, t *testing.T, d Doc) {
	ns := "sc-" + rand.String(5)
	r := &Run{env: e, doc: d, t: t, lists: map[string][]string{}, records: map[string][]kv.Record{}, writers: map[string]*writer{}, watches: map[string]*mountWatch{}, metrics: map[string]map[string]float64{}, marks: map[string]time.Time{}, addresses: map[string]string{},
		vars: map[string]string{"ns": ns, "pv": ns + "-store"}}
	for k, v := range e.Images {
		r.vars[k] = v
	}
	t.Cleanup(func() { r.cleanup() })
	if err := r.createNamespace(ctx); err != nil {
		t.Fatalf("%s: create namespace %s: %v", d.File, ns, err)
	}
	start := time.Now()
	for _, s := range d.Steps {
		stepStart := time.Now()
		t.Logf("%s: %s", s.Where(), s.Text)
		sctx, cancel := context.WithTimeout(ctx, s.Timeout)
		err := r.step(sctx, s)
		cancel()
		if err != nil {
			e.Failures.add(d.Name, s, err)
			t.Fatalf("\n%s: step failed after %s: %s\n[%s]\n%v", s.Where(), time.Since(stepStart).Round(100*time.Millisecond), s.Text, Verdict(err), err)
		}
		e.Timings.observe(s, time.Since(stepStart))
	}
	t.Logf("%s: %d steps passed in %s", d.Name, len(d.Steps), time.Since(start).Round(time.Second))
}

func (r *Run) step(ctx context.Context, s Step) error {
	switch s.Kind {
	case "apply":
		return r.apply(ctx, r.substituteObjects(s.Objects))
	case "apply refused":
		return r.applyRefused(ctx, r.substituteObjects(s.Objects))
	case "delete":
		return r.delete(ctx, r.substituteObjects(s.Objects))
	case "expect":
		return r.expect(ctx, s, r.substituteObjects(s.Objects)[0])
	}
	a := args{}
	for k, v := range s.Args {
		a[k] = r.substitute(v)
		a["raw:"+k] = v
	}
	return s.def.run(ctx, r, a)
}

// substitute replaces $variables in text.
func (r *Run) substitute(text string) string {
	return variable.ReplaceAllStringFunc(text, func(m string) string {
		if v, ok := r.vars[m[1:]]; ok {
			return v
		}
		return m
	})
}

func (r *Run) substituteObjects(objs []map[string]any) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: substituteValue(o, r.substitute).(map[string]any)}
		out = append(out, u)
	}
	return out
}

func substituteValue(v any, sub func(string) string) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = substituteValue(e, sub)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = substituteValue(e, sub)
		}
		return l
	case string:
		return sub(x)
	}
	return v
}

func (r *Run) namespaceFor(u *unstructured.Unstructured) {
	if info := kinds[u.GetKind()]; info.namespaced && u.GetNamespace() == "" {
		u.SetNamespace(r.vars["ns"])
	}
}

func (r *Run) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		r.namespaceFor(u)
		if u.GetKind() == "PersistentVolume" {
			r.trackPV(u.GetName())
		}
	}
	return harness.Apply(ctx, r.env.R, objs)
}

func (r *Run) delete(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		r.namespaceFor(u)
		u.SetGroupVersionKind(kinds[u.GetKind()].gvk)
		if err := r.env.R.Delete(ctx, u); err != nil {
			return fmt.Errorf("delete %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// trackPV remembers a PersistentVolume the scenario made, for cleanup.
func (r *Run) trackPV(name string) {
	for _, n := range r.lists["_pvs"] {
		if n == name {
			return
		}
	}
	r.lists["_pvs"] = append(r.lists["_pvs"], name)
}

// expect waits until the selected objects match, then (with "for") keeps
// checking that they still do.
func (r *Run) expect(ctx context.Context, s Step, want *unstructured.Unstructured) error {
	r.namespaceFor(want)
	start := time.Now()
	var last string
	err := harness.Until(ctx, "the cluster to match "+s.Where(), s.Expect.Within, func(ctx context.Context) (bool, string, error) {
		ok, report, err := r.matches(ctx, s.Expect, want)
		last = report
		return ok, "", err
	})
	if err != nil {
		// %w keeps Until's verdict: no match seen (a broken promise), or
		// the objects could not be read.
		return fmt.Errorf("waited %s; expected (%s):\n%s\nseen:\n%s\n(%w)", time.Since(start).Round(time.Second), quantifier(s.Expect), toYAML(want.Object), last, err)
	}
	if s.Expect.For == 0 {
		return nil
	}
	return holdsFor(ctx, s.Expect.For.String(), func() error {
		ok, report, err := r.matches(ctx, s.Expect, want)
		if err == nil && !ok {
			err = fmt.Errorf("%w: matched, then stopped matching within %s; expected:\n%s\nseen:\n%s", harness.ErrNotSeen, s.Expect.For, toYAML(want.Object), report)
		}
		return err
	})
}

func quantifier(e ExpectOptions) string {
	q := e.Quantifier
	if q == "" {
		q = "the named object"
	}
	if e.Count >= 0 {
		q += fmt.Sprintf(", count %d", e.Count)
	}
	return q
}

// matches selects the objects want describes and compares them. The report
// says, per object, what differs, with its YAML and events.
func (r *Run) matches(ctx context.Context, e ExpectOptions, want *unstructured.Unstructured) (bool, string, error) {
	got, err := r.selectObjects(ctx, want)
	if err != nil {
		return false, "", err
	}
	var report []string
	matched := 0
	for _, g := range got {
		if diff := Diff(want.Object, g.Object); diff != "" {
			report = append(report, fmt.Sprintf("%s %s: differs (-expected +seen):\n%s\n%s%s", g.GetKind(), g.GetName(), diff,
				indent(toYAML(trimmed(g.Object))), r.eventsReport(ctx, g)))
			continue
		}
		matched++
	}
	count := len(got)
	report = append([]string{fmt.Sprintf("%d selected, %d matching", count, matched)}, report...)
	text := strings.Join(report, "\n")
	if e.Count >= 0 && count != e.Count {
		return false, text, nil
	}
	switch e.Quantifier {
	case "any":
		return matched > 0, text, nil
	default: // "all", or the named object
		return count > 0 && matched == count || (e.Count == 0 && count == 0), text, nil
	}
}

func (r *Run) selectObjects(ctx context.Context, want *unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	info := kinds[want.GetKind()]
	if name := want.GetName(); name != "" {
		u := unstructured.Unstructured{}
		u.SetGroupVersionKind(info.gvk)
		if err := r.env.R.Get(ctx, name, want.GetNamespace(), &u); err != nil {
			return nil, nil //nolint:nilerr // absent: nothing selected
		}
		return []unstructured.Unstructured{u}, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(info.gvk.GroupVersion().WithKind(want.GetKind() + "List"))
	var sel []string
	for k, v := range want.GetLabels() {
		sel = append(sel, k+"="+v)
	}
	ns := ""
	if info.namespaced {
		ns = want.GetNamespace()
	}
	if err := r.listIn(ctx, ns, list, strings.Join(sel, ","), ""); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Diff is empty when got holds everything want says; otherwise it shows
// the expected fields against what was seen. Maps match by key; a list
// matches when each expected element matches some seen element.
func Diff(want, got any) string {
	if match(want, got) {
		return ""
	}
	return cmp.Diff(want, project(want, got))
}

func match(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !match(wv, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return false
		}
		for _, wv := range w {
			found := false
			for _, gv := range g {
				if match(wv, gv) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(want) == fmt.Sprint(got)
}

// project keeps of got only what want mentions, so a diff shows just that.
func project(want, got any) any {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := map[string]any{}
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				out[k] = project(wv, gv)
			}
		}
		return out
	case []any:
		return got
	}
	if got == nil {
		return nil
	}
	if fmt.Sprint(want) == fmt.Sprint(got) {
		return want
	}
	return got
}

func trimmed(obj map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		out[k] = v
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := map[string]any{}
		for k, v := range md {
			if k != "managedFields" {
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// eventsReport lists the events about an object.
func (r *Run) eventsReport(ctx context.Context, u unstructured.Unstructured) string {
	events, err := r.events(ctx, u.GetNamespace(), u.GetName())
	if err != nil || len(events) == 0 {
		return "  events: none\n"
	}
	var b strings.Builder
	b.WriteString("  events:\n")
	for _, e := range events {
		fmt.Fprintf(&b, "    %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	return b.String()
}

func (r *Run) events(ctx context.Context, ns, name string) ([]corev1.Event, error) {
	var list corev1.EventList
	// An empty namespace lists every namespace: events about a cluster-scoped
	// object (a PersistentVolume) are recorded in "default".
	if err := r.listIn(ctx, ns, &list, "", "involvedObject.name="+name); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// listIn lists objects in ns ("" is every namespace) by label and field
// selectors. It goes through the controller-runtime client because
// resources.Resources.WithNamespace changes the namespace of the one
// shared client, which the writer's goroutine and the steps would race on.
func (r *Run) listIn(ctx context.Context, ns string, list crclient.ObjectList, labelSel, fieldSel string) error {
	opts := []crclient.ListOption{crclient.InNamespace(ns)}
	if labelSel != "" {
		sel, err := labels.Parse(labelSel)
		if err != nil {
			return err
		}
		opts = append(opts, crclient.MatchingLabelsSelector{Selector: sel})
	}
	if fieldSel != "" {
		sel, err := fields.ParseSelector(fieldSel)
		if err != nil {
			return err
		}
		opts = append(opts, crclient.MatchingFieldsSelector{Selector: sel})
	}
	return r.env.R.GetControllerRuntimeClient().List(ctx, list, opts...)
}
