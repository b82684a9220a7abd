// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/copyapi"
	"liken.sh/per-node/driver/internal/kube"
	"liken.sh/per-node/driver/internal/namepart"
)

// Finalizer is on a per-node PersistentVolume while any Copy of it
// remains: one finalizer, whatever the number of nodes that hold a copy.
const Finalizer = copyapi.Finalizer

// listPage is how many objects a page of a paged list holds.
const listPage = 500

// deleteBatch is how many nodes' Copies one DeleteCollection names.
const deleteBatch = 100

// OwnCopies is this node's Copies as last seen: the controller's informer,
// which watches only this node's.
type OwnCopies interface {
	// OwnCopy returns this node's Copy of the PV volume of UID uid as last
	// seen, and whether the view has synced (before that it has seen
	// nothing).
	OwnCopy(volume, uid string) (c *copyapi.Copy, synced bool)
}

// hasFinalizer says whether pv carries Finalizer.
func hasFinalizer(pv *corev1.PersistentVolume) bool {
	return slices.Contains(pv.Finalizers, Finalizer)
}

// copiesOf lists, fresh from the API server, the Copies of the PV volume of
// UID uid (a page at a time: a PV may have been held by thousands of nodes).
func copiesOf(ctx context.Context, copies kube.Copies, volume, uid string) ([]copyapi.Copy, error) {
	var out []copyapi.Copy
	opts := metav1.ListOptions{LabelSelector: copyapi.UIDSelector(uid), Limit: listPage}
	for {
		lctx, cancel := context.WithTimeout(ctx, APITimeout)
		page, err := copies.List(lctx, opts)
		cancel()
		if err != nil {
			return nil, copyAPIError(err, "list the Copies of PersistentVolume %s", volume)
		}
		for _, c := range page.Items {
			if c.Of(volume, uid) {
				out = append(out, c)
			}
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// holders is the nodes that cs are on, sorted, each once.
func holders(cs []copyapi.Copy) []string {
	nodes := make([]string, 0, len(cs))
	for _, c := range cs {
		nodes = append(nodes, c.Spec.Node)
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// createCopy creates node's Copy of pv, owned by the Node of UID nodeUID
// (if given), and returns it as the API server answered.
func createCopy(ctx context.Context, copies kube.Copies, pv *corev1.PersistentVolume, node string, nodeUID types.UID) (*copyapi.Copy, error) {
	c, err := copies.Create(ctx, copyapi.New(pv.Name, string(pv.UID), node, nodeUID), metav1.CreateOptions{FieldManager: DriverName})
	if err != nil {
		return nil, copyAPIError(err, "create the Copy of PersistentVolume %s on node %s", pv.Name, node)
	}
	return c, nil
}

// deleteCopy deletes c, if it is still the object that was read (its UID).
func deleteCopy(ctx context.Context, copies kube.Copies, c *copyapi.Copy) error {
	uid := c.UID
	err := copies.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) && isServerStatus(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		return nil // another object of that name: not the Copy that was read
	}
	return apiError(err, "delete the Copy %s of PersistentVolume %s on node %s", c.Name, c.Spec.Volume, c.Spec.Node)
}

// forgetCopies deletes, of cs (the Copies of one PV, freshly listed), the
// ones on nodes that no Node owns: Copies written by hand or by a restore.
// A Copy the driver wrote is owned by its node's Node, and Kubernetes'
// garbage collector deletes it with the Node; the admission policy lets a
// node's account delete no other node's owned Copy. One DELETE each for a
// few, else one DeleteCollection per deleteBatch nodes (labels select them:
// the PV's UID and each node's name) for the nodes whose every Copy is
// ownerless. Labels are not what a Copy is (its spec is): a Copy labelled
// as one of those nodes' that the API server refuses to delete (another
// node's, planted by its account or written by hand) makes that batch's
// Copies go one DELETE each, so that no planted object stops the rest.
func forgetCopies(ctx context.Context, copies kube.Copies, cs []copyapi.Copy, nodes []string) error {
	byNode := onNodes(cs)
	var each, pending []*copyapi.Copy
	var batch []string
	for _, n := range nodes {
		owned, loose := split(byNode[n])
		switch {
		case len(loose) == 0:
		case owned: // a DeleteCollection of the node's Copies would name the owned one
			each = append(each, loose...)
		default:
			batch, pending = append(batch, n), append(pending, loose...)
		}
	}
	if len(each)+len(pending) <= askEach {
		each, batch = append(each, pending...), nil
	}
	if err := deleteEach(ctx, copies, each); err != nil {
		return err
	}
	for part := range slices.Chunk(batch, deleteBatch) {
		err := deleteNodesCopies(ctx, copies, cs[0].Spec.VolumeUID, part)
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			if err != nil {
				return copyAPIError(err, "delete the Copies of PersistentVolume %s on %s", cs[0].Spec.Volume, nodesNamed(part))
			}
			continue
		}
		klog.InfoS("Deleting the Copies of gone nodes by their labels was refused: a Copy labelled as one of theirs is not; deleting theirs one at a time",
			"volume_id", cs[0].Spec.Volume, "nodes", nodesNamed(part), "err", err.Error())
		var theirs []*copyapi.Copy
		for _, n := range part {
			theirs = append(theirs, byNode[n]...)
		}
		if err := deleteEach(ctx, copies, theirs); err != nil {
			return err
		}
	}
	return nil
}

// deleteEach deletes cs, one DELETE each (of the object that was read).
func deleteEach(ctx context.Context, copies kube.Copies, cs []*copyapi.Copy) error {
	for _, c := range cs {
		dctx, cancel := context.WithTimeout(ctx, APITimeout)
		err := deleteCopy(dctx, copies, c)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteNodesCopies is one DeleteCollection of the Copies labelled as of the
// PV of UID uid on nodes; the error is the API server's own.
func deleteNodesCopies(ctx context.Context, copies kube.Copies, uid string, nodes []string) error {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = namepart.Of(n)
	}
	sel := fmt.Sprintf("%s,%s in (%s)", copyapi.UIDSelector(uid), copyapi.NodeLabel, strings.Join(parts, ","))
	dctx, cancel := context.WithTimeout(ctx, APITimeout)
	defer cancel()
	return copies.DeleteCollection(dctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
}

// onNodes is cs by the node each is on.
func onNodes(cs []copyapi.Copy) map[string][]*copyapi.Copy {
	by := make(map[string][]*copyapi.Copy, len(cs))
	for i := range cs {
		by[cs[i].Spec.Node] = append(by[cs[i].Spec.Node], &cs[i])
	}
	return by
}

// split says whether any of cs is owned by a Node, and which are not.
func split(cs []*copyapi.Copy) (owned bool, loose []*copyapi.Copy) {
	for _, c := range cs {
		if c.OwnedByNode() {
			owned = true
		} else {
			loose = append(loose, c)
		}
	}
	return owned, loose
}

// ownedOn is those of nodes that hold a Copy, of cs, owned by a Node: the
// garbage collector's to delete.
func ownedOn(cs []copyapi.Copy, nodes []string) []string {
	byNode := onNodes(cs)
	var out []string
	for _, n := range nodes {
		if owned, _ := split(byNode[n]); owned {
			out = append(out, n)
		}
	}
	return out
}

// looseOn is the nodes that hold a Copy, of cs, that no Node owns, sorted,
// each once.
func looseOn(cs []copyapi.Copy) []string {
	var out []string
	for _, c := range cs {
		if !c.OwnedByNode() {
			out = append(out, c.Spec.Node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// copyAPIError is apiError for a request about Copies, where NotFound for a
// list or a create means the API server does not serve them: the CRD is not
// installed (an outage to the caller, never a missing PV).
func copyAPIError(err error, format string, args ...any) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s: the API server does not serve copies.%s (is deploy/crd.yaml applied?): %v",
			ErrAPI, fmt.Sprintf(format, args...), copyapi.Group, err)
	}
	return apiError(err, format, args...)
}

// addFinalizer puts Finalizer on pv (of pv's UID only) and returns the PV as
// the API server answered: it refuses a new finalizer on a PV being
// deleted, so what was read still holds when the finalizer is there. A
// strategic merge patch merges finalizers as a set: nodes that add it at
// once leave it once, after every finalizer that was there.
func addFinalizer(ctx context.Context, pvs kube.PersistentVolumes, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	now, err := pvs.Patch(ctx, pv.Name, types.StrategicMergePatchType, finalizerPatch(pv, true), metav1.PatchOptions{FieldManager: DriverName})
	return now, apiError(err, "put the finalizer %s on PersistentVolume %s", Finalizer, pv.Name)
}

// release removes Finalizer from the PV of pv's name and UID, once it is
// being deleted and no Copy of it remains: a fresh list, after the caller
// deleted its own, decides. Of nodes that delete their Copies at once, the
// last one's list finds none.
func release(ctx context.Context, pvs kube.PersistentVolumes, copies kube.Copies, pv *corev1.PersistentVolume) error {
	if pv.DeletionTimestamp == nil || !hasFinalizer(pv) {
		return nil
	}
	left, err := copiesOf(ctx, copies, pv.Name, string(pv.UID))
	if err != nil || len(left) > 0 {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, APITimeout)
	defer cancel()
	_, err = pvs.Patch(pctx, pv.Name, types.StrategicMergePatchType, finalizerPatch(pv, false), metav1.PatchOptions{FieldManager: DriverName})
	if errors.Is(apiError(err, ""), ErrNoVolume) || apierrors.IsConflict(err) {
		return nil // gone, or created again (the UID in the patch)
	}
	if err != nil {
		return apiError(err, "remove the finalizer %s from PersistentVolume %s", Finalizer, pv.Name)
	}
	klog.InfoS("No copy of the PersistentVolume remains; removed its finalizer", "volume_id", pv.Name, "finalizer", Finalizer)
	return nil
}

// finalizerPatch is a strategic merge patch that adds (add) or removes
// (!add) Finalizer and nothing else, on the PV of pv's UID only (the API
// server refuses a changed UID).
func finalizerPatch(pv *corev1.PersistentVolume, add bool) []byte {
	meta := map[string]any{"uid": string(pv.UID)}
	if add {
		meta["finalizers"] = []string{Finalizer}
	} else {
		meta["$deleteFromPrimitiveList/finalizers"] = []string{Finalizer}
	}
	return mustJSON(map[string]any{"metadata": meta})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal a patch: %v", err)) // maps and slices of strings always marshal
	}
	return b
}
