// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"github.com/prometheus/client_golang/prometheus"
)

var recordsDesc = prometheus.NewDesc("per_node_records",
	"PersistentVolumes that record this node as holding a copy (its Copy objects), from the controller's cache.", nil, nil)

// recordsCollector reports the records this node holds, once the
// controller's cache has synced.
type recordsCollector struct{ c *Controller }

func (r recordsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- recordsDesc }

func (r recordsCollector) Collect(ch chan<- prometheus.Metric) {
	if !r.c.synced.Load() {
		return
	}
	n := len(r.c.own.ListIndexFuncValues(byVolume))
	ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.GaugeValue, float64(n))
}
