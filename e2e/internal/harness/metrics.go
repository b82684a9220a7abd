// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DriverHealthPort is the port of the driver's /healthz, /readyz and /metrics.
const DriverHealthPort = "9808"

// DriverMetrics reads the /metrics of the ready driver pod on node through
// the API server's pod proxy: each series by its name and sorted labels, as
// `name{a="x",b="y"}` (counters, gauges, untyped).
func DriverMetrics(ctx context.Context, cs kubernetes.Interface, node string) (map[string]float64, error) {
	pods, err := cs.CoreV1().Pods(DriverNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	var ready []string
	var seen []string
	for _, p := range pods.Items {
		seen = append(seen, fmt.Sprintf("%s (%s, ready %v)", p.Name, p.Status.Phase, PodReady(&p)))
		if PodReady(&p) {
			ready = append(ready, p.Name)
		}
	}
	if len(ready) != 1 {
		return nil, fmt.Errorf("expected one ready driver pod on %s; seen %v", node, seen)
	}
	raw, err := cs.CoreV1().Pods(DriverNamespace).ProxyGet("http", ready[0], DriverHealthPort, "/metrics", nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/%s:%s/metrics: %w", DriverNamespace, ready[0], DriverHealthPort, err)
	}
	return ParseMetrics(raw)
}

// ParseMetrics reads the Prometheus text format into series → value
// (counters, gauges and untyped; a histogram as its _count and _sum series;
// summaries are left out).
func ParseMetrics(raw []byte) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				v = m.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM: // as Prometheus names them: _count and _sum
				out[seriesKey(name+"_sum", m.GetLabel())] = m.GetHistogram().GetSampleSum()
				out[seriesKey(name+"_count", m.GetLabel())] = float64(m.GetHistogram().GetSampleCount())
				continue
			default:
				continue
			}
			out[seriesKey(name, m.GetLabel())] = v
		}
	}
	return out, nil
}

func seriesKey(name string, labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return name
	}
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// SumOf adds every series of one metric (all label values).
func SumOf(m map[string]float64, metric string) float64 {
	var sum float64
	for k, v := range m {
		if k == metric || strings.HasPrefix(k, metric+"{") {
			sum += v
		}
	}
	return sum
}

// KubeletMetrics reads node's kubelet /metrics through the API server's node
// proxy, as ParseMetrics gives them.
func KubeletMetrics(ctx context.Context, cs kubernetes.Interface, node string) (map[string]float64, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape the kubelet of %s: %w", node, err)
	}
	return ParseMetrics(raw)
}

// VolumeOps sums, between two scrapes of one kubelet, its volume operations
// (storage_operation_duration_seconds) for one volume plugin by operation:
// how many succeeded and their mean time, and how many failed (kubelet
// backs off after each failure). "none" when there were none.
func VolumeOps(before, after map[string]float64, plugin string) string {
	type ops struct{ ok, failed, seconds float64 }
	byOp := map[string]*ops{}
	for k, v := range after {
		name, labels, _ := strings.Cut(k, "{")
		if !strings.HasPrefix(name, "storage_operation_duration_seconds_") || !strings.Contains(labels, `volume_plugin="`+plugin+`"`) {
			continue
		}
		_, op, _ := strings.Cut(labels, `operation_name="`)
		op, _, _ = strings.Cut(op, `"`)
		if byOp[op] == nil {
			byOp[op] = &ops{}
		}
		d, ok := v-before[k], strings.Contains(labels, `status="success"`)
		switch {
		case strings.HasSuffix(name, "_count") && ok:
			byOp[op].ok += d
		case strings.HasSuffix(name, "_count"):
			byOp[op].failed += d
		case strings.HasSuffix(name, "_sum") && ok:
			byOp[op].seconds += d
		}
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(byOp)) {
		o := byOp[op]
		if o.ok+o.failed == 0 {
			continue
		}
		mean := "-"
		if o.ok > 0 {
			mean = time.Duration(o.seconds / o.ok * float64(time.Second)).Round(time.Millisecond).String()
		}
		parts = append(parts, fmt.Sprintf("%s %.0f ok (mean %s), %.0f failed", op, o.ok, mean, o.failed))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// CSICalls says, from two kubelet scrapes, which CSI calls kubelet made to
// driver between them (its csi_operations_seconds: the time kubelet waited,
// connection included), each with how many and their mean time, and how
// many answered with a code other than OK. "none" when there were none.
func CSICalls(before, after map[string]float64, driver string) string {
	type calls struct{ n, failed, seconds float64 }
	byMethod := map[string]*calls{}
	for k, v := range after {
		name, labels, _ := strings.Cut(k, "{")
		if !strings.HasPrefix(name, "csi_operations_seconds_") || !strings.Contains(labels, `driver_name="`+driver+`"`) {
			continue
		}
		_, method, _ := strings.Cut(labels, `method_name="`)
		method, _, _ = strings.Cut(method, `"`)
		method = method[strings.LastIndex(method, "/")+1:]
		if byMethod[method] == nil {
			byMethod[method] = &calls{}
		}
		d := v - before[k]
		switch {
		case strings.HasSuffix(name, "_count"):
			byMethod[method].n += d
			if !strings.Contains(labels, `grpc_status_code="OK"`) {
				byMethod[method].failed += d
			}
		case strings.HasSuffix(name, "_sum"):
			byMethod[method].seconds += d
		}
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(byMethod)) {
		c := byMethod[m]
		if c.n == 0 {
			continue
		}
		mean := time.Duration(c.seconds / c.n * float64(time.Second)).Round(100 * time.Microsecond)
		parts = append(parts, fmt.Sprintf("%s %.0f (mean %s, %.0f not OK)", m, c.n, mean, c.failed))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}
