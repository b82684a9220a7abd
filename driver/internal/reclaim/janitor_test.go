// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"

	"liken.sh/per-node/driver/internal/kube/kubefake"
)

// quickJanitor is janitorTiming in seconds, for tests.
var quickJanitor = janitorTiming{lease: 2 * time.Second, renew: 1500 * time.Millisecond, retry: 500 * time.Millisecond, every: 100 * time.Millisecond}

// janitorCandidate is the running controller of self, a candidate for the
// janitor's Lease in leases, over a world of its own that holds a PV being
// deleted whose one Copy is of a node that is gone: only the janitor can
// release it (no live node holds it). The first Node by name, "a-windows",
// runs no driver.
type janitorCandidate struct {
	testController
	stop func()
}

func newJanitorCandidate(t *testing.T, self string, leases *kubefake.Leases) *janitorCandidate {
	t.Helper()
	nodes := []string{"a-windows", "b-linux", "c-linux"}
	orphan := deletingSince(recorded(pv("orphan", "u"), "gone"), 2*orphanedAfter)
	ctl := newController(t, self, &fakeCopies{uids: map[string]string{}}, nodes, orphan).live()
	scheme := runtime.NewScheme()
	assert.NilError(t, metav1.AddMetaToScheme(scheme))
	objs := []runtime.Object{&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", DeletionTimestamp: orphan.DeletionTimestamp, Finalizers: []string{Finalizer}}}}
	for _, n := range nodes {
		objs = append(objs, nodeMeta(n))
	}
	ctl.meta = metadatafake.NewSimpleMetadataClient(scheme, objs...)
	ctl.Controller.meta = ctl.meta
	ctl.janitorTiming = quickJanitor
	ctl.ElectJanitor(leases)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	c := &janitorCandidate{testController: ctl}
	var stopped bool
	c.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			assert.NilError(t, <-done)
		}
	}
	t.Cleanup(c.stop)
	return c
}

// released says whether the candidate's orphan went (no Copy, no finalizer).
func (c *janitorCandidate) released(t *testing.T) bool {
	return !slices.Contains(c.view(t, "orphan"), Finalizer)
}

// sweeps counts the candidate's lists of PersistentVolumes.
func (c *janitorCandidate) sweeps() int {
	n := 0
	for _, a := range c.meta.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "persistentvolumes" {
			n++
		}
	}
	return n
}

// The janitor is a driver that runs, whatever the names of the Nodes: the
// first Node by name runs none here (a Windows node, a pool the chart
// leaves out), and a PV no live node holds is still released, by one
// driver only; when the janitor stops, another takes its place and
// releases what is left.
func TestTheJanitorIsADriverThatRuns(t *testing.T) {
	leases := kubefake.NewLeases("per-node-system")
	cs := map[string]*janitorCandidate{"b-linux": newJanitorCandidate(t, "b-linux", leases), "c-linux": newJanitorCandidate(t, "c-linux", leases)}
	holder := func() string {
		l, err := leases.Get(context.Background(), JanitorLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	state := func() string {
		return fmt.Sprintf("lease held by %q; released: b-linux %v, c-linux %v; sweeps: b-linux %d, c-linux %d",
			holder(), cs["b-linux"].released(t), cs["c-linux"].released(t), cs["b-linux"].sweeps(), cs["c-linux"].sweeps())
	}
	var first string
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if h := holder(); cs[h] != nil && cs[h].released(t) {
			first = h
			return poll.Success()
		}
		return poll.Continue("the orphan released by the janitor, a driver that runs: %s", state())
	}, poll.WithTimeout(20*time.Second))
	other := "b-linux"
	if first == other {
		other = "c-linux"
	}
	assert.Equal(t, cs[other].sweeps(), 0, "only the janitor lists PersistentVolumes: %s", state())
	assert.Assert(t, !cs[other].released(t), state())

	cs[first].stop()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if holder() == other && cs[other].released(t) {
			return poll.Success()
		}
		return poll.Continue("%s to take the janitor's Lease from %s, which stopped, and release its orphan: %s", other, first, state())
	}, poll.WithTimeout(20*time.Second))
}
