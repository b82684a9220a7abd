// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"liken.sh/per-node/driver/internal/mounts"
)

// The benchmarks call the node server in-process (no gRPC) with real bind
// mounts, with 0, 100, 1,000 and 10,000 other volumes mounted on the node, and
// measure a raw bind mount + unmount of an empty directory under the same
// conditions. `make bench` prints both and their ratio. They need root.
//
// Everything lives on a tmpfs the benchmark mounts: the root filesystem of
// the machines this runs on is ext4 mounted with `discard`, where a single
// mkdir + rmdir costs about 0.5 ms whoever does it. Kubelet's contract makes
// the driver create and remove the target directory, so on such a disk that
// cost would swamp what is measured here: the driver's own work.

var otherVolumes = []int{0, 100, 1000, 10000}

// mountOthers publishes n other volumes, as if n other pods ran on the node.
func mountOthers(b *testing.B, s *Server, dir string, n int) {
	b.Helper()
	for i := range n {
		handle := fmt.Sprintf("other-%d", i)
		target := podTarget(dir, fmt.Sprintf("%d", i), handle)
		if _, err := s.NodePublishVolume(context.Background(), publishReq(handle, target, "p")); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.mounter.Unmount(target) })
	}
}

func benchServer(b *testing.B) (*Server, string) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Fatal("benchmarks make real bind mounts and must run as root")
	}
	dir := b.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	s, err := New(Config{NodeID: "bench", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel()})
	if err != nil {
		b.Fatal(err)
	}
	return s, dir
}

func BenchmarkPublishUnpublish(b *testing.B) {
	for _, n := range otherVolumes {
		b.Run(fmt.Sprintf("others=%d", n), func(b *testing.B) {
			s, dir := benchServer(b)
			mountOthers(b, s, dir, n)
			ctx := context.Background()
			target := podTarget(dir, "bench", "store")
			pub := publishReq("store", target, "bench")
			for b.Loop() {
				if _, err := s.NodePublishVolume(ctx, pub); err != nil {
					b.Fatal(err)
				}
				unpublishReq := unpublishRequest("store", target)
				if _, err := s.NodeUnpublishVolume(ctx, unpublishReq); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRawBindMount(b *testing.B) {
	for _, n := range otherVolumes {
		b.Run(fmt.Sprintf("others=%d", n), func(b *testing.B) {
			s, dir := benchServer(b)
			mountOthers(b, s, dir, n)
			src, dst := filepath.Join(dir, "raw-src"), filepath.Join(dir, "raw-dst")
			for _, d := range []string{src, dst} {
				if err := os.Mkdir(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
					b.Fatal(err)
				}
				if err := unix.Unmount(dst, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
