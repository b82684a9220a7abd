// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/reclaim"
)

// fakeTracker stands in for the PersistentVolume: its UID, or an error.
type fakeTracker struct {
	uid    string
	err    error
	mu     sync.Mutex
	events []string
}

func (f *fakeTracker) Record(context.Context, string) (string, error) { return f.uid, f.err }
func (f *fakeTracker) Event(_ context.Context, _, _, _, reason, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, reason)
}

func (f *fakeTracker) reasons() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func newTrackedServer(t *testing.T, tr *fakeTracker) (*Server, string) {
	t.Helper()
	s, dir := newTestServer(t)
	tracked, err := New(Config{NodeID: "worker-a", Root: s.layout.Root(), Mounter: mounts.NewKernel(), Tracker: tr})
	assert.NilError(t, err)
	return tracked, dir
}

func TestPublishRecordsBeforeCreatingAndRefusesWhatCannotBeRecorded(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
	}{
		{"API unreachable", fmt.Errorf("%w: timeout", reclaim.ErrAPI), codes.Unavailable},
		{"PV being deleted", reclaim.ErrDeleting, codes.FailedPrecondition},
		{"no such PV", reclaim.ErrNoVolume, codes.NotFound},
		{"handle names a PV that is not ours", fmt.Errorf("%w: spec.csi.driver", reclaim.ErrNotOurs), codes.FailedPrecondition},
		{"PV kept changing", fmt.Errorf("%w: conflict", reclaim.ErrConflict), codes.Aborted},
		{"RBAC or policy refused", fmt.Errorf("%w: forbidden", reclaim.ErrForbidden), codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newTrackedServer(t, &fakeTracker{err: tc.err})
			_, err := s.NodePublishVolume(context.Background(), publishReq("store", podTarget(dir, "1", "store"), "p"))
			assertCode(t, err, tc.code)
			_, statErr := os.Stat(filepath.Join(s.layout.VolumesDir(), "store"))
			assert.Assert(t, errors.Is(statErr, os.ErrNotExist), "no untracked copy is created")
		})
	}
}

func TestCopyIsBoundToItsPVAndReplacedForANewOne(t *testing.T) {
	tr := &fakeTracker{uid: "uid-1"}
	s, dir := newTrackedServer(t, tr)
	ctx := context.Background()
	target := podTarget(dir, "1", "store")
	_, err := s.NodePublishVolume(ctx, publishReq("store", target, "p"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(target, "old-data"), nil, 0o644))
	uid, err := s.CopyUID("store")
	assert.NilError(t, err)
	assert.Equal(t, uid, "uid-1")
	assert.DeepEqual(t, tr.reasons(), []string{"CopyCreated"})

	_, err = s.RemoveCopy("store", "")
	assert.Assert(t, errors.Is(err, ErrHeld), "a held copy is not removed: %v", err)
	unpublish(t, s, "store", target)

	// The PV is deleted and created again under the same name.
	tr.uid = "uid-2"
	_, err = s.NodePublishVolume(ctx, publishReq("store", target, "p"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })
	entries, err := os.ReadDir(target)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 0, "the new PV never sees the old copy's data")
	waitTrashEmpty(t, s)
}

// makeCopy publishes handle for a pod, writes file (if not "") into its copy,
// and unpublishes: a copy on this node that no pod holds. It returns the
// pod's target.
func makeCopy(t *testing.T, s *Server, dir, handle, file string) string {
	t.Helper()
	target := podTarget(dir, "1", handle)
	_, err := s.NodePublishVolume(context.Background(), publishReq(handle, target, "p"))
	assert.NilError(t, err)
	if file != "" {
		assert.NilError(t, os.WriteFile(filepath.Join(target, file), []byte("x"), 0o644))
	}
	unpublish(t, s, handle, target)
	return target
}

// trashStuckOnAMount makes a copy of "store" (bound to "u") with a mount
// inside it and removes it: the removal must not descend into the mount,
// so emptying the trash fails until the mount is gone. It returns the
// mounted directory, which holds a file "precious".
func trashStuckOnAMount(t *testing.T, s *Server, dir string) string {
	t.Helper()
	makeCopy(t, s, dir, "store", "")
	other := filepath.Join(dir, "other")
	assert.NilError(t, os.MkdirAll(other, 0o750))
	assert.NilError(t, os.WriteFile(filepath.Join(other, "precious"), []byte("x"), 0o644))
	copyDir, err := s.layout.CopyDir("store")
	assert.NilError(t, err)
	inside := filepath.Join(copyDir, "mnt")
	assert.NilError(t, os.Mkdir(inside, 0o750))
	assert.NilError(t, mounts.NewKernel().Bind(other, inside, 0))
	t.Cleanup(func() {
		entries, _ := os.ReadDir(s.layout.TrashDir())
		for _, e := range entries {
			_ = mounts.NewKernel().Unmount(filepath.Join(s.layout.TrashDir(), e.Name(), "data/mnt"))
		}
	})
	removed, err := s.RemoveCopy("store", "u")
	assert.NilError(t, err)
	assert.Assert(t, removed)
	return other
}

// Emptying the trash is retried until it is done, and a failure is an event.
func TestTrashRemovalIsRetriedUntilDone(t *testing.T) {
	tr := &fakeTracker{uid: "u"}
	s, dir := newTrackedServer(t, tr)
	other := trashStuckOnAMount(t, s, dir)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if slices.Contains(tr.reasons(), "CopyRemovalFailed") {
			return poll.Success()
		}
		return poll.Continue("events so far: %v", tr.reasons())
	})
	_, err := os.Stat(filepath.Join(other, "precious"))
	assert.NilError(t, err, "removal descended into a mount")

	entries, err := os.ReadDir(s.layout.TrashDir())
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1)
	assert.NilError(t, mounts.NewKernel().Unmount(filepath.Join(s.layout.TrashDir(), entries[0].Name(), "data/mnt")))
	waitTrashEmpty(t, s)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if slices.Contains(tr.reasons(), "CopyRemoved") {
			return poll.Success()
		}
		return poll.Continue("events so far: %v", tr.reasons())
	})
}

func TestRemoveCopyEmptiesTheTrash(t *testing.T) {
	s, dir := newTrackedServer(t, &fakeTracker{uid: "u"})
	target := podTarget(dir, "1", "store")
	_, err := s.NodePublishVolume(context.Background(), publishReq("store", target, "p"))
	assert.NilError(t, err)
	for i := range 100 {
		assert.NilError(t, os.WriteFile(filepath.Join(target, fmt.Sprint(i)), []byte("x"), 0o644))
	}
	unpublish(t, s, "store", target)
	removed, err := s.RemoveCopy("store", "u")
	assert.NilError(t, err)
	assert.Assert(t, removed)
	handles, err := s.Handles()
	assert.NilError(t, err)
	assert.Equal(t, len(handles), 0, "the copy is unreachable at once")
	waitTrashEmpty(t, s)
	removed, err = s.RemoveCopy("store", "u")
	assert.NilError(t, err)
	assert.Assert(t, !removed, "nothing left to remove")
}

func waitTrashEmpty(t *testing.T, s *Server) {
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		entries, err := os.ReadDir(s.layout.TrashDir())
		if err != nil {
			return poll.Error(err)
		}
		if len(entries) > 0 {
			return poll.Continue("%d entries in the trash", len(entries))
		}
		return poll.Success()
	})
}

// The copy's PV UID is written once, atomically: a later publish does not
// rewrite it, so a crash can never leave it empty.
func TestPVUIDIsWrittenOnceAndAtomically(t *testing.T) {
	s, dir := newTrackedServer(t, &fakeTracker{uid: "uid-1"})
	ctx := context.Background()
	target := podTarget(dir, "1", "store")
	_, err := s.NodePublishVolume(ctx, publishReq("store", target, "p"))
	assert.NilError(t, err)
	vdir, err := s.layout.VolumeDir("store")
	assert.NilError(t, err)
	before, err := os.Stat(filepath.Join(vdir, uidFile))
	assert.NilError(t, err)
	unpublish(t, s, "store", target)

	_, err = s.NodePublishVolume(ctx, publishReq("store", target, "p"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })
	after, err := os.Stat(filepath.Join(vdir, uidFile))
	assert.NilError(t, err)
	assert.Assert(t, os.SameFile(before, after) && before.ModTime().Equal(after.ModTime()),
		"pv-uid was rewritten by a second publish of the same PV")
	leftovers, err := filepath.Glob(filepath.Join(vdir, uidFile+".*"))
	assert.NilError(t, err)
	assert.Equal(t, len(leftovers), 0, "temporary files left: %v", leftovers)
}
