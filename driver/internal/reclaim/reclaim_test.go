// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"liken.sh/per-node/driver/internal/copyapi"
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

// noUpdates fails if the client ever sent a full-object update.
func noUpdates(t *testing.T, c *fake.Clientset) {
	t.Helper()
	for _, a := range c.Actions() {
		assert.Assert(t, a.GetVerb() != "update", "the driver sent a full-object update of %s", a.GetResource().Resource)
	}
}

// Node names of 63, 64 and 253 characters: the longest a label value
// spells out, the shortest it hashes, the longest a node may have.
var (
	name63  = strings.Repeat("a", 63)
	name64  = strings.Repeat("b", 64)
	name253 = strings.Repeat("c", 61) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 63) + "." + strings.Repeat("f", 63)
)

// A record is this node's Copy and the PV's one finalizer, appended after
// the others; nothing else of the PV changes, a second record writes
// nothing, and Forget deletes the Copy (a live PV keeps its finalizer).
func TestRecordCreatesThisNodesCopyAndTheFinalizer(t *testing.T) {
	for _, node := range []string{me, name63, name64, name253} {
		t.Run(node[:8], func(t *testing.T) {
			ctx := context.Background()
			p := pv("store", "uid-1", pvProtection, "example.com/other")
			p.Labels = map[string]string{"team": "a"}
			p.Annotations = map[string]string{"note": "kept"}
			p.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "example", Name: "store"}
			w := newWorld(p, deleting(pv("going", "uid-2", pvProtection)))
			tr := w.tracker(node)

			uid, err := tr.Record(ctx, "store")
			assert.NilError(t, err)
			assert.Equal(t, uid, "uid-1")
			got := getPVT(t, w.client, "store")
			assert.DeepEqual(t, sorted(got.Finalizers), sorted([]string{pvProtection, "example.com/other", Finalizer}))
			assert.DeepEqual(t, w.holders(t, "store"), []string{node})
			cs := w.allCopies(t)
			assert.Equal(t, len(cs), 1)
			assert.DeepEqual(t, cs[0].Spec, copyapi.CopySpec{Volume: "store", VolumeUID: "uid-1", Node: node})
			assert.DeepEqual(t, cs[0].Labels, map[string]string{copyapi.VolumeLabel: "store", copyapi.VolumeUIDLabel: "uid-1",
				copyapi.NodeLabel: namepart.Of(node)})
			assert.Equal(t, got.Annotations["note"], "kept")
			assert.DeepEqual(t, got.Labels, p.Labels)
			assert.DeepEqual(t, got.Spec, p.Spec)

			writes := len(w.client.Actions()) + len(w.copies.Fake.Actions())
			_, err = tr.Record(ctx, "store")
			assert.NilError(t, err)
			assert.Equal(t, len(w.allCopies(t)), 1, "recorded once")
			for _, a := range append(w.client.Actions(), w.copies.Fake.Actions()...)[writes:] {
				assert.Assert(t, a.GetVerb() == "get" || a.GetVerb() == "list", "a second record wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
			}

			assert.NilError(t, Forget(ctx, w.client.CoreV1().PersistentVolumes(), w.copies, getPVT(t, w.client, "store"), node))
			assert.DeepEqual(t, w.holders(t, "store"), []string{})
			assert.DeepEqual(t, sorted(finalizersOfPV(t, w, "store")), sorted([]string{pvProtection, "example.com/other", Finalizer})) // live: kept

			_, err = tr.Record(ctx, "going")
			assert.Assert(t, errors.Is(err, ErrDeleting), "got %v", err)
			assert.DeepEqual(t, finalizersOfPV(t, w, "going"), []string{pvProtection})
			assert.DeepEqual(t, w.holders(t, "going"), []string{})

			_, err = tr.Record(ctx, "missing")
			assert.Assert(t, errors.Is(err, ErrNoVolume), "got %v", err)
			noUpdates(t, w.client)
		})
	}
}

func finalizersOfPV(t *testing.T, w world, name string) []string {
	t.Helper()
	return getPVT(t, w.client, name).Finalizers
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
			w := newWorld(p)
			_, err := w.tracker(me).Record(context.Background(), p.Name)
			assert.Assert(t, errors.Is(err, ErrNotOurs), "got %v", err)
			assert.DeepEqual(t, getPVT(t, w.client, p.Name), p)
			for _, a := range w.client.Actions() {
				assert.Equal(t, a.GetVerb(), "get", "a refused PV was written to")
			}
			assert.DeepEqual(t, w.copyVerbs(), []string(nil))
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
		{"admission policy refuses the Copy", "create", []error{apierrors.NewInvalid(schema.GroupKind{Kind: "Copy"}, "", nil)}, ErrForbidden},
		{"API server down", "get", []error{apierrors.NewServiceUnavailable("etcd is down")}, ErrAPI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(pv("store", "uid-1", pvProtection))
			calls := 0
			react := func(clienttesting.Action) (bool, runtime.Object, error) {
				err := tc.answers[min(calls, len(tc.answers)-1)]
				calls++
				return err != nil, nil, err
			}
			if tc.verb == "create" {
				w.copies.Fake.PrependReactor(tc.verb, "*", react)
			} else {
				w.client.PrependReactor(tc.verb, "persistentvolumes", react)
			}
			tr := w.tracker(me)
			tr.outageWait = 0 // one try (the wait: TestRecordWaitsForAnAPIServerThatDoesNotAnswer)
			_, err := tr.Record(context.Background(), "store")
			if tc.want == nil {
				assert.NilError(t, err)
				assert.DeepEqual(t, w.view(t, "store"), []string{pvProtection, Finalizer, rec(me)})
				return
			}
			assert.DeepEqual(t, w.holders(t, "store", "uid-1"), []string{}) // a refused record leaves no Copy
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
			w := newWorld(pv("store", "uid-1"))
			c := w.client
			reads, recording := 0, true
			c.PrependReactor("get", "persistentvolumes", func(clienttesting.Action) (bool, runtime.Object, error) {
				if !recording {
					return false, nil, nil
				}
				err := tc.answers[min(reads, len(tc.answers)-1)]
				reads++
				return err != nil, nil, err
			})
			tr := w.tracker(me)
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
			assert.Equal(t, w.has(t, "store", me), tc.wantRecord)
		})
	}
}

// Forget deletes the Copies of the nodes it names of the PV of the UID the
// caller saw, never those of a PV created under the name since; and
// releases a PV being deleted once no Copy of it is left.
func TestForgetDeletesCopiesAndReleasesThePVOnlyWhenNoneIsLeft(t *testing.T) {
	many := make([]string, 0, 2*deleteBatch+3)
	for i := range cap(many) {
		many = append(many, fmt.Sprintf("gone-%03d", i))
	}
	manyRecs := []string{pvProtection}
	for _, n := range many {
		manyRecs = append(manyRecs, rec(n))
	}
	for _, tc := range []struct {
		name     string
		pv       *corev1.PersistentVolume
		seen     *corev1.PersistentVolume
		forget   []string
		wantView []string
		// alone is how many Copies go one DELETE each beside the batches
		// (those of a node that also holds a Copy its Node owns).
		alone int
	}{
		{"live: the Copy goes, the finalizer stays", pv("store", "uid-1", pvProtection, rec(me), rec("worker-b")), nil, []string{me},
			[]string{pvProtection, Finalizer, rec("worker-b")}, 0},
		{"being deleted, another Copy left", deleting(pv("store", "uid-1", rec(me), rec("worker-b"))), nil, []string{me},
			[]string{Finalizer, rec("worker-b")}, 0},
		{"being deleted, the last Copy", deleting(pv("store", "uid-1", "example.com/x", rec(me))), nil, []string{me},
			[]string{"example.com/x"}, 0},
		{"being deleted, no Copy left", deleting(pv("store", "uid-1", Finalizer)), nil, nil, nil, 0},
		{"created again", pv("store", "uid-2", rec(me)), deleting(pv("store", "uid-1", rec(me))), []string{me},
			[]string{Finalizer, rec(me)}, 0},
		{"hundreds of gone nodes in a few requests", deleting(pv("store", "uid-1", manyRecs...)), nil, many,
			[]string{pvProtection}, 0},
		{"a Copy its Node owns is the garbage collector's", deleting(pv("store", "uid-1", owned("gone-a"), rec("gone-b"))), nil,
			[]string{"gone-a", "gone-b"}, []string{Finalizer, owned("gone-a")}, 0},
		{"a Copy its Node owns, and one written by hand, on one node", deleting(pv("store", "uid-1", owned("gone-a"), rec("gone-a"))), nil,
			[]string{"gone-a"}, []string{Finalizer, owned("gone-a")}, 0},
		{"hundreds of gone nodes, one of them with a Copy its Node owns", deleting(pv("store", "uid-1", append(manyRecs, owned(many[7]))...)), nil, many,
			[]string{pvProtection, Finalizer, owned(many[7])}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(tc.pv)
			seen := tc.seen
			if seen == nil {
				seen = getPVT(t, w.client, "store")
			}
			assert.NilError(t, Forget(context.Background(), w.client.CoreV1().PersistentVolumes(), w.copies, seen, tc.forget...))
			if got := w.view(t, "store"); len(tc.wantView) > 0 || len(got) > 0 {
				assert.DeepEqual(t, got, tc.wantView)
			}
			assert.Assert(t, len(w.copies.Fake.Actions()) <= 2+len(tc.forget)/deleteBatch+1+1+tc.alone,
				"%d requests about Copies to forget %d nodes: %v", len(w.copies.Fake.Actions()), len(tc.forget), w.copyVerbs())
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

// The finalizer is added by a merge patch that carries the UID that was
// read: once, after every finalizer that is there. Whatever changed since
// the read (the PV created again, its deletion begun, its finalizers gone),
// the API server's answer decides, and a PV this node does not end up
// recorded on keeps no Copy of it.
func TestTheFinalizerIsAddedOnceWithTheUIDThatWasRead(t *testing.T) {
	for _, tc := range []struct {
		name        string
		server      *corev1.PersistentVolume
		seen        *cacheOf
		want        error
		wantUID     string
		wantPatches int
		wantView    []string
	}{
		{"after the others", pv("store", "uid-1", pvProtection, "example.com/x"), nil,
			nil, "uid-1", 1, recs(pvProtection, "example.com/x", rec(me))},
		{"there already", pv("store", "uid-1", pvProtection, rec("worker-b")), nil,
			nil, "uid-1", 0, []string{pvProtection, Finalizer, rec(me), rec("worker-b")}},
		{"no finalizers", pv("store", "uid-1"), nil,
			nil, "uid-1", 1, []string{Finalizer, rec(me)}},
		{"created again since it was seen", pv("store", "uid-2", pvProtection), seen(pv("store", "uid-1", pvProtection)),
			nil, "uid-2", 2, []string{pvProtection, Finalizer, rec(me)}},
		{"its deletion began since it was seen", deleting(pv("store", "uid-1", pvProtection)), seen(pv("store", "uid-1", pvProtection)),
			ErrDeleting, "", 1, []string{pvProtection}},
		{"its finalizers went since it was seen", pv("store", "uid-1"), seen(pv("store", "uid-1", pvProtection)),
			nil, "uid-1", 1, []string{Finalizer, rec(me)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(tc.server)
			tr := w.tracker(me)
			if tc.seen != nil {
				tr.Consult(tc.seen)
			}
			uid, err := tr.Record(context.Background(), "store")
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			assert.Equal(t, uid, tc.wantUID)
			patches := 0
			for _, a := range w.client.Actions() {
				if pa, ok := a.(clienttesting.PatchAction); ok {
					patches++
					assert.Equal(t, pa.GetPatchType(), types.StrategicMergePatchType)
					assert.Assert(t, !strings.Contains(string(pa.GetPatch()), "resourceVersion"), "patch %s", pa.GetPatch())
					assert.Assert(t, strings.Contains(string(pa.GetPatch()), `"uid":"uid-`), "patch %s", pa.GetPatch())
				}
			}
			assert.Equal(t, patches, tc.wantPatches)
			assert.DeepEqual(t, w.view(t, "store"), tc.wantView)
			assert.Equal(t, len(w.allCopies(t)), len(w.holders(t, "store")), "a Copy of another UID was left: %v", w.allCopies(t))
			noUpdates(t, w.client)
		})
	}
}

// Whatever happens to the PV between the read and the record, the API
// server's answer decides: a PV being deleted or created again keeps no
// Copy of this node, and a PV created again is recorded instead.
func TestRecordBetweenReadAndWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		// meanwhile changes the PV as this node's Copy is created.
		meanwhile func(w world)
		want      error
		uid       string
		wantView  []string
	}{
		{"another node recorded itself", func(w world) {
			assert.NilError(t, w.client.Tracker().Update(pvResource, pv("store", "uid-1", pvProtection, Finalizer), ""))
			assert.NilError(t, w.copies.Tracker.Add(copyOf("store", "uid-1", "worker-b")))
		}, nil, "uid-1", []string{pvProtection, Finalizer, rec(me), rec("worker-b")}},
		{"its deletion began", func(w world) {
			assert.NilError(t, w.client.Tracker().Update(pvResource, deleting(pv("store", "uid-1", pvProtection)), ""))
		}, ErrDeleting, "", []string{pvProtection}},
		{"its deletion began, and it had the finalizer", func(w world) {
			assert.NilError(t, w.client.Tracker().Update(pvResource, deleting(pv("store", "uid-1", Finalizer)), ""))
		}, ErrDeleting, "", nil}, // this node's Copy was the last: released
		{"it was created again", func(w world) {
			assert.NilError(t, w.client.Tracker().Delete(pvResource, "", "store"))
			assert.NilError(t, w.client.Tracker().Add(pv("store", "uid-2", pvProtection)))
		}, nil, "uid-2", []string{pvProtection, Finalizer, rec(me)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(pv("store", "uid-1", pvProtection))
			creates := 0
			w.copies.Fake.PrependReactor("create", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
				if creates++; creates == 1 {
					tc.meanwhile(w)
				}
				return false, nil, nil
			})
			uid, err := w.tracker(me).Record(context.Background(), "store")
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			assert.Equal(t, uid, tc.uid)
			if got := w.view(t, "store"); len(tc.wantView) > 0 || len(got) > 0 {
				assert.DeepEqual(t, got, tc.wantView)
			}
			assert.Equal(t, len(w.allCopies(t)), len(w.holders(t, "store")), "a Copy of another UID was left: %v", w.allCopies(t))
		})
	}
}

// cacheOf is a cache that saw pvs and this node's Copies copies.
type cacheOf struct {
	pvs    []*corev1.PersistentVolume
	copies []*copyapi.Copy
	synced bool
}

// seen is a synced cache of pvs, of whose rec markers only this node's
// (me) are its Copies.
func seen(pvs ...*corev1.PersistentVolume) *cacheOf {
	objs, cs := seed(pvs...)
	c := &cacheOf{synced: true}
	for _, o := range objs {
		c.pvs = append(c.pvs, o.(*corev1.PersistentVolume))
	}
	for _, cp := range cs {
		if cp.Spec.Node == me {
			c.copies = append(c.copies, cp)
		}
	}
	return c
}

func (c *cacheOf) Cached(name string) (*corev1.PersistentVolume, bool) {
	for _, p := range c.pvs {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

func (c *cacheOf) OwnCopy(volume, uid string) (*copyapi.Copy, bool) {
	for _, cp := range c.copies {
		if cp.Of(volume, uid) {
			return cp, c.synced
		}
	}
	return nil, c.synced
}

// A PV the cache shows recorded costs one read, which confirms it is not
// being deleted; one it shows without this node's Copy is recorded
// without a read first; whatever changed since the cache saw it, the
// outcome is the one a fresh read would have given.
func TestRecordFromTheCache(t *testing.T) {
	notOurs := pv("store", "uid-1")
	notOurs.Spec.CSI.VolumeHandle = "other"
	for _, tc := range []struct {
		name       string
		server     []*corev1.PersistentVolume
		seen       *cacheOf
		want       error
		wantUID    string
		wantVerbs  []string // of PVs, then of Copies after a "|"
		wantRecord bool
	}{
		{"seen without the record", pvs(pv("store", "uid-1", pvProtection)), seen(pv("store", "uid-1", pvProtection)),
			nil, "uid-1", []string{"patch", "|", "create"}, true},
		{"seen with the record", pvs(pv("store", "uid-1", rec(me))), seen(pv("store", "uid-1", rec(me))),
			nil, "uid-1", []string{"get", "|"}, true},
		{"seen with the record, its deletion begun since", pvs(deleting(pv("store", "uid-1", rec(me)))), seen(pv("store", "uid-1", rec(me))),
			ErrDeleting, "", []string{"get", "|"}, true},
		{"seen, the Copy not yet", pvs(pv("store", "uid-1", rec("worker-b"))), seen(pv("store", "uid-1", rec("worker-b"))),
			nil, "uid-1", []string{"get", "|", "create"}, true},
		{"not seen", pvs(pv("store", "uid-1", pvProtection)), nil,
			nil, "uid-1", []string{"get", "patch", "|", "list", "create"}, true},
		{"the cache has not synced", pvs(pv("store", "uid-1", rec(me))), &cacheOf{},
			nil, "uid-1", []string{"get", "|", "list"}, true},
		{"created again since", pvs(pv("store", "uid-2", pvProtection)), seen(pv("store", "uid-1", pvProtection)),
			nil, "uid-2", []string{"patch", "get", "get", "get", "patch", "|", "create", "delete", "create"}, true},
		{"its deletion began since", pvs(deleting(pv("store", "uid-1", pvProtection))), seen(pv("store", "uid-1", pvProtection)),
			ErrDeleting, "", []string{"patch", "get", "get", "|", "create", "delete"}, false},
		{"gone since", nil, seen(pv("store", "uid-1", pvProtection)),
			ErrNoVolume, "", []string{"patch", "get", "|", "create", "delete"}, false},
		{"seen not ours", pvs(notOurs), seen(notOurs),
			ErrNotOurs, "", []string{"get", "|"}, false},
		{"seen being deleted", pvs(deleting(pv("store", "uid-1", pvProtection))), seen(deleting(pv("store", "uid-1", pvProtection))),
			ErrDeleting, "", []string{"get", "|"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(tc.server...)
			tr := w.tracker(me)
			if tc.seen != nil {
				tr.Consult(tc.seen)
			}
			uid, err := tr.Record(context.Background(), "store")
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			assert.Equal(t, uid, tc.wantUID)
			assert.DeepEqual(t, append(append(verbsOf(w.client), "|"), w.copyVerbs()...), tc.wantVerbs)
			if tc.server == nil {
				assert.Equal(t, len(w.allCopies(t)), 0)
				return
			}
			assert.Equal(t, w.has(t, "store", me), tc.wantRecord, "view %v", w.view(t, "store"))
		})
	}
}

func pvs(p ...*corev1.PersistentVolume) []*corev1.PersistentVolume { return p }

// A node records itself once: a second publish before the driver's own
// view of its Copies shows the first (the informer a moment behind) makes
// no second Copy.
func TestARecordIsMadeOnceWhileTheViewLags(t *testing.T) {
	w := newWorld(pv("store", "uid-1", pvProtection))
	tr := w.tracker(me)
	tr.Consult(seen(pv("store", "uid-1", pvProtection))) // synced, and never shows the Copy
	for range 3 {
		_, err := tr.Record(context.Background(), "store")
		assert.NilError(t, err)
	}
	assert.Equal(t, len(w.allCopies(t)), 1, "Copies: %v", w.allCopies(t))
}

// A publish that writes nothing decides from a fresh read, never from the
// caches alone: with the PV's deletion begun on the API server, and the
// caches a moment behind (they show the PV live and recorded, this node's
// new Copy not yet), a second publish is refused.
func TestAPublishThatWritesNothingReadsThePVFresh(t *testing.T) {
	w := newWorld(pv("store", "uid-1", rec("worker-b")))
	tr := w.tracker(me)
	tr.Consult(seen(pv("store", "uid-1", rec("worker-b")))) // synced, and never shows this node's Copy
	_, err := tr.Record(context.Background(), "store")
	assert.NilError(t, err)
	now := getPVT(t, w.client, "store")
	_, err = w.client.CoreV1().PersistentVolumes().Update(context.Background(), deleting(now), metav1.UpdateOptions{})
	assert.NilError(t, err)
	uid, err := tr.Record(context.Background(), "store")
	assert.Assert(t, errors.Is(err, ErrDeleting), "a publish of a PV being deleted: want %v, got uid %q, err %v", ErrDeleting, uid, err)
}

// A node's account can create its own Copy labelled as another, gone
// node's (older policies let it; a restore or a hand may write one too).
// Deleting the gone nodes' Copies by label must not be stopped by it: the
// API server refuses deleting the planted Copy, as the admission policy
// does (it is owned by a live Node, on another node), and every Copy of
// the gone nodes still goes, however many there are.
func TestForgettingGoneNodesIsNotStoppedByAPlantedCopy(t *testing.T) {
	for _, n := range []int{1, 3, askEach + 1, 2*deleteBatch + 3} {
		t.Run(fmt.Sprintf("%d gone nodes", n), func(t *testing.T) {
			var gone []string
			recs := []string{pvProtection, owned("worker-b")}
			for i := range n {
				gone = append(gone, fmt.Sprintf("gone-%03d", i))
				recs = append(recs, rec(gone[i]))
			}
			w := newWorld(deleting(pv("store", "uid-1", recs...)))
			planted := ownedCopyOf("store", "uid-1", "worker-b")
			planted.Name, planted.UID = "a-planted", "planted-uid"
			planted.Labels[copyapi.NodeLabel] = gone[0]
			assert.NilError(t, w.copies.Tracker.Add(planted))
			w.copies.Refuse = func(c *copyapi.Copy) error {
				if c.OwnedByNode() && c.Spec.Node != me {
					return apierrors.NewForbidden(copyGVR.GroupResource(), c.Name, errors.New("may delete only its own Copies and Copies no Node owns"))
				}
				return nil
			}
			err := Forget(context.Background(), w.client.CoreV1().PersistentVolumes(), w.copies, getPVT(t, w.client, "store"), gone...)
			assert.NilError(t, err)
			var left []string
			for _, c := range w.allCopies(t) {
				left = append(left, c.Name+" on "+c.Spec.Node)
			}
			slices.Sort(left)
			want := []string{"a-planted on worker-b", ownedCopyOf("store", "uid-1", "worker-b").Name + " on worker-b"}
			assert.DeepEqual(t, left, want)
		})
	}
}
