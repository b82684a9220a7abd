// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"fmt"
	"strings"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps that leave on a node's disk what a crash of the driver leaves: a
// copy made but not yet bound to its PV, a removal half done in the trash.

// stepUnbindCopy removes the file that binds a node's copy to its PV's UID,
// as a crash between making the copy and binding it leaves it.
func stepUnbindCopy(ctx context.Context, r *Run, a args) error {
	f := fmt.Sprintf("%s/volumes/%s/pv-uid", copiesRoot, r.vars["pv"])
	out, err := r.onNode(ctx, a["node"], "sh", "-c", fmt.Sprintf("set -e; cat %s; rm %s", f, f))
	if err != nil {
		return fmt.Errorf("unbind the copy on %s: %w: %s", a["node"], err, out)
	}
	r.t.Logf("the copy on %s was bound to PV UID %s; unbound", a["node"], strings.TrimSpace(out))
	return nil
}

// stepHalfRemoved leaves in a node's trash an entry of the scenario's PV
// with files in it, as a driver killed in the middle of a removal does.
func stepHalfRemoved(ctx context.Context, r *Run, a args) error {
	entry := fmt.Sprintf("%s/trash/%s.1", copiesRoot, trashPrefix(r.vars["pv"]))
	script := fmt.Sprintf(`set -e; mkdir -p %[1]s/data/half
for i in 1 2 3 4 5 6 7 8; do head -c 1048576 /dev/zero > %[1]s/data/half/$i; done
ls %[1]s/data/half | wc -l`, entry)
	out, err := r.onNode(ctx, a["node"], "sh", "-c", script)
	if err != nil {
		return fmt.Errorf("leave a half-done removal on %s: %w: %s", a["node"], err, out)
	}
	return nil
}

// stepTrashEmpty waits until a node's trash holds no entry of the PV.
func stepTrashEmpty(ctx context.Context, r *Run, a args) error {
	script := fmt.Sprintf("cd %s && ls -d trash/%s.* 2>/dev/null || true", copiesRoot, trashPrefix(r.vars["pv"]))
	what := fmt.Sprintf("the trash on %s to hold nothing of %s", a["node"], r.vars["pv"])
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		out, err := r.onNode(ctx, a["node"], "sh", "-c", script)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		return strings.TrimSpace(out) == "", out, nil
	})
}

// backupDir is where the suite keeps a node's copy it put aside, on that
// node's disk, outside the copies root.
const backupDir = "/var/lib/per-node-e2e-backup"

// stepBackUpCopy copies a node's copy of the scenario's PV, as it is on
// disk (its pv-uid included), aside on the node: what a file-level backup of
// the whole volume directory would hold.
func stepBackUpCopy(ctx context.Context, r *Run, a args) error {
	pv := r.vars["pv"]
	script := fmt.Sprintf("set -e; rm -rf %[1]s/%[2]s; mkdir -p %[1]s; cp -a %[3]s/volumes/%[2]s %[1]s/%[2]s; cat %[1]s/%[2]s/pv-uid", backupDir, pv, copiesRoot)
	out, err := r.onNode(ctx, a["node"], "sh", "-c", script)
	if err != nil {
		return fmt.Errorf("back up the copy on %s: %w: %s", a["node"], err, out)
	}
	r.t.Logf("the copy on %s, of PV UID %s, is backed up in %s", a["node"], strings.TrimSpace(out), backupDir)
	return nil
}

// stepPutBackupBack moves the backed-up copy into the copies root again, as
// an operator restoring that backup would, while the driver runs.
func stepPutBackupBack(ctx context.Context, r *Run, a args) error {
	pv := r.vars["pv"]
	script := fmt.Sprintf("set -e; [ ! -e %[3]s/volumes/%[2]s ] || { echo 'a copy is already there' >&2; exit 1; }; mv %[1]s/%[2]s %[3]s/volumes/%[2]s", backupDir, pv, copiesRoot)
	if out, err := r.onNode(ctx, a["node"], "sh", "-c", script); err != nil {
		return fmt.Errorf("put the backed-up copy back on %s: %w: %s", a["node"], err, out)
	}
	return nil
}
