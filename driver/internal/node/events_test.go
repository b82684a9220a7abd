// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"liken.sh/per-node/driver/internal/kube/kubefake"
	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/reclaim"
)

// eventsSeen is an EventRecorder that keeps "reason uid" of each event.
type eventsSeen struct {
	mu   sync.Mutex
	seen []string
}

func (e *eventsSeen) Event(obj runtime.Object, _, reason, _ string) {
	ref, ok := obj.(*corev1.ObjectReference)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, reason+" "+string(ref.UID))
}

func (e *eventsSeen) Eventf(obj runtime.Object, t, reason, f string, args ...any) {
	e.Event(obj, t, reason, fmt.Sprintf(f, args...))
}

func (e *eventsSeen) AnnotatedEventf(obj runtime.Object, _ map[string]string, t, reason, f string, args ...any) {
	e.Eventf(obj, t, reason, f, args...)
}

func (e *eventsSeen) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seen)
}

func perNodePV(name, uid string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: reclaim.DriverName, VolumeHandle: name}}},
	}
}

// An event about a copy names the PV that copy belongs to: the removal of
// a copy of a PV deleted and created again under the same name names the
// old PV's UID, not the new one's (which the driver read last), and the
// new copy's creation names the new one.
func TestCopyEventsNameThePVOfTheCopy(t *testing.T) {
	s, dir := newTestServer(t)
	client := fake.NewClientset(perNodePV("store", "uid-old"))
	seen := &eventsSeen{}
	tr := reclaim.NewTracker(client.CoreV1().PersistentVolumes(), kubefake.NewCopies(), "worker-a", seen)
	s, err := New(Config{NodeID: "worker-a", Root: s.layout.Root(), Mounter: mounts.NewKernel(), Tracker: tr})
	assert.NilError(t, err)
	ctx := context.Background()

	target := podTarget(dir, "1", "store")
	_, err = s.NodePublishVolume(ctx, publishReq("store", target, "store-1"))
	assert.NilError(t, err)
	unpublish(t, s, "store", target)

	assert.NilError(t, client.CoreV1().PersistentVolumes().Delete(ctx, "store", metav1.DeleteOptions{}))
	_, err = client.CoreV1().PersistentVolumes().Create(ctx, perNodePV("store", "uid-new"), metav1.CreateOptions{})
	assert.NilError(t, err)
	target = podTarget(dir, "2", "store")
	_, err = s.NodePublishVolume(ctx, publishReq("store", target, "store-2"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })

	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if slices.ContainsFunc(seen.all(), func(e string) bool { return e == "CopyRemoved uid-old" || e == "CopyRemoved uid-new" }) {
			return poll.Success()
		}
		return poll.Continue("no CopyRemoved yet; events: %v", seen.all())
	})
	got := seen.all()
	slices.Sort(got) // the removal's event comes from the trash's goroutine
	assert.DeepEqual(t, got, []string{"CopyCreated uid-new", "CopyCreated uid-old", "CopyRemoved uid-old"})
}
