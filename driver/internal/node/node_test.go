// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"liken.sh/per-node/driver/internal/mounts"
)

// These tests make real bind mounts: they must run as root (make test does
// in CI). They fail, rather than skip, without it.
func newTestServer(t *testing.T) (*Server, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("node tests make real bind mounts and must run as root")
	}
	dir := t.TempDir()
	s, err := New(Config{NodeID: "worker-a", Version: "test", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel()})
	assert.NilError(t, err)
	return s, dir
}

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
}

func publishReq(handle, target, pod string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId: handle, TargetPath: target, VolumeCapability: mountCap(),
		VolumeContext: map[string]string{
			"csi.storage.k8s.io/pod.namespace": "example",
			"csi.storage.k8s.io/pod.name":      pod,
		},
	}
}

// podTarget is where kubelet would mount handle for the pod with uid.
func podTarget(dir, uid, handle string) string {
	return filepath.Join(dir, "kubelet/pods", uid, "volumes/kubernetes.io~csi", handle, "mount")
}

func unpublish(t *testing.T, s *Server, handle, target string) {
	t.Helper()
	_, err := s.NodeUnpublishVolume(context.Background(), unpublishRequest(handle, target))
	assert.NilError(t, err)
}

func unpublishRequest(handle, target string) *csi.NodeUnpublishVolumeRequest {
	return &csi.NodeUnpublishVolumeRequest{VolumeId: handle, TargetPath: target}
}

func assertCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	assert.Assert(t, err != nil, "expected %s, got success", want)
	st, ok := status.FromError(err)
	assert.Assert(t, ok, "not a status error: %v", err)
	assert.Equal(t, st.Code(), want, "message: %s", st.Message())
}

func TestPublishRefusesBadRequestsAndChangesNothing(t *testing.T) {
	s, dir := newTestServer(t)
	target := podTarget(dir, "1111", "x")
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	for _, tc := range []struct {
		name   string
		handle string
		target string
		cap    *csi.VolumeCapability
	}{
		{"empty handle", "", target, mountCap()},
		{"dot dot", "..", target, mountCap()},
		{"slash", "a/b", target, mountCap()},
		{"absolute", "/abs", target, mountCap()},
		{"upper case", "Store", target, mountCap()},
		{"space", "a b", target, mountCap()},
		{"NUL", "a\x00b", target, mountCap()},
		{"over-long", strings.Repeat("a", 254), target, mountCap()},
		{"no target", "store", "", mountCap()},
		{"relative target", "store", "rel/target", mountCap()},
		{"no capability", "store", target, nil},
		{"block", "store", target, block},
		{"no access type", "store", target, &csi.VolumeCapability{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
				VolumeId: tc.handle, TargetPath: tc.target, VolumeCapability: tc.cap,
			})
			assertCode(t, err, codes.InvalidArgument)
			copies, err := os.ReadDir(s.layout.VolumesDir())
			assert.NilError(t, err)
			assert.Check(t, is.Len(copies, 0), "a refused request created a copy")
			_, err = os.Stat(target)
			assert.Check(t, errors.Is(err, os.ErrNotExist), "a refused request created the target")
		})
	}
}

func TestPublishGivesEachNodeItsOwnCopyThatOutlivesThePod(t *testing.T) {
	s, dir := newTestServer(t)
	ctx := context.Background()
	target := podTarget(dir, "1111", "store")

	_, err := s.NodePublishVolume(ctx, publishReq("store", target, "store-a"))
	assert.NilError(t, err)
	entries, err := os.ReadDir(target)
	assert.NilError(t, err)
	assert.Check(t, is.Len(entries, 0), "the first pod on a node gets an empty directory")
	assert.NilError(t, os.WriteFile(filepath.Join(target, "record"), []byte("1"), 0o644))

	// kubelet retries: same target is a success and mounts nothing new.
	_, err = s.NodePublishVolume(ctx, publishReq("store", target, "store-a"))
	assert.NilError(t, err)

	unpublish(t, s, "store", target)
	_, err = os.Stat(target)
	assert.Check(t, errors.Is(err, os.ErrNotExist), "unpublish removes the target")
	unpublish(t, s, "store", target) // idempotent

	later := podTarget(dir, "2222", "store")
	_, err = s.NodePublishVolume(ctx, publishReq("store", later, "store-b"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", later) })
	got, err := os.ReadFile(filepath.Join(later, "record"))
	assert.NilError(t, err, "a later pod on the node finds the node's copy")
	assert.Equal(t, string(got), "1")
}

func TestPublishReadOnly(t *testing.T) {
	s, dir := newTestServer(t)
	target := podTarget(dir, "1111", "store")
	req := publishReq("store", target, "reader")
	req.Readonly = true
	_, err := s.NodePublishVolume(context.Background(), req)
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })
	err = os.WriteFile(filepath.Join(target, "f"), nil, 0o644)
	assert.ErrorContains(t, err, "read-only")
}

func TestSecondHolderOnTheNodeIsRefusedByName(t *testing.T) {
	s, dir := newTestServer(t)
	ctx := context.Background()
	first, second := podTarget(dir, "1111", "store"), podTarget(dir, "2222", "store")
	_, err := s.NodePublishVolume(ctx, publishReq("store", first, "store-a"))
	assert.NilError(t, err)

	_, err = s.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
	assertCode(t, err, codes.FailedPrecondition)
	assert.ErrorContains(t, err, "example/store-a")

	// Another handle is not affected.
	other := podTarget(dir, "2222", "other")
	_, err = s.NodePublishVolume(ctx, publishReq("other", other, "store-b"))
	assert.NilError(t, err)
	unpublish(t, s, "other", other)

	unpublish(t, s, "store", first)
	_, err = s.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
	assert.NilError(t, err, "the second pod starts once the first leaves")
	unpublish(t, s, "store", second)
}

func TestHolderIsReadFromTheKernelAfterRestartAndHandUnmount(t *testing.T) {
	s, dir := newTestServer(t)
	ctx := context.Background()
	first, second := podTarget(dir, "0b6f1c2e", "store"), podTarget(dir, "2222", "store")
	_, err := s.NodePublishVolume(ctx, publishReq("store", first, "store-a"))
	assert.NilError(t, err)
	s.Stop() // an upgrade: the driver is stopped, then started again

	// A restarted driver learns from the kernel's mount table that the copy
	// is held, and still names the holder by name.
	restarted, err := New(Config{NodeID: "worker-a", Root: s.layout.Root(), Mounter: mounts.NewKernel()})
	assert.NilError(t, err)
	_, err = restarted.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
	assertCode(t, err, codes.FailedPrecondition)
	assert.ErrorContains(t, err, "example/store-a")

	// An unmount by hand frees the copy.
	assert.NilError(t, mounts.NewKernel().Unmount(first))
	_, err = restarted.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
	assert.NilError(t, err)
	unpublish(t, restarted, "store", second)
}

// The holder's saved name is only a name: the kernel decides whether a copy
// is held. A name that is missing, unreadable or saved for another target
// gives way to the pod UID read from the mounted target; the copy stays held.
func TestARestartedDriverNamesTheHolderOnlyFromARecordOfTheSameMount(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, file string)
		want  string
	}{
		{"record kept", func(*testing.T, string) {}, "example/store-a"},
		{"record missing", func(t *testing.T, file string) { assert.NilError(t, os.Remove(file)) }, "pod uid 0b6f1c2e"},
		{"record torn", func(t *testing.T, file string) { replaceRecord(t, file, `{"target":`) }, "pod uid 0b6f1c2e"},
		{"record of another mount", func(t *testing.T, file string) {
			replaceRecord(t, file, `{"target":"/elsewhere","pod":"example/impostor"}`)
		}, "pod uid 0b6f1c2e"},
		{"record a regular file", func(t *testing.T, file string) {
			assert.NilError(t, os.Remove(file))
			assert.NilError(t, os.WriteFile(file, []byte(`{"target":"/elsewhere","pod":"example/impostor"}`), 0o600))
		}, "pod uid 0b6f1c2e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newTestServer(t)
			ctx := context.Background()
			first, second := podTarget(dir, "0b6f1c2e", "store"), podTarget(dir, "2222", "store")
			_, err := s.NodePublishVolume(ctx, publishReq("store", first, "store-a"))
			assert.NilError(t, err)
			t.Cleanup(func() { unpublish(t, s, "store", first) })
			volumeDir, err := s.layout.VolumeDir("store")
			assert.NilError(t, err)
			// A driver that crashes a moment after the publish has saved
			// the name.
			waitForRecord(t, filepath.Join(volumeDir, holderFile), true)
			tc.spoil(t, filepath.Join(volumeDir, holderFile))

			restarted, err := New(Config{NodeID: "worker-a", Root: s.layout.Root(), Mounter: mounts.NewKernel()})
			assert.NilError(t, err)
			_, err = restarted.NodePublishVolume(ctx, publishReq("store", second, "store-b"))
			assertCode(t, err, codes.FailedPrecondition)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// replaceRecord puts a holder record with content at file (a symlink whose
// target is the record, as holders.Save writes it).
func replaceRecord(t *testing.T, file, content string) {
	t.Helper()
	assert.NilError(t, os.Remove(file))
	assert.NilError(t, os.Symlink(content, file))
}

func TestUnpublishForgetsTheHoldersName(t *testing.T) {
	s, dir := newTestServer(t)
	ctx := context.Background()
	target := podTarget(dir, "1111", "store")
	_, err := s.NodePublishVolume(ctx, publishReq("store", target, "store-a"))
	assert.NilError(t, err)
	volumeDir, err := s.layout.VolumeDir("store")
	assert.NilError(t, err)
	// publish saves the holder's name next to the copy, unpublish removes it
	waitForRecord(t, filepath.Join(volumeDir, holderFile), true)
	unpublish(t, s, "store", target)
	waitForRecord(t, filepath.Join(volumeDir, holderFile), false)
}

// A driver that stops (an upgrade) has written every holder's name due
// when Stop returns: the next driver names the holder at once. The name's
// writer runs beside the request path, so a Stop that only told it to stop
// would leave the name to a race; the rounds make losing it show.
func TestStopWritesTheNamesDue(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		s, dir := newTestServer(t)
		target := podTarget(dir, "1111", "store")
		_, err := s.NodePublishVolume(ctx, publishReq("store", target, "store-a"))
		assert.NilError(t, err)
		s.Stop()
		volumeDir, err := s.layout.VolumeDir("store")
		assert.NilError(t, err)
		b, err := os.Readlink(filepath.Join(volumeDir, holderFile))
		assert.NilError(t, err, "round %d: no holder's name when Stop returned", round)
		assert.Assert(t, strings.Contains(b, "example/store-a"), "round %d: name saved %q", round, b)
		unpublish(t, s, "store", target)
	}
}

// waitForRecord waits until the holder's name at file is there (present)
// or gone: names are saved a moment after the answer (holders.Names).
func waitForRecord(t *testing.T, file string, present bool) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		_, err := os.Lstat(file)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return poll.Error(err)
		}
		if (err == nil) == present {
			return poll.Success()
		}
		return poll.Continue("holder's name at %s: want there=%v, lstat says %v", file, present, err)
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(10*time.Millisecond))
}

func TestConcurrentPublishesOfOneHandleHaveOneWinner(t *testing.T) {
	s, dir := newTestServer(t)
	const pods = 8
	codesSeen := make([]codes.Code, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.NodePublishVolume(context.Background(),
				publishReq("store", podTarget(dir, string(rune('a'+i)), "store"), "p"))
			codesSeen[i] = status.Code(err)
		}()
	}
	wg.Wait()
	won := 0
	for i, c := range codesSeen {
		switch c {
		case codes.OK:
			won++
			t.Cleanup(func() { unpublish(t, s, "store", podTarget(dir, string(rune('a'+i)), "store")) })
		case codes.FailedPrecondition:
		default:
			t.Errorf("publish %d: unexpected code %s", i, c)
		}
	}
	assert.Equal(t, won, 1, "codes: %v", codesSeen)
}

func TestVolumeStats(t *testing.T) {
	s, dir := newTestServer(t)
	ctx := context.Background()
	target := podTarget(dir, "1111", "store")
	_, err := s.NodePublishVolume(ctx, publishReq("store", target, "store-a"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })
	assert.NilError(t, os.WriteFile(filepath.Join(target, "f"), make([]byte, 64<<10), 0o644))

	resp, err := s.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "store", VolumePath: target})
	assert.NilError(t, err)
	bytes, inodes := resp.GetUsage()[0], resp.GetUsage()[1]
	assert.Equal(t, bytes.GetUnit(), csi.VolumeUsage_BYTES)
	assert.Assert(t, bytes.GetUsed() >= 64<<10, "used %d", bytes.GetUsed())
	assert.Assert(t, bytes.GetTotal() >= bytes.GetUsed())
	assert.Equal(t, inodes.GetUsed(), int64(2)) // the copy's directory and f
	// The totals and what is free are the filesystem's that holds the
	// copies, as an unprivileged writer sees it (without the blocks kept
	// for root: what the store can still write).
	var fs unix.Statfs_t
	assert.NilError(t, unix.Statfs(s.layout.Root(), &fs))
	bsize := fs.Bsize
	assert.Equal(t, bytes.GetTotal(), int64(fs.Blocks)*bsize)
	const slack = 64 << 20 // what others write meanwhile
	avail := int64(fs.Bavail) * bsize
	assert.Assert(t, bytes.GetAvailable() > avail-slack && bytes.GetAvailable() < avail+slack,
		"available %d bytes, the filesystem says %d to an unprivileged writer (%d with root's reserve)",
		bytes.GetAvailable(), avail, int64(fs.Bfree)*bsize)
	assert.Equal(t, inodes.GetTotal(), int64(fs.Files))

	for _, tc := range []struct {
		name, handle, path string
		want               codes.Code
	}{
		{"unknown volume", "fake-vol-id", target, codes.NotFound},
		{"not mounted there", "store", filepath.Join(dir, "elsewhere"), codes.NotFound},
		{"no path", "store", "", codes.InvalidArgument},
		{"bad handle", "../store", target, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: tc.handle, VolumePath: tc.path})
			assertCode(t, err, tc.want)
		})
	}
}

// A new copy is an empty directory every user may write (pods run as any
// user; the copy is theirs to restrict), whatever the driver's umask.
func TestANewCopyIsOpenToEveryUser(t *testing.T) {
	s, dir := newTestServer(t)
	target := podTarget(dir, "1111", "store")
	_, err := s.NodePublishVolume(context.Background(), publishReq("store", target, "store-a"))
	assert.NilError(t, err)
	t.Cleanup(func() { unpublish(t, s, "store", target) })
	copyDir, err := s.layout.CopyDir("store")
	assert.NilError(t, err)
	fi, err := os.Stat(copyDir)
	assert.NilError(t, err)
	assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o777), "the copy's mode")
}

func TestIdentity(t *testing.T) {
	s, _ := newTestServer(t)
	ctx := context.Background()
	info, err := s.GetPluginInfo(ctx, nil)
	assert.NilError(t, err)
	assert.Equal(t, info.GetName(), "per-node.liken.sh")
	caps, err := s.GetPluginCapabilities(ctx, nil)
	assert.NilError(t, err)
	assert.Check(t, is.Len(caps.GetCapabilities(), 0), "no controller service is advertised")
	node, err := s.NodeGetInfo(ctx, nil)
	assert.NilError(t, err)
	assert.Equal(t, node.GetNodeId(), "worker-a")
}

func TestHeldErrorIs(t *testing.T) {
	var err error = &HeldError{Handle: "store"}
	assert.Assert(t, errors.Is(err, ErrHeld))
}

// A copy is walked at most once per StatsTTL: kubelet asks every minute,
// and a walk of a large copy is expensive.
func TestVolumeStatsAreReusedForTheirTTL(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ttl       time.Duration
		wantFresh bool
	}{
		{"within the TTL", time.Hour, false},
		{"measured every time", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dir := newTestServer(t)
			s, err := New(Config{NodeID: "worker-a", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel(), StatsTTL: tc.ttl})
			assert.NilError(t, err)
			ctx := context.Background()
			target := podTarget(dir, "1111", "store")
			_, err = s.NodePublishVolume(ctx, publishReq("store", target, "store-a"))
			assert.NilError(t, err)
			t.Cleanup(func() { unpublish(t, s, "store", target) })
			req := &csi.NodeGetVolumeStatsRequest{VolumeId: "store", VolumePath: target}
			before, err := s.NodeGetVolumeStats(ctx, req)
			assert.NilError(t, err)
			assert.NilError(t, os.WriteFile(filepath.Join(target, "f"), make([]byte, 1<<20), 0o644))
			after, err := s.NodeGetVolumeStats(ctx, req)
			assert.NilError(t, err)
			fresh := after.GetUsage()[1].GetUsed() != before.GetUsage()[1].GetUsed()
			assert.Equal(t, fresh, tc.wantFresh, "inodes before %d, after %d",
				before.GetUsage()[1].GetUsed(), after.GetUsage()[1].GetUsed())
		})
	}
}
