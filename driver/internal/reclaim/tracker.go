// Package reclaim ties each node's copies to the PersistentVolume they
// belong to, so that deleting the PV removes every copy on every node, and
// nothing else. Nothing in Kubernetes tells a CSI driver that a static PV
// was deleted, so the driver works from the PV objects themselves:
//
//   - before a node creates its copy it adds its finalizer,
//     per-node.liken.sh/<node>, to the PV: `kubectl get pv -o yaml` shows
//     which nodes hold copies, and the PV cannot disappear while one remains;
//   - when the PV is being deleted and its claim is gone, each node removes
//     its copy as soon as no pod on it holds the copy, then its finalizer;
//   - when a Node object is deleted, the drivers on the other nodes remove
//     its finalizers, so a node that never returns wedges nothing;
//   - at start a node removes copies whose PV is gone, or is another PV of
//     the same name (copies are bound to the PV's UID), or no longer lists
//     the node — each confirmed by a fresh read from the API server.
package reclaim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
)

// FinalizerPrefix starts every node's finalizer on a PersistentVolume.
const FinalizerPrefix = "per-node.liken.sh/"

// pvProtection is kube-controller-manager's finalizer, removed once no
// claim is bound to the PV.
const pvProtection = "kubernetes.io/pv-protection"

var (
	// ErrNoVolume means no PersistentVolume has the handle's name.
	ErrNoVolume = errors.New("no PersistentVolume of that name")
	// ErrDeleting means the PersistentVolume is being deleted.
	ErrDeleting = errors.New("the PersistentVolume is being deleted")
	// ErrAPI means the API server could not be asked or did not answer.
	ErrAPI = errors.New("the API server did not answer")
)

// Finalizer is the finalizer that says node holds a copy. A finalizer's
// name part is at most 63 characters; longer node names are hashed.
func Finalizer(node string) string {
	if len(node) <= 63 {
		return FinalizerPrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return FinalizerPrefix + node[:50] + "-" + hex.EncodeToString(sum[:])[:12]
}

// Tracker records on PersistentVolumes which nodes hold copies.
type Tracker struct {
	client   kubernetes.Interface
	node     string
	recorder record.EventRecorder
}

// NewTracker returns the tracker of node.
func NewTracker(client kubernetes.Interface, node string, recorder record.EventRecorder) *Tracker {
	return &Tracker{client: client, node: node, recorder: recorder}
}

// Record makes sure the PV named handle lists this node as a holder, and
// returns the PV's UID. It refuses a PV that is being deleted.
func (t *Tracker) Record(ctx context.Context, handle string) (string, error) {
	var uid string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pv, err := t.client.CoreV1().PersistentVolumes().Get(ctx, handle, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %s", ErrNoVolume, handle)
		}
		if err != nil {
			return fmt.Errorf("%w: get PersistentVolume %s: %v", ErrAPI, handle, err)
		}
		if pv.DeletionTimestamp != nil {
			return ErrDeleting
		}
		uid = string(pv.UID)
		f := Finalizer(t.node)
		if slices.Contains(pv.Finalizers, f) {
			return nil
		}
		pv.Finalizers = append(pv.Finalizers, f)
		_, err = t.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("%w: record node %s on PersistentVolume %s: %v", ErrAPI, t.node, handle, err)
		}
		return err
	})
	return uid, err
}

// Forget removes node's finalizer from the PV named handle, if it is there.
func Forget(ctx context.Context, client kubernetes.Interface, handle, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pv, err := client.CoreV1().PersistentVolumes().Get(ctx, handle, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrAPI, err)
		}
		f := Finalizer(node)
		i := slices.Index(pv.Finalizers, f)
		if i < 0 {
			return nil
		}
		pv.Finalizers = slices.Delete(pv.Finalizers, i, i+1)
		_, err = client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
		return err
	})
}

// Event records an event on the PV named handle.
func (t *Tracker) Event(ctx context.Context, handle, eventType, reason, message string) {
	if t.recorder == nil {
		return
	}
	pv, err := t.client.CoreV1().PersistentVolumes().Get(ctx, handle, metav1.GetOptions{})
	if err != nil {
		pv = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: handle}}
	}
	t.recorder.Event(pv, eventType, reason, message)
}

// removable reports whether a PV's copies may go: it is being deleted and
// no claim protection remains.
func removable(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, pvProtection)
}
