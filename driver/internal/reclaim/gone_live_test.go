// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"slices"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"liken.sh/per-node/driver/internal/copyapi"
)

// liveTest is a controller of self whose clock is a variable, over a live
// PV "v" recorded by records, the Nodes in nodes existing.
type liveTest struct {
	testController
	t     *testing.T
	clock time.Time
}

func newLiveTest(t *testing.T, self string, grace time.Duration, nodes []string, records ...string) *liveTest {
	t.Helper()
	p := recorded(pv("v", "u", pvProtection), records...)
	lt := &liveTest{t: t, clock: time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)}
	copies := &fakeCopies{uids: map[string]string{}}
	if slices.Contains(records, self) || slices.Contains(records, owned(self)) {
		copies.uids["v"] = "u" // a holder holds a copy
	}
	lt.testController = newController(t, self, copies, nodes, p)
	lt.ForgetGoneAfter(grace)
	lt.gone.now = func() time.Time { return lt.clock }
	return lt
}

// syncAt syncs "v" at the clock plus d, from a cache that holds the PV as
// the API server has it now, and returns the Nodes it asked about and the
// nodes still recorded.
func (lt *liveTest) syncAt(d time.Duration) (asked, left []string) {
	t := lt.t
	t.Helper()
	lt.clock = lt.clock.Add(d)
	lt.held = newStaticPVs(getPVT(t, lt.world.client, "v"))
	lt.meta.ClearActions()
	assert.NilError(t, lt.sync(context.Background(), "v"))
	asked = []string{}
	for _, a := range lt.meta.Actions() {
		if g, ok := a.(clienttesting.GetAction); ok && a.GetResource().Resource == "nodes" {
			asked = append(asked, g.GetName())
		}
	}
	slices.Sort(asked)
	return asked, lt.holders(t, "v")
}

// deletions counts the requests that deleted Copies.
func (lt *liveTest) deletions() int {
	n := 0
	for _, v := range lt.copyVerbs() {
		if v == "delete" || v == "delete-collection" {
			n++
		}
	}
	return n
}

// On a live PV, a record of a node whose Node object is missing goes once it
// has been missing for the whole grace period, seen so when the period
// starts and again by a fresh read at its end, in one PATCH, by the first
// live holder; records of live nodes never go.
func TestARecordOfANodeGoneForTheGracePeriodGoesFromALivePV(t *testing.T) {
	const grace = time.Hour
	lt := newLiveTest(t, "a", grace, []string{"a", "b"}, "a", "gone", "b", "gone2")
	all := []string{"a", "b", "gone", "gone2"}
	asked, left := lt.syncAt(0)
	assert.DeepEqual(t, asked, []string{"b", "gone", "gone2"})
	assert.Assert(t, is.DeepEqual(left, all), "a record went before the grace period began")

	asked, left = lt.syncAt(time.Minute) // an event: no look before a quarter of the period
	assert.DeepEqual(t, asked, []string{})
	assert.DeepEqual(t, left, all)

	asked, left = lt.syncAt(grace/2 - time.Minute)
	assert.DeepEqual(t, asked, []string{"b", "gone", "gone2"})
	assert.Assert(t, is.DeepEqual(left, all), "a record went half way through the grace period")

	asked, left = lt.syncAt(grace / 2)
	assert.DeepEqual(t, asked, []string{"b", "gone", "gone2"})
	assert.DeepEqual(t, left, []string{"a", "b"})
	assert.Equal(t, lt.deletions(), 2, "requests about Copies: %v", lt.copyVerbs())
	noUpdates(t, lt.world.client)
	pvs, missing := lt.gone.size()
	assert.Equal(t, missing, 0, "missing nodes still timed after their records went")
	assert.Equal(t, pvs, 1)
}

// A node that is seen again during the grace period starts it again when it
// goes missing again; a read that fails, or a node that is there, drops
// nothing.
func TestANodeSeenAgainStartsTheGracePeriodAgain(t *testing.T) {
	const grace = time.Hour
	lt := newLiveTest(t, "a", grace, []string{"a", "b"}, "a", "b")
	lt.syncAt(0)
	// b goes, for most of the period.
	assert.NilError(t, lt.meta.Resource(nodesResource).Delete(context.Background(), "b", metav1.DeleteOptions{}))
	_, left := lt.syncAt(grace / 4)
	assert.DeepEqual(t, left, []string{"a", "b"})
	// b is back, then goes again.
	_, err := lt.meta.Resource(nodesResource).(metadataCreator).CreateFake(nodeMeta("b"), metav1.CreateOptions{})
	assert.NilError(t, err)
	_, left = lt.syncAt(grace / 2)
	assert.DeepEqual(t, left, []string{"a", "b"})
	assert.NilError(t, lt.meta.Resource(nodesResource).Delete(context.Background(), "b", metav1.DeleteOptions{}))
	_, left = lt.syncAt(grace / 2)
	assert.Assert(t, is.DeepEqual(left, []string{"a", "b"}), "the grace period did not start again when the node came back")
	// The reads fail at the end of the period: kept, and retried.
	lt.meta.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	_, left = lt.syncAt(grace)
	assert.Assert(t, is.DeepEqual(left, []string{"a", "b"}), "a record went on a read that failed")
	assert.Equal(t, lt.deletions(), 0)
}

// Only the first live holder acts. A holder after a live one, a node that
// holds no record, and a driver whose grace period is 0 drop nothing, and
// the last two ask about nothing.
func TestOnlyTheFirstLiveHolderDropsLiveRecords(t *testing.T) {
	const grace = time.Hour
	for _, tc := range []struct {
		name      string
		self      string
		grace     time.Duration
		records   []string
		wantAsked []string
		wantLeft  []string
	}{
		{name: "the_first_live_holder", self: "a", grace: grace,
			records: []string{"gone", "a", "b"}, wantAsked: []string{"b", "gone"}, wantLeft: []string{"a", "b"}},
		{name: "a_holder_after_a_live_one", self: "b", grace: grace,
			records: []string{"a", "gone", "b"}, wantAsked: []string{"a", "gone"}, wantLeft: []string{"a", "b", "gone"}},
		{name: "a_node_without_a_record", self: "c", grace: grace,
			records: []string{"a", "gone"}, wantAsked: []string{}, wantLeft: []string{"a", "gone"}},
		{name: "the_only_record", self: "a", grace: grace,
			records: []string{"a"}, wantAsked: []string{}, wantLeft: []string{"a"}},
		{name: "grace_0_never", self: "a",
			records: []string{"a", "gone"}, wantAsked: []string{}, wantLeft: []string{"a", "gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLiveTest(t, tc.self, tc.grace, []string{"a", "b", "c"}, tc.records...)
			lt.syncAt(0)
			asked, left := lt.syncAt(grace + time.Second)
			assert.DeepEqual(t, asked, tc.wantAsked)
			assert.DeepEqual(t, left, tc.wantLeft)
		})
	}
}

// A node whose record went and came back (the Node deleted, registered
// again, recorded again) starts its grace period again when it goes missing
// again: the time it was missing before does not count (scenario 17 saw a
// record dropped 4 s after its Node's second deletion).
func TestANodeRecordedAgainStartsTheGracePeriodAgain(t *testing.T) {
	const grace = time.Hour
	lt := newLiveTest(t, "a", grace, []string{"a", "c"}, "a", "c", "b") // b's Node is deleted
	lt.syncAt(0)                                                        // b missing from here
	// b's record is removed, b registers and records itself again, its
	// Node is deleted again: no look found it live in between.
	b := lt.allCopies(t)
	b = slices.DeleteFunc(b, func(c copyapi.Copy) bool { return c.Spec.Node != "b" })
	assert.NilError(t, lt.world.copies.Tracker.Delete(copyGVR, "", b[0].Name))
	lt.syncAt(grace / 4)
	again := copyOf("v", "u", "b")
	again.Name += "-again"
	assert.NilError(t, lt.world.copies.Tracker.Add(again))
	_, left := lt.syncAt(grace / 2)
	assert.Assert(t, is.DeepEqual(left, []string{"a", "b", "c"}), "a record went although its node had been recorded again")
	_, left = lt.syncAt(grace / 2)
	assert.Assert(t, is.DeepEqual(left, []string{"a", "b", "c"}), "a record went half way through its new grace period")
	_, left = lt.syncAt(grace / 2)
	assert.DeepEqual(t, left, []string{"a", "c"})
}

// A Copy its Node owns is the garbage collector's: the grace period is for
// Copies no Node owns (written by hand or by a restore). Owned Copies are
// neither asked about nor deleted, and a holder before this one whose Copy
// its Node owns counts as live unasked.
func TestOnlyCopiesNoNodeOwnsWaitForTheGracePeriod(t *testing.T) {
	const grace = time.Hour
	for _, tc := range []struct {
		name      string
		self      string
		records   []string
		wantAsked []string
		wantLeft  []string
	}{
		{name: "owned_copies_of_gone_nodes_are_left_to_the_collector", self: "a",
			records: []string{owned("a"), owned("gone"), "gone2", owned("b")}, wantAsked: []string{"gone2"},
			wantLeft: []string{"a", "b", "gone"}},
		{name: "a_holder_after_an_owned_one_leaves_it_to_that_one", self: "b",
			records: []string{owned("a"), owned("b"), "gone2"}, wantAsked: []string{"gone2"},
			wantLeft: []string{"a", "b", "gone2"}},
		{name: "only_owned_copies_ask_nothing", self: "a",
			records: []string{owned("a"), owned("b"), owned("gone")}, wantAsked: []string{},
			wantLeft: []string{"a", "b", "gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLiveTest(t, tc.self, grace, []string{"a", "b", "c"}, tc.records...)
			lt.syncAt(0)
			asked, left := lt.syncAt(grace + time.Second)
			assert.DeepEqual(t, asked, tc.wantAsked)
			assert.DeepEqual(t, left, tc.wantLeft)
		})
	}
}

var copyGVR = copyapi.SchemeGroupVersion.WithResource(copyapi.Resource)

func TestGoneClock(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	g := newGoneClock(time.Hour)
	assert.Equal(t, g.wait("v", t0), time.Duration(0), "a PV never looked at waits")
	due, next := g.seen("v", t0, map[string]bool{"b": true}, []string{"b", "x"})
	assert.DeepEqual(t, due, []string(nil))
	assert.Equal(t, next, 15*time.Minute)
	assert.Equal(t, g.wait("v", t0.Add(5*time.Minute)), 10*time.Minute)
	due, next = g.seen("v", t0.Add(50*time.Minute), nil, []string{"x"})
	assert.DeepEqual(t, due, []string(nil))
	assert.Equal(t, next, 10*time.Minute, "the next look is when x is due")
	due, _ = g.seen("v", t0.Add(time.Hour), nil, []string{"x"})
	assert.DeepEqual(t, due, []string{"x"})
	// Each PV times its own recorded nodes; a look that does not ask about
	// one (not recorded, or another holder drops it) forgets it.
	g.seen("w", t0, nil, []string{"x"})
	due, _ = g.seen("w", t0.Add(2*time.Hour), nil, nil)
	assert.DeepEqual(t, due, []string(nil))
	pvs, missing := g.size()
	assert.Equal(t, pvs, 2)
	assert.Equal(t, missing, 1, "x is still timed on v only")
	g.dropped("v", "x")
	g.dropped("w")
	pvs, missing = g.size()
	assert.Equal(t, pvs, 1)
	assert.Equal(t, missing, 0)
}

// metadataCreator is the fake metadata client's way to add an object.
type metadataCreator interface {
	CreateFake(obj *metav1.PartialObjectMetadata, opts metav1.CreateOptions, subresources ...string) (*metav1.PartialObjectMetadata, error)
}
