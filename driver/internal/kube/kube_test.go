// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"gotest.tools/v3/assert"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"liken.sh/per-node/driver/internal/copyapi"
)

// apiServer answers every request with a copy of what it was sent (or, for
// a GET, an object of that name) and notes the method, path and content
// type of each.
type apiServer struct {
	mu   sync.Mutex
	seen []string
}

func (s *apiServer) handler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", r.Header.Get("Content-Type")) // an echo
	if r.Method == http.MethodGet || r.Method == http.MethodPatch {
		w.Header().Set("Content-Type", "application/json")
		body, _ = json.Marshal(corev1.PersistentVolume{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "uid-1"}})
	}
	_, _ = w.Write(body)
}

// The clients send core/v1 and coordination/v1 requests where client-go's
// clientset sends them: PVs at the cluster scope, events in each event's
// own namespace, Leases in theirs, in protobuf where the clientset prefers
// it.
func TestTheClientsAskWhereTheClientsetAsks(t *testing.T) {
	s := &apiServer{}
	srv := httptest.NewServer(http.HandlerFunc(s.handler))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}

	pvs, err := NewPersistentVolumes(cfg)
	assert.NilError(t, err)
	pv, err := pvs.Get(context.Background(), "store", metav1.GetOptions{})
	assert.NilError(t, err)
	assert.Equal(t, pv.UID, types.UID("uid-1"))
	_, err = pvs.Patch(context.Background(), "store", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{})
	assert.NilError(t, err)

	sink, err := NewEventSink(cfg)
	assert.NilError(t, err)
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "store.1", Namespace: "default"}, Reason: "CopyRemoved"}
	got, err := sink.Create(e)
	assert.NilError(t, err)
	assert.Equal(t, got.Reason, "CopyRemoved")
	_, err = sink.Update(e)
	assert.NilError(t, err)
	_, err = sink.Patch(e, []byte(`{"count":2}`))
	assert.NilError(t, err)

	leases, err := NewLeases(cfg, "per-node-system")
	assert.NilError(t, err)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "per-node-janitor"}}
	made, err := leases.Create(context.Background(), l, metav1.CreateOptions{})
	assert.NilError(t, err)
	assert.Equal(t, made.Name, "per-node-janitor")
	_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
	assert.NilError(t, err)

	assert.DeepEqual(t, s.seen, []string{
		"GET /api/v1/persistentvolumes/store ",
		"PATCH /api/v1/persistentvolumes/store application/strategic-merge-patch+json",
		"POST /api/v1/namespaces/default/events application/vnd.kubernetes.protobuf",
		"PUT /api/v1/namespaces/default/events/store.1 application/vnd.kubernetes.protobuf",
		"PATCH /api/v1/namespaces/default/events/store.1 application/strategic-merge-patch+json",
		"POST /apis/coordination.k8s.io/v1/namespaces/per-node-system/leases application/vnd.kubernetes.protobuf",
		"PUT /apis/coordination.k8s.io/v1/namespaces/per-node-system/leases/per-node-janitor application/vnd.kubernetes.protobuf",
	})
}

// The scheme knows core/v1, the driver's own Copy, Lease (the janitor's
// election) and the meta types a list or a watch carries, and nothing of
// any other group.
func TestTheSchemeIsCoreV1CopyAndLeaseAlone(t *testing.T) {
	for _, obj := range []runtime.Object{&corev1.PersistentVolume{}, &corev1.Event{}, &corev1.Node{}, &metav1.Status{},
		&copyapi.Copy{}, &copyapi.CopyList{}, &coordinationv1.Lease{}} {
		_, _, err := Scheme.ObjectKinds(obj)
		assert.NilError(t, err, "%T", obj)
	}
	for _, gv := range Scheme.PreferredVersionAllGroups() {
		assert.Assert(t, gv.Group == "" || gv == copyapi.SchemeGroupVersion || gv == coordinationv1.SchemeGroupVersion, "the scheme knows group %s", gv)
	}
}

// fakePVs is the fake clientset's client of PersistentVolumes, saying as
// the clientset does that its watch cannot stream the initial list.
type fakePVs struct {
	corev1client.PersistentVolumeInterface
}

func (fakePVs) IsWatchListSemanticsUnSupported() bool { return true }

// Start returns once the informer has listed what is there; stop ends it.
// A context that ends before the list is ErrNotSynced.
func TestStartWaitsForTheListAndStopEndsIt(t *testing.T) {
	c := fake.NewClientset(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "store"}})
	inf := PersistentVolumeInformer(fakePVs{c.CoreV1().PersistentVolumes()}, 0)
	stop, err := Start(context.Background(), inf)
	assert.NilError(t, err)
	_, ok, err := inf.GetIndexer().GetByKey("store")
	assert.NilError(t, err)
	assert.Assert(t, ok, "Start returned before the informer listed PV store")
	stop()
	assert.Assert(t, inf.IsStopped(), "the informer still runs after stop")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stop, err = Start(ctx, PersistentVolumeInformer(fakePVs{c.CoreV1().PersistentVolumes()}, 0))
	stop()
	assert.Assert(t, errors.Is(err, ErrNotSynced), "got %v", err)
}
