// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient/k8s"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps about the records nodes keep of PersistentVolumes (their Copies,
// copies.go), the driver's service account, and the kubelet.

// driverAccount is the driver's service account, as the API server names it.
const driverAccount = "system:serviceaccount:per-node-system:per-node-node"

// nodeNameKey is where a bound service account token carries its node.
const nodeNameKey = "authentication.kubernetes.io/node-name"

func (r *Run) pv(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	var pv corev1.PersistentVolume
	err := r.env.R.Get(ctx, name, "", &pv)
	return &pv, err
}

func stepPVRecordsEveryStorePodsNode(ctx context.Context, r *Run, a args) error {
	return harness.Until(ctx, "PersistentVolume "+a["name"]+" to record the node of every store pod", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pods, err := r.storePods(ctx)
			if err != nil {
				return false, "", err
			}
			pv, nodes, err := r.recorded(ctx, a["name"])
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			var missing []string
			for _, p := range pods {
				if p.Spec.NodeName == "" || !slices.Contains(nodes, p.Spec.NodeName) {
					missing = append(missing, fmt.Sprintf("%s (pod %s)", p.Spec.NodeName, p.Name))
				}
			}
			fin := slices.Contains(pv.Finalizers, copiesFinalizer)
			ok := len(pods) > 0 && len(missing) == 0 && fin
			return ok, fmt.Sprintf("%d store pods; not recorded: %v; Copies on %v; finalizer %s: %v", len(pods), missing, nodes, copiesFinalizer, fin), nil
		})
}

func stepPVNoRecordFor(ctx context.Context, r *Run, a args) error {
	return holdsFor(ctx, a["duration"], func() error {
		pv, err := r.pv(ctx, a["name"])
		if err != nil {
			return err
		}
		cs, err := r.copiesOf(ctx, a["name"])
		if err != nil {
			return err
		}
		if len(cs) > 0 || slices.Contains(pv.Finalizers, copiesFinalizer) {
			return fmt.Errorf("PersistentVolume %s carries per-node records, expected none for %s: Copies %v, finalizers %v",
				a["name"], a["duration"], cs, pv.Finalizers)
		}
		return nil
	})
}

func stepNoWorkerHoldsACopy(ctx context.Context, r *Run, _ args) error {
	nodes, err := r.workers(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := stepCopyAbsent(ctx, r, args{"node": n.Name}); err != nil {
			return err
		}
	}
	return nil
}

func stepNoOtherNodeHoldsACopy(ctx context.Context, r *Run, a args) error {
	nodes, err := r.nodeList(a)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n == a["node"] {
			continue
		}
		if err := stepCopyAbsent(ctx, r, args{"node": n}); err != nil {
			return err
		}
	}
	return nil
}

// stepRememberNodes names the list of the nodes the store pods run on.
func stepRememberNodes(ctx context.Context, r *Run, a args) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	var nodes []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no store pod is scheduled: %s", r.podsReport(ctx))
	}
	slices.Sort(nodes)
	r.lists[a["as"]] = nodes
	r.vars[a["as"]] = strings.Join(nodes, ",")
	return nil
}

func (r *Run) nodeList(a args) ([]string, error) {
	name := strings.TrimPrefix(a["raw:nodes"], "$")
	if l, ok := r.lists[name]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("%s is not a list of nodes (see `remember the nodes of the store pods`)", a["raw:nodes"])
}

func stepPVEventFromEach(ctx context.Context, r *Run, a args) error {
	nodes, err := r.nodeList(a)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := stepPVEventFrom(ctx, r, args{"name": a["name"], "reason": a["reason"], "node": n}); err != nil {
			return err
		}
	}
	return nil
}

// stepPVRecordsOnly waits until the PV's per-node records are exactly the node's.
func stepPVRecordsOnly(ctx context.Context, r *Run, a args) error {
	want := []string{a["node"]}
	return harness.Until(ctx, "PersistentVolume "+a["name"]+" to record "+a["node"]+" and no other node", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pv, nodes, err := r.recorded(ctx, a["name"])
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			fin := slices.Contains(pv.Finalizers, copiesFinalizer)
			return slices.Equal(nodes, want) && fin, fmt.Sprintf("Copies on %v; finalizer %s: %v", nodes, copiesFinalizer, fin), nil
		})
}

// stepPVRecordsExactly waits until the nodes that hold a Copy of the PV are
// exactly those of a list, and the PV carries the finalizer.
func stepPVRecordsExactly(ctx context.Context, r *Run, a args) error {
	want, err := r.nodeList(a)
	if err != nil {
		return err
	}
	return r.untilRecorded(ctx, a["name"], fmt.Sprintf("exactly %v", want), func(nodes []string) bool { return slices.Equal(nodes, want) })
}

// stepPVRecords waits until the PV records node (among others).
func stepPVRecords(ctx context.Context, r *Run, a args) error {
	return r.untilRecorded(ctx, a["name"], a["node"], func(nodes []string) bool { return slices.Contains(nodes, a["node"]) })
}

// untilRecorded waits until the PV carries the finalizer and the nodes that
// hold a Copy of it satisfy ok.
func (r *Run) untilRecorded(ctx context.Context, name, what string, ok func([]string) bool) error {
	return harness.Until(ctx, "PersistentVolume "+name+" to record "+what, deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pv, nodes, err := r.recorded(ctx, name)
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			fin := slices.Contains(pv.Finalizers, copiesFinalizer)
			return fin && ok(nodes), fmt.Sprintf("Copies on %v; finalizer %s: %v", nodes, copiesFinalizer, fin), nil
		})
}

// stepRecordGoes waits until a live PV no longer records node, while the
// records of the other nodes stay.
func stepRecordGoes(ctx context.Context, r *Run, a args) error {
	gone := a["node"]
	var before []string
	return harness.Until(ctx, "the record of "+a["node"]+" to go from the live PersistentVolume "+a["name"], deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pv, nodes, err := r.recorded(ctx, a["name"])
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			if pv.DeletionTimestamp != nil {
				return false, "", fmt.Errorf("PersistentVolume %s is being deleted: this step is about a live one", a["name"])
			}
			others := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == gone })
			if before == nil {
				before = others
			}
			if !slices.Equal(others, before) {
				return false, "", fmt.Errorf("the records of other nodes changed: had %v, now %v", before, others)
			}
			return !slices.Contains(nodes, gone), fmt.Sprintf("Copies on %v", nodes), nil
		})
}

// goneNodeName is the name of the i-th node of stepAddGoneRecords: no
// Node of the cluster has it.
func goneNodeName(i int) string { return fmt.Sprintf("gone-for-good-%05d", i) }

// stepAddGoneRecords does, as an administrator, what a restore or a
// long-lived cluster leaves: the Copies of n nodes that are gone.
func stepAddGoneRecords(ctx context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	if err != nil || n < 1 {
		return fmt.Errorf("not a number of records: %q", a["n"])
	}
	pv, err := r.pv(ctx, a["name"])
	if err != nil {
		return err
	}
	nodes := make([]string, n)
	for i := range n {
		nodes[i] = goneNodeName(i)
	}
	if err := r.watchFirstRecordGone(ctx, pv); err != nil {
		return err
	}
	return r.createCopies(ctx, pv, nodes)
}

// goneRecords notes, of each PV whose gone records a step added, when the
// first Copy of it was seen deleted: the suite's grace period
// (forgetGoneNodesAfter, a minute) lets the first live holder delete them
// on a live PV, and a later step must know whether a record it checks was
// admitted before that.
type goneRecords struct {
	mu    sync.Mutex
	first map[string]time.Time // by the PV's UID
}

// went notes that a Copy of the PV of UID uid was seen deleted now.
func (g *goneRecords) went(uid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.first == nil {
		g.first = map[string]time.Time{}
	}
	if _, seen := g.first[uid]; !seen {
		g.first[uid] = time.Now()
	}
}

// firstWent is when the first Copy of the PV of UID uid was seen deleted.
func (g *goneRecords) firstWent(uid string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.first[uid]
	return t, ok
}

// watchFirstRecordGone watches, until the scenario ends, the Copies of pv's
// UID and notes when the first is deleted.
func (r *Run) watchFirstRecordGone(ctx context.Context, pv *corev1.PersistentVolume) error {
	c, err := copiesClient(r.env.R.GetConfig())
	if err != nil {
		return err
	}
	// The scenario's, not the step's: the step ends before the records go.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := c.Watch(wctx, metav1.ListOptions{LabelSelector: copyVolumeUIDLabel + "=" + string(pv.UID)})
	if err != nil {
		cancel()
		return fmt.Errorf("watch the Copies of PersistentVolume %s: %w", pv.Name, err)
	}
	r.t.Cleanup(func() { cancel(); w.Stop() })
	go func() {
		for {
			select {
			case <-wctx.Done():
				return
			case e, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if e.Type == watch.Deleted {
					r.gone.went(string(pv.UID))
				}
			}
		}
	}()
	return nil
}

// admittedBeforeAnyWent says whether the Copy of node of pv was created
// before the first of pv's Copies was seen deleted (a second's margin: a
// creation time is in whole seconds), and says when each was.
func (r *Run) admittedBeforeAnyWent(ctx context.Context, pv *corev1.PersistentVolume, node string) (bool, string, error) {
	went, ok := r.gone.firstWent(string(pv.UID))
	if !ok {
		return false, "no Copy of it was seen deleted", nil
	}
	cs, err := r.copiesOf(ctx, pv.Name)
	if err != nil {
		return false, "", err
	}
	for _, c := range cs {
		if c.uid == string(pv.UID) && c.node == node {
			made := c.created.Add(time.Second)
			return !made.After(went), fmt.Sprintf("%s's Copy created at %s, the first other Copy seen deleted at %s",
				node, c.created.Format(time.RFC3339), went.Format(time.RFC3339Nano)), nil
		}
	}
	return false, "no Copy of " + node, nil
}

// stepRecordedBeside waits until a PV records node while it still records
// at least n others: the node's own record was admitted beside them.
func stepRecordedBeside(ctx context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return fmt.Errorf("not a number of records: %q", a["n"])
	}
	return harness.Until(ctx, "PersistentVolume "+a["name"]+" to record "+a["node"]+" beside "+a["n"]+" others", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pv, nodes, err := r.recorded(ctx, a["name"])
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			has := slices.Contains(nodes, a["node"])
			others := len(nodes)
			if has {
				others--
			}
			if has && others < n {
				// The first live holder deletes them once the suite's
				// grace period has passed: fewer now says nothing if the
				// record was admitted before the first went.
				before, when, err := r.admittedBeforeAnyWent(ctx, pv, a["node"])
				if err != nil {
					return false, "", harness.Unobserved(err)
				}
				if before {
					r.t.Logf("%s was recorded beside every other record (%s); %d are left now", a["node"], when, others)
					return true, "", nil
				}
				return false, "", fmt.Errorf("%s was recorded beside only %d other records (want %d): they went before its publish (%s), so this run proves nothing about it", a["node"], others, n, when)
			}
			return has, fmt.Sprintf("recorded: %v, beside %d others", has, others), nil
		})
}

// stepClearClaimUID does what an admin does to let a new claim of the same
// name bind a Released PV: it removes the old claim's UID from claimRef.
func stepClearClaimUID(ctx context.Context, r *Run, a args) error {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: a["name"]}}
	patch := `{"spec":{"claimRef":{"uid":null,"resourceVersion":null}}}`
	return r.env.R.Patch(ctx, pv, k8s.Patch{PatchType: types.MergePatchType, Data: []byte(patch)})
}

// stepRestartKubelet restarts kubelet alone in a node's container and waits
// until it reports Ready again (it registers the Node again if it was
// deleted).
func stepRestartKubelet(ctx context.Context, r *Run, a args) error {
	since := time.Now()
	r.marks["kubelet on "+a["node"]] = since
	if _, err := r.onNode(ctx, a["node"], "systemctl", "restart", "kubelet"); err != nil {
		return err
	}
	return r.waitKubelet(ctx, a["node"], since)
}

// driverClient is a client that acts as the driver's service account with
// a token bound to a pod on node: what the driver on that node may do.
func (r *Run) driverClient(node string) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(r.driverConfig(node))
}

// driverConfig is the configuration of driverClient.
func (r *Run) driverConfig(node string) *rest.Config {
	cfg := rest.CopyConfig(r.env.R.GetConfig())
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: driverAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:per-node-system", "system:authenticated"},
		Extra:    map[string][]string{nodeNameKey: {node}},
	}
	return cfg
}

// asDriverPatch sends a merge patch to a PV as the driver on node.
func (r *Run) asDriverPatch(ctx context.Context, node, pv string, patch string) error {
	c, err := r.driverClient(node)
	if err != nil {
		return err
	}
	_, err = c.CoreV1().PersistentVolumes().Patch(ctx, pv, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// asDriverRefused sends patch as the driver on node and requires the API
// server to refuse it, leaving the PV as it was.
func (r *Run) asDriverRefused(ctx context.Context, node, pvName, what, patch string) error {
	before, err := r.pv(ctx, pvName)
	if err != nil {
		return err
	}
	if err := r.refusedByPolicy(r.asDriverPatch(ctx, node, pvName, patch), node, what, "PersistentVolume "+pvName, patch); err != nil {
		r.undoPV(ctx, before)
		return err
	}
	after, err := r.pv(ctx, pvName)
	if err != nil {
		return err
	}
	if d := cmp.Diff(pvContent(before), pvContent(after)); d != "" {
		r.undoPV(ctx, before)
		return fmt.Errorf("the refused change still changed PersistentVolume %s (-before +after):\n%s", pvName, d)
	}
	return nil
}

// undoPV puts back, as an administrator, what a change that should have
// been refused changed on a PV, so that a broken policy (make mutants on a
// kept cluster) leaves nothing that the next run would take for its own.
func (r *Run) undoPV(ctx context.Context, before *corev1.PersistentVolume) {
	now, err := r.pv(ctx, before.Name)
	if err == nil {
		now.Spec, now.Labels, now.Annotations, now.Finalizers = before.Spec, before.Labels, before.Annotations, before.Finalizers
		err = r.env.R.Update(ctx, now)
	}
	if err != nil {
		r.t.Logf("undoing the change of PersistentVolume %s: %v", before.Name, err)
	}
}

// refusedByPolicy requires err to be the API server's refusal (Forbidden
// or Invalid: an admission policy's) of what the driver's account on node
// tried on object.
func (r *Run) refusedByPolicy(err error, node, what, object, patch string) error {
	if err == nil {
		return fmt.Errorf("%w: the driver's account on %s was allowed to %s on %s (patch %s); expected a refusal",
			harness.ErrNotSeen, node, what, object, patch)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return fmt.Errorf("the driver's account on %s, %s: expected Forbidden or Invalid from the admission policy, got: %w", node, what, err)
	}
	r.t.Logf("refused as expected: %v", err)
	return nil
}

// allowedByPolicy is the error of a request the documents say the driver's
// account may make: a refusal (Forbidden or Invalid) is the promise broken,
// anything else says nothing of the policy.
func allowedByPolicy(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return fmt.Errorf("%w: %s, but the API server refused: %v", harness.ErrNotSeen, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// pvContent is what a refused change must leave as it was: the spec
// (claimRef included), finalizers and annotations.
func pvContent(pv *corev1.PersistentVolume) any {
	return struct {
		Spec        corev1.PersistentVolumeSpec
		Finalizers  []string
		Labels      map[string]string
		Annotations map[string]string
	}{pv.Spec, pv.Finalizers, pv.Labels, pv.Annotations}
}

func stepDriverChangesClaimRef(ctx context.Context, r *Run, a args) error {
	return r.asDriverRefused(ctx, a["node"], a["name"], "change the claimRef",
		`{"spec":{"claimRef":{"namespace":"elsewhere","name":"thief","uid":null,"resourceVersion":null}}}`)
}

func stepDriverLabelsPV(ctx context.Context, r *Run, a args) error {
	k, v, _ := strings.Cut(a["label"], "=")
	return r.asDriverRefused(ctx, a["node"], a["name"], "set the label "+a["label"],
		fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, k, v))
}

func stepDriverAnnotatesPV(ctx context.Context, r *Run, a args) error {
	k, v, _ := strings.Cut(a["label"], "=")
	return r.asDriverRefused(ctx, a["node"], a["name"], "set the annotation "+a["label"],
		fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v))
}

// stepDriverAddsOthersRecord: the driver on node may not create the Copy
// of another node.
func stepDriverAddsOthersRecord(ctx context.Context, r *Run, a args) error {
	c, err := r.copyOwned(ctx, a["name"], a["other"], a["other"])
	if err != nil {
		return err
	}
	return r.driverCreateRefused(ctx, a["node"], c, "create the Copy of "+a["other"]+", owned by its Node", "PersistentVolume "+a["name"])
}

// stepDriverAddsOwnRecordNotOwned: the driver on node may create its own
// node's Copy only when that node's Node owns it, so that the garbage
// collector deletes it with the Node: not without an owner, and not owned
// by another Node.
func stepDriverAddsOwnRecordNotOwned(ctx context.Context, r *Run, a args) error {
	for _, owner := range []string{"", a["other"]} {
		c, err := r.copyOwned(ctx, a["name"], a["node"], owner)
		if err != nil {
			return err
		}
		what := "create its own Copy with no owner"
		if owner != "" {
			what = "create its own Copy owned by the Node " + owner
		}
		if err := r.driverCreateRefused(ctx, a["node"], c, what, "PersistentVolume "+a["name"]); err != nil {
			return err
		}
	}
	return nil
}

// stepDriverAddsOwnRecordWithMore: the driver on node may create its own
// Copy, owned by its Node, only as a driver writes it: a finalizer (which
// would keep it, and the PV, forever once the Node is gone), an annotation,
// another node's label, another PV's UID label, a fourth label or an owner
// that blocks its Node's deletion are each refused.
func stepDriverAddsOwnRecordWithMore(ctx context.Context, r *Run, a args) error {
	pv, err := r.pv(ctx, a["name"])
	if err != nil {
		return err
	}
	for _, tc := range []struct {
		what string
		add  func(u *unstructured.Unstructured)
	}{
		{"create its own Copy with the finalizer example.com/hold", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"example.com/hold"}) }},
		{"create its own Copy annotated example.com/owner=thief", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"example.com/owner": "thief"})
		}},
		{"create its own Copy labelled as a Copy of node " + a["other"], func(u *unstructured.Unstructured) { setLabel(u, copyNodeLabel, a["other"]) }},
		{"create its own Copy labelled as a Copy of another PersistentVolume's UID", func(u *unstructured.Unstructured) {
			setLabel(u, copyVolumeUIDLabel, "00000000-0000-0000-0000-000000000000")
		}},
		{"create its own Copy with a fourth label", func(u *unstructured.Unstructured) { setLabel(u, "team", "thief") }},
		{"create its own Copy whose owner blocks its Node's deletion (blockOwnerDeletion)", func(u *unstructured.Unstructured) {
			refs := u.GetOwnerReferences()
			block := true
			refs[0].BlockOwnerDeletion = &block
			u.SetOwnerReferences(refs)
		}},
	} {
		c, err := r.copyOwned(ctx, a["name"], a["node"], a["node"])
		if err != nil {
			return err
		}
		tc.add(c)
		if err := r.driverCreateRefused(ctx, a["node"], c, tc.what, "PersistentVolume "+pv.Name); err != nil {
			return err
		}
	}
	return nil
}

// setLabel sets the label k=v of u.
func setLabel(u *unstructured.Unstructured, k, v string) {
	l := u.GetLabels()
	l[k] = v
	u.SetLabels(l)
}

// driverCreateRefused requires the admission policy to refuse the driver on
// node creating the Copy u (what, on object, say it in a message).
func (r *Run) driverCreateRefused(ctx context.Context, node string, u *unstructured.Unstructured, what, object string) error {
	c, err := copiesClient(r.driverConfig(node))
	if err != nil {
		return err
	}
	made, err := c.Create(ctx, u, metav1.CreateOptions{})
	if err == nil {
		if derr := r.deleteCopyAsAdmin(ctx, made.GetName()); derr != nil {
			r.t.Logf("removing the Copy that should have been refused: %v", derr)
		}
	}
	return r.refusedByPolicy(err, node, what, object, "")
}

// stepDriverRemovesOthersRecord: the driver on node may not delete the Copy
// of another node, which that node's Node owns (the garbage collector
// deletes it with the Node), and the Copy is still there.
func stepDriverRemovesOthersRecord(ctx context.Context, r *Run, a args) error {
	_, held, err := r.copyOn(ctx, a["name"], a["other"])
	if err != nil {
		return err
	}
	c, err := copiesClient(r.driverConfig(a["node"]))
	if err != nil {
		return err
	}
	err = c.Delete(ctx, held.name, metav1.DeleteOptions{})
	if err := r.refusedByPolicy(err, a["node"], "delete the Copy of "+a["other"], "Copy "+held.name, ""); err != nil {
		return err
	}
	_, still, err := r.copyOn(ctx, a["name"], a["other"])
	if err != nil {
		return err
	}
	if still.name != held.name {
		return fmt.Errorf("refused, but the Copy of %s changed: %s, was %s", a["other"], still.name, held.name)
	}
	return nil
}

// stepDriverRemovesLooseRecord: a Copy no Node owns (written by hand, or
// by a restore) may be deleted by any node's driver: that is how the
// driver deletes those of nodes that are gone.
func stepDriverRemovesLooseRecord(ctx context.Context, r *Run, a args) error {
	pv, err := r.pv(ctx, a["name"])
	if err != nil {
		return err
	}
	admin, err := copiesClient(r.env.R.GetConfig())
	if err != nil {
		return err
	}
	made, err := admin.Create(ctx, copyObject(pv, a["other"]), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create, as an administrator, a Copy of %s that no Node owns: %w", a["other"], err)
	}
	c, err := copiesClient(r.driverConfig(a["node"]))
	if err != nil {
		return err
	}
	if err := c.Delete(ctx, made.GetName(), metav1.DeleteOptions{}); err != nil {
		return allowedByPolicy(err, "the driver's account on %s may delete the Copy %s of %s that no Node owns", a["node"], made.GetName(), a["other"])
	}
	return nil
}

// stepDriverChangesOwnCopy: the driver on node may not change a Copy, not
// even its own (here: a label added), and the Copy stays as it was.
func stepDriverChangesOwnCopy(ctx context.Context, r *Run, a args) error {
	_, own, err := r.copyOn(ctx, a["name"], a["node"])
	if err != nil {
		return err
	}
	c, err := copiesClient(r.driverConfig(a["node"]))
	if err != nil {
		return err
	}
	patch := `{"metadata":{"labels":{"team":"thief"}}}`
	_, err = c.Patch(ctx, own.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err == nil {
		undo := `{"metadata":{"labels":{"team":null}}}`
		if admin, aerr := copiesClient(r.env.R.GetConfig()); aerr == nil {
			_, _ = admin.Patch(ctx, own.name, types.MergePatchType, []byte(undo), metav1.PatchOptions{})
		}
	}
	return r.refusedByPolicy(err, a["node"], "change its own Copy", "Copy "+own.name, patch)
}

// copyOn is the PV named name and node's Copy of it (of its UID now); an
// error if the node holds none.
func (r *Run) copyOn(ctx context.Context, name, node string) (*corev1.PersistentVolume, aCopy, error) {
	pv, err := r.pv(ctx, name)
	if err != nil {
		return nil, aCopy{}, err
	}
	cs, err := r.copiesOf(ctx, name)
	if err != nil {
		return nil, aCopy{}, err
	}
	i := slices.IndexFunc(cs, func(c aCopy) bool { return c.node == node && c.uid == string(pv.UID) })
	if i < 0 {
		return nil, aCopy{}, fmt.Errorf("%s holds no Copy of PersistentVolume %s (Copies %v)", node, name, cs)
	}
	return pv, cs[i], nil
}

// deleteCopyAsAdmin deletes the Copy named name as an administrator.
func (r *Run) deleteCopyAsAdmin(ctx context.Context, name string) error {
	c, err := copiesClient(r.env.R.GetConfig())
	if err != nil {
		return err
	}
	return c.Delete(ctx, name, metav1.DeleteOptions{})
}

// stepRemoveRecord deletes a node's Copy of a PV as an admin (or a restore
// without Copies) would: the record vanishes while the copy stays on the
// node.
func stepRemoveRecord(ctx context.Context, r *Run, a args) error {
	cs, err := r.copiesOf(ctx, a["name"])
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.node == a["node"] {
			if err := r.deleteCopyAsAdmin(ctx, c.name); err != nil {
				return err
			}
		}
	}
	_, nodes, err := r.recorded(ctx, a["name"])
	if err != nil {
		return err
	}
	if slices.Contains(nodes, a["node"]) {
		return fmt.Errorf("PersistentVolume %s still records %s after its Copy was deleted (Copies on %v)", a["name"], a["node"], nodes)
	}
	return nil
}

// stepDriverAddsOwnRecordRefused: the driver may put the per-node finalizer
// only on a per-node PV.
func stepDriverAddsOwnRecordRefused(ctx context.Context, r *Run, a args) error {
	return r.asDriverRefused(ctx, a["node"], a["name"], "put the finalizer "+copiesFinalizer,
		fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, copiesFinalizer))
}

// stepDriverAddsOwnRecord: the driver may create its own node's Copy and
// put the per-node finalizer on the PV.
func stepDriverAddsOwnRecord(ctx context.Context, r *Run, a args) error {
	own, err := r.copyOwned(ctx, a["name"], a["node"], a["node"])
	if err != nil {
		return err
	}
	c, err := copiesClient(r.driverConfig(a["node"]))
	if err != nil {
		return err
	}
	if _, err := c.Create(ctx, own, metav1.CreateOptions{}); err != nil {
		return allowedByPolicy(err, "the driver's account on %s may create its own Copy", a["node"])
	}
	if err := r.asDriverPatch(ctx, a["node"], a["name"], fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, copiesFinalizer)); err != nil {
		return allowedByPolicy(err, "the driver's account on %s may put the finalizer %s", a["node"], copiesFinalizer)
	}
	pv, nodes, err := r.recorded(ctx, a["name"])
	if err != nil {
		return err
	}
	if !slices.Contains(nodes, a["node"]) || !slices.Contains(pv.Finalizers, copiesFinalizer) {
		return fmt.Errorf("allowed, but PersistentVolume %s does not record %s: Copies on %v, finalizers %v", a["name"], a["node"], nodes, pv.Finalizers)
	}
	return nil
}

// applyRefused requires the API server to refuse creating every object,
// and checks that none was created.
func (r *Run) applyRefused(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		r.namespaceFor(u)
		if u.GetKind() == "PersistentVolume" {
			r.trackPV(u.GetName()) // cleaned up should the refusal fail
		}
		err := r.env.R.Create(ctx, u)
		if err == nil {
			return fmt.Errorf("%s %s was created; expected the API server to refuse it", u.GetKind(), u.GetName())
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return fmt.Errorf("%s %s: expected a refusal (Forbidden or Invalid), got: %w", u.GetKind(), u.GetName(), err)
		}
		r.t.Logf("refused as expected: %v", err)
		got := u.DeepCopy()
		if err := r.env.R.Get(ctx, u.GetName(), u.GetNamespace(), got); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s exists after the refusal (get: %v)", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// asDriverEvent creates, as the driver on node, a valid event in a
// namespace (in "default" about the PV, as the driver writes them; in any
// other about a pod there), and removes it again (as the test's own
// account) if created.
func (r *Run) asDriverEvent(ctx context.Context, node, ns, pvName string) error {
	c, err := r.driverClient(node)
	if err != nil {
		return err
	}
	about := corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: pvName}
	if ns != metav1.NamespaceDefault {
		about = corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "per-node-account-check"}
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: about.Name + ".", Namespace: ns},
		InvolvedObject: about,
		Reason:         "AccountCheck", Message: "the e2e suite checks the driver's account on " + node,
		Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "per-node.liken.sh", Host: node},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}
	made, err := c.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	if err == nil {
		cs, cerr := r.clientset()
		if cerr == nil {
			_ = cs.CoreV1().Events(ns).Delete(ctx, made.Name, metav1.DeleteOptions{})
		}
	}
	return err
}

func stepDriverEventAllowed(ctx context.Context, r *Run, a args) error {
	if err := r.asDriverEvent(ctx, a["node"], a["namespace"], r.vars["pv"]); err != nil {
		return fmt.Errorf("the driver's account on %s may write events in namespace %s: %w", a["node"], a["namespace"], err)
	}
	return nil
}

func stepDriverEventRefused(ctx context.Context, r *Run, a args) error {
	err := r.asDriverEvent(ctx, a["node"], a["namespace"], r.vars["pv"])
	if err == nil {
		return fmt.Errorf("%w: the driver's account on %s was allowed to write an event in namespace %s; expected Forbidden",
			harness.ErrNotSeen, a["node"], a["namespace"])
	}
	if apierrors.IsInvalid(err) { // validation comes after authorization
		return fmt.Errorf("%w: the driver's account on %s was authorized to write an event in namespace %s (the API server then found the event invalid: %v); expected Forbidden",
			harness.ErrNotSeen, a["node"], a["namespace"], err)
	}
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("the driver's account on %s, writing an event in namespace %s: expected Forbidden, got: %w", a["node"], a["namespace"], err)
	}
	r.t.Logf("refused as expected: %v", err)
	return nil
}

// stepAdminRecords creates, as an administrator (or a restore) would, a
// Copy of the PV on node that no Node owns.
func stepAdminRecords(ctx context.Context, r *Run, a args) error {
	pv, err := r.pv(ctx, a["name"])
	if err != nil {
		return err
	}
	return r.createCopies(ctx, pv, []string{a["node"]})
}
