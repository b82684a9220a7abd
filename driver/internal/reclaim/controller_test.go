// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"liken.sh/per-node/driver/internal/copyapi"
)

// fakeCopies is this node's disk, as the controller sees it. Safe for the
// controller's workers at once, as the real one is.
type fakeCopies struct {
	mu      sync.Mutex
	uids    map[string]string
	held    map[string]bool
	removed []string
	// removing, if set, is called as a removal begins, outside the lock.
	removing func(handle string)
	// trashFails is how many calls of EmptyTrash fail before one succeeds;
	// trashCalls counts them.
	trashFails, trashCalls int
}

func (f *fakeCopies) Handles() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Collect(maps.Keys(f.uids))
	slices.Sort(out)
	return out, nil
}

func (f *fakeCopies) HasCopy(h string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.uids[h]
	return ok, nil
}

func (f *fakeCopies) CopyUID(h string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uids[h], nil
}

func (f *fakeCopies) EmptyTrash() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trashCalls++
	if f.trashCalls <= f.trashFails {
		return errors.New("a trash entry could not be removed")
	}
	return nil
}

// RemoveCopy refuses, as the node's does, a copy bound to another UID than
// the one the removal was decided for.
func (f *fakeCopies) RemoveCopy(h, uid string) (bool, error) {
	if f.removing != nil {
		f.removing(h)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[h] {
		return false, errors.New("held by a pod")
	}
	now, ok := f.uids[h]
	if ok && now != uid {
		return false, fmt.Errorf("%w: decided for %q, now %q", ErrCopyChanged, uid, now)
	}
	delete(f.uids, h)
	f.removed = append(f.removed, h)
	return ok, nil
}

func nodeMeta(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-of-" + name)},
	}
}

// testController is a controller of node self over a fake API server that
// holds pvs and the Nodes named in nodes; its Node cache holds self's Node
// if it is among them (the informer watches only that one).
type testController struct {
	*Controller
	world
	meta *metadatafake.FakeMetadataClient
}

func newController(t *testing.T, self string, copies *fakeCopies, nodes []string, pvs ...*corev1.PersistentVolume) testController {
	t.Helper()
	w := newWorld(pvs...)
	objs, cs := seed(pvs...)
	view := newStaticPVs()
	for _, p := range objs {
		view.pvs[p.(*corev1.PersistentVolume).Name] = p.(*corev1.PersistentVolume)
	}
	scheme := runtime.NewScheme()
	assert.NilError(t, metav1.AddMetaToScheme(scheme))
	var nodeObjs []runtime.Object
	nodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		nodeObjs = append(nodeObjs, nodeMeta(n))
		if n == self {
			assert.NilError(t, nodeIndex.Add(nodeMeta(n)))
		}
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, nodeObjs...)
	ctl, err := NewController(fakePVs{w.client.CoreV1().PersistentVolumes()}, w.copies, meta, self, copies, nil)
	assert.NilError(t, err)
	ctl.held = view
	ctl.nodes = cache.NewGenericLister(nodeIndex, nodesResource.GroupResource())
	ctl.own = ownIndex(t, self, cs...)
	return testController{Controller: ctl, world: w, meta: meta}
}

// live makes the controller read its own informers' caches again (Run
// fills them), in place of the fixed views newController gave it.
func (tc testController) live() testController {
	tc.own = tc.copyInformer.GetIndexer()
	tc.nodes = cache.NewGenericLister(tc.nodeInformer.GetIndexer(), nodesResource.GroupResource())
	return tc
}

// ownIndex is the controller's index of self's Copies, holding those of cs.
func ownIndex(t *testing.T, self string, cs ...*copyapi.Copy) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byVolume: func(obj any) ([]string, error) {
		return []string{obj.(*copyapi.Copy).Spec.Volume}, nil
	}})
	for _, c := range cs {
		if c.Spec.Node == self {
			assert.NilError(t, idx.Add(c))
		}
	}
	return idx
}

// fakePVs is the fake clientset's client of PersistentVolumes, saying as
// the clientset itself does that its watch cannot stream the initial list
// (the informer then lists, then watches).
type fakePVs struct {
	corev1client.PersistentVolumeInterface
}

func (fakePVs) IsWatchListSemanticsUnSupported() bool { return true }

// syncAll runs sync for every queued handle once, as the queue would, and
// returns the handles whose sync failed (they would be retried).
func (tc testController) syncAll(t *testing.T) map[string]error {
	t.Helper()
	failed := map[string]error{}
	for tc.queue.Len() > 0 {
		name, _ := tc.queue.Get()
		if err := tc.sync(context.Background(), name); err != nil {
			failed[name] = err
		}
		tc.queue.Done(name)
	}
	return failed
}

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
		{"deleted, claim gone", deleting(pv("v", "u", rec(me))), false, false, true, nil},
		{"deleted, claim still bound", deleting(pv("v", "u", pvProtection, rec(me))), false, false, false,
			recs(pvProtection, rec(me))},
		{"deleted, a pod still holds it", deleting(pv("v", "u", rec(me))), true, true, false, recs(rec(me))},
		{"not deleted", pv("v", "u", owned(me)), false, false, false, recs(owned(me))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copies := &fakeCopies{uids: map[string]string{"v": "u"}, held: map[string]bool{"v": tc.held}}
			ctl := newController(t, me, copies, []string{me}, tc.pv)
			err := ctl.sync(ctx, "v")
			assert.Equal(t, err != nil, tc.wantErr, "err %v", err)
			assert.Equal(t, len(copies.removed) == 1, tc.wantRemoved, "removed: %v", copies.removed)
			assert.DeepEqual(t, ctl.view(t, "v"), tc.wantFinal)
			noUpdates(t, ctl.world.client)
		})
	}
}

// Copies of nodes that are gone are deleted, whatever the length of their
// names; Copies of nodes that exist (this one included) never are.
func TestSyncDropsRecordsOfNodesThatAreGone(t *testing.T) {
	for _, self := range []string{me, name63, name64, name253} {
		t.Run("self "+self[:8], func(t *testing.T) {
			// Alive: self and "zz-alive" (after self by name: self acts).
			// Gone: "gone" and the long names that are not self.
			alive := []string{self, "zz-alive"}
			records := []string{"zz-alive"}
			for _, n := range []string{self, "gone", name63, name64, name253} {
				if !slices.Contains(records, n) {
					records = append(records, n)
				}
			}
			p := deleting(recorded(pv("v", "u", pvProtection), records...)) // the claim is still bound
			ctl := newController(t, self, &fakeCopies{uids: map[string]string{}}, alive, p)
			assert.NilError(t, ctl.sync(context.Background(), "v"))
			assert.DeepEqual(t, ctl.holders(t, "v"), sorted(alive))
			assert.DeepEqual(t, finalizersOfPV(t, ctl.world, "v"), []string{pvProtection, Finalizer})
			noUpdates(t, ctl.world.client)
		})
	}
}

// A gone node's record is dropped only on the API server's own NotFound for
// that Node: a read that fails, or that finds the Node, keeps it.
func TestARecordIsOnlyDroppedOnTheAPIServersNotFound(t *testing.T) {
	long := 2 * orphanedAfter // this node holds no record: it waits that long
	// The read fails: kept.
	p := deletingSince(recorded(pv("w", "u", pvProtection), "maybe"), long)
	ctl := newController(t, me, &fakeCopies{uids: map[string]string{}}, []string{me}, p)
	ctl.meta.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	assert.NilError(t, ctl.forgetGoneNodes(context.Background(), getPVT(t, ctl.world.client, "w")))
	assert.DeepEqual(t, ctl.view(t, "w"), recs(pvProtection, rec("maybe")))

	// A NotFound about another Node: kept.
	ctl = newController(t, me, &fakeCopies{uids: map[string]string{}}, []string{me}, deletingSince(recorded(pv("w", "u", pvProtection), "maybe"), long))
	ctl.meta.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(nodesResource.GroupResource(), "another")
	})
	assert.NilError(t, ctl.forgetGoneNodes(context.Background(), getPVT(t, ctl.world.client, "w")))
	assert.DeepEqual(t, ctl.view(t, "w"), recs(pvProtection, rec("maybe")))

	// On a live PV a gone node's record stays: the Node may register again.
	ctl = newController(t, me, &fakeCopies{uids: map[string]string{}}, []string{me}, recorded(pv("w", "u"), "away"))
	assert.NilError(t, ctl.sync(context.Background(), "w"))
	assert.DeepEqual(t, ctl.view(t, "w"), recs(rec("away")))

	// The read finds it: kept.
	ctl = newController(t, me, &fakeCopies{uids: map[string]string{}}, []string{me, "new"}, deletingSince(recorded(pv("w", "u", pvProtection), "new"), long))
	assert.NilError(t, ctl.forgetGoneNodes(context.Background(), getPVT(t, ctl.world.client, "w")))
	assert.DeepEqual(t, ctl.view(t, "w"), recs(pvProtection, rec("new")))

	// The API server's own NotFound for it: dropped.
	ctl = newController(t, me, &fakeCopies{uids: map[string]string{}}, []string{me}, deletingSince(recorded(pv("w", "u", pvProtection), "gone"), long))
	assert.NilError(t, ctl.forgetGoneNodes(context.Background(), getPVT(t, ctl.world.client, "w")))
	assert.DeepEqual(t, ctl.view(t, "w"), []string{pvProtection})
}

// A copy whose live PV does not list this node is the same volume's copy:
// the node records itself again and keeps it.
func TestAMissingRecordIsNotPermissionToDelete(t *testing.T) {
	for _, self := range []string{me, name64, name253} {
		t.Run(self[:8], func(t *testing.T) {
			copies := &fakeCopies{uids: map[string]string{"store": "u1"}}
			p := pv("store", "u1", pvProtection) // replaced without its finalizers
			ctl := newController(t, self, copies, []string{self}, p)
			assert.NilError(t, ctl.queueLocal())
			assert.DeepEqual(t, ctl.syncAll(t), map[string]error{})
			assert.DeepEqual(t, copies.removed, []string(nil))
			assert.Assert(t, ctl.has(t, "store", self), "record not restored")
			for _, c := range ctl.allCopies(t) {
				assert.Assert(t, c.OwnedByNode() && c.OwnerReferences[0].UID == types.UID("uid-of-"+self),
					"a restored Copy is not owned by this node's Node: %v", c.OwnerReferences)
			}
			noUpdates(t, ctl.world.client)
		})
	}

	// While this node's own Node object is absent (deleted, not yet
	// registered again) the copy is kept and re-recording waits.
	copies := &fakeCopies{uids: map[string]string{"store": "u1"}}
	ctl := newController(t, me, copies, nil, pv("store", "u1"))
	err := ctl.sync(context.Background(), "store")
	assert.Assert(t, errors.Is(err, errOwnNodeAbsent), "got %v", err)
	assert.DeepEqual(t, copies.removed, []string(nil))
}

// At start every copy is decided by a fresh answer, and a copy that cannot
// be decided is retried, never removed.
func TestCopiesAtStart(t *testing.T) {
	copies := &fakeCopies{uids: map[string]string{
		"gone":        "u1", // PV deleted while this node was away
		"reborn":      "old-uid",
		"forgotten":   "u3", // PV no longer lists this node
		"kept":        "u4",
		"untracked":   "", // predates tracking: adopted by the next publish
		"unreachable": "u6",
		"uncached":    "u7", // the cache lags: the PV exists
	}}
	ctl := newController(t, me, copies, []string{me},
		recorded(pv("reborn", "new-uid"), me), pv("forgotten", "u3"), recorded(pv("kept", "u4"), me),
		pv("untracked", "u5"))
	_, err := ctl.world.client.CoreV1().PersistentVolumes().Create(context.Background(), recorded(pv("uncached", "u7"), me), metav1.CreateOptions{})
	assert.NilError(t, err)
	ctl.world.client.PrependReactor("get", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.GetAction).GetName() == "unreachable" {
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		return false, nil, nil
	})
	assert.NilError(t, ctl.queueLocal())
	failed := ctl.syncAll(t)
	assert.DeepEqual(t, sorted(copies.removed), []string{"gone", "reborn"})
	assert.Equal(t, len(failed), 1, "failed: %v", failed)
	assert.Assert(t, errors.Is(failed["unreachable"], ErrAPI), "an undecided copy is retried: %v", failed)
	assert.Assert(t, ctl.has(t, "forgotten", me))
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// The controller works on several handles at once: a removal waits for
// the API server, and 200 PVs deleted together must not wait for 200 round
// trips one after another. Each removal here waits until `workers` of them
// have begun; one at a time, the first would wait forever.
func TestRemovalsRunAtOnce(t *testing.T) {
	var pvs []*corev1.PersistentVolume
	copies := &fakeCopies{uids: map[string]string{}}
	for i := range 2 * workers {
		name := fmt.Sprintf("v%d", i)
		pvs = append(pvs, deleting(recorded(pv(name, "u"+name), me)))
		copies.uids[name] = "u" + name
	}
	var mu sync.Mutex
	var begun []string
	all, stop := make(chan struct{}), make(chan struct{})
	copies.removing = func(h string) {
		mu.Lock()
		begun = append(begun, h)
		if len(begun) == workers {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-stop: // the test has failed; let the workers finish
		}
	}
	tc := newController(t, me, copies, []string{me}, pvs...)
	for _, p := range pvs {
		tc.queue.Add(p.Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tc.work(ctx); close(done) }()
	t.Cleanup(func() { close(stop); cancel(); tc.queue.ShutDown(); <-done })
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		mu.Lock()
		defer mu.Unlock()
		if len(begun) < workers {
			return poll.Continue("%d removals begun at once (%v), want %d", len(begun), begun, workers)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		left := 0
		for _, p := range pvs {
			if got, err := tc.world.client.CoreV1().PersistentVolumes().Get(ctx, p.Name, metav1.GetOptions{}); err == nil && slices.Contains(got.Finalizers, Finalizer) && slices.Contains(tc.holders(t, p.Name), me) {
				left++
			}
		}
		if h, _ := copies.Handles(); len(h) > 0 || left > 0 {
			return poll.Continue("copies left %v, records left %d of %d", h, left, len(pvs))
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second))
}

// The informers cache objects without their managed fields, and with
// everything the controller reads; a PV of another driver or of none as
// othersPV: its name, UID, version, finalizers, deletion, this driver's
// annotations and spec.csi's driver and handle.
func TestLeanKeepsWhatTheControllerReads(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}}
	ours := deleting(recorded(pv("store", "uid-1", pvProtection), me, name253))
	for _, obj := range []metav1.Object{ours, nodeMeta("worker-b")} {
		want := obj.(runtime.Object).DeepCopyObject()
		obj.SetManagedFields(managed)
		got, err := lean(obj)
		assert.NilError(t, err)
		assert.DeepEqual(t, got, want)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "store", Obj: pv("store", "uid-1")}
	got, err := lean(tomb)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, tomb)

	for _, tc := range []struct {
		name string
		full *corev1.PersistentVolume
		want *corev1.PersistentVolume
	}{
		{"local", localPV("data"), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "data", UID: "uid-l",
			ResourceVersion: "9", Finalizers: []string{pvProtection}}}},
		{"another CSI driver, being deleted, with this driver's record", othersCSI("nfs"), &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "nfs", UID: "uid-n", ResourceVersion: "7", DeletionTimestamp: othersCSI("nfs").DeletionTimestamp,
				Finalizers: []string{pvProtection, Finalizer}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "nfs.csi.k8s.io", VolumeHandle: "share-1"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.full.SetManagedFields(managed)
			got, err := lean(tc.full)
			assert.NilError(t, err)
			assert.DeepEqual(t, got, tc.want)
		})
	}
}

var deletedAt = metav1.NewTime(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))

// localPV is a static local PV as the local static provisioner writes one.
func localPV(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-l", ResourceVersion: "9", Finalizers: []string{pvProtection},
			Labels:      map[string]string{"storage.example/disk": "nvme0"},
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "local-volume-provisioner-worker-b"}},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "local",
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "db", Name: name, UID: "uid-c"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn,
					Values: []string{"worker-b"}}}}}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
}

// othersCSI is a PV of another CSI driver, being deleted, that bears this
// driver's finalizer (someone copied it).
func othersCSI(name string) *corev1.PersistentVolume {
	p := pv(name, "uid-n", pvProtection, Finalizer)
	p.Spec.CSI.Driver, p.Spec.CSI.VolumeHandle = "nfs.csi.k8s.io", "share-1"
	p.Spec.CSI.VolumeAttributes = map[string]string{"server": "nfs.example", "share": "/exports"}
	p.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": "nfs.csi.k8s.io"}
	p.DeletionTimestamp = &deletedAt
	return p
}

// What the controller decides about a PV that is not per-node's is the same
// from what lean keeps of it as from the whole PV: for every such PV and
// every state of a copy of that name on disk, the same API requests and
// the same copies removed.
func TestOthersPVsDecideTheSameAsWhole(t *testing.T) {
	hostPath := localPV("data")
	hostPath.Spec.Local, hostPath.Spec.HostPath = nil, &corev1.HostPathVolumeSource{Path: "/srv/data"}
	released := localPV("data")
	released.Finalizers, released.DeletionTimestamp = nil, &deletedAt
	alive := othersCSI("data")
	alive.DeletionTimestamp = nil
	others := map[string]*corev1.PersistentVolume{"local": localPV("data"), "hostPath": hostPath,
		"local being deleted, protection gone": released, "another CSI driver, being deleted": othersCSI("data"),
		"another CSI driver": alive}
	copies := map[string]map[string]string{"no copy": {}, "a copy bound to its UID": {"data": "uid-l"},
		"a copy bound to the other driver's UID": {"data": "uid-n"}, "a copy bound to another UID": {"data": "uid-x"},
		"a copy bound to none": {"data": ""}}
	for _, self := range []string{me, name253} { // a node name that fits a finalizer, and one that is hashed
		for pvName, whole := range others {
			for copyName, uids := range copies {
				t.Run(fmt.Sprintf("node of %d characters, %s, %s", len(self), pvName, copyName), func(t *testing.T) {
					decide := func(cached *corev1.PersistentVolume) (actions []string, removed []string, err error) {
						fc := &fakeCopies{uids: maps.Clone(uids)}
						ctl := newController(t, self, fc, []string{self}, whole.DeepCopy())
						ctl.held = newStaticPVs(cached)
						err = ctl.sync(context.Background(), "data")
						for _, a := range ctl.world.client.Actions() {
							actions = append(actions, fmt.Sprintf("%s %s", a.GetVerb(), a.GetResource().Resource))
						}
						return actions, fc.removed, err
					}
					kept, err := lean(whole.DeepCopy())
					assert.NilError(t, err)
					wantActions, wantRemoved, wantErr := decide(whole.DeepCopy())
					gotActions, gotRemoved, gotErr := decide(kept.(*corev1.PersistentVolume))
					assert.DeepEqual(t, gotActions, wantActions)
					assert.DeepEqual(t, gotRemoved, wantRemoved)
					assert.Equal(t, fmt.Sprint(gotErr), fmt.Sprint(wantErr))
				})
			}
		}
	}
}

// The Copies of gone nodes of a PV being deleted are deleted by one driver: the first live node, by name, of those that
// hold one (a live node's own Copy goes only after its copy, so one is
// there until the end). A node after a live one leaves it to that one; a
// node with no Copy waits orphanedAfter and then acts only if no node that
// holds one is live, so the PV is never stuck.
func TestOneLiveRecordedNodeDropsTheRecordsOfGoneNodes(t *testing.T) {
	for _, tc := range []struct {
		name, self string
		records    []string
		since      time.Duration // how long the PV has been being deleted
		wantAsked  []string      // the Nodes asked about, one GET each
		wantLeft   []string
	}{
		{name: "the_first_live_holder_drops_every_gone_record", self: "a",
			records: []string{"a", "gone", "b", "gone2"}, wantAsked: []string{"gone", "b", "gone2"}, wantLeft: []string{"a", "b"}},
		{name: "a_holder_after_a_live_one_leaves_it_to_that_one", self: "b",
			records: []string{"a", "gone", "b", "gone2"}, wantAsked: []string{"a", "gone", "gone2"}, wantLeft: []string{"a", "b", "gone", "gone2"}},
		{name: "a_holder_after_only_gone_ones_drops_them", self: "b",
			records: []string{"gone", "b", "gone2"}, wantAsked: []string{"gone", "gone2"}, wantLeft: []string{"b"}},
		{name: "the_only_record_asks_nothing", self: "a",
			records: []string{"a"}, wantLeft: []string{"a"}},
		{name: "a_node_without_a_record_waits", self: "c",
			records: []string{"gone", "gone2"}, wantLeft: []string{"gone", "gone2"}},
		{name: "after_waiting_it_leaves_them_to_a_live_holder", self: "c", since: 2 * orphanedAfter,
			records: []string{"b", "gone"}, wantAsked: []string{"b", "gone"}, wantLeft: []string{"b", "gone"}},
		{name: "after_waiting_with_no_live_holder_it_drops_them", self: "c", since: 2 * orphanedAfter,
			records: []string{"gone", "gone2"}, wantAsked: []string{"gone", "gone2"}, wantLeft: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := deletingSince(recorded(pv("v", "u", pvProtection), tc.records...), tc.since)
			ctl := newController(t, tc.self, &fakeCopies{uids: map[string]string{}}, []string{"a", "b", "c"}, p)
			assert.NilError(t, ctl.forgetGoneNodes(context.Background(), getPVT(t, ctl.world.client, "v")))
			asked := []string{}
			for _, a := range ctl.meta.Actions() {
				if g, ok := a.(clienttesting.GetAction); ok && a.GetResource().Resource == "nodes" {
					asked = append(asked, g.GetName())
				}
			}
			slices.Sort(asked)
			assert.DeepEqual(t, asked, append([]string{}, slices.Sorted(slices.Values(tc.wantAsked))...))
			assert.DeepEqual(t, ctl.holders(t, "v"), tc.wantLeft)
			patches := 0
			for _, a := range ctl.world.client.Actions() {
				if a.GetVerb() == "patch" {
					patches++
				}
			}
			assert.Assert(t, patches <= 1, "%d PATCHes of the PV, want one at most: %v", patches, ctl.world.client.Actions())
		})
	}
}

// afterQueue is the controller's queue, noting what was added for later.
type afterQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	after map[string]time.Duration
}

func (q *afterQueue) AddAfter(item string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.after[item] = d
}

// A Copy its Node owns is the garbage collector's. On a PV being deleted,
// the driver deletes only the gone nodes' Copies that no Node owns and
// looks again soon; once the collector has deleted the owned one, the PV
// is released.
func TestTheCollectorDeletesTheCopiesOfGoneNodes(t *testing.T) {
	p := deletingSince(pv("v", "u", owned("gone"), rec("gone2")), 2*orphanedAfter)
	ctl := newController(t, "c", &fakeCopies{uids: map[string]string{}}, []string{"a", "b", "c"}, p)
	q := &afterQueue{TypedRateLimitingInterface: ctl.queue, after: map[string]time.Duration{}}
	ctl.queue = q
	assert.NilError(t, ctl.forgetGoneNodes(context.Background(), getPVT(t, ctl.world.client, "v")))
	assert.DeepEqual(t, ctl.view(t, "v"), []string{Finalizer, owned("gone")})
	assert.Equal(t, q.after["v"], collectorWait, "the PV is not looked at again while the collector works")

	left := ctl.allCopies(t)
	assert.Equal(t, len(left), 1)
	assert.NilError(t, ctl.world.copies.Tracker.Delete(copyGVR, "", left[0].Name)) // the collector
	assert.NilError(t, ctl.forgetGoneNodes(context.Background(), getPVT(t, ctl.world.client, "v")))
	assert.Equal(t, len(finalizersOfPV(t, ctl.world, "v")), 0, "the PV is not released once the collector is done")
}

// More recorded nodes than askEach are read by one paged list of Nodes,
// not a GET each; a node the complete list lacks is gone.
func TestManyRecordedNodesAreReadByAList(t *testing.T) {
	records := []string{"a"}
	for i := range 2 * askEach {
		records = append(records, fmt.Sprintf("gone-%02d", i))
	}
	records = append(records, "b")
	ctl := newController(t, "a", &fakeCopies{uids: map[string]string{}}, []string{"a", "b"}, deleting(recorded(pv("v", "u", pvProtection), records...)))
	assert.NilError(t, ctl.sync(context.Background(), "v"))
	var gets, lists int
	for _, a := range ctl.meta.Actions() {
		switch a.GetVerb() {
		case "get":
			gets++
		case "list":
			lists++
		}
	}
	assert.Equal(t, gets, 0, "GETs of Nodes")
	assert.Equal(t, lists, 1, "lists of Nodes")
	assert.DeepEqual(t, ctl.holders(t, "v"), []string{"a", "b"})

	// A list that fails drops nothing, and the PV is retried.
	ctl = newController(t, "a", &fakeCopies{uids: map[string]string{}}, []string{"a", "b"}, deleting(recorded(pv("v", "u", pvProtection), records...)))
	ctl.meta.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	assert.Assert(t, ctl.sync(context.Background(), "v") != nil, "a failed list of Nodes was not retried")
	assert.Equal(t, len(ctl.holders(t, "v")), len(records))
}

// The controller watches only its own Node and its own Copies: its
// informers' lists and watches ask for that one name and that node's
// label, and another Node's arrival or departure queues nothing.
func TestTheControllerWatchesOnlyItsOwnNode(t *testing.T) {
	copies := &fakeCopies{uids: map[string]string{}}
	ctl := newController(t, me, copies, []string{me, "other"}, recorded(pv("v", "u"), "other"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ctl.live()
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NilError(t, <-done) })
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if ctl.synced.Load() {
			return poll.Success()
		}
		return poll.Continue("caches not synced")
	}, poll.WithTimeout(10*time.Second))
	selectors := selectorsOf(ctl.meta.Actions(), false)
	assert.Assert(t, len(selectors) > 0, "the controller neither listed nor watched Nodes")
	for _, s := range selectors {
		assert.Assert(t, strings.HasSuffix(s, " metadata.name="+me), "a Node list or watch not narrowed to this node: %q (all: %v)", s, selectors)
	}
	copySelectors := selectorsOf(ctl.world.copies.Fake.Actions(), true)
	assert.Assert(t, len(copySelectors) > 0, "the controller neither listed nor watched Copies")
	for _, s := range copySelectors {
		assert.Assert(t, strings.HasSuffix(s, " "+copyapi.NodeSelector(me)), "a Copy list or watch not narrowed to this node's: %q (all: %v)", s, copySelectors)
	}
}

// Another node's arrival or departure queues nothing; this node's queues
// its PVs.
func TestOnlyThisNodesEventsQueueWork(t *testing.T) {
	copies := &fakeCopies{uids: map[string]string{"v": "u"}}
	q := newController(t, me, copies, []string{me}, recorded(pv("v", "u"), "other"))
	q.onNode("other")
	assert.Equal(t, q.queue.Len(), 0, "another node's event queued work")
	q.onNode(me)
	assert.Equal(t, q.queue.Len(), 1, "this node's event did not queue its PVs")
}

// This node's Node registered again (a new UID) queues what the node holds:
// its Copies' owner is gone, and it records itself again, owned by the new
// one. Its status reports (same UID) queue nothing.
func TestThisNodeRegisteredAgainQueuesWhatItHolds(t *testing.T) {
	copies := &fakeCopies{uids: map[string]string{"v": "u"}}
	q := newController(t, me, copies, []string{me}, recorded(pv("v", "u"), me))
	before, report, again := nodeMeta(me), nodeMeta(me), nodeMeta(me)
	report.ResourceVersion = "2"
	again.UID = "uid-of-" + me + "-again"
	q.nodeEvents().OnUpdate(before, report)
	assert.Equal(t, q.queue.Len(), 0, "a status report of this node's Node queued work")
	q.nodeEvents().OnUpdate(report, again)
	assert.Equal(t, q.queue.Len(), 1, "this node's Node registered again (new UID) did not queue what it holds")
}

// What a driver that stopped in the middle of a removal left in the trash
// is removed when the controller starts, and retried until it is gone.
func TestRunEmptiesWhatACrashLeftInTheTrash(t *testing.T) {
	copies := &fakeCopies{uids: map[string]string{}, trashFails: 1}
	ctl := newController(t, me, copies, []string{me})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ctl.live()
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NilError(t, <-done)
	})
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		copies.mu.Lock()
		defer copies.mu.Unlock()
		if copies.trashCalls > copies.trashFails {
			return poll.Success()
		}
		return poll.Continue("the trash was emptied %d times; the first fails, the controller must try again", copies.trashCalls)
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(50*time.Millisecond))
}

// This node's Copies of a PV that no longer exists, or that was created
// again, go with the copy they record (or without one, if the copy went
// first); a Copy of a PV that exists stays.
func TestCopiesOfGonePVsGo(t *testing.T) {
	disk := &fakeCopies{uids: map[string]string{"gone": "u1", "reborn": "old-uid"}}
	ctl := newController(t, me, disk, []string{me}, recorded(pv("reborn", "new-uid"), me), recorded(pv("kept", "u4"), me))
	stale := []*copyapi.Copy{copyOf("gone", "u1", me), copyOf("reborn", "old-uid", me), copyOf("nodisk", "u9", me)}
	for _, c := range stale {
		assert.NilError(t, ctl.world.copies.Tracker.Add(c))
		assert.NilError(t, ctl.own.Add(c))
	}
	assert.NilError(t, ctl.queueLocal())
	ctl.queue.Add("nodisk")
	assert.DeepEqual(t, ctl.syncAll(t), map[string]error{})
	var left []string
	for _, c := range ctl.allCopies(t) {
		left = append(left, c.Spec.Volume+"/"+c.Spec.VolumeUID)
	}
	assert.DeepEqual(t, sorted(left), []string{"kept/u4", "reborn/new-uid"})
	assert.DeepEqual(t, sorted(disk.removed), []string{"gone", "reborn"})
}

// selectorsOf lists "list <selector>" and "watch <selector>" for each list
// and watch among actions: their label selectors if labels, else their
// field selectors.
func selectorsOf(actions []clienttesting.Action, labels bool) []string {
	var out []string
	for _, a := range actions {
		var r clienttesting.ListRestrictions
		verb := ""
		switch a := a.(type) {
		case clienttesting.ListAction:
			verb, r = "list ", a.GetListRestrictions()
		case clienttesting.WatchAction:
			w := a.GetWatchRestrictions()
			verb, r = "watch ", clienttesting.ListRestrictions{Labels: w.Labels, Fields: w.Fields}
		default:
			continue
		}
		if labels {
			out = append(out, verb+r.Labels.String())
		} else {
			out = append(out, verb+r.Fields.String())
		}
	}
	return out
}

// refreshOwn makes the controller's view of its own Copies what the API
// server holds, as its informer would.
func (tc testController) refreshOwn(t *testing.T) {
	t.Helper()
	var mine []*copyapi.Copy
	for _, c := range tc.allCopies(t) {
		mine = append(mine, c.DeepCopy())
	}
	tc.own = ownIndex(t, tc.node, mine...)
}

// This node's Copy that its Node does not own (written by hand, restored,
// or owned by the Node before it was deleted and registered again) is
// replaced by one its Node owns, and then deleted: the garbage collector
// can then delete the record with the Node. The PV stays recorded
// throughout.
func TestThisNodesCopyComesToBeOwnedByItsNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		marker  string
		nodeUID types.UID
	}{
		{"written by hand", rec(me), "uid-of-" + me},
		{"owned by the Node before it registered again", owned(me), "uid-of-" + me + "-again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl := newController(t, me, &fakeCopies{uids: map[string]string{"store": "u1"}}, []string{me}, pv("store", "u1", pvProtection, tc.marker))
			again := nodeMeta(me)
			again.UID = tc.nodeUID
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			assert.NilError(t, idx.Add(again))
			ctl.nodes = cache.NewGenericLister(idx, nodesResource.GroupResource())
			for range 2 { // the new Copy's event brings the PV back
				ctl.queue.Add("store")
				assert.DeepEqual(t, ctl.syncAll(t), map[string]error{})
				assert.Assert(t, ctl.has(t, "store", me), "this node's record went: %v", ctl.view(t, "store"))
				ctl.refreshOwn(t)
			}
			cs := ctl.allCopies(t)
			assert.Equal(t, len(cs), 1, "Copies: %v", cs)
			assert.Assert(t, cs[0].OwnedBy(tc.nodeUID), "this node's Copy is owned by %v, want its Node %s", cs[0].OwnerReferences, tc.nodeUID)
		})
	}
}

// A publish may ask the controller about this node's Node and Copies (the
// Tracker consults it) from the moment main hands it over, while Run is
// still starting: nothing Run does may write what those reads read. Under
// go test -race (make test), a Run that sets up its views after
// NewController returns is reported here.
func TestPublishMayAskTheControllerWhileItStarts(t *testing.T) {
	ctl := newController(t, me, &fakeCopies{uids: map[string]string{}}, []string{me}, recorded(pv("v", "u"), me)).live()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	asked := make(chan int, 1)
	go func() {
		n := 0
		for !ctl.synced.Load() {
			_ = ctl.OwnNodeUID()
			_, _ = ctl.OwnCopy("v", "u")
			n++
		}
		asked <- n
	}()
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NilError(t, <-done) })
	select {
	case n := <-asked:
		assert.Assert(t, n > 0, "the publish side never asked before the caches synced")
	case <-time.After(10 * time.Second):
		t.Fatal("the controller's caches did not sync in 10 s")
	}
}

// This node's Copy goes without its copy (its Node deleted and registered
// again, so the garbage collector deletes what the old Node owned; or
// kubectl delete copy), any number of times with no restart between: each
// time the node records itself again, owned by its Node as it is now.
func TestEveryLossOfThisNodesCopyIsRecordedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// uids are this node's Node's UID at each loss ("" keeps it).
		uids []types.UID
		// missed: the informer's events of the deletions are not seen (a
		// delete and create again within its lag).
		missed bool
	}{
		{"registered again twice", []types.UID{"uid-of-" + me + "-again-1", "uid-of-" + me + "-again-2"}, false},
		{"registered again twice, the deletions' events missed", []types.UID{"uid-of-" + me + "-again-1", "uid-of-" + me + "-again-2"}, true},
		{"registered again, then its Copy deleted by hand", []types.UID{"uid-of-" + me + "-again-1", ""}, false},
		{"its Copy deleted by hand twice", []types.UID{"", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl := newController(t, me, &fakeCopies{uids: map[string]string{"store": "u1"}}, []string{me}, pv("store", "u1", pvProtection, owned(me)))
			ctl.synced.Store(true)
			nodeUID := types.UID("uid-of-" + me)
			for i, uid := range tc.uids {
				if uid != "" {
					nodeUID = uid
					again := nodeMeta(me)
					again.UID = uid
					idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
					assert.NilError(t, idx.Add(again))
					ctl.nodes = cache.NewGenericLister(idx, nodesResource.GroupResource())
				}
				for _, c := range ctl.allCopies(t) { // the collector, or kubectl delete copy
					assert.NilError(t, ctl.world.copies.Delete(context.Background(), c.Name, metav1.DeleteOptions{}))
					if !tc.missed {
						ctl.copyEvent(&c) // as the informer tells of it
					}
				}
				ctl.refreshOwn(t)
				for range 2 { // the new Copy's event brings the PV back
					ctl.queue.Add("store")
					assert.DeepEqual(t, ctl.syncAll(t), map[string]error{})
					ctl.refreshOwn(t)
				}
				cs := ctl.allCopies(t)
				assert.Equal(t, len(cs), 1, "after loss %d, this node's Copies: %v", i+1, cs)
				assert.Assert(t, cs[0].OwnedBy(nodeUID), "after loss %d, this node's Copy is owned by %v, want its Node %s", i+1, cs[0].OwnerReferences, nodeUID)
			}
		})
	}
}
