// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package copylabels

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// A PersistentVolume name of 253 characters, the longest Kubernetes allows.
var longPV = strings.Repeat("a", 60) + "." + strings.Repeat("b", 192)

func TestKeyIsALabelKeyForEveryPVName(t *testing.T) {
	for _, tc := range []struct{ pv, want string }{
		{"store", Prefix + "store"},
		{strings.Repeat("s", 63), Prefix + strings.Repeat("s", 63)},
		{strings.Repeat("s", 64), Prefix + strings.Repeat("s", 50) + "-" + "9791065143e7"},
		{longPV, Prefix + strings.Repeat("a", 50) + "-"},
	} {
		got := Key(tc.pv)
		assert.Assert(t, strings.HasPrefix(got, tc.want), "Key(%q) = %q, want %q...", tc.pv, got, tc.want)
		assert.Assert(t, is.Len(validation.IsQualifiedName(got), 0), "Key(%q) = %q is no label key", tc.pv, got)
	}
	assert.Assert(t, Key(strings.Repeat("s", 64)) != Key(strings.Repeat("s", 65)), "two long names share a label")
}

func TestPatchSetsExactlyTheCopiesAndTouchesNoOtherLabel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		handles []string
		want    map[string]any // the patch's labels; nil: no patch
	}{
		{"nothing to do", map[string]string{"kubernetes.io/hostname": "w1", Key("a"): ""}, []string{"a"}, nil},
		{"no copies, no labels", map[string]string{"kubernetes.io/hostname": "w1"}, nil, nil},
		{"a new copy", map[string]string{"kubernetes.io/hostname": "w1"}, []string{"a", longPV},
			map[string]any{Key("a"): "", Key(longPV): ""}},
		{"a copy gone", map[string]string{Key("a"): "", Key("b"): "", "team": "x"}, []string{"b"},
			map[string]any{Key("a"): nil}},
		{"a value edited by hand", map[string]string{Key("a"): "no"}, []string{"a"}, map[string]any{Key("a"): ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Patch(tc.labels, tc.handles)
			if tc.want == nil {
				assert.Assert(t, is.Nil(p), "patch %s", p)
				return
			}
			var got struct {
				Metadata struct {
					Labels map[string]any `json:"labels"`
				} `json:"metadata"`
			}
			assert.NilError(t, json.Unmarshal(p, &got))
			assert.DeepEqual(t, got.Metadata.Labels, tc.want)
		})
	}
}

// fakeCopies is the disk: the handles this node holds copies of.
type fakeCopies struct {
	mu      sync.Mutex
	handles []string
}

func (f *fakeCopies) Handles() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.handles), nil
}

func (f *fakeCopies) set(h ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handles = h
}

func nodeMeta(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
}

func copyLabels(t *testing.T, meta *metadatafake.FakeMetadataClient, node string) (map[string]string, error) {
	t.Helper()
	m, err := meta.Resource(nodes).Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range m.Labels {
		if strings.HasPrefix(k, Prefix) || k == "team" {
			out[k] = v
		}
	}
	return out, nil
}

// waitLabels polls until the Node's copy labels (and its "team" label) are
// want.
func waitLabels(t *testing.T, meta *metadatafake.FakeMetadataClient, node string, want map[string]string) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		got, err := copyLabels(t, meta, node)
		if err != nil {
			return poll.Continue("get node %s: %v", node, err)
		}
		if !maps.Equal(got, want) {
			return poll.Continue("node %s's labels are %v, want %v", node, got, want)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(20*time.Millisecond))
}

func patchLabels(t *testing.T, meta *metadatafake.FakeMetadataClient, node string, labels map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	assert.NilError(t, err)
	_, err = meta.Resource(nodes).Patch(context.Background(), node, types.MergePatchType, b, metav1.PatchOptions{})
	assert.NilError(t, err)
}

// The labels follow the disk through every way they can go wrong: a stale
// label at start, a copy made and one removed, a hand edit, and a Node
// deleted and registered again; the other labels and the other nodes are
// never touched.
func TestTheLabelsFollowTheCopiesOnDisk(t *testing.T) {
	scheme := runtime.NewScheme()
	assert.NilError(t, metav1.AddMetaToScheme(scheme))
	meta := metadatafake.NewSimpleMetadataClient(scheme,
		nodeMeta("w1", map[string]string{"team": "x", Key("gone"): ""}),
		nodeMeta("w2", map[string]string{Key("other"): ""}))
	disk := &fakeCopies{handles: []string{"store", longPV}}
	l := New(meta, "w1", disk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NilError(t, <-done) })

	// At start: the stale label goes, the copies' labels come.
	waitLabels(t, meta, "w1", map[string]string{"team": "x", Key("store"): "", Key(longPV): ""})

	// A copy made, one removed.
	disk.set("store", "logs")
	l.Changed()
	waitLabels(t, meta, "w1", map[string]string{"team": "x", Key("store"): "", Key("logs"): ""})

	// A hand edit: a label removed, another added.
	patchLabels(t, meta, "w1", map[string]any{Key("store"): nil, Key("never"): "", "team": "y"})
	waitLabels(t, meta, "w1", map[string]string{"team": "y", Key("store"): "", Key("logs"): ""})

	// The Node deleted and registered again, without the labels.
	assert.NilError(t, meta.Resource(nodes).Delete(ctx, "w1", metav1.DeleteOptions{}))
	_, err := meta.Resource(nodes).(metadatafake.MetadataClient).CreateFake(nodeMeta("w1", map[string]string{"team": "y"}), metav1.CreateOptions{})
	assert.NilError(t, err)
	waitLabels(t, meta, "w1", map[string]string{"team": "y", Key("store"): "", Key("logs"): ""})

	got, err := copyLabels(t, meta, "w2")
	assert.NilError(t, err)
	assert.DeepEqual(t, got, map[string]string{Key("other"): ""})
}

// A burst of copies made (a node starting many pods of new volumes at once)
// costs the Node a handful of PATCHes, not one per copy: every PATCH of a
// Node is sent to every watcher of Nodes in the cluster.
func TestABurstOfCopiesIsLabelledInFewPatches(t *testing.T) {
	scheme := runtime.NewScheme()
	assert.NilError(t, metav1.AddMetaToScheme(scheme))
	meta := metadatafake.NewSimpleMetadataClient(scheme, nodeMeta("w1", nil))
	disk := &fakeCopies{}
	l := New(meta, "w1", disk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NilError(t, <-done) })
	// One copy labelled first: the labeller's watch has synced and its
	// first look is done, so that look (a PATCH of its own, on a loaded
	// machine in the middle of the burst) is not counted as the burst's.
	handles := []string{"warm"}
	want := map[string]string{Key("warm"): ""}
	disk.set(handles...)
	l.Changed()
	waitLabels(t, meta, "w1", want)
	meta.ClearActions()

	start := time.Now()
	for i := range 40 {
		h := fmt.Sprintf("v%02d", i)
		handles = append(handles, h)
		want[Key(h)] = ""
		disk.set(handles...)
		l.Changed()
		time.Sleep(5 * time.Millisecond) // copies made one after another, as publishes do
	}
	// 200 ms on an idle machine; on a loaded one the burst lasts longer and
	// spans more of the labeller's one-second batches, each a PATCH at most.
	span := time.Since(start)
	waitLabels(t, meta, "w1", want)
	patches := 0
	for _, a := range meta.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	allowed := 3 + int(span/batch)
	assert.Assert(t, patches <= allowed, "40 copies made over %s took %d PATCHes of the Node, want at most %d (3, and one per second the burst lasted past the first)",
		span.Round(time.Millisecond), patches, allowed)
}
