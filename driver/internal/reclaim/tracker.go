// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package reclaim ties each node's copies to the PersistentVolume they
// belong to, so that deleting the PV removes every copy on every node, and
// nothing else. Nothing in Kubernetes tells a CSI driver that a static PV
// was deleted, so the driver works from the API objects themselves:
//
//   - before a node creates its copy it records itself: its Copy
//     (copyapi), one object per PV and node, and the PV's one finalizer,
//     per-node.liken.sh/copies, which stays while any Copy of it remains.
//     `kubectl get copies` shows which nodes hold copies, and the PV cannot
//     disappear while one remains;
//   - a node creates only its own Copy, and on the PV writes only that
//     finalizer, with a patch that carries the UID it read; what it wrote
//     is checked against the API server's answer;
//   - when the PV is being deleted and its claim is gone, each node removes
//     its copy as soon as no pod on it holds the copy, then deletes its
//     Copy; the node whose fresh list finds no Copy left removes the
//     finalizer;
//   - the Copies of Nodes that are gone are deleted by one live holder, so
//     a node that never returns wedges nothing;
//   - a copy is removed only when its PV is being deleted, or a fresh read
//     shows the PV gone or carrying another UID. A missing record is not
//     permission to delete: a node whose Copy vanished (deleted by hand, a
//     Node deleted and re-registered) or whose PV lost its finalizer (a PV
//     replaced) records itself again and keeps its copy.
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
	"k8s.io/utils/lru"

	"liken.sh/per-node/driver/internal/copyapi"
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
	pvs      kube.PersistentVolumes
	copies   kube.Copies
	node     string
	recorder record.EventRecorder
	// uids remembers the UID of each PV seen, so an event needs no API call.
	uids *uidCache
	// cache, if set, is where a PV was last seen (the controller's
	// informer); it saves the read before a new record.
	cache Cache
	// own, if set, is this node's Copies as last seen.
	own OwnCopies
	// created holds the Copies this tracker created until own shows them
	// (createdTrust at most; see hasCopy).
	created *lru.Cache
	// owner, if set, is the UID of this node's Node object ("" while it is
	// not known): the owner of every Copy the tracker creates.
	owner func() types.UID
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

// Cache is a view of PersistentVolumes and of this node's Copies that may
// lag the API server.
type Cache interface {
	OwnCopies
	// Cached returns the PV of name as last seen, if it was seen.
	Cached(name string) (*corev1.PersistentVolume, bool)
}

// NewTracker returns the tracker of node.
func NewTracker(pvs kube.PersistentVolumes, copies kube.Copies, node string, recorder record.EventRecorder) *Tracker {
	return &Tracker{pvs: pvs, copies: copies, node: node, recorder: recorder, uids: newUIDCache(),
		created: lru.New(maxUIDs), outageWait: OutageWait, outagePoll: time.Second}
}

// Consult makes the tracker look in cache before it reads a PV or lists
// Copies to record this node. Call it before the tracker is used.
func (t *Tracker) Consult(cache Cache) {
	t.cache, t.own = cache, cache
	if n, ok := cache.(interface{ OwnNodeUID() types.UID }); ok {
		t.owner = n.OwnNodeUID
	}
}

// ownerUID is the owner of a Copy this tracker creates: this node's Node,
// once it is known; none when the tracker has no view of it (tests,
// tools).
func (t *Tracker) ownerUID() (types.UID, error) {
	if t.owner == nil {
		return "", nil
	}
	if uid := t.owner(); uid != "" {
		return uid, nil
	}
	return "", fmt.Errorf("%w: %w", ErrAPI, errOwnNodeAbsent)
}

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

// record is Record, also saying whether it had to write the record. What
// it decides without writing is decided on a fresh read of the PV: a PV
// taken from the cache and found recorded is read again, and checked again.
func (t *Tracker) record(ctx context.Context, handle string) (uid string, wrote bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, APITimeout)
	defer cancel()
	fresh := false
	err = onConflict(func() error {
		for {
			pv, cached, err := t.read(ctx, handle, fresh)
			fresh = true // a retry reads the PV again
			if err != nil {
				return err
			}
			uid = string(pv.UID)
			if wrote, err = t.recordOn(ctx, pv); err != nil || wrote || !cached {
				return err
			}
		}
	})
	if err != nil {
		return "", false, err
	}
	return uid, wrote, nil
}

// read is the PV of handle, checked: a per-node volume of that name, not
// being deleted, and whether it is the cache's. Unless fresh, it is the
// cache's if the cache shows such a PV that does not record this node yet:
// the one case where the read can be saved, since what is written next is
// checked against the API server's answer (and record reads again when
// nothing was written after all). A PV that records this node is read fresh: nothing is
// written, and the read is what confirms it is not being deleted.
func (t *Tracker) read(ctx context.Context, handle string, fresh bool) (pv *corev1.PersistentVolume, cached bool, err error) {
	if t.cache != nil && !fresh {
		if seen, ok := t.cache.Cached(handle); ok && CheckOurs(seen, handle) == nil && seen.DeletionTimestamp == nil && !t.recordedIn(seen) {
			pv, cached = seen, true
		}
	}
	if pv == nil {
		if pv, err = getPV(ctx, t.pvs, handle); err != nil {
			return nil, false, err
		}
	}
	t.uids.set(handle, pv.UID)
	if err := CheckOurs(pv, handle); err != nil {
		return nil, false, err
	}
	if pv.DeletionTimestamp != nil {
		return nil, false, ErrDeleting
	}
	return pv, cached, nil
}

// recordOn makes sure this node's Copy of pv exists and pv carries
// Finalizer, and says whether it wrote either. Whatever it writes, it
// checks against the API server's answer: the PV as the finalizer's patch
// left it, or read again after a new Copy. A PV being deleted or created
// again meanwhile gets no Copy of this node (ErrDeleting, or a Conflict
// that reads the new one).
func (t *Tracker) recordOn(ctx context.Context, pv *corev1.PersistentVolume) (bool, error) {
	has, err := t.hasCopy(ctx, pv)
	if err != nil {
		return false, err
	}
	if has && hasFinalizer(pv) {
		return false, nil
	}
	var made *copyapi.Copy
	if !has {
		owner, err := t.ownerUID()
		if err != nil {
			return false, err
		}
		if made, err = createCopy(ctx, t.copies, pv, t.node, owner); err != nil {
			return false, err
		}
		t.created.Add(ownKey(pv.Name, string(pv.UID)), createdCopy{made, time.Now()})
	}
	now := pv
	switch {
	case !hasFinalizer(pv):
		now, err = addFinalizer(ctx, t.pvs, pv)
		err = t.refusedWhy(ctx, pv, err)
	case made != nil:
		now, err = getPV(ctx, t.pvs, pv.Name)
	}
	if err == nil {
		err = checkRecorded(pv, now)
	}
	if err != nil && made != nil {
		t.undo(ctx, made)
	}
	return true, err
}

// checkRecorded says whether now, the API server's answer after this node
// recorded itself on read, still is that PV, live and with Finalizer.
func checkRecorded(read, now *corev1.PersistentVolume) error {
	switch {
	case now.UID != read.UID:
		return apierrors.NewConflict(corev1.Resource("persistentvolumes"), read.Name,
			fmt.Errorf("created again (UID %s, was %s) while this node recorded itself", now.UID, read.UID))
	case now.DeletionTimestamp != nil:
		return ErrDeleting
	case !hasFinalizer(now):
		return fmt.Errorf("%w: PersistentVolume %s does not show the finalizer %s this node just put on it", ErrAPI, now.Name, Finalizer)
	}
	return CheckOurs(now, now.Name)
}

// undo deletes a Copy this node created for a PV that turned out to be
// deleted or replaced, and releases that PV if it was its last Copy.
func (t *Tracker) undo(ctx context.Context, made *copyapi.Copy) {
	t.created.Remove(ownKey(made.Spec.Volume, made.Spec.VolumeUID))
	if err := deleteCopy(ctx, t.copies, made); err != nil {
		klog.ErrorS(err, "Cannot delete the Copy of a PersistentVolume this node did not record itself on; the controller will",
			"volume_id", made.Spec.Volume)
		return
	}
	if pv, err := getPV(ctx, t.pvs, made.Spec.Volume); err == nil && string(pv.UID) == made.Spec.VolumeUID {
		if err := release(ctx, t.pvs, t.copies, pv); err != nil {
			klog.ErrorS(err, "Cannot release a PersistentVolume being deleted; the controller will", "volume_id", pv.Name)
		}
	}
}

// createdTrust is how long a Copy this tracker created answers for itself
// while the view of this node's Copies has not shown it: the informer's lag
// is well under a second, and a Copy deleted in that time (its Node deleted
// and registered again, kubectl delete copy) must not be taken as there.
const createdTrust = 30 * time.Second

// createdCopy is a Copy this tracker created, and when.
type createdCopy struct {
	copy *copyapi.Copy
	at   time.Time
}

// seenCopy tells the tracker that the view of this node's Copies has seen
// c's volume's Copy change (created, updated or deleted): from then on the
// view, not what this tracker created, answers for it.
func (t *Tracker) seenCopy(c *copyapi.Copy) {
	t.created.Remove(ownKey(c.Spec.Volume, c.Spec.VolumeUID))
}

// justCreated says whether this tracker created this node's Copy of the PV
// of key in the last createdTrust, owned by this node's Node as it is now,
// and the view has not seen that Copy change since.
func (t *Tracker) justCreated(key string) bool {
	v, ok := t.created.Get(key)
	if !ok {
		return false
	}
	made := v.(createdCopy)
	if time.Since(made.at) < createdTrust && t.fits(made.copy) {
		return true
	}
	t.created.Remove(key)
	return false
}

// hasCopy says whether this node's Copy of pv exists: one the view of this
// node's Copies shows, or one this tracker just created that the view does
// not show yet (justCreated); before that view has synced, a fresh list
// decides.
func (t *Tracker) hasCopy(ctx context.Context, pv *corev1.PersistentVolume) (bool, error) {
	key := ownKey(pv.Name, string(pv.UID))
	if t.own != nil {
		c, synced := t.own.OwnCopy(pv.Name, string(pv.UID))
		if c != nil && t.fits(c) {
			t.created.Remove(key) // the view has it now
			return true, nil
		}
		if t.justCreated(key) {
			return true, nil
		}
		if synced || c != nil {
			return false, nil // none, or not owned by this node's Node: one is made
		}
	} else if t.justCreated(key) {
		return true, nil
	}
	cs, err := copiesOf(ctx, t.copies, pv.Name, string(pv.UID))
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(cs, func(c copyapi.Copy) bool { return c.Spec.Node == t.node && t.fits(&c) }), nil
}

// recordedIn says whether the caches show pv recorded: this node's Copy of
// it, owned by this node's Node, and its finalizer.
func (t *Tracker) recordedIn(pv *corev1.PersistentVolume) bool {
	if !hasFinalizer(pv) || t.own == nil {
		return false
	}
	c, _ := t.own.OwnCopy(pv.Name, string(pv.UID))
	return c != nil && t.fits(c)
}

// fits says whether c, this node's Copy, is the one this tracker would
// write: owned by this node's Node. A Copy written by hand (or by a
// restore), or owned by this node's Node before it was deleted and
// registered again, is replaced (and then deleted, tidyOwn). While this
// node's Node is not known, any Copy fits.
func (t *Tracker) fits(c *copyapi.Copy) bool {
	if t.owner == nil {
		return true
	}
	uid := t.owner()
	return uid == "" || c.OwnedBy(uid)
}

// ownKey is the key of this node's Copy of a PV of name and UID.
func ownKey(volume, uid string) string { return volume + "/" + uid }

// refusedWhy reads the PV again after the API server refused to record
// this node on it (err wraps ErrForbidden): a PV whose deletion began since
// it was read gives ErrDeleting, and one created again under the same name
// a Conflict, which reads the new one. Other errors, and refusals of an
// unchanged PV, are returned as they are.
func (t *Tracker) refusedWhy(ctx context.Context, read *corev1.PersistentVolume, err error) error {
	if !errors.Is(err, ErrForbidden) {
		return err
	}
	now, gerr := getPV(ctx, t.pvs, read.Name)
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

// Forget deletes the Copies of nodes of pv (its name and UID) that no Node
// owns (forgetCopies), and, if pv is being deleted and no Copy of it is
// left, removes its finalizer. A PV created again under the name since has
// other Copies (of its own UID), which this never touches.
func Forget(ctx context.Context, pvs kube.PersistentVolumes, copies kube.Copies, pv *corev1.PersistentVolume, nodes ...string) error {
	if len(nodes) > 0 {
		cs, err := copiesOf(ctx, copies, pv.Name, string(pv.UID))
		if err != nil {
			return err
		}
		if err := forgetCopies(ctx, copies, cs, nodes); err != nil {
			return err
		}
	}
	return release(ctx, pvs, copies, pv)
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

// Event records an event on the PV named handle of UID uid: an event about
// a copy names the PV that copy is bound to, never a PV of the same name
// read since. With uid "", it names the UID this tracker read last (an
// event about a publish, which read it). It makes no API call of its own:
// the recorder sends events in the background.
func (t *Tracker) Event(_ context.Context, handle, uid, eventType, reason, message string) {
	if t.recorder == nil {
		return
	}
	id := types.UID(uid)
	if id == "" {
		id = t.uids.get(handle)
	}
	ref := &corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: handle, UID: id}
	t.recorder.Event(ref, eventType, reason, message)
}

// removable reports whether a PV's copies may go: it is being deleted and
// no claim protection remains.
func removable(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, pvProtection)
}
