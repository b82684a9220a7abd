// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps for what a hostile pod must not reach: canary files on a node,
// kubelet's measurements of a volume, files the node keeps open, and PV
// names at the length limit.

// canaryScript plants a tree of files under DIR/canary on a node: small
// ones, and 32 MiB that a measurement which strayed there would count.
const canaryScript = `set -e
mkdir -p %[1]s/canary/sub
for i in $(seq 1 20); do
  echo "canary $i of %[1]s" > %[1]s/canary/f-$i
  echo "canary sub $i of %[1]s" > %[1]s/canary/sub/g-$i
done
dd if=/dev/zero of=%[1]s/canary/sub/ballast bs=1M count=32 2>/dev/null`

// canarySnapshot prints what the canary tree holds: every path, its type
// and size, and a checksum of all its contents.
const canarySnapshot = `[ -d %[1]s/canary ] || { echo "no canary tree in %[1]s"; exit 0; }
cd %[1]s/canary && find . -printf '%%y %%s %%p\n' | sort && find . -type f | sort | xargs cat | md5sum`

func stepPlantCanaries(ctx context.Context, r *Run, a args) error {
	dir, node := a["dir"], a["node"]
	if !strings.HasPrefix(dir, copiesRoot+"/") {
		// Canaries outside every copy are removed at cleanup.
		r.lists["_canaries"] = append(r.lists["_canaries"], node+"\x00"+dir)
	}
	if _, err := r.onNode(ctx, node, "sh", "-c", fmt.Sprintf(canaryScript, dir)); err != nil {
		return fmt.Errorf("plant canaries in %s on %s: %w", dir, node, err)
	}
	snap, err := r.onNode(ctx, node, "sh", "-c", fmt.Sprintf(canarySnapshot, dir))
	if err != nil {
		return fmt.Errorf("read the canaries in %s on %s: %w", dir, node, err)
	}
	r.vars["_canary:"+node+":"+dir] = snap
	return nil
}

func stepCanariesIntact(ctx context.Context, r *Run, a args) error {
	dir, node := a["dir"], a["node"]
	want, ok := r.vars["_canary:"+node+":"+dir]
	if !ok {
		return fmt.Errorf("no canaries were planted in %s on %s in this scenario", dir, node)
	}
	what := fmt.Sprintf("the canaries in %s on %s to be as planted:\n%s", dir, node, want)
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		out, err := r.onNode(ctx, node, "sh", "-c", fmt.Sprintf(canarySnapshot, dir))
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		return out == want, out, nil
	})
}

// removeCanaries removes canaries planted outside every copy (cleanup).
func (r *Run) removeCanaries(ctx context.Context) {
	for _, c := range r.lists["_canaries"] {
		node, dir, _ := strings.Cut(c, "\x00")
		if _, err := r.onNode(ctx, node, "rm", "-rf", dir+"/canary"); err != nil {
			r.t.Logf("cleanup: removing the canaries in %s on %s: %v", dir, node, err)
		}
	}
}

// stepMeasuredAgain waits until kubelet has measured a pod's volume n more
// times: the time of its stats in kubelet's summary (which kubelet gets
// from the driver's NodeGetVolumeStats every one to two minutes) moves n
// times.
func stepMeasuredAgain(ctx context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return fmt.Errorf("%q is not a number of measurements", a["n"])
	}
	var times []time.Time
	what := fmt.Sprintf("kubelet to measure the volume of pod %s %d more times", a["pod"], n)
	return r.untilVolumeStats(ctx, a["pod"], what, func(v volumeStats) (bool, string) {
		if len(times) == 0 || v.Time.After(times[len(times)-1]) {
			times = append(times, v.Time)
		}
		return len(times) > n, fmt.Sprintf("measured at %s; last: used %d bytes, %d inodes", stamps(times), v.Used, v.InodesUsed)
	})
}

// stepCountsBetween reads kubelet's figure of a pod's volume (the used
// bytes the driver measured) and requires it between min and max MiB.
func stepCountsBetween(ctx context.Context, r *Run, a args) error {
	low, high := mib(a["min"]), mib(a["max"])
	what := fmt.Sprintf("kubelet to count between %s and %s MiB used in the volume of pod %s", a["min"], a["max"], a["pod"])
	return r.untilVolumeStats(ctx, a["pod"], what, func(v volumeStats) (bool, string) {
		return v.Used >= low && v.Used <= high,
			fmt.Sprintf("used %.1f MiB, %d inodes, measured at %s", float64(v.Used)/(1<<20), v.InodesUsed, v.Time.UTC().Format("15:04:05"))
	})
}

func stamps(ts []time.Time) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.UTC().Format("15:04:05"))
	}
	return strings.Join(s, ", ")
}

// openFilesScript lists every descriptor of every process on a node that
// points into a PV's copy or its trash (a removed file still open keeps
// its blocks).
const openFilesScript = `for fd in /proc/[0-9]*/fd/*; do
  t=$(readlink "$fd" 2>/dev/null) || continue
  case "$t" in
    %[1]s/volumes/%[2]s/*|%[1]s/volumes/%[2]s|%[1]s/trash/%[3]s.*) echo "$fd -> $t";;
  esac
done; true`

func stepNoOpenFiles(ctx context.Context, r *Run, a args) error {
	pv, node := a["name"], a["node"]
	script := fmt.Sprintf(openFilesScript, copiesRoot, pv, trashPrefix(pv))
	what := fmt.Sprintf("no process on %s to hold a file of persistentvolume %s open", node, pv)
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		out, err := r.onNode(ctx, node, "sh", "-c", script)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		return strings.TrimSpace(out) == "", out, nil
	})
}

// trashPrefix is what a trash entry of pv starts with: the PV's name cut to
// its first 235 characters (driver/internal/layout's TrashName).
func trashPrefix(pv string) string { return pv[:min(len(pv), 235)] }

// stepNamePV renames the scenario's PersistentVolume ($pv) to a valid name
// of exactly n characters that starts with the scenario's namespace.
func stepNamePV(_ context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	base := r.ns() + "-store-"
	if err != nil || n < len(base)+1 || n > 253 {
		return fmt.Errorf("a persistentvolume name of %q characters: expected %d to 253", a["n"], len(base)+1)
	}
	r.vars["pv"] = base + strings.Repeat("long", n)[:n-len(base)]
	r.t.Logf("$pv is %s (%d characters)", r.vars["pv"], len(r.vars["pv"]))
	return nil
}
