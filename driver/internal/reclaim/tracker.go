// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package reclaim ties each node's copies to the PersistentVolume they
// belong to, so that deleting the PV removes every copy on every node, and
// nothing else. Nothing in Kubernetes tells a CSI driver that a static PV
// was deleted, so the driver works from the PV objects themselves:
//
//   - before a node creates its copy it records itself on the PV: its
//     finalizer, per-node.liken.sh/<node> (long names hashed, the full name
//     then in an annotation of the same key). `kubectl get pv -o yaml` shows
//     which nodes hold copies, and the PV cannot disappear while one remains;
//   - a node only ever adds or removes its own record, with a conditional
//     patch, and only on a PV that is a per-node volume of that name;
//   - when the PV is being deleted and its claim is gone, each node removes
//     its copy as soon as no pod on it holds the copy, then its record;
//   - when a PV is being deleted, the drivers on the other nodes remove the
//     records of Nodes that are gone, so a node that never returns wedges
//     nothing;
//   - a copy is removed only when its PV is being deleted, or a fresh read
//     shows the PV gone or carrying another UID. A missing record is not
//     permission to delete: a node whose record vanished (a Node deleted and
//     re-registered, a PV replaced without its finalizers) records itself
//     again and keeps its copy.
package reclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/kube"
)

// DriverName is the CSI driver whose PersistentVolumes are reconciled.
const DriverName = "per-node.liken.sh"

// pvProtection is kube-controller-manager's finalizer, removed once no
// claim is bound to the PV.
const pvProtection = "kubernetes.io/pv-protection"

// APITimeout bounds every call to the API server.
const APITimeout = 10 * time.Second

var (
	// ErrNoVolume means no PersistentVolume has the handle's name.
	ErrNoVolume = errors.New("no PersistentVolume of that name")
	// ErrDeleting means the PersistentVolume is being deleted.
	ErrDeleting = errors.New("the PersistentVolume is being deleted")
	// ErrNotOurs means the PersistentVolume of the handle's name is not a
	// per-node volume whose volumeHandle is its own name.
	ErrNotOurs = errors.New("not a per-node PersistentVolume of that name")
	// ErrAPI means the API server could not be asked or did not answer.
	ErrAPI = errors.New("the API server did not answer")
	// ErrConflict means the PV kept changing under every retry.
	ErrConflict = errors.New("the PersistentVolume kept changing while this node recorded itself")
	// ErrForbidden means the API server refused the change (RBAC or
	// admission policy).
	ErrForbidden = errors.New("the API server refused the change")
)

// Tracker records on PersistentVolumes which nodes hold copies.
type Tracker struct {
	client   kube.PersistentVolumes
	node     string
	recorder record.EventRecorder
	// uids remembers the UID of each PV seen, so an event needs no API call.
	uids *uidCache
	// cache, if set, is where a PV was last seen (the controller's
	// informer); it saves the read before a new record.
	cache Cache
	// outageWait is how long Record tries again, every outagePoll, while
	// the API server does not answer.
	outageWait, outagePoll time.Duration
}

// OutageWait is how long a record waits for an API server that does not
// answer before the publish is refused (Unavailable). kubelet tries a
// refused mount again after a backoff that doubles up to 2 min, so a
// refusal at once could leave a pod waiting up to two minutes after the API
// server is back; waiting here, asking again every second, lets it start
// within a second of the return. The copy is still not made before the
// record.
const OutageWait = 30 * time.Second

// Cache is a view of PersistentVolumes that may lag the API server.
type Cache interface {
	// Cached returns the PV of name as last seen, if it was seen.
	Cached(name string) (*corev1.PersistentVolume, bool)
}

// NewTracker returns the tracker of node.
func NewTracker(client kube.PersistentVolumes, node string, recorder record.EventRecorder) *Tracker {
	return &Tracker{client: client, node: node, recorder: recorder, uids: newUIDCache(),
		outageWait: OutageWait, outagePoll: time.Second}
}

// Consult makes the tracker look in cache before it reads a PV to record
// this node on it. Call it before the tracker is used.
func (t *Tracker) Consult(cache Cache) { t.cache = cache }

// CheckOurs says which field, if any, makes pv not a per-node volume that a
// publish of handle may use.
func CheckOurs(pv *corev1.PersistentVolume, handle string) error {
	switch {
	case pv.Spec.CSI == nil:
		return fmt.Errorf("%w: PersistentVolume %s has no spec.csi; a per-node PV's volumeHandle must be its own name", ErrNotOurs, handle)
	case pv.Spec.CSI.Driver != DriverName:
		return fmt.Errorf("%w: PersistentVolume %s has spec.csi.driver %q, not %s; a per-node PV's volumeHandle must be its own name",
			ErrNotOurs, handle, pv.Spec.CSI.Driver, DriverName)
	case pv.Spec.CSI.VolumeHandle != pv.Name:
		return fmt.Errorf("%w: PersistentVolume %s has spec.csi.volumeHandle %q; it must be the PV's own name",
			ErrNotOurs, handle, pv.Spec.CSI.VolumeHandle)
	}
	return nil
}

// Record makes sure the PV named handle lists this node as a holder, and
// returns the PV's UID. It refuses a PV that is being deleted or is not a
// per-node volume of that name, and then changes nothing. While the API
// server does not answer it asks again, for up to OutageWait.
func (t *Tracker) Record(ctx context.Context, handle string) (string, error) {
	var uid string
	var err error
	start := time.Now()
	attempts := 0
	// Each attempt has the caller's ctx (and APITimeout): the poll's own
	// deadline only decides whether to ask again.
	_ = wait.PollUntilContextTimeout(ctx, t.outagePoll, t.outageWait, true, func(context.Context) (bool, error) {
		attempts++
		uid, _, err = t.record(ctx, handle)
		if errors.Is(err, ErrAPI) && attempts == 1 {
			klog.InfoS("The API server did not answer; asking again before refusing the publish",
				"volume_id", handle, "wait", t.outageWait, "err", err)
		}
		return !errors.Is(err, ErrAPI), nil
	})
	if attempts > 1 {
		klog.InfoS("Waited for the API server to record this node", "volume_id", handle,
			"attempts", attempts, "waited", time.Since(start).Round(time.Millisecond), "answered", !errors.Is(err, ErrAPI))
	}
	return uid, err
}

// record is Record, also saying whether it had to write the record.
func (t *Tracker) record(ctx context.Context, handle string) (uid string, patched bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, APITimeout)
	defer cancel()
	if seen, ok := t.unrecorded(handle); ok {
		uid, err := t.recordSeen(ctx, seen)
		if !apierrors.IsConflict(err) {
			return uid, err == nil, err
		}
		// created again since it was seen: read it
	}
	err = onConflict(func() error {
		pv, err := getPV(ctx, t.client, handle)
		if err != nil {
			return err
		}
		t.uids.set(handle, pv.UID)
		if err := CheckOurs(pv, handle); err != nil {
			return err
		}
		if pv.DeletionTimestamp != nil {
			return ErrDeleting
		}
		uid = string(pv.UID)
		if HasRecord(pv, t.node) {
			return nil
		}
		patched = true
		return t.refusedWhy(ctx, pv, patchRecord(ctx, t.client, pv, t.node, true))
	})
	return uid, patched && err == nil, err
}

// unrecorded returns the cached PV of handle if the cache shows a per-node
// volume of that name, not being deleted, that does not record this node
// yet: the one case where the read before the record can be saved.
func (t *Tracker) unrecorded(handle string) (*corev1.PersistentVolume, bool) {
	if t.cache == nil {
		return nil, false
	}
	pv, ok := t.cache.Cached(handle)
	if !ok || CheckOurs(pv, handle) != nil || pv.DeletionTimestamp != nil || HasRecord(pv, t.node) {
		return nil, false
	}
	return pv, true
}

// recordSeen records this node on the PV seen in the cache, in one
// request: the patch carries the seen UID, so it lands on that PV or on
// none, and what the cache showed of it still holds, since a PV's source
// never changes after creation and the API server adds no finalizer to a
// PV being deleted. The answer is the fresh read, and is checked as one.
// A PV created again since it was seen gives a Conflict.
func (t *Tracker) recordSeen(ctx context.Context, seen *corev1.PersistentVolume) (string, error) {
	now, err := sendRecordPatch(ctx, t.client, seen, true, t.node)
	if err != nil {
		return "", t.refusedWhy(ctx, seen, err)
	}
	t.uids.set(now.Name, now.UID)
	if now.UID != seen.UID {
		return "", fmt.Errorf("%w: PersistentVolume %s answered with UID %s, the record was for %s", ErrAPI, now.Name, now.UID, seen.UID)
	}
	if err := CheckOurs(now, now.Name); err != nil {
		return "", err
	}
	switch {
	case now.DeletionTimestamp != nil:
		return "", ErrDeleting // it recorded this node already; the controller drops the record
	case !HasRecord(now, t.node):
		return "", fmt.Errorf("%w: PersistentVolume %s does not show the record this node just wrote", ErrAPI, now.Name)
	}
	return string(now.UID), nil
}

// refusedWhy reads the PV again after the API server refused to record
// this node on it (err wraps ErrForbidden): a PV whose deletion began since
// it was read gives ErrDeleting, and one created again under the same name
// a Conflict, which reads the new one. Other errors, and refusals of an
// unchanged PV, are returned as they are.
func (t *Tracker) refusedWhy(ctx context.Context, read *corev1.PersistentVolume, err error) error {
	if !errors.Is(err, ErrForbidden) {
		return err
	}
	now, gerr := getPV(ctx, t.client, read.Name)
	switch {
	case gerr != nil:
		return err
	case now.UID != read.UID:
		return apierrors.NewConflict(corev1.Resource("persistentvolumes"), read.Name,
			fmt.Errorf("created again (UID %s, was %s) before the record was written", now.UID, read.UID))
	case now.DeletionTimestamp != nil:
		return ErrDeleting
	}
	return err
}

// Forget removes the records of nodes from the PV named handle whose UID
// is uid, those that are there, in one request: the patch carries uid, so
// the API server refuses it on a PV created under that name since (that
// PV's records are what will remove the nodes' copies of it). A refusal is
// read again to tell that from an error.
func Forget(ctx context.Context, client kube.PersistentVolumes, handle, uid string, nodes ...string) error {
	if len(nodes) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, APITimeout)
	defer cancel()
	seen := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: handle, UID: types.UID(uid)}}
	_, err := sendRecordPatch(ctx, client, seen, false, nodes...)
	if errors.Is(err, ErrNoVolume) {
		return nil
	}
	if !errors.Is(err, ErrForbidden) {
		return err
	}
	now, gerr := getPV(ctx, client, handle)
	switch {
	case errors.Is(gerr, ErrNoVolume):
		return nil
	case gerr == nil && string(now.UID) != uid:
		klog.InfoS("Not dropping a record: the PersistentVolume was created again", "volume_id", handle,
			"nodes", nodes, "uid", uid, "new_uid", now.UID)
		return nil
	}
	return err
}

// patchRecord adds or removes node's record on pv, unless it is already so.
func patchRecord(ctx context.Context, client kube.PersistentVolumes, pv *corev1.PersistentVolume, node string, add bool) error {
	has := HasRecord(pv, node) || (!add && slices.Contains(pv.Finalizers, Finalizer(node)))
	if has == add {
		return nil
	}
	_, err := sendRecordPatch(ctx, client, pv, add, node)
	return err
}

// sendRecordPatch adds or removes the records of nodes on the PV of pv's
// name and UID, and returns the PV as the API server answered.
func sendRecordPatch(ctx context.Context, client kube.PersistentVolumes, pv *corev1.PersistentVolume, add bool, nodes ...string) (*corev1.PersistentVolume, error) {
	opts := metav1.PatchOptions{FieldManager: DriverName}
	if add && len(nodes) == 1 && appendable(pv, nodes[0]) {
		// An append costs the API server one pass over the records; its
		// strategic merge of a new entry costs more (7.4 s beside 5,000
		// records where an append takes 1.4 s: docs/performance.md).
		now, err := client.Patch(ctx, pv.Name, types.JSONPatchType, recordAppend(pv, nodes[0]), opts)
		if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			return now, apiError(err, "record %s on PersistentVolume %s", nodesNamed(nodes), pv.Name)
		}
		// The PV changed since it was read (another UID, no finalizers or
		// annotations to append to, being deleted): the merge patch says why.
	}
	now, err := client.Patch(ctx, pv.Name, types.StrategicMergePatchType, recordPatch(pv, add, nodes...), opts)
	verb := "record"
	if !add {
		verb = "drop the record of"
	}
	return now, apiError(err, "%s %s on PersistentVolume %s", verb, nodesNamed(nodes), pv.Name)
}

// nodesNamed names nodes for a message: every one of a few, the count and
// the first of many (a PATCH may drop the records of thousands).
func nodesNamed(nodes []string) string {
	if len(nodes) <= 3 {
		return "node " + strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%d nodes (%s, ...)", len(nodes), nodes[0])
}

// apiSaysGone says whether err is the API server's own answer that the
// object resource/name does not exist: a NotFound Status it sent whose
// details name that object. Copies are removed and records dropped on this
// answer only.
func apiSaysGone(err error, resource, name string) bool {
	st, ok := serverStatus(err)
	return ok && st.Reason == metav1.StatusReasonNotFound && st.Details != nil &&
		st.Details.Name == name && st.Details.Kind == resource
}

// serverStatus is the Status the server sent with err: not one client-go
// made of a response that was not a Status (a proxy's plain-text or HTML
// page), which it marks as an unexpected server response.
func serverStatus(err error) (metav1.Status, bool) {
	var api apierrors.APIStatus
	if !errors.As(err, &api) {
		return metav1.Status{}, false
	}
	st := api.Status()
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == metav1.CauseTypeUnexpectedServerResponse {
				return metav1.Status{}, false
			}
		}
	}
	return st, true
}

func isServerStatus(err error) bool { _, ok := serverStatus(err); return ok }

// getPV reads a PV fresh from the API server.
func getPV(ctx context.Context, client kube.PersistentVolumes, name string) (*corev1.PersistentVolume, error) {
	pv, err := client.Get(ctx, name, metav1.GetOptions{})
	if apiSaysGone(err, "persistentvolumes", name) {
		return nil, fmt.Errorf("%w: %s", ErrNoVolume, name)
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: get PersistentVolume %s: a 404 that is not the API server's answer about it: %v", ErrAPI, name, err)
	}
	if err != nil {
		return nil, apiError(err, "get PersistentVolume %s", name)
	}
	return pv, nil
}

// apiError sorts an API error: a conflict is retried by onConflict, a
// missing PV is ErrNoVolume, a refusal is not an outage, and everything
// else is the API not answering.
func apiError(err error, format string, args ...any) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsConflict(err):
		return err
	case apierrors.IsNotFound(err) && isServerStatus(err):
		return fmt.Errorf("%w: %s: %v", ErrNoVolume, fmt.Sprintf(format, args...), err)
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%w: %s: %v", ErrForbidden, fmt.Sprintf(format, args...), err)
	default:
		return fmt.Errorf("%w: %s: %v", ErrAPI, fmt.Sprintf(format, args...), err)
	}
}

// onConflict retries fn while the API server answers Conflict, and turns a
// conflict that outlasts the retries into ErrConflict.
func onConflict(fn func() error) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, fn)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}

// Event records an event on the PV named handle. It makes no API call of
// its own: the recorder sends events in the background.
func (t *Tracker) Event(_ context.Context, handle, eventType, reason, message string) {
	if t.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: handle, UID: t.uids.get(handle)}
	t.recorder.Event(ref, eventType, reason, message)
}

// removable reports whether a PV's copies may go: it is being deleted and
// no claim protection remains.
func removable(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, pvProtection)
}
