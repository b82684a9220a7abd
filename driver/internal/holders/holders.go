// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package holders remembers which pod on this node holds each copy.
//
// The kernel is the source of truth: the index is seeded from the mount
// table at start and every recorded holder is confirmed against the kernel
// before it is believed, so the answer stays right after a driver restart, a
// crash, or an unmount made by hand. The index only saves reading the whole
// mount table on every request. A small record next to each copy (Save,
// Load), written off the request path (Names), keeps the holder's name
// across restarts; it names, never decides.
package holders

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
)

// Holder is the pod that has a copy mounted on this node.
type Holder struct {
	// Target is the path the copy is mounted at.
	Target string `json:"target"`
	// Pod names the pod: "namespace/name" when kubelet passed pod info,
	// otherwise "pod uid <uid>" read from the target path.
	Pod string `json:"pod"`
}

// Index maps volume handles to their holders. It is safe for concurrent use;
// callers serialise work on one handle themselves.
type Index struct {
	mu sync.Mutex
	m  map[string]Holder
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{m: map[string]Holder{}} }

// Get returns the recorded holder of handle, if any.
func (i *Index) Get(handle string) (Holder, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	h, ok := i.m[handle]
	return h, ok
}

// Set records the holder of handle.
func (i *Index) Set(handle string, h Holder) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.m[handle] = h
}

// Forget drops the record of handle.
func (i *Index) Forget(handle string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.m, handle)
}

// Len is the number of recorded holders.
func (i *Index) Len() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.m)
}

// kubelet mounts CSI volumes at
// /var/lib/kubelet/pods/<pod-uid>/volumes/kubernetes.io~csi/<pv>/mount.
var podUIDInTarget = regexp.MustCompile(`/pods/([0-9a-fA-F-]+)/volumes/`)

// PodName names the pod behind a publish request: from kubelet's pod info
// when the CSIDriver asks for it (podInfoOnMount), else from the target path.
func PodName(volumeContext map[string]string, target string) string {
	ns, name := volumeContext["csi.storage.k8s.io/pod.namespace"], volumeContext["csi.storage.k8s.io/pod.name"]
	if ns != "" && name != "" {
		return ns + "/" + name
	}
	if m := podUIDInTarget.FindStringSubmatch(target); m != nil {
		return "pod uid " + m[1]
	}
	return "the pod using " + target
}

// Who names the holder in a sentence: "pod <namespace>/<name>", or the
// fallback PodName gave when kubelet passed no pod info.
func (h Holder) Who() string {
	if strings.HasPrefix(h.Pod, "pod ") || strings.HasPrefix(h.Pod, "the pod ") {
		return h.Pod
	}
	return "pod " + h.Pod
}

// Save records h at path, so that a driver that starts again can name the
// pod holding a copy it finds mounted. The record is a symlink whose target
// is h in JSON: symlink(2) creates it whole in one call, where a file would
// take open, write, close and a rename (a quarter of a publish among 1,000
// mounts, make bench). A record already there is replaced in one rename. It
// does not fsync: a name lost in a crash costs only the name.
func Save(path string, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	err = os.Symlink(string(b), path)
	if errors.Is(err, fs.ErrExist) {
		tmp := path + ".tmp"
		_ = os.Remove(tmp)
		if err = os.Symlink(string(b), tmp); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		return fmt.Errorf("save the holder's name: %w", err)
	}
	return nil
}

// Load returns the holder saved at path for target. A record that is
// missing, unreadable or saved for another target gives fallback: the
// record only names a holder the kernel already shows.
func Load(path, target, fallback string) Holder {
	h := Holder{Target: target, Pod: fallback}
	b, err := os.Readlink(path)
	if err != nil {
		return h
	}
	var saved Holder
	if json.Unmarshal([]byte(b), &saved) != nil || saved.Target != target || saved.Pod == "" {
		return h
	}
	return saved
}

// Remove deletes the record at path, if any.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the holder's name: %w", err)
	}
	return nil
}
