package reclaim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	listersv1 "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

const me = "worker-a"

func pv(name, uid string, finalizers ...string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Finalizers: finalizers},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: DriverName, VolumeHandle: name}}},
	}
}

func deleting(p *corev1.PersistentVolume) *corev1.PersistentVolume {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

func finalizersOf(t *testing.T, c *fake.Clientset, name string) []string {
	t.Helper()
	got, err := c.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	assert.NilError(t, err)
	return got.Finalizers
}

func TestFinalizerNames(t *testing.T) {
	assert.Equal(t, Finalizer("kind-worker"), "per-node.liken.sh/kind-worker")
	long := strings.Repeat("n", 200) + ".example.com"
	f := Finalizer(long)
	name := strings.TrimPrefix(f, FinalizerPrefix)
	assert.Assert(t, len(name) <= 63, "%q is too long for a finalizer", name)
	assert.Equal(t, Finalizer(long), f, "stable")
	assert.Assert(t, Finalizer(long+"x") != f, "distinct")
}

func TestRecord(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(pv("store", "uid-1", pvProtection), deleting(pv("going", "uid-2", pvProtection)))
	tr := NewTracker(c, me, nil)

	uid, err := tr.Record(ctx, "store")
	assert.NilError(t, err)
	assert.Equal(t, uid, "uid-1")
	assert.DeepEqual(t, finalizersOf(t, c, "store"), []string{pvProtection, Finalizer(me)})
	_, err = tr.Record(ctx, "store")
	assert.NilError(t, err)
	assert.DeepEqual(t, finalizersOf(t, c, "store"), []string{pvProtection, Finalizer(me)}) // recorded once

	_, err = tr.Record(ctx, "going")
	assert.Assert(t, errors.Is(err, ErrDeleting), "got %v", err)
	assert.DeepEqual(t, finalizersOf(t, c, "going"), []string{pvProtection})

	_, err = tr.Record(ctx, "missing")
	assert.Assert(t, errors.Is(err, ErrNoVolume), "got %v", err)
}

func TestRecordRetriesConflictsAndReportsAPIErrors(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(pv("store", "uid-1"))
	conflicts := 1
	c.PrependReactor("update", "persistentvolumes", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumes"}, "store", errors.New("changed"))
		}
		return false, nil, nil
	})
	_, err := NewTracker(c, me, nil).Record(ctx, "store")
	assert.NilError(t, err)
	assert.DeepEqual(t, finalizersOf(t, c, "store"), []string{Finalizer(me)})

	down := fake.NewClientset(pv("store", "uid-1"))
	down.PrependReactor("get", "persistentvolumes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	_, err = NewTracker(down, me, nil).Record(ctx, "store")
	assert.Assert(t, errors.Is(err, ErrAPI), "got %v", err)
}

// fakeCopies is this node's disk, as the controller sees it.
type fakeCopies struct {
	uids    map[string]string
	held    map[string]bool
	removed []string
}

func (f *fakeCopies) Handles() ([]string, error) {
	var out []string
	for h := range f.uids {
		out = append(out, h)
	}
	return out, nil
}
func (f *fakeCopies) CopyUID(h string) (string, error) { return f.uids[h], nil }
func (f *fakeCopies) EmptyTrash()                      {}
func (f *fakeCopies) RemoveCopy(h string) (bool, error) {
	if f.held[h] {
		return false, errors.New("held by a pod")
	}
	_, ok := f.uids[h]
	delete(f.uids, h)
	f.removed = append(f.removed, h)
	return ok, nil
}

func newController(t *testing.T, copies *fakeCopies, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	c := fake.NewClientset(objs...)
	ctl := NewController(c, me, copies)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		if p, ok := o.(*corev1.PersistentVolume); ok {
			assert.NilError(t, indexer.Add(p))
		}
	}
	ctl.pvs = listersv1.NewPersistentVolumeLister(indexer)
	return ctl, c
}

func node(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func TestSyncRemovesTheCopyOnlyWhenThePVGoesAndNoPodHoldsIt(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		pv          *corev1.PersistentVolume
		held        bool
		wantErr     bool
		wantRemoved bool
		wantFinal   []string
	}{
		{"deleted, claim gone", deleting(pv("v", "u", Finalizer(me))), false, false, true, []string{}},
		{"deleted, claim still bound", deleting(pv("v", "u", pvProtection, Finalizer(me))), false, false, false,
			[]string{pvProtection, Finalizer(me)}},
		{"deleted, a pod still holds it", deleting(pv("v", "u", Finalizer(me))), true, true, false, []string{Finalizer(me)}},
		{"not deleted", pv("v", "u", Finalizer(me)), false, false, false, []string{Finalizer(me)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copies := &fakeCopies{uids: map[string]string{"v": "u"}, held: map[string]bool{"v": tc.held}}
			ctl, c := newController(t, copies, tc.pv, node(me))
			err := ctl.sync(ctx, "v")
			assert.Equal(t, err != nil, tc.wantErr, "err %v", err)
			assert.Equal(t, len(copies.removed) == 1, tc.wantRemoved)
			assert.DeepEqual(t, finalizersOf(t, c, "v"), tc.wantFinal)
		})
	}
}

func TestSyncDropsRecordsOfNodesThatAreGone(t *testing.T) {
	ctx := context.Background()
	p := deleting(pv("v", "u", Finalizer(me), Finalizer("gone"), Finalizer("alive")))
	ctl, c := newController(t, &fakeCopies{uids: map[string]string{}}, p, node(me), node("alive"))
	assert.NilError(t, ctl.sync(ctx, "v"))
	assert.DeepEqual(t, finalizersOf(t, c, "v"), []string{Finalizer("alive")})

	// An API error is never taken for "gone".
	p = pv("w", "u", Finalizer("maybe"))
	ctl, c = newController(t, &fakeCopies{uids: map[string]string{}}, p)
	c.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	assert.NilError(t, ctl.sync(ctx, "w"))
	assert.DeepEqual(t, finalizersOf(t, c, "w"), []string{Finalizer("maybe")})
}

func TestReconcileLocalRemovesOrphansOnlyOnAFreshAnswer(t *testing.T) {
	copies := &fakeCopies{uids: map[string]string{
		"gone":        "u1", // PV deleted while this node was away
		"reborn":      "old-uid",
		"forgotten":   "u3", // PV no longer lists this node
		"kept":        "u4",
		"untracked":   "", // predates tracking: adopted by the next publish
		"unreachable": "u6",
	}}
	ctl, c := newController(t, copies,
		pv("reborn", "new-uid", Finalizer(me)), pv("forgotten", "u3"), pv("kept", "u4", Finalizer(me)),
		pv("untracked", "u5"), pv("unreachable", "u6"))
	c.PrependReactor("get", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.GetAction).GetName() == "unreachable" {
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		return false, nil, nil
	})
	ctl.reconcileLocal(context.Background())
	assert.DeepEqual(t, sorted(copies.removed), []string{"forgotten", "gone", "reborn"})
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
