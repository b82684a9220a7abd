// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"testing"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An event names its node exactly: worker's step is not satisfied by an
// event from worker2, nor by one about an earlier PV of the same name.
func TestAnEventIsFromTheExactNodeAboutTheCurrentPV(t *testing.T) {
	ev := func(msg string, uid types.UID) corev1.Event {
		return corev1.Event{Message: msg, InvolvedObject: corev1.ObjectReference{UID: uid}}
	}
	for _, tc := range []struct {
		name  string
		event corev1.Event
		uid   string
		want  bool
	}{
		{"that node", ev("node e2e-worker created its copy", "u1"), "u1", true},
		{"that node, a refusal", ev("node e2e-worker: the volume is being deleted", "u1"), "u1", true},
		{"a node whose name starts with it", ev("node e2e-worker2 created its copy", "u1"), "u1", false},
		{"another node", ev("node e2e-worker3: refused", "u1"), "u1", false},
		{"an earlier PV of the same name", ev("node e2e-worker created its copy", "u0"), "u1", false},
		{"the PV is gone: any UID", ev("node e2e-worker removed its copy (5 bytes)", "u0"), "", true},
		{"an event with no UID", ev("node e2e-worker created its copy", ""), "u1", true},
		{"the node named in the middle", ev("pod x on node e2e-worker", "u1"), "u1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, fromNode(tc.event, "e2e-worker", tc.uid), tc.want)
		})
	}
}
