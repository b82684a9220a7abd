// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
)

var recordsDesc = prometheus.NewDesc("per_node_records",
	"PersistentVolumes that record this node as holding a copy (its finalizer), from the controller's cache.", nil, nil)

// recordsCollector reports the records this node holds, once the
// controller's cache has synced.
type recordsCollector struct{ c *Controller }

func (r recordsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- recordsDesc }

func (r recordsCollector) Collect(ch chan<- prometheus.Metric) {
	if !r.c.synced.Load() {
		return
	}
	pvs, err := r.c.pvs.List(labels.Everything())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(recordsDesc, err)
		return
	}
	n := 0
	for _, pv := range pvs {
		if ours(pv) && HasRecord(pv, r.c.node) {
			n++
		}
	}
	ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.GaugeValue, float64(n))
}
