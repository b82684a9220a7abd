// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/klient/k8s"

	"liken.sh/per-node/e2e/internal/harness"
)

// copyLabelPrefix starts the label a node's driver puts on its Node for
// each volume the node holds a copy of.
const copyLabelPrefix = "copy.per-node.liken.sh/"

// copyLabel is the label for pv, as docs/operating.md gives it: the name,
// or for a name longer than 63 characters its first 50, a dash and the
// first 12 hex digits of its SHA-256. Written here from the document, not
// taken from the driver, so that the two are checked against each other.
func copyLabel(pv string) string {
	if len(pv) <= 63 {
		return copyLabelPrefix + pv
	}
	sum := sha256.Sum256([]byte(pv))
	return copyLabelPrefix + pv[:50] + "-" + hex.EncodeToString(sum[:])[:12]
}

func (r *Run) node(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := r.env.R.Get(ctx, name, "", &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// stepNodeLabelled waits until a node carries (want) or lacks the copy
// label of a PV.
func stepNodeLabelled(want bool) func(context.Context, *Run, args) error {
	return func(ctx context.Context, r *Run, a args) error {
		key := copyLabel(a["name"])
		what := fmt.Sprintf("node %s to carry the label %s", a["node"], key)
		if !want {
			what = fmt.Sprintf("node %s not to carry the label %s", a["node"], key)
		}
		return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
			n, err := r.node(ctx, a["node"])
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			_, has := n.Labels[key]
			return has == want, fmt.Sprintf("its copy labels: %v", copyLabelsOf(n)), nil
		})
	}
}

func copyLabelsOf(n *corev1.Node) []string {
	var out []string
	for k := range n.Labels {
		if strings.HasPrefix(k, copyLabelPrefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// stepLabelsAreTheCopies waits until the workers that carry a PV's copy
// label are exactly those whose disk holds a copy of it.
func stepLabelsAreTheCopies(ctx context.Context, r *Run, a args) error {
	key := copyLabel(a["name"])
	what := fmt.Sprintf("the workers labelled %s to be those that hold a copy of %s", key, a["name"])
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		workers, err := r.workers(ctx)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		var labelled, holding []string
		for _, w := range workers {
			if _, ok := w.Labels[key]; ok {
				labelled = append(labelled, w.Name)
			}
			out, err := r.onNode(ctx, w.Name, "sh", "-c", fmt.Sprintf("test -d %s/volumes/%s && echo yes || true", copiesRoot, a["name"]))
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			if strings.TrimSpace(out) == "yes" {
				holding = append(holding, w.Name)
			}
		}
		return len(holding) > 0 && slices.Equal(labelled, holding),
			fmt.Sprintf("labelled %v, holding a copy %v", labelled, holding), nil
	})
}

// stepRemoveCopyLabel removes a PV's copy label from a node by hand, as an
// admin might.
func stepRemoveCopyLabel(ctx context.Context, r *Run, a args) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a["node"]}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, copyLabel(a["name"]))
	return r.env.R.Patch(ctx, n, k8s.Patch{PatchType: types.MergePatchType, Data: []byte(patch)})
}

// preferCopies is the guide's optional block (README.md): a preferred node
// affinity on the nodes that hold a copy of pv.
func preferCopies(pv string) map[string]any {
	return map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
		map[string]any{"weight": float64(100), "preference": map[string]any{"matchExpressions": []any{
			map[string]any{"key": copyLabel(pv), "operator": "Exists"}}}}}}}
}

// stepPreferCopies adds the guide's optional block to a deployment. The pod
// template changes, so the deployment rolls out.
func stepPreferCopies(ctx context.Context, r *Run, a args) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"spec": map[string]any{"affinity": preferCopies(a["name"])}}}})
	if err != nil {
		return err
	}
	return r.patchDeployment(ctx, a["deployment"], string(patch))
}

// asDriverPatchNode sends a merge patch to a Node as the driver on node.
func (r *Run) asDriverPatchNode(ctx context.Context, node, target, patch string) (*corev1.Node, error) {
	c, err := r.driverClient(node)
	if err != nil {
		return nil, err
	}
	return c.CoreV1().Nodes().Patch(ctx, target, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

// asDriverNodeRefused sends patch to target as the driver on node and
// requires the API server to refuse it, leaving target's labels, taints
// and annotations as they were.
func (r *Run) asDriverNodeRefused(ctx context.Context, node, target, what, patch string) error {
	before, err := r.node(ctx, target)
	if err != nil {
		return err
	}
	_, err = r.asDriverPatchNode(ctx, node, target, patch)
	if err := r.refusedByPolicy(err, node, what, "Node "+target, patch); err != nil {
		r.undoNode(ctx, before)
		return err
	}
	after, err := r.node(ctx, target)
	if err != nil {
		return err
	}
	if !maps.Equal(before.Labels, after.Labels) || !maps.Equal(before.Annotations, after.Annotations) ||
		!slices.EqualFunc(before.Spec.Taints, after.Spec.Taints, func(x, y corev1.Taint) bool { return x.MatchTaint(&y) }) {
		r.undoNode(ctx, before)
		return fmt.Errorf("the refused change still changed Node %s: labels %v → %v, taints %v → %v",
			target, before.Labels, after.Labels, before.Spec.Taints, after.Spec.Taints)
	}
	return nil
}

// undoNode puts back, as an administrator, the labels, annotations and
// taints a change that should have been refused changed on a Node: a
// broken policy (make mutants on a kept cluster) must leave no label or
// taint that the next run would see, or that would keep pods off it.
func (r *Run) undoNode(ctx context.Context, before *corev1.Node) {
	now, err := r.node(ctx, before.Name)
	if err == nil {
		now.Labels, now.Annotations, now.Spec.Taints = before.Labels, before.Annotations, before.Spec.Taints
		err = r.env.R.Update(ctx, now)
	}
	if err != nil {
		r.t.Logf("undoing the change of Node %s: %v", before.Name, err)
	}
}

func stepDriverLabelsOthersNode(ctx context.Context, r *Run, a args) error {
	return r.asDriverNodeRefused(ctx, a["node"], a["other"], "label it as holding a copy of "+a["name"],
		fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, copyLabel(a["name"])))
}

func stepDriverLabelsOwnNodeWith(ctx context.Context, r *Run, a args) error {
	k, v, _ := strings.Cut(a["label"], "=")
	return r.asDriverNodeRefused(ctx, a["node"], a["node"], "set the label "+a["label"],
		fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, k, v))
}

func stepDriverAnnotatesOwnNode(ctx context.Context, r *Run, a args) error {
	k, v, _ := strings.Cut(a["label"], "=")
	return r.asDriverNodeRefused(ctx, a["node"], a["node"], "set the annotation "+a["label"],
		fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v))
}

func stepDriverTaintsOwnNode(ctx context.Context, r *Run, a args) error {
	return r.asDriverNodeRefused(ctx, a["node"], a["node"], "taint it",
		`{"spec":{"taints":[{"key":"per-node.liken.sh/thief","effect":"NoSchedule"}]}}`)
}

// stepDriverLabelsOwnCopy: the driver on a node may put a copy label on its
// own Node. The label may not stay (the node's driver drops a label for a
// copy it does not hold): the API server's answer is what is checked.
func stepDriverLabelsOwnCopy(ctx context.Context, r *Run, a args) error {
	key := copyLabel(a["name"])
	got, err := r.asDriverPatchNode(ctx, a["node"], a["node"], fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, key))
	if err != nil {
		return fmt.Errorf("the driver's account on %s may label its own Node %s: %w", a["node"], key, err)
	}
	if _, ok := got.Labels[key]; !ok {
		return fmt.Errorf("patch allowed but Node %s came back without %s: %v", a["node"], key, copyLabelsOf(got))
	}
	return nil
}
