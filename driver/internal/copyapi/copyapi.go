// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package copyapi is the Copy resource (per-node.liken.sh/v1alpha1): one
// object for each node that holds a copy of a PersistentVolume. A node's
// driver creates its Copy before it makes the copy and deletes it once the
// copy is gone; the PersistentVolume carries one finalizer, Finalizer,
// while any Copy of it remains. Records are objects, never entries of a
// list on a shared object, so a record change costs the API server the
// same whatever the number of nodes that hold a copy, and is delivered
// only to the node it names (each driver watches its own Copies by label).
//
// A Copy is identified by its spec (volume, volumeUID, node), not by its
// name: the name is generated, so no node can take the name another
// node's Copy would have. Anything that reads Copies reads their spec; the
// labels only narrow a list or a watch.
package copyapi

import (
	"slices"

	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"liken.sh/per-node/driver/internal/namepart"
)

// Group is the API group of Copy.
const Group = "per-node.liken.sh"

// SchemeGroupVersion is the group and version of Copy.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

// Resource is Copy's resource name.
const Resource = "copies"

// Finalizer is on a PersistentVolume while any Copy of it remains.
const Finalizer = Group + "/copies"

// Label keys: the node a Copy is on and the PersistentVolume it is a copy
// of (names fitted to a label value by namepart.Of), and that PV's UID.
const (
	NodeLabel      = Group + "/node"
	VolumeLabel    = Group + "/volume"
	VolumeUIDLabel = Group + "/volume-uid"
)

// Copy says that a node holds a copy of a PersistentVolume.
type Copy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CopySpec `json:"spec"`
}

// CopySpec is what a Copy says; it never changes.
type CopySpec struct {
	// Volume is the PersistentVolume's name (its volumeHandle).
	Volume string `json:"volume"`
	// VolumeUID is the UID of the PersistentVolume the copy belongs to.
	VolumeUID string `json:"volumeUID"`
	// Node is the name of the node that holds the copy.
	Node string `json:"node"`
}

// CopyList is a list of Copies.
type CopyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Copy `json:"items"`
}

// New is the Copy of volume (of UID uid) on node, to be created: a
// generated name that starts with the volume's and the node's names, and
// the labels that select it. With nodeUID it is owned by that Node object,
// so that Kubernetes' garbage collector deletes it once the Node is gone.
func New(volume, uid, node string, nodeUID types.UID) *Copy {
	c := &Copy{
		TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "Copy"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: namePrefix(volume, node),
			Labels: map[string]string{VolumeLabel: namepart.Of(volume), VolumeUIDLabel: uid, NodeLabel: namepart.Of(node)}},
		Spec: CopySpec{Volume: volume, VolumeUID: uid, Node: node},
	}
	if nodeUID != "" {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: nodeUID}}
	}
	return c
}

// OwnedByNode says whether c is owned by a Node: the driver's own Copies
// are, and the garbage collector deletes them with their Node; Copies an
// administrator or a restore wrote may not be.
func (c *Copy) OwnedByNode() bool {
	return c.ownedByNode(func(types.UID) bool { return true })
}

// OwnedBy says whether c is owned by the Node of UID uid.
func (c *Copy) OwnedBy(uid types.UID) bool {
	return c.ownedByNode(func(u types.UID) bool { return u == uid })
}

// ownedByNode says whether one of c's owners is a Node whose UID is ok.
func (c *Copy) ownedByNode(ok func(types.UID) bool) bool {
	return slices.ContainsFunc(c.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.Kind == "Node" && r.APIVersion == "v1" && ok(r.UID)
	})
}

// namePrefix is a readable start of a Copy's name: the volume's and the
// node's names, dots made dashes, at most 50 characters, ending in a dash
// (the API server adds five random characters).
func namePrefix(volume, node string) string {
	p := strings.ReplaceAll(volume+"-"+node, ".", "-")
	if len(p) > 50 {
		p = p[:50]
	}
	return strings.TrimRight(p, "-") + "-"
}

// VolumeSelector selects the Copies of volume (read their spec: a label
// value of a long name is shortened).
func VolumeSelector(volume string) string { return VolumeLabel + "=" + namepart.Of(volume) }

// UIDSelector selects the Copies of the PersistentVolume of UID uid (read
// their spec).
func UIDSelector(uid string) string { return VolumeUIDLabel + "=" + uid }

// NodeSelector selects the Copies on node (read their spec).
func NodeSelector(node string) string { return NodeLabel + "=" + namepart.Of(node) }

// Of says whether c is a Copy of the PersistentVolume volume of UID uid.
func (c *Copy) Of(volume, uid string) bool {
	return c.Spec.Volume == volume && c.Spec.VolumeUID == uid
}

// AddToScheme registers Copy and CopyList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &Copy{}, &CopyList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// DeepCopyObject copies c.
func (c *Copy) DeepCopyObject() runtime.Object { return c.DeepCopy() }

// DeepCopy copies c.
func (c *Copy) DeepCopy() *Copy {
	if c == nil {
		return nil
	}
	out := &Copy{TypeMeta: c.TypeMeta, Spec: c.Spec}
	c.DeepCopyInto(&out.ObjectMeta)
	return out
}

// DeepCopyObject copies l.
func (l *CopyList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &CopyList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Copy, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopy()
		}
	}
	return out
}
