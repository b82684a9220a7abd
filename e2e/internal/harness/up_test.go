// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCheckNodesRefusesAClusterOfAnotherVersion(t *testing.T) {
	node := func(name, version string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version}}}
	}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  string
		err   error
	}{
		{"every node runs it", []*corev1.Node{node("cp", "v1.37.2"), node("w1", "v1.37.2")}, "v1.37.2", nil},
		{"another minor", []*corev1.Node{node("cp", "v1.36.3"), node("w1", "v1.36.3")}, "v1.37.2", ErrWrongVersion},
		{"one node differs", []*corev1.Node{node("cp", "v1.37.2"), node("w1", "v1.37.1")}, "v1.37.2", ErrWrongVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for _, n := range tc.nodes {
				_, err := cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
				assert.NilError(t, err)
			}
			err := checkNodes(context.Background(), cs, "per-node-e2e", tc.want)
			if tc.err == nil {
				assert.NilError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

func TestLanesNameOneClusterEach(t *testing.T) {
	for _, tc := range []struct {
		lanes string
		want  []string
		err   bool
	}{
		{"", []string{"per-node-e2e"}, false},
		{"1", []string{"per-node-e2e"}, false},
		{"3", []string{"per-node-e2e", "per-node-e2e-2", "per-node-e2e-3"}, false},
		{"0", nil, true},
		{"5", nil, true},
		{"two", nil, true},
	} {
		t.Run("E2E_LANES="+tc.lanes, func(t *testing.T) {
			t.Setenv("E2E_CLUSTER", "per-node-e2e")
			t.Setenv("E2E_LANES", tc.lanes)
			t.Setenv("E2E_SCENARIO", "")
			c, err := FromEnv()
			if tc.err {
				assert.ErrorIs(t, err, ErrLanes)
				return
			}
			assert.NilError(t, err)
			assert.DeepEqual(t, c.Clusters(), tc.want)
		})
	}
}

// TestARunOfFewerScenariosThanLanesBringsUpOneClusterEach: make e2e
// SCENARIO=07 waits for one cluster, not E2E_LANES of them.
func TestARunOfFewerScenariosThanLanesBringsUpOneClusterEach(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		want     int
	}{
		{"", 3},           // every scenario
		{"07", 1},         // one
		{"07,08", 2},      // two
		{"0", 3},          // 01 to 09: more than the lanes
		{"07, 12-", 2},    // spaces after commas, as TestScenarios trims them
		{"99-nothing", 1}, // none: one cluster, and TestScenarios says no scenario matches
	} {
		t.Run("E2E_SCENARIO="+tc.scenario, func(t *testing.T) {
			t.Setenv("E2E_CLUSTER", "per-node-e2e")
			t.Setenv("E2E_LANES", "3")
			t.Setenv("E2E_SCENARIO", tc.scenario)
			c, err := FromEnv()
			assert.NilError(t, err)
			assert.Equal(t, c.Lanes, tc.want, "clusters for scenarios %q", tc.scenario)
		})
	}
}

func TestAClusterShortOfAReadyNodeIsRefused(t *testing.T) {
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	kind := []string{"cp", "w1", "w2"}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		err   error
	}{
		{"every node Ready", []*corev1.Node{node("cp", "True"), node("w1", "True"), node("w2", "True")}, nil},
		{"a worker never registered", []*corev1.Node{node("cp", "True"), node("w1", "True")}, ErrNodesNotReady},
		{"a worker not Ready", []*corev1.Node{node("cp", "True"), node("w1", "True"), node("w2", "False")}, ErrNodesNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for _, n := range tc.nodes {
				_, err := cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
				assert.NilError(t, err)
			}
			err := waitNodesReady(context.Background(), cs, "per-node-e2e", kind, time.Second)
			if tc.err == nil {
				assert.NilError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.err)
			assert.ErrorContains(t, err, "w2")
		})
	}
}
