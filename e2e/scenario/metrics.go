// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps that read a node driver's /metrics, as Prometheus would: through
// the driver pod's health port (here by the API server's pod proxy).

// scrape reads the metrics of the driver on node.
func (r *Run) scrape(ctx context.Context, node string) (map[string]float64, error) {
	cs, err := r.clientset()
	if err != nil {
		return nil, err
	}
	return harness.DriverMetrics(ctx, cs, node)
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
			return false, "", harness.Unobserved(err)
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
				return false, "", harness.Unobserved(err)
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
				return false, "", harness.Unobserved(err)
			}
			_, has := m[a["series"]]
			return has == want, seriesOf(m, a["series"]), nil
		})
	}
}

// stepDispatchedAtLevel waits until the API server says it dispatched
// requests of the FlowSchema name at the priority level of the same name
// (apiserver_flowcontrol_dispatched_requests_total): the chart's API
// Priority and Fairness objects are installed, and catch the drivers'
// requests.
func stepDispatchedAtLevel(ctx context.Context, r *Run, a args) error {
	cs, err := r.clientset()
	if err != nil {
		return err
	}
	name := a["name"]
	return harness.Until(ctx, "the API server to dispatch requests of FlowSchema "+name+" at priority level "+name, deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			parser := expfmt.NewTextParser(model.UTF8Validation)
			families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			seen := map[string]float64{}
			for _, m := range families["apiserver_flowcontrol_dispatched_requests_total"].GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				seen[l["flow_schema"]+" at "+l["priority_level"]] += m.GetCounter().GetValue()
			}
			if seen[name+" at "+name] > 0 {
				return true, "", nil
			}
			return false, fmt.Sprintf("dispatched by FlowSchema and priority level: %v", seen), nil
		})
}
