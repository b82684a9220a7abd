// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"liken.sh/per-node/driver/internal/namepart"
)

// FinalizerPrefix starts every node's finalizer on a PersistentVolume.
const FinalizerPrefix = "per-node.liken.sh/"

// Finalizer is the finalizer that says node holds a copy. Names longer than
// a finalizer's 63-character name part are shortened with a hash; the full
// name is then kept on the PV in an annotation of the same key (see
// recordPatch), so the record can always be read back.
func Finalizer(node string) string {
	return FinalizerPrefix + namepart.Of(node)
}

// HasRecord reports whether the PV records that node holds a copy: its
// finalizer, and for a long name the annotation that spells the name out.
func HasRecord(pv *corev1.PersistentVolume, node string) bool {
	f := Finalizer(node)
	if !slices.Contains(pv.Finalizers, f) {
		return false
	}
	return !namepart.Hashed(node) || pv.Annotations[f] == node
}

// Recorded lists the nodes a PV records as holders. A hashed finalizer
// whose annotation is missing or does not hash back to it names no node
// that can be checked: it is left out (kept on the PV, never dropped for a
// name it does not spell), and its own node restores the annotation.
func Recorded(pv *corev1.PersistentVolume) []string {
	var nodes []string
	for _, f := range pv.Finalizers {
		part, ok := strings.CutPrefix(f, FinalizerPrefix)
		if !ok {
			continue
		}
		if full, ok := pv.Annotations[f]; ok && namepart.Hashed(full) && Finalizer(full) == f {
			nodes = append(nodes, full)
			continue
		}
		// A hash without its name, or a name no finalizer of ours spells. A
		// real node name of the hashed shape is read as hashed too, so it is
		// never dropped on a guess; its node re-records it with the annotation.
		if namepart.LooksHashed(part) || Finalizer(part) != f {
			continue
		}
		nodes = append(nodes, part)
	}
	return nodes
}

// appendable says whether node's record can be appended to pv as read: it
// has finalizers (a live PV always has kubernetes.io/pv-protection) and,
// for a long name, annotations.
func appendable(pv *corev1.PersistentVolume, node string) bool {
	return len(pv.Finalizers) > 0 && (!namepart.Hashed(node) || len(pv.Annotations) > 0)
}

// recordAppend is a JSON patch that appends node's record to pv's
// finalizers (and, for a long name, its annotation), on the PV of pv's UID
// only. Appends of nodes that publish at once do not conflict (the patch
// carries no resourceVersion). It fails, changing nothing, on a PV of
// another UID or without finalizers (or annotations) to append to. A read
// that missed this node's own record (a cache a moment behind) appends it
// twice; the removal drops every copy of it.
func recordAppend(pv *corev1.PersistentVolume, node string) []byte {
	f := Finalizer(node)
	ops := []map[string]string{
		{"op": "test", "path": "/metadata/uid", "value": string(pv.UID)},
		{"op": "add", "path": "/metadata/finalizers/-", "value": f},
	}
	if namepart.Hashed(node) {
		ops = append(ops, map[string]string{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(f), "value": node})
	}
	b, err := json.Marshal(ops)
	if err != nil {
		panic(fmt.Sprintf("marshal a record append: %v", err)) // maps of strings always marshal
	}
	return b
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// recordPatch is a strategic merge patch that adds (add) or removes
// (!add) exactly the records of nodes and nothing else: one PATCH drops
// the records of any number of gone nodes. Finalizers merge as a set, so
// the records of nodes that publish at once do not conflict: the patch
// carries no resourceVersion. It carries the UID that was read, so it
// never lands on another PV created under the same name (the API server
// refuses a changed UID), and the API server itself refuses a new
// finalizer on a PV being deleted: what the read decided still holds when
// the record is written.
func recordPatch(pv *corev1.PersistentVolume, add bool, nodes ...string) []byte {
	meta := map[string]any{"uid": string(pv.UID)}
	finalizers := make([]string, 0, len(nodes))
	annotations := map[string]any{}
	for _, node := range nodes {
		f := Finalizer(node)
		finalizers = append(finalizers, f)
		if !namepart.Hashed(node) {
			continue
		}
		if add {
			annotations[f] = node
		} else {
			annotations[f] = nil
		}
	}
	if add {
		meta["finalizers"] = finalizers
	} else {
		meta["$deleteFromPrimitiveList/finalizers"] = finalizers
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		panic(fmt.Sprintf("marshal a record patch: %v", err)) // maps of strings always marshal
	}
	return b
}
