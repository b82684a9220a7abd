// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps about how a copy is mounted into a pod: the flags of its mount on
// the node, and what a write in the pod does.

// mountOptions finds the mount of target in a mount table and returns its
// per-mount options (the sixth field of /proc/*/mountinfo).
func mountOptions(mountinfo, target string) ([]string, bool) {
	for line := range strings.Lines(mountinfo) {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == target {
			return strings.Split(f[5], ","), true
		}
	}
	return nil, false
}

// podTarget is kubelet's mount point of a pod's volume of pv.
func podTarget(uid types.UID, pv string) string {
	return fmt.Sprintf("%s/pods/%s/volumes/kubernetes.io~csi/%s/mount", kubeletDir, uid, pv)
}

// hasOptions finds target in a mount table and says whether it carries
// every option of want, and what it carries.
func hasOptions(mountinfo, target string, want []string) (bool, string) {
	got, ok := mountOptions(mountinfo, target)
	if !ok {
		return false, target + " is not mounted"
	}
	for _, o := range want {
		if !slices.Contains(got, o) {
			return false, "mounted with " + strings.Join(got, ",")
		}
	}
	return true, ""
}

// stepMountHasOptions reads the node's mount table: the pod's target of the
// scenario's PV is mounted with every option of the comma list.
func stepMountHasOptions(ctx context.Context, r *Run, a args) error {
	var p corev1.Pod
	if err := r.env.R.Get(ctx, a["pod"], r.ns(), &p); err != nil {
		return err
	}
	target := podTarget(p.UID, r.vars["pv"])
	want := strings.Split(a["options"], ",")
	what := fmt.Sprintf("the mount of pod %s's volume on %s to have the options %s", p.Name, p.Spec.NodeName, a["options"])
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		out, err := r.onNode(ctx, p.Spec.NodeName, "cat", "/proc/1/mountinfo")
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		ok, seen := hasOptions(out, target, want)
		return ok, seen, nil
	})
}

// stepPodSeesOptions reads the mount table inside the pod's container: its
// mount at path has every option of the comma list.
func stepPodSeesOptions(ctx context.Context, r *Run, a args) error {
	want := strings.Split(a["options"], ",")
	what := fmt.Sprintf("pod %s to see %s mounted with the options %s", a["pod"], a["path"], a["options"])
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var stdout, stderr bytes.Buffer
		cmd := []string{"/probe", "cat", "/proc/self/mountinfo"}
		if err := r.env.R.ExecInPod(ctx, r.ns(), a["pod"], "probe", cmd, &stdout, &stderr); err != nil {
			return false, "", harness.Unobserved(fmt.Errorf("read the mount table in pod %s: %w: %s", a["pod"], err, stderr.String()))
		}
		ok, seen := hasOptions(stdout.String(), a["path"], want)
		return ok, seen, nil
	})
}

// stepWriteInPodRefused runs the probe's write in the pod: it must fail,
// and say the filesystem is read-only.
func stepWriteInPodRefused(ctx context.Context, r *Run, a args) error {
	var stdout, stderr bytes.Buffer
	cmd := []string{"/probe", "write", a["file"], "written by the suite"}
	err := r.env.R.ExecInPod(ctx, r.ns(), a["pod"], "probe", cmd, &stdout, &stderr)
	switch {
	case err == nil:
		return fmt.Errorf("%w: the write of %s in pod %s succeeded; expected it refused, the copy mounted read-only", harness.ErrNotSeen, a["file"], a["pod"])
	case !strings.Contains(stderr.String(), "read-only file system"):
		return fmt.Errorf("the write of %s in pod %s failed, but not as read-only: %w: %s", a["file"], a["pod"], err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
