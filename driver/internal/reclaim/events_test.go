// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"testing"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// refRecorder keeps the object each event is about.
type refRecorder struct {
	record.FakeRecorder
	refs []*corev1.ObjectReference
}

func (r *refRecorder) Event(obj runtime.Object, _, _, _ string) {
	r.refs = append(r.refs, obj.(*corev1.ObjectReference))
}

// Every event a node's driver tells is about the PV by name and UID, so
// that a PV created again under the same name never shows its
// predecessor's story (kubectl describe matches events by UID).
func TestEveryEventNamesThePVsUID(t *testing.T) {
	w := newWorld(pv("store", "uid-1"))
	rec := &refRecorder{}
	tr := NewTracker(w.client.CoreV1().PersistentVolumes(), w.copies, me, rec)
	_, err := tr.Record(context.Background(), "store")
	assert.NilError(t, err)
	tr.Event(context.Background(), "store", "", corev1.EventTypeNormal, "CopyCreated", "made")
	assert.Equal(t, len(rec.refs), 1)
	assert.DeepEqual(t, *rec.refs[0], corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: "store", UID: "uid-1"})
}
