// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps that read a node driver's /metrics, as Prometheus would: through
// the driver pod's health port (here by the API server's pod proxy).

// driverHealthPort is the port of /healthz, /readyz and /metrics.
const driverHealthPort = "9808"

// scrape reads the metrics of the driver on node: each series by its name
// and sorted labels, as `name{a="x",b="y"}`.
func (r *Run) scrape(ctx context.Context, node string) (map[string]float64, error) {
	pods, err := r.driverPodsOn(ctx, node)
	if err != nil {
		return nil, err
	}
	var running []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil && harness.PodReady(&p) {
			running = append(running, p.Name)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("expected one ready driver pod on %s; seen %s", node, r.driverPodsReport(pods))
	}
	cs, err := r.clientset()
	if err != nil {
		return nil, err
	}
	raw, err := cs.CoreV1().Pods(driverNamespace).ProxyGet("http", running[0], driverHealthPort, "/metrics", nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/%s:%s/metrics: %w", driverNamespace, running[0], driverHealthPort, err)
	}
	return parseMetrics(raw)
}

// parseMetrics reads the Prometheus text format into series → value
// (counters, gauges and untyped; histograms and summaries are left out).
func parseMetrics(raw []byte) (map[string]float64, error) {
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

// seriesOf lists the series of one metric, for messages.
func seriesOf(m map[string]float64, series string) string {
	name, _, _ := strings.Cut(series, "{")
	var seen []string
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			seen = append(seen, fmt.Sprintf("%s %g", k, v))
		}
	}
	sort.Strings(seen)
	if len(seen) == 0 {
		return "no " + name + " series"
	}
	return strings.Join(seen, "; ")
}

func stepNoteMetrics(ctx context.Context, r *Run, a args) error {
	var m map[string]float64
	err := harness.Until(ctx, "the metrics of the driver on "+a["node"], deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var err error
		m, err = r.scrape(ctx, a["node"])
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	r.metrics[a["node"]] = m
	return nil
}

// stepMetricGrew waits until a counter is above the value noted earlier
// (0 when the series was not there).
func stepMetricGrew(ctx context.Context, r *Run, a args) error {
	noted, ok := r.metrics[a["node"]]
	if !ok {
		return fmt.Errorf("no metrics of the driver on %s were noted in this scenario", a["node"])
	}
	before := noted[a["series"]]
	return harness.Until(ctx, fmt.Sprintf("%s on %s to count more than %g", a["series"], a["node"], before), deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			m, err := r.scrape(ctx, a["node"])
			if err != nil {
				return false, err.Error(), nil
			}
			return m[a["series"]] > before, fmt.Sprintf("noted %g; now %s", before, seriesOf(m, a["series"])), nil
		})
}

// stepMetricPresent waits until the driver on node reports a series (want)
// or no longer reports it.
func stepMetricPresent(want bool) func(ctx context.Context, r *Run, a args) error {
	return func(ctx context.Context, r *Run, a args) error {
		what := "to report " + a["series"]
		if !want {
			what = "to report no " + a["series"]
		}
		return harness.Until(ctx, "the driver on "+a["node"]+" "+what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
			m, err := r.scrape(ctx, a["node"])
			if err != nil {
				return false, err.Error(), nil
			}
			_, has := m[a["series"]]
			return has == want, seriesOf(m, a["series"]), nil
		})
	}
}
