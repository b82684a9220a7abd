// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/reclaim"
	"liken.sh/per-node/driver/internal/tree"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// A pod makes a tree deeper than PATH_MAX with relative mkdir in a loop:
// measuring and removing it must still work.
func TestTreeWalksATreeDeeperThanPathMax(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "copy")
	assert.NilError(t, os.Mkdir(dir, 0o750))
	const depth = 600 // 600 × 16 bytes: more than twice PATH_MAX
	name := strings.Repeat("d", 15)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	assert.NilError(t, err)
	for range depth {
		assert.NilError(t, unix.Mkdirat(fd, name, 0o750))
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		assert.NilError(t, err)
		_ = unix.Close(fd)
		fd = next
	}
	f, err := unix.Openat(fd, "bottom", unix.O_CREAT|unix.O_WRONLY, 0o644)
	assert.NilError(t, err)
	_ = unix.Close(f)
	_ = unix.Close(fd)

	u, err := usage(dir)
	assert.NilError(t, err, "measuring a tree %d directories deep", depth)
	assert.Equal(t, u.Inodes, int64(depth+2), "the copy, %d directories and the file at the bottom", depth)
	removed, err := tree.Remove(dir)
	assert.NilError(t, err, "removing a tree %d directories deep", depth)
	assert.Equal(t, removed.Inodes, int64(depth+2))
	_, err = os.Lstat(dir)
	assert.Assert(t, errors.Is(err, os.ErrNotExist), "the copy is still there: %v", err)
}

// swapper swaps dir/name between a real directory and what swap makes in
// its place, in a loop, until stop: a pod racing the driver's walk.
func swapper(t *testing.T, dir, name string, swap func(path string) error) (stop func()) {
	t.Helper()
	var done atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		path, real := filepath.Join(dir, name), filepath.Join(dir, name+".real")
		for !done.Load() {
			if os.Rename(path, real) != nil {
				_ = os.MkdirAll(real, 0o750)
			}
			_ = swap(path)
			_ = os.Remove(path)
			_ = os.Rename(real, path)
		}
	}()
	return func() { done.Store(true); <-finished }
}

// A pod swaps a directory of its copy for a symlink to a directory outside
// the copy, in a loop, while the copy is removed: nothing outside the copy
// may go.
func TestTreeRemovalNeverFollowsASymlinkSwappedIn(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	assert.NilError(t, os.Mkdir(outside, 0o750))
	const canaries = 20
	for i := range canaries {
		assert.NilError(t, os.WriteFile(filepath.Join(outside, "canary-"+strconv.Itoa(i)), []byte("keep"), 0o644))
	}
	for round := range 300 {
		copyDir := filepath.Join(base, "copy-"+strconv.Itoa(round))
		d := filepath.Join(copyDir, "d")
		assert.NilError(t, os.MkdirAll(d, 0o750))
		for i := range 20 {
			assert.NilError(t, os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)), nil, 0o644))
		}
		stop := swapper(t, copyDir, "d", func(path string) error { return os.Symlink(outside, path) })
		for range 5 {
			_, _ = tree.Remove(copyDir)
		}
		stop()
		left, err := os.ReadDir(outside)
		assert.NilError(t, err)
		assert.Equal(t, len(left), canaries, "round %d: removing a copy deleted %d files outside it", round, canaries-len(left))
	}
}

// A pod swaps a directory of its copy for a FIFO in a loop while the copy
// is measured: a measurement must never open the FIFO (and hang there).
func TestTreeMeasurementNeverOpensAFIFOSwappedIn(t *testing.T) {
	copyDir := filepath.Join(t.TempDir(), "copy")
	assert.NilError(t, os.MkdirAll(filepath.Join(copyDir, "d"), 0o750))
	for i := range 50 {
		assert.NilError(t, os.WriteFile(filepath.Join(copyDir, "d", "f"+strconv.Itoa(i)), nil, 0o644))
	}
	stop := swapper(t, copyDir, "d", func(path string) error { return unix.Mkfifo(path, 0o644) })
	var rounds atomic.Int64
	measured := make(chan struct{})
	go func() {
		defer close(measured)
		for range 3000 {
			_, _ = usage(copyDir)
			rounds.Add(1)
		}
	}()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		select {
		case <-measured:
			return poll.Success()
		default:
			return poll.Continue("%d of 3000 measurements done; the last one has not returned", rounds.Load())
		}
	}, poll.WithTimeout(60*time.Second), poll.WithDelay(100*time.Millisecond))
	stop()
}

// pvName is a valid PersistentVolume name of n characters: labels of at
// most 63 characters joined by dots.
func pvName(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 && b.Len()%64 == 63 {
			if b.Len() == n-1 { // a name must not end in a dot
				b.WriteByte('z')
				continue
			}
			b.WriteByte('.')
			continue
		}
		b.WriteByte(byte('a' + b.Len()%26))
	}
	return b.String()
}

// Every valid PV name, up to 253 characters, works through publish,
// replacement by a PV created again under that name, removal, the trash and
// a restart.
func TestEveryValidPVNameLengthWorks(t *testing.T) {
	for _, n := range []int{1, 63, 64, 235, 236, 253} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			handle := pvName(n)
			assert.Equal(t, len(handle), n)
			tr := &fakeTracker{uid: "uid-1"}
			s, dir := newTrackedServer(t, tr)
			ctx := context.Background()
			target := makeCopy(t, s, dir, handle, "old-data")

			// The PV is created again under the same name: the old copy
			// goes to the trash, the new PV's pod starts empty.
			tr.uid = "uid-2"
			_, err := s.NodePublishVolume(ctx, publishReq(handle, target, "p"))
			assert.NilError(t, err, "publishing %d-character PV %s created again", n, handle)
			entries, err := os.ReadDir(target)
			assert.NilError(t, err)
			assert.Equal(t, len(entries), 0, "the new PV sees the old copy's data")
			unpublish(t, s, handle, target)
			waitTrashEmpty(t, s)

			// A restart finds the copy; deleting the PV empties the trash.
			restarted, err := New(Config{NodeID: "worker-a", Root: s.layout.Root(), Mounter: s.mounter, Tracker: tr})
			assert.NilError(t, err)
			handles, err := restarted.Handles()
			assert.NilError(t, err)
			assert.DeepEqual(t, handles, []string{handle})
			removed, err := restarted.RemoveCopy(handle, "uid-2")
			assert.NilError(t, err)
			assert.Assert(t, removed)
			waitTrashEmpty(t, restarted)
		})
	}
}

// The reclaim controller decides to remove a copy from its pv-uid, then
// reads the PV (seconds, under rate limits): meanwhile the PV can be created
// again and a pod of it can make, write and release a new copy. The removal
// names the copy it decided on, and is refused under the volume's lock when
// the copy on disk is another.
func TestARemovalIsRefusedWhenTheCopyChangedSinceTheDecision(t *testing.T) {
	tr := &fakeTracker{uid: "uid-1"}
	s, dir := newTrackedServer(t, tr)
	ctx := context.Background()
	target := makeCopy(t, s, dir, "store", "")
	decidedOn, err := s.CopyUID("store") // the controller's decision: uid-1 is gone
	assert.NilError(t, err)

	// Meanwhile the PV is created again and a pod writes a new copy.
	tr.uid = "uid-2"
	_, err = s.NodePublishVolume(ctx, publishReq("store", target, "p"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(target, "new-data"), []byte("keep"), 0o644))
	unpublish(t, s, "store", target)

	removed, err := s.RemoveCopy("store", decidedOn)
	assert.Assert(t, errors.Is(err, reclaim.ErrCopyChanged), "removing the copy of %s: want ErrCopyChanged, got %v", decidedOn, err)
	assert.Assert(t, !removed)
	uid, err := s.CopyUID("store")
	assert.NilError(t, err)
	assert.Equal(t, uid, "uid-2", "the new PV's copy was removed")

	removed, err = s.RemoveCopy("store", "uid-2")
	assert.NilError(t, err)
	assert.Assert(t, removed, "the copy decided on is removed")
}

// A PV "evil" whose handle is "victim" (made with the admission policy off,
// or before the driver was installed) would get victim's copies, and
// deleting victim would remove copies that evil's pods use. kubelet's
// target path names the PV: a publish whose PV is not its handle is
// refused, and nothing is made.
func TestAPublishForAnotherPVThanItsHandleIsRefused(t *testing.T) {
	s, dir := newTrackedServer(t, &fakeTracker{uid: "uid-1"})
	target := podTarget(dir, "1", "evil")
	_, err := s.NodePublishVolume(context.Background(), publishReq("victim", target, "p"))
	assertCode(t, err, codes.FailedPrecondition)
	assert.ErrorContains(t, err, `"evil"`)
	has, err := s.HasCopy("victim")
	assert.NilError(t, err)
	assert.Assert(t, !has, "a copy of victim was made for PV evil")
	_, err = os.Lstat(target)
	assert.Assert(t, errors.Is(err, os.ErrNotExist), "the target was made: %v", err)
}

// During an API outage a publish holds its volume's lock for up to ~40 s;
// work on every other volume of the node must not wait behind it (with
// hashed buckets, two of 300 volumes always share one).
func TestVolumeLocksAreExact(t *testing.T) {
	s, _ := newTestServer(t)
	const volumes = 300
	var held atomic.Int64
	release := make(chan struct{})
	var done sync.WaitGroup
	for i := range volumes {
		done.Go(func() {
			h := "pv-" + strconv.Itoa(i)
			s.locks.LockKey(h)
			held.Add(1)
			<-release
			_ = s.locks.UnlockKey(h)
		})
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := held.Load(); n < volumes {
			return poll.Continue("%d of %d volumes' locks held at once; the others wait behind another volume", n, volumes)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second))
	close(release)
	done.Wait()
}

// A PV's mountOptions reach the driver as the capability's mount flags:
// those that restate the defaults are accepted; those that would hold on
// the node's mount and not in the pod (the container runtime's own bind
// clears them), and any other, are refused with a message naming them, and
// nothing is made.
func TestMountOptionsAreAcceptedOnlyWhenTheyReachThePod(t *testing.T) {
	s, dir := newTrackedServer(t, &fakeTracker{uid: "uid-1"})
	ctx := context.Background()
	withFlags := func(handle, target string, flags ...string) *csi.NodePublishVolumeRequest {
		req := publishReq(handle, target, "p")
		req.VolumeCapability.GetMount().MountFlags = flags
		return req
	}
	target := podTarget(dir, "1", "store")
	_, err := s.NodePublishVolume(ctx, withFlags("store", target, "rw", "relatime"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })

	for i, flags := range [][]string{{"nosuid", "noexec"}, {"ro"}, {"discard", "vers=4.1"}} {
		handle := fmt.Sprintf("other-%d", i)
		_, err = s.NodePublishVolume(ctx, withFlags(handle, podTarget(dir, fmt.Sprint(2+i), handle), flags...))
		assertCode(t, err, codes.InvalidArgument)
		assert.ErrorContains(t, err, flags[0])
		has, err := s.HasCopy(handle)
		assert.NilError(t, err)
		assert.Assert(t, !has, "a copy was made for a refused publish (%v)", flags)
	}
}

// A copy with no pv-uid was not made for any PV this driver can name (a
// crash between making the copy and binding it, or a copy made in
// standalone mode): no PV's pod gets what it holds. The next publish
// starts from an empty copy, and the old one goes to the trash.
func TestACopyBoundToNoPVIsNotAdopted(t *testing.T) {
	tr := &fakeTracker{uid: "uid-1"}
	s, dir := newTrackedServer(t, tr)
	ctx := context.Background()
	target := makeCopy(t, s, dir, "store", "unbound-data")
	vdir, err := s.layout.VolumeDir("store")
	assert.NilError(t, err)
	assert.NilError(t, os.Remove(filepath.Join(vdir, uidFile)))

	tr.uid = "uid-2"
	_, err = s.NodePublishVolume(ctx, publishReq("store", target, "p"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })
	entries, err := os.ReadDir(target)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 0, "a PV's pod sees a copy that was bound to no PV")
	uid, err := s.CopyUID("store")
	assert.NilError(t, err)
	assert.Equal(t, uid, "uid-2")
	waitTrashEmpty(t, s)
}

// A trash entry that cannot be removed is retried with back-off while the
// driver runs, and its retries end when the driver stops: no goroutine
// outlives Stop.
func TestTrashRetriesEndWhenTheDriverStops(t *testing.T) {
	s, dir := newTrackedServer(t, &fakeTracker{uid: "u"})
	trashStuckOnAMount(t, s, dir)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := s.trashWorkers.Load(); n != 1 {
			return poll.Continue("%d trash workers, want 1 retrying", n)
		}
		return poll.Success()
	})
	s.Stop()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := s.trashWorkers.Load(); n != 0 {
			return poll.Continue("%d trash workers still running after Stop", n)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second))
}

// An unpublish acts on the target path itself, never on where a symlink
// there points: a symlink left at one pod's target (by hand, or by anything
// that can write under kubelet's pods directory) must not unmount another
// pod's copy.
func TestUnpublishNeverFollowsASymlinkAtTheTarget(t *testing.T) {
	s, dir := newTestServer(t)
	ctx := context.Background()
	held := podTarget(dir, "1111", "store")
	_, err := s.NodePublishVolume(ctx, publishReq("store", held, "store-a"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", held) })

	link := podTarget(dir, "2222", "other")
	assert.NilError(t, os.MkdirAll(filepath.Dir(link), 0o750))
	assert.NilError(t, os.Symlink(held, link))
	_, err = s.NodeUnpublishVolume(ctx, unpublishRequest("other", link))
	t.Logf("unpublish of the symlink: %v", err)

	mounted, err := mounts.NewKernel().IsMountPoint(held)
	assert.NilError(t, err)
	assert.Assert(t, mounted, "pod store-a's copy was unmounted by an unpublish of a symlink to it")
}
