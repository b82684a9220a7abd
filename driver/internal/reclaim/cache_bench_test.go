// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkCacheOfOthersPVs is the Go heap 1,000 PVs of another driver (the
// local PVs of the bench's wave) hold in the controller's cache, whole and
// as lean keeps them: `go test -run '^$' -bench CacheOfOthersPVs ./driver/internal/reclaim`.
func BenchmarkCacheOfOthersPVs(b *testing.B) {
	const n = 1000
	for _, tc := range []struct {
		name string
		keep func(*corev1.PersistentVolume) any
	}{
		{"whole", func(p *corev1.PersistentVolume) any { return p }},
		{"lean", func(p *corev1.PersistentVolume) any { kept, _ := lean(p); return kept }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perPV float64
			for range b.N {
				cache := make([]any, 0, n)
				before := heapAfterGC()
				for i := range n {
					cache = append(cache, tc.keep(localPV(fmt.Sprintf("local-%04d", i))))
				}
				perPV = float64(heapAfterGC()-before) / n
				runtime.KeepAlive(cache)
			}
			b.ReportMetric(perPV, "heap-B/PV")
		})
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
