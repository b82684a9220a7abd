// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"liken.sh/per-node/driver/internal/namepart"
)

const me = "worker-a"

func pv(name, uid string, finalizers ...string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Finalizers: finalizers, ResourceVersion: "7"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: DriverName, VolumeHandle: name}}},
	}
}

// recorded is pv with node's full record (finalizer and, for a long name,
// the annotation), as Record leaves it.
func recorded(p *corev1.PersistentVolume, nodes ...string) *corev1.PersistentVolume {
	for _, n := range nodes {
		p.Finalizers = append(p.Finalizers, Finalizer(n))
		if namepart.Hashed(n) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[Finalizer(n)] = n
		}
	}
	return p
}

func deleting(p *corev1.PersistentVolume) *corev1.PersistentVolume {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

// deletingSince is deleting, the deletion asked for ago.
func deletingSince(p *corev1.PersistentVolume, ago time.Duration) *corev1.PersistentVolume {
	then := metav1.NewTime(time.Now().Add(-ago))
	p.DeletionTimestamp = &then
	return p
}

func getPVT(t *testing.T, c *fake.Clientset, name string) *corev1.PersistentVolume {
	t.Helper()
	got, err := c.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	assert.NilError(t, err)
	return got
}

func finalizersOf(t *testing.T, c *fake.Clientset, name string) []string {
	t.Helper()
	return getPVT(t, c, name).Finalizers
}

// noUpdates fails if the client ever sent a full-object update.
func noUpdates(t *testing.T, c *fake.Clientset) {
	t.Helper()
	for _, a := range c.Actions() {
		assert.Assert(t, a.GetVerb() != "update", "the driver sent a full-object update of %s", a.GetResource().Resource)
	}
}

// Node names of 63, 64 and 253 characters: the longest a finalizer spells
// out, the shortest it hashes, the longest a node may have.
var (
	name63  = strings.Repeat("a", 63)
	name64  = strings.Repeat("b", 64)
	name253 = strings.Repeat("c", 61) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 63) + "." + strings.Repeat("f", 63)
)

func TestFinalizerNames(t *testing.T) {
	assert.Equal(t, len(name253), 253)
	assert.Equal(t, Finalizer("kind-worker"), "per-node.liken.sh/kind-worker")
	assert.Equal(t, Finalizer(name63), FinalizerPrefix+name63)
	for _, long := range []string{name64, name253} {
		f := Finalizer(long)
		part := strings.TrimPrefix(f, FinalizerPrefix)
		assert.Assert(t, len(part) <= 63, "%q is too long for a finalizer", part)
		assert.Equal(t, Finalizer(long), f, "stable")
		assert.Assert(t, Finalizer(long+"x") != f, "distinct")
	}
	// Every record reads back as the node that wrote it, whatever its length.
	p := recorded(pv("v", "u"), "short", name63, name64, name253)
	assert.DeepEqual(t, Recorded(p), []string{"short", name63, name64, name253})
	for _, n := range []string{"short", name63, name64, name253} {
		assert.Assert(t, HasRecord(p, n), "record of %q", n)
	}
	// A hashed finalizer without its annotation names nobody: never guessed.
	bare := pv("w", "u", Finalizer(name64))
	assert.DeepEqual(t, Recorded(bare), []string(nil))
	assert.Assert(t, !HasRecord(bare, name64), "a hashed finalizer without its annotation is an incomplete record")
}

func TestRecordPatchesOnlyThisNodesRecord(t *testing.T) {
	for _, node := range []string{me, name63, name64, name253} {
		t.Run(node[:8], func(t *testing.T) {
			ctx := context.Background()
			p := pv("store", "uid-1", pvProtection, "example.com/other")
			p.Labels = map[string]string{"team": "a"}
			p.Annotations = map[string]string{"note": "kept"}
			p.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "example", Name: "store"}
			c := fake.NewClientset(p, deleting(pv("going", "uid-2", pvProtection)))
			tr := NewTracker(c.CoreV1().PersistentVolumes(), node, nil)

			uid, err := tr.Record(ctx, "store")
			assert.NilError(t, err)
			assert.Equal(t, uid, "uid-1")
			got := getPVT(t, c, "store")
			assert.DeepEqual(t, sorted(got.Finalizers), sorted([]string{pvProtection, "example.com/other", Finalizer(node)}))
			assert.Assert(t, HasRecord(got, node))
			assert.Equal(t, got.Annotations["note"], "kept")
			assert.DeepEqual(t, got.Labels, p.Labels)
			assert.DeepEqual(t, got.Spec, p.Spec)

			_, err = tr.Record(ctx, "store")
			assert.NilError(t, err)
			assert.DeepEqual(t, finalizersOf(t, c, "store"), got.Finalizers) // recorded once

			assert.NilError(t, Forget(ctx, c.CoreV1().PersistentVolumes(), "store", "uid-1", node))
			got = getPVT(t, c, "store")
			assert.DeepEqual(t, sorted(got.Finalizers), []string{"example.com/other", pvProtection})
			assert.DeepEqual(t, got.Annotations, map[string]string{"note": "kept"})

			_, err = tr.Record(ctx, "going")
			assert.Assert(t, errors.Is(err, ErrDeleting), "got %v", err)
			assert.DeepEqual(t, finalizersOf(t, c, "going"), []string{pvProtection})

			_, err = tr.Record(ctx, "missing")
			assert.Assert(t, errors.Is(err, ErrNoVolume), "got %v", err)
			noUpdates(t, c)
		})
	}
}

// A handle that names a PV which is not a per-node volume of that name is
// refused, and that PV is left exactly as it was.
func TestRecordRefusesAPVThatIsNotOurs(t *testing.T) {
	hostPath := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "data", UID: "u"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/srv/data"}}},
	}
	otherDriver := pv("nfs", "u")
	otherDriver.Spec.CSI.Driver = "nfs.csi.k8s.io"
	borrowed := pv("borrowed", "u")
	borrowed.Spec.CSI.VolumeHandle = "store"
	for _, p := range []*corev1.PersistentVolume{hostPath, otherDriver, borrowed} {
		t.Run(p.Name, func(t *testing.T) {
			c := fake.NewClientset(p)
			_, err := NewTracker(c.CoreV1().PersistentVolumes(), me, nil).Record(context.Background(), p.Name)
			assert.Assert(t, errors.Is(err, ErrNotOurs), "got %v", err)
			assert.DeepEqual(t, getPVT(t, c, p.Name), p)
			for _, a := range c.Actions() {
				assert.Equal(t, a.GetVerb(), "get", "a refused PV was written to")
			}
		})
	}
}

var pvResource = corev1.SchemeGroupVersion.WithResource("persistentvolumes")

func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumes"}, "store", errors.New("changed"))
}

func TestRecordSortsAPIErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verb    string
		answers []error // one per call; the last repeats
		want    error
	}{
		{"one conflict is retried", "patch", []error{conflict(), nil}, nil},
		{"conflicts that outlast the retries", "patch", []error{conflict()}, ErrConflict},
		{"RBAC refuses", "patch", []error{apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumes"}, "store", errors.New("no"))}, ErrForbidden},
		{"admission policy refuses", "patch", []error{apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolume"}, "store", nil)}, ErrForbidden},
		{"API server down", "get", []error{apierrors.NewServiceUnavailable("etcd is down")}, ErrAPI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(pv("store", "uid-1"))
			calls := 0
			c.PrependReactor(tc.verb, "persistentvolumes", func(clienttesting.Action) (bool, runtime.Object, error) {
				err := tc.answers[min(calls, len(tc.answers)-1)]
				calls++
				return err != nil, nil, err
			})
			tr := NewTracker(c.CoreV1().PersistentVolumes(), me, nil)
			tr.outageWait = 0 // one try (the wait: TestRecordWaitsForAnAPIServerThatDoesNotAnswer)
			_, err := tr.Record(context.Background(), "store")
			if tc.want == nil {
				assert.NilError(t, err)
				assert.DeepEqual(t, finalizersOf(t, c, "store"), []string{Finalizer(me)})
				return
			}
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			for _, other := range []error{ErrConflict, ErrForbidden, ErrAPI} {
				if !errors.Is(other, tc.want) {
					assert.Assert(t, !errors.Is(err, other), "%v is also reported as %v", err, other)
				}
			}
		})
	}
}

// While the API server does not answer, Record asks again and records this
// node once it answers, so kubelet's backoff does not hold a pod back after
// an outage; a refusal is never asked again, and the caller's deadline and
// OutageWait bound the wait.
func TestRecordWaitsForAnAPIServerThatDoesNotAnswer(t *testing.T) {
	down := apierrors.NewServiceUnavailable("the API server is starting")
	refused := apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumes"}, "store", errors.New("no"))
	for _, tc := range []struct {
		name       string
		answers    []error // one per read; the last repeats
		wait       time.Duration
		gone       bool // the caller's context has ended
		want       error
		wantReads  int // 0: more than one
		wantRecord bool
	}{
		{"back after three tries", []error{down, down, down, nil}, time.Minute, false, nil, 4, true},
		// Long enough for a second read even on a loaded machine (a first read
		// slower than the whole wait was seen to leave no time for one).
		{"away for longer than the wait", []error{down}, 500 * time.Millisecond, false, ErrAPI, 0, false},
		{"a refusal is not asked again", []error{refused}, time.Minute, false, ErrForbidden, 1, false},
		{"the caller gave up", []error{down}, time.Minute, true, ErrAPI, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(pv("store", "uid-1"))
			reads, recording := 0, true
			c.PrependReactor("get", "persistentvolumes", func(clienttesting.Action) (bool, runtime.Object, error) {
				if !recording {
					return false, nil, nil
				}
				err := tc.answers[min(reads, len(tc.answers)-1)]
				reads++
				return err != nil, nil, err
			})
			tr := NewTracker(c.CoreV1().PersistentVolumes(), me, nil)
			tr.outageWait, tr.outagePoll = tc.wait, time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			if tc.gone {
				cancel()
			}
			defer cancel()
			_, err := tr.Record(ctx, "store")
			recording = false
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			if tc.wantReads == 0 {
				assert.Assert(t, reads > 1, "the API server was asked %d times", reads)
			} else {
				assert.Equal(t, reads, tc.wantReads)
			}
			assert.Equal(t, HasRecord(getPVT(t, c, "store"), me), tc.wantRecord)
		})
	}
}

// Forget is one request, a patch carrying the UID the caller saw: the API
// server refuses it on another PV created under the name since (that one's
// record is what will remove this node's copy of it), and only a refusal
// is read again.
func TestForgetIsOnePatchOfThePVTheCallerSaw(t *testing.T) {
	for _, tc := range []struct {
		name       string
		node       string
		objs       []runtime.Object
		uid        string
		wantRecord bool
		wantVerbs  []string
	}{
		{"recorded", me, []runtime.Object{recorded(pv("store", "uid-1"), me, "worker-b")}, "uid-1", false, []string{"patch"}},
		{"recorded, long name", name253, []runtime.Object{recorded(pv("store", "uid-1"), name253)}, "uid-1", false, []string{"patch"}},
		{"not recorded", me, []runtime.Object{pv("store", "uid-1")}, "uid-1", false, []string{"patch"}},
		{"created again", me, []runtime.Object{recorded(pv("store", "uid-2"), me)}, "uid-1", true, []string{"patch", "get"}},
		{"gone", me, nil, "uid-1", false, []string{"patch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := withAPIServerRules(fake.NewClientset(tc.objs...))
			assert.NilError(t, Forget(context.Background(), c.CoreV1().PersistentVolumes(), "store", tc.uid, tc.node))
			assert.DeepEqual(t, verbsOf(c), tc.wantVerbs)
			if tc.objs == nil {
				return
			}
			got := getPVT(t, c, "store")
			assert.Equal(t, HasRecord(got, tc.node), tc.wantRecord, "finalizers %v, annotations %v", got.Finalizers, got.Annotations)
			assert.Equal(t, slices.Contains(got.Finalizers, Finalizer("worker-b")), tc.name == "recorded", "another node's record")
		})
	}
}

// verbsOf lists the verbs of the requests the client sent, in order.
func verbsOf(c *fake.Clientset) []string {
	var verbs []string
	for _, a := range c.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	return verbs
}

// withAPIServerRules makes the fake API server keep the two rules of the
// real one that records rely on: a patch never changes an object's UID,
// and no finalizer is added to an object being deleted.
func withAPIServerRules(c *fake.Clientset) *fake.Clientset {
	c.PrependReactor("patch", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		obj, err := c.Tracker().Get(pvResource, "", pa.GetName())
		if err != nil {
			return false, nil, nil // the default reactor answers NotFound
		}
		now := obj.(*corev1.PersistentVolume)
		if pa.GetPatchType() == types.JSONPatchType {
			return jsonPatchRules(now, pa.GetPatch())
		}
		var patch struct {
			Metadata struct {
				UID        string   `json:"uid"`
				Finalizers []string `json:"finalizers"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		refuse := func(why string) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolume"}, now.Name,
				field.ErrorList{field.Forbidden(field.NewPath("metadata"), why)})
		}
		if patch.Metadata.UID != "" && patch.Metadata.UID != string(now.UID) {
			return refuse("uid: field is immutable")
		}
		for _, f := range patch.Metadata.Finalizers {
			if now.DeletionTimestamp != nil && !slices.Contains(now.Finalizers, f) {
				return refuse("no new finalizers can be added if the object is being deleted")
			}
		}
		return false, nil, nil
	})
	return c
}

// jsonPatchRules answers a JSON patch as the real API server does where
// records rely on it: a failed test, or an add to a list that is not there,
// is a 422 that changes nothing; a new finalizer on an object being deleted
// is refused. Otherwise the fake applies it.
func jsonPatchRules(now *corev1.PersistentVolume, patch []byte) (bool, runtime.Object, error) {
	var ops []struct{ Op, Path, Value string }
	if err := json.Unmarshal(patch, &ops); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	unprocessable := func(why string) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", why, 0, false)
	}
	for _, op := range ops {
		switch {
		case op.Op == "test" && op.Path == "/metadata/uid" && op.Value != string(now.UID):
			return unprocessable("testing value /metadata/uid failed")
		case op.Op == "add" && op.Path == "/metadata/finalizers/-" && len(now.Finalizers) == 0:
			return unprocessable("add operation does not apply: doc is missing path: /metadata/finalizers/-")
		case op.Op == "add" && op.Path == "/metadata/finalizers/-" && now.DeletionTimestamp != nil:
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolume"}, now.Name,
				field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted")})
		}
	}
	return false, nil, nil
}

// A node's record is appended to a PV that has finalizers (a live PV always
// has kubernetes.io/pv-protection): one JSON patch, one pass over the list
// for the API server. Whatever changed since the read (the PV created
// again, its deletion begun, its finalizers gone), the outcome is the one
// the merge patch gives.
func TestARecordIsAppendedWhereThePVHasFinalizers(t *testing.T) {
	withAnnotation := func(p *corev1.PersistentVolume) *corev1.PersistentVolume {
		p.Annotations = map[string]string{"note": "kept"}
		return p
	}
	for _, tc := range []struct {
		name      string
		node      string
		server    *corev1.PersistentVolume
		seen      cacheOf
		want      error
		wantUID   string
		wantTypes []types.PatchType
		wantFinal []string
	}{
		{"appended after the others", me, pv("store", "uid-1", pvProtection, "example.com/x"), nil,
			nil, "uid-1", []types.PatchType{types.JSONPatchType}, []string{pvProtection, "example.com/x", Finalizer(me)}},
		{"a long name with its annotation", name64, withAnnotation(pv("store", "uid-1", pvProtection)), nil,
			nil, "uid-1", []types.PatchType{types.JSONPatchType}, []string{pvProtection, Finalizer(name64)}},
		{"a long name where there are no annotations", name64, pv("store", "uid-1", pvProtection), nil,
			nil, "uid-1", []types.PatchType{types.StrategicMergePatchType}, []string{pvProtection, Finalizer(name64)}},
		{"no finalizers", me, pv("store", "uid-1"), nil,
			nil, "uid-1", []types.PatchType{types.StrategicMergePatchType}, []string{Finalizer(me)}},
		{"created again since it was seen", me, pv("store", "uid-2", pvProtection), cacheOf{pv("store", "uid-1", pvProtection)},
			nil, "uid-2", []types.PatchType{types.JSONPatchType, types.StrategicMergePatchType, types.JSONPatchType}, []string{pvProtection, Finalizer(me)}},
		{"its deletion began since it was seen", me, deleting(pv("store", "uid-1", pvProtection)), cacheOf{pv("store", "uid-1", pvProtection)},
			ErrDeleting, "", []types.PatchType{types.JSONPatchType, types.StrategicMergePatchType}, []string{pvProtection}},
		{"its finalizers went since it was seen", me, pv("store", "uid-1"), cacheOf{pv("store", "uid-1", pvProtection)},
			nil, "uid-1", []types.PatchType{types.JSONPatchType, types.StrategicMergePatchType}, []string{Finalizer(me)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := withAPIServerRules(fake.NewClientset(tc.server))
			tr := NewTracker(c.CoreV1().PersistentVolumes(), tc.node, nil)
			if tc.seen != nil {
				tr.Consult(tc.seen)
			}
			uid, err := tr.Record(context.Background(), "store")
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			assert.Equal(t, uid, tc.wantUID)
			var got []types.PatchType
			for _, a := range c.Actions() {
				if pa, ok := a.(clienttesting.PatchAction); ok {
					got = append(got, pa.GetPatchType())
					assert.Assert(t, !strings.Contains(string(pa.GetPatch()), "resourceVersion"), "patch %s", pa.GetPatch())
				}
			}
			assert.DeepEqual(t, got, tc.wantTypes)
			final := getPVT(t, c, "store")
			if tc.wantTypes[len(tc.wantTypes)-1] == types.JSONPatchType {
				assert.DeepEqual(t, final.Finalizers, tc.wantFinal) // appended: in order
			} else {
				assert.DeepEqual(t, sorted(final.Finalizers), sorted(tc.wantFinal)) // merged: where the merge puts it
			}
			if tc.want == nil {
				assert.Assert(t, HasRecord(final, tc.node), "finalizers %v, annotations %v", final.Finalizers, final.Annotations)
			}
			noUpdates(t, c)
		})
	}
}

// The record is a patch of the finalizer set that carries the UID it read
// and no resourceVersion: nodes that publish the same PV at once do not
// conflict, and the API server's own rules (a UID never changes; no new
// finalizer on a PV being deleted) keep what the read decided. A refusal
// is then read again to say why.
func TestRecordBetweenReadAndWrite(t *testing.T) {
	invalid := func() error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolume"}, "store", nil)
	}
	for _, tc := range []struct {
		name string
		// meanwhile changes the PV as the first patch arrives, and says
		// whether the API server refuses that patch.
		meanwhile func(c *fake.Clientset) bool
		want      error
		uid       string
	}{
		{"another node recorded itself", func(c *fake.Clientset) bool {
			assert.NilError(t, c.Tracker().Update(pvResource, recorded(pv("store", "uid-1"), "worker-b"), ""))
			return false
		}, nil, "uid-1"},
		{"its deletion began", func(c *fake.Clientset) bool {
			assert.NilError(t, c.Tracker().Update(pvResource, deleting(pv("store", "uid-1", pvProtection)), ""))
			return true
		}, ErrDeleting, ""},
		{"it was created again", func(c *fake.Clientset) bool {
			assert.NilError(t, c.Tracker().Delete(pvResource, "", "store"))
			assert.NilError(t, c.Tracker().Add(pv("store", "uid-2")))
			return true
		}, nil, "uid-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(pv("store", "uid-1"))
			var patches []string
			c.PrependReactor("patch", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
				patches = append(patches, string(a.(clienttesting.PatchAction).GetPatch()))
				if len(patches) == 1 && tc.meanwhile(c) {
					return true, nil, invalid()
				}
				return false, nil, nil
			})
			uid, err := NewTracker(c.CoreV1().PersistentVolumes(), me, nil).Record(context.Background(), "store")
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			for _, p := range patches {
				assert.Assert(t, !strings.Contains(p, "resourceVersion"), "patch %s", p)
			}
			assert.Assert(t, strings.Contains(patches[0], `"uid":"uid-1"`), "patch %s", patches[0])
			if tc.want != nil {
				assert.Assert(t, !slices.Contains(finalizersOf(t, c, "store"), Finalizer(me)), "recorded on a PV being deleted")
				return
			}
			assert.Equal(t, uid, tc.uid)
			assert.Assert(t, slices.Contains(finalizersOf(t, c, "store"), Finalizer(me)), "finalizers %v", finalizersOf(t, c, "store"))
		})
	}
}

// cacheOf is a cache that saw pvs.
type cacheOf []*corev1.PersistentVolume

func (c cacheOf) Cached(name string) (*corev1.PersistentVolume, bool) {
	for _, p := range c {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// A PV the cache shows without this node's record is recorded in one
// request, the patch whose answer is the fresh read; whatever changed since
// the cache saw it, the outcome is the one a fresh read would have given.
func TestRecordFromTheCache(t *testing.T) {
	notOurs := pv("store", "uid-1")
	notOurs.Spec.CSI.VolumeHandle = "other"
	for _, tc := range []struct {
		name       string
		server     []runtime.Object
		seen       cacheOf
		want       error
		wantUID    string
		wantVerbs  []string
		wantRecord bool
	}{
		{"seen without the record", []runtime.Object{pv("store", "uid-1")}, cacheOf{pv("store", "uid-1")},
			nil, "uid-1", []string{"patch"}, true},
		{"seen with the record", []runtime.Object{recorded(pv("store", "uid-1"), me)}, cacheOf{recorded(pv("store", "uid-1"), me)},
			nil, "uid-1", []string{"get"}, true},
		{"not seen", []runtime.Object{pv("store", "uid-1")}, nil,
			nil, "uid-1", []string{"get", "patch"}, true},
		{"created again since", []runtime.Object{pv("store", "uid-2")}, cacheOf{pv("store", "uid-1")},
			nil, "uid-2", []string{"patch", "get", "get", "patch"}, true},
		{"its deletion began since", []runtime.Object{deleting(pv("store", "uid-1", pvProtection))}, cacheOf{pv("store", "uid-1")},
			ErrDeleting, "", []string{"patch", "get"}, false},
		{"recorded and being deleted since", []runtime.Object{deleting(recorded(pv("store", "uid-1"), me))}, cacheOf{pv("store", "uid-1")},
			ErrDeleting, "", []string{"patch"}, true},
		{"gone since", nil, cacheOf{pv("store", "uid-1")},
			ErrNoVolume, "", []string{"patch"}, false},
		{"seen not ours", []runtime.Object{notOurs}, cacheOf{notOurs},
			ErrNotOurs, "", []string{"get"}, false},
		{"seen being deleted", []runtime.Object{deleting(pv("store", "uid-1", pvProtection))}, cacheOf{deleting(pv("store", "uid-1", pvProtection))},
			ErrDeleting, "", []string{"get"}, false},
		// A PV's source is immutable, so an answer that is not ours where
		// the cache showed ours cannot happen; if it did, no copy is made.
		{"answered not ours", []runtime.Object{notOurs}, cacheOf{pv("store", "uid-1")},
			ErrNotOurs, "", []string{"patch"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := withAPIServerRules(fake.NewClientset(tc.server...))
			tr := NewTracker(c.CoreV1().PersistentVolumes(), me, nil)
			tr.Consult(tc.seen)
			uid, err := tr.Record(context.Background(), "store")
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			assert.Equal(t, uid, tc.wantUID)
			assert.DeepEqual(t, verbsOf(c), tc.wantVerbs)
			if tc.server == nil {
				return
			}
			got := getPVT(t, c, "store")
			assert.Equal(t, HasRecord(got, me), tc.wantRecord, "finalizers %v", got.Finalizers)
		})
	}
}
