// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"liken.sh/per-node/driver/internal/mounts"
)

// BenchmarkPublishVsBindMount calls the node server in-process (no gRPC)
// with real bind mounts, with 0, 100, 1,000 and 10,000 other volumes mounted
// on the node. Each iteration times one publish + unpublish, then one raw
// bind mount + unmount of an empty directory, back to back, so that both see
// the same machine: on a shared 2-core VM the cost of one mount(2) among
// 10,000 mounts swings 5x from one minute to the next, and a ratio of two
// benchmarks run minutes apart measured the swing (2.81 one day, 1.74 the
// next, on the same code). It reports each side's median and mean and their
// ratios; `make bench` prints them. It needs root.
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

func BenchmarkPublishVsBindMount(b *testing.B) {
	for _, n := range otherVolumes {
		b.Run(fmt.Sprintf("others=%d", n), func(b *testing.B) {
			s, dir := benchServer(b)
			mountOthers(b, s, dir, n)
			ctx := context.Background()
			target := podTarget(dir, "bench", "store")
			pub, unpub := publishReq("store", target, "bench"), unpublishRequest("store", target)
			src, dst := filepath.Join(dir, "raw-src"), filepath.Join(dir, "raw-dst")
			for _, d := range []string{src, dst} {
				if err := os.Mkdir(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			var driver, bind []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := s.NodePublishVolume(ctx, pub); err != nil {
					b.Fatal(err)
				}
				if _, err := s.NodeUnpublishVolume(ctx, unpub); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
					b.Fatal(err)
				}
				if err := unix.Unmount(dst, 0); err != nil {
					b.Fatal(err)
				}
				driver, bind = append(driver, t1.Sub(t0)), append(bind, time.Since(t1))
			}
			d, r := median(driver), median(bind)
			b.ReportMetric(float64(d.Nanoseconds()), "driver-p50-ns")
			b.ReportMetric(float64(r.Nanoseconds()), "bind-p50-ns")
			b.ReportMetric(float64(d)/float64(r), "ratio-p50")
			b.ReportMetric(float64(sum(driver))/float64(sum(bind)), "ratio-mean")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}
