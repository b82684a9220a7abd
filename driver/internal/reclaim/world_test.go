// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"liken.sh/per-node/driver/internal/copyapi"
	"liken.sh/per-node/driver/internal/kube/kubefake"
)

// rec marks, in a test PV's finalizers, that node holds a Copy of it:
// newWorld makes the Copy and puts Finalizer on the PV in its place.
func rec(node string) string { return "copy:" + node }

// owned marks that node holds a Copy owned by its Node, as the driver
// writes them (rec's are ownerless, as an administrator writes them).
func owned(node string) string { return "owned:" + node }

// markOf is the marker of c in a test PV's finalizers.
func markOf(c *copyapi.Copy) string {
	if c.OwnedByNode() {
		return owned(c.Spec.Node)
	}
	return rec(c.Spec.Node)
}

// world is a fake API server: PersistentVolumes and Copies.
type world struct {
	client *fake.Clientset
	copies *kubefake.Copies
}

// newWorld holds pvs, each with the Copies its rec markers name.
func newWorld(pvs ...*corev1.PersistentVolume) world {
	objs, cs := seed(pvs...)
	return world{client: withAPIServerRules(fake.NewClientset(objs...)), copies: kubefake.NewCopies(cs...)}
}

// seed turns rec markers into Copies and the one finalizer.
func seed(pvs ...*corev1.PersistentVolume) ([]runtime.Object, []*copyapi.Copy) {
	var objs []runtime.Object
	var cs []*copyapi.Copy
	for _, p := range pvs {
		p = p.DeepCopy()
		var fs []string
		for _, f := range p.Finalizers {
			node, ok := strings.CutPrefix(f, "copy:")
			ownedNode, isOwned := strings.CutPrefix(f, "owned:")
			if !ok && !isOwned {
				fs = append(fs, f)
				continue
			}
			if !slices.Contains(fs, Finalizer) {
				fs = append(fs, Finalizer)
			}
			if isOwned {
				cs = append(cs, ownedCopyOf(p.Name, string(p.UID), ownedNode))
				continue
			}
			cs = append(cs, copyOf(p.Name, string(p.UID), node))
		}
		p.Finalizers = fs
		objs = append(objs, p)
	}
	return objs, cs
}

// copyOf is node's Copy of the PV volume of UID uid, as the API server
// keeps it.
func copyOf(volume, uid, node string) *copyapi.Copy {
	c := copyapi.New(volume, uid, node, "")
	c.Name = c.GenerateName + "seed-" + uid
	c.UID = types.UID("copy-of-" + uid + "-" + node)
	return c
}

// ownedCopyOf is copyOf owned by node's Node, as the driver writes it.
func ownedCopyOf(volume, uid, node string) *copyapi.Copy {
	c := copyapi.New(volume, uid, node, types.UID("uid-of-"+node))
	c.Name = c.GenerateName + "owned-" + uid
	c.UID = types.UID("owned-copy-of-" + uid + "-" + node)
	return c
}

// copies lists every Copy the fake holds.
func (w world) allCopies(t *testing.T) []copyapi.Copy {
	t.Helper()
	l, err := w.copies.List(context.Background(), metav1.ListOptions{})
	assert.NilError(t, err)
	return l.Items
}

// holders is the nodes that hold a Copy of the PV named name, of its UID
// now (of uid, if given).
func (w world) holders(t *testing.T, name string, uid ...string) []string {
	t.Helper()
	u := ""
	if len(uid) > 0 {
		u = uid[0]
	} else {
		u = string(getPVT(t, w.client, name).UID)
	}
	cs, err := copiesOf(context.Background(), w.copies, name, u)
	assert.NilError(t, err)
	return holders(cs)
}

// has says whether node holds a Copy of the PV named name and the PV
// carries Finalizer: the node is recorded.
func (w world) has(t *testing.T, name, node string) bool {
	t.Helper()
	return slices.Contains(getPVT(t, w.client, name).Finalizers, Finalizer) && slices.Contains(w.holders(t, name), node)
}

// view is the PV's finalizers, sorted (a merge patch puts a new one where
// it likes), then a rec marker for each node that holds a Copy of it: the
// state of its records in one list.
func (w world) view(t *testing.T, name string) []string {
	t.Helper()
	p := getPVT(t, w.client, name)
	out := slices.Sorted(slices.Values(p.Finalizers))
	cs, err := copiesOf(context.Background(), w.copies, name, string(p.UID))
	assert.NilError(t, err)
	var marks []string
	for i := range cs {
		marks = append(marks, markOf(&cs[i]))
	}
	slices.SortFunc(marks, func(a, b string) int {
		_, na, _ := strings.Cut(a, ":")
		_, nb, _ := strings.Cut(b, ":")
		return strings.Compare(na+"\x00"+a, nb+"\x00"+b)
	})
	return append(out, slices.Compact(marks)...)
}

// copyVerbs lists the verbs of the requests about Copies, in order.
func (w world) copyVerbs() []string {
	var verbs []string
	for _, a := range w.copies.Fake.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	return verbs
}

// tracker is node's tracker of w.
func (w world) tracker(node string) *Tracker {
	return NewTracker(w.client.CoreV1().PersistentVolumes(), w.copies, node, nil)
}

// recorded is p with rec markers for nodes: each holds a Copy of it (a
// node given as an owned marker holds one its Node owns).
func recorded(p *corev1.PersistentVolume, nodes ...string) *corev1.PersistentVolume {
	for _, n := range nodes {
		if strings.HasPrefix(n, "owned:") {
			p.Finalizers = append(p.Finalizers, n)
			continue
		}
		p.Finalizers = append(p.Finalizers, rec(n))
	}
	return p
}

// recs is fs with Finalizer among the finalizers before its first rec
// marker, sorted: how view shows a PV whose nodes hold Copies.
func recs(fs ...string) []string {
	i := slices.IndexFunc(fs, func(f string) bool { return strings.HasPrefix(f, "copy:") || strings.HasPrefix(f, "owned:") })
	if i < 0 {
		return fs
	}
	out := slices.Insert(slices.Clone(fs[:i]), len(fs[:i]), Finalizer)
	slices.Sort(out)
	return append(out, fs[i:]...)
}

// staticPVs is a pvView that holds a fixed set of PVs, as a synced watch
// of each would show them; names lists what watch asked for and forget did
// not take back. Safe for the controller's workers at once, as heldPVs is.
type staticPVs struct {
	mu      sync.Mutex
	pvs     map[string]*corev1.PersistentVolume
	watched map[string]bool
}

func newStaticPVs(pvs ...*corev1.PersistentVolume) *staticPVs {
	s := &staticPVs{pvs: map[string]*corev1.PersistentVolume{}, watched: map[string]bool{}}
	for _, p := range pvs {
		s.pvs[p.Name] = p
	}
	return s
}

func (s *staticPVs) watch(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watched[name] = true
	return nil
}

func (s *staticPVs) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watched, name)
}

func (s *staticPVs) get(name string) (*corev1.PersistentVolume, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pvs[name]
	return p, ok
}

func (s *staticPVs) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.watched))
	for n := range s.watched {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
