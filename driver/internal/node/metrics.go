// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

var (
	copiesDesc = prometheus.NewDesc("per_node_copies",
		"Copies of per-node volumes on this node's disk.", nil, nil)
	copyBytesDesc = prometheus.NewDesc("per_node_copy_used_bytes",
		"Bytes a copy uses on this node, measured at most once per --stats-ttl (shared with kubelet's volume stats).",
		[]string{"volume_id"}, nil)
	heldDesc = prometheus.NewDesc("per_node_copies_held",
		"Copies mounted into a pod on this node.", nil, nil)
	trashDesc = prometheus.NewDesc("per_node_copies_being_removed",
		"Removed copies whose files are still being deleted from this node's disk.", nil, nil)
)

// copiesCollector reports the node's copies as they are at scrape time: a
// copy's series goes when the copy goes.
type copiesCollector struct{ s *Server }

func (c copiesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- copiesDesc
	ch <- copyBytesDesc
	ch <- heldDesc
	ch <- trashDesc
}

func (c copiesCollector) Collect(ch chan<- prometheus.Metric) {
	handles, err := c.s.Handles()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(copiesDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(copiesDesc, prometheus.GaugeValue, float64(len(handles)))
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(c.s.holders.Len()))
	for _, h := range handles {
		dir, err := c.s.layout.CopyDir(h)
		if err != nil {
			continue
		}
		used, err := c.s.usage.get(h, dir, metricsWait)
		if err != nil {
			klog.V(2).InfoS("Cannot measure a copy for its metric", "volume_id", h, "err", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(copyBytesDesc, prometheus.GaugeValue, float64(used.Bytes), h)
	}
	if trash, err := os.ReadDir(c.s.layout.TrashDir()); err == nil {
		ch <- prometheus.MustNewConstMetric(trashDesc, prometheus.GaugeValue, float64(len(trash)))
	}
}
