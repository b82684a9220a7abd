// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"gotest.tools/v3/assert"
	"sigs.k8s.io/yaml"
)

const rulesFile = "../../deploy/components/monitoring/prometheusrule.yaml"

// alert is one rule of the PrometheusRule.
type alert struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func loadAlerts(t *testing.T) map[string]alert {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	assert.NilError(t, err)
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []struct {
				Name  string  `json:"name"`
				Rules []alert `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	assert.NilError(t, yaml.UnmarshalStrict(raw, &pr))
	assert.Equal(t, pr.Kind, "PrometheusRule")
	out := map[string]alert{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			assert.Assert(t, r.Alert != "", "group %s has a rule that is not an alert: %+v", g.Name, r)
			_, dup := out[r.Alert]
			assert.Assert(t, !dup, "alert %s is defined twice", r.Alert)
			out[r.Alert] = r
		}
	}
	assert.Assert(t, len(out) > 0, "%s defines no alert", rulesFile)
	return out
}

// a case: the series loaded (promqltest's load syntax, one sample a minute
// from time 0), the minute the alert is evaluated at after being evaluated
// every minute before, and whether it is firing then.
type alertCase struct {
	alert, name string
	series      string
	at          int
	firing      bool
}

var cases = []alertCase{
	{"PerNodeDriverDown", "a driver unscraped for 7 minutes", `
		up{job="per-node-system/per-node", node="w1", instance="10.0.0.1:9808"} 1x2 0x12`, 10, true},
	{"PerNodeDriverDown", "a driver unscraped for 3 minutes (a restart)", `
		up{job="per-node-system/per-node", node="w1", instance="10.0.0.1:9808"} 1x6 0x2 1x5`, 10, false},
	{"PerNodeDriverDown", "another job down", `
		up{job="per-node-system/per-node", node="w1", instance="10.0.0.1:9808"} 1x12
		up{job="kube-state-metrics", instance="10.0.0.9:8080"} 0x12`, 10, false},

	{"PerNodeAPIServerErrors", "no answer from the API server for 20 minutes", `
		per_node_api_requests_total{verb="PATCH", code="<error>", node="w1"} 0+5x30
		per_node_api_requests_total{verb="GET", code="200", node="w1"} 0+5x30`, 25, true},
	{"PerNodeAPIServerErrors", "5xx for 20 minutes", `
		per_node_api_requests_total{verb="GET", code="503", node="w1"} 0+2x30`, 25, true},
	{"PerNodeAPIServerErrors", "answers only, and old errors that stopped", `
		per_node_api_requests_total{verb="PATCH", code="200", node="w1"} 0+5x30
		per_node_api_requests_total{verb="PATCH", code="<error>", node="w1"} 0+5x3 15x27
		per_node_api_requests_total{verb="PATCH", code="409", node="w1"} 0+1x30`, 25, false},

	{"PerNodeCopyRemovalStuck", "a copy in the trash for 40 minutes", `
		per_node_copies_being_removed{node="w1"} 1x45`, 40, true},
	{"PerNodeCopyRemovalStuck", "a copy removed in 5 minutes", `
		per_node_copies_being_removed{node="w1"} 1x5 0x40`, 40, false},

	{"PerNodeRemovalsRetrying", "5 retries a minute for 40 minutes", `
		per_node_workqueue_retries_total{name="reclaim", node="w1"} 0+5x45`, 40, true},
	{"PerNodeRemovalsRetrying", "a retry a minute", `
		per_node_workqueue_retries_total{name="reclaim", node="w1"} 0+1x45`, 40, false},

	{"PerNodeSecondPodWaiting", "a second pod refused for 50 minutes", `
		per_node_mount_refusals_total{reason="held", node="w1"} 0+1x55`, 50, true},
	{"PerNodeSecondPodWaiting", "a second pod that started after 5 minutes", `
		per_node_mount_refusals_total{reason="held", node="w1"} 0+1x5 5x50`, 50, false},
	{"PerNodeSecondPodWaiting", "refusals of a PV being deleted", `
		per_node_mount_refusals_total{reason="deleting", node="w1"} 0+1x55`, 50, false},

	{"PerNodeCopyFillingUp", "a per-node copy's filesystem 95% full", fillingUp("per-node.liken.sh", 5), 25, true},
	{"PerNodeCopyFillingUp", "a per-node copy's filesystem half full", fillingUp("per-node.liken.sh", 50), 25, false},
	{"PerNodeCopyFillingUp", "another driver's volume 95% full", fillingUp("ebs.csi.aws.com", 5), 25, false},
}

// fillingUp: a claim's volume of csiDriver on node w1, with available of
// 100 bytes free, and kube-state-metrics' series for its claim and volume.
func fillingUp(csiDriver string, available int) string {
	return `
		kubelet_volume_stats_available_bytes{namespace="db", persistentvolumeclaim="data", node="w1"} ` + strconv.Itoa(available) + `x30
		kubelet_volume_stats_capacity_bytes{namespace="db", persistentvolumeclaim="data", node="w1"} 100x30
		kube_persistentvolumeclaim_info{namespace="db", persistentvolumeclaim="data", volumename="db-data"} 1x30
		kube_persistentvolume_info{persistentvolume="db-data", csi_driver="` + csiDriver + `"} 1x30`
}

// loadCommand is promqltest's load of series (one a line), a sample a minute.
func loadCommand(series string) string {
	var b strings.Builder
	b.WriteString("load 1m\n")
	for _, line := range strings.Split(series, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString("  " + line + "\n")
		}
	}
	return b.String()
}

// TestAlerts evaluates each alert every minute, as Prometheus does, on the
// case's series, and checks whether it fires at the case's minute.
func TestAlerts(t *testing.T) {
	defs := loadAlerts(t)
	p := parser.NewParser(parser.Options{})
	for _, tc := range cases {
		t.Run(tc.alert+"/"+tc.name, func(t *testing.T) {
			def, ok := defs[tc.alert]
			assert.Assert(t, ok, "no alert %s in %s", tc.alert, rulesFile)
			expr, err := p.ParseExpr(def.Expr)
			assert.NilError(t, err, "alert %s", tc.alert)
			hold, err := time.ParseDuration(def.For)
			assert.NilError(t, err, "alert %s: for %q", tc.alert, def.For)
			rule := rules.NewAlertingRule(def.Alert, expr, hold, 0, labels.FromMap(def.Labels), labels.FromMap(def.Annotations),
				labels.EmptyLabels(), "", true, nil)
			storage := promqltest.LoadedStorage(t, loadCommand(tc.series))
			query := rules.EngineQueryFunc(promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery), storage)
			var last []string
			for m := 0; m <= tc.at; m++ {
				vec, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).Add(time.Duration(m)*time.Minute), query, nil, 0)
				assert.NilError(t, err, "alert %s at minute %d", tc.alert, m)
				last = last[:0]
				for _, s := range vec {
					last = append(last, s.Metric.String())
				}
			}
			firing := false
			for _, a := range rule.ActiveAlerts() {
				firing = firing || a.State == rules.StateFiring
			}
			assert.Equal(t, firing, tc.firing, "alert %s at minute %d: expected firing=%v, seen ALERTS %v",
				tc.alert, tc.at, tc.firing, last)
		})
	}
}

// TestEveryAlertFiresAndStaysQuiet: each alert has a case where it fires
// and one where it stays quiet, and no case names an alert that is gone.
func TestEveryAlertFiresAndStaysQuiet(t *testing.T) {
	defs := loadAlerts(t)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range cases {
		_, ok := defs[tc.alert]
		assert.Assert(t, ok, "a case names alert %s, which %s does not define", tc.alert, rulesFile)
		if tc.firing {
			fires[tc.alert] = true
		} else {
			quiet[tc.alert] = true
		}
	}
	for name := range defs {
		assert.Assert(t, fires[name], "alert %s has no case where it fires", name)
		assert.Assert(t, quiet[name], "alert %s has no case where it stays quiet", name)
	}
}

// TestRunbooksExist: each alert has a severity, a summary and a runbook
// link to a section of docs/runbooks.md that exists.
func TestRunbooksExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbooks.md"))
	assert.NilError(t, err)
	var anchors []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## ") {
			anchors = append(anchors, slug(strings.TrimPrefix(line, "## ")))
		}
	}
	const prefix = "https://github.com/liken-sh/per-node/blob/main/docs/runbooks.md#"
	for name, a := range loadAlerts(t) {
		assert.Assert(t, a.Labels["severity"] != "", "alert %s has no severity", name)
		assert.Assert(t, a.Annotations["summary"] != "", "alert %s has no summary", name)
		url := a.Annotations["runbook_url"]
		assert.Assert(t, strings.HasPrefix(url, prefix), "alert %s: runbook_url %q is not a section of docs/runbooks.md", name, url)
		anchor := strings.TrimPrefix(url, prefix)
		assert.Assert(t, slices.Contains(anchors, anchor), "alert %s links to #%s; docs/runbooks.md has: %v", name, anchor, anchors)
	}
}

// slug is the anchor GitHub gives a heading: lower case, punctuation but
// hyphens dropped, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAlertsNameOnlyServedMetrics: every per_node_ metric an alert reads is
// in docs/operating.md's table of the metrics the driver serves.
func TestAlertsNameOnlyServedMetrics(t *testing.T) {
	served := servedMetrics(t)
	for name, a := range loadAlerts(t) {
		served.check(t, "alert "+name, a.Expr)
	}
}

const dashboardFile = "../../charts/per-node/dashboards/per-node.json"

// TestDashboardQueriesParse: every query of the Grafana dashboard is PromQL
// that parses, and names only metrics the driver serves.
func TestDashboardQueriesParse(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	assert.NilError(t, err)
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	assert.NilError(t, json.Unmarshal(raw, &d))
	assert.Assert(t, len(d.Panels) > 0, "%s has no panel", dashboardFile)
	p := parser.NewParser(parser.Options{})
	served := servedMetrics(t)
	for _, panel := range d.Panels {
		assert.Assert(t, len(panel.Targets) > 0, "panel %q has no query", panel.Title)
		for _, target := range panel.Targets {
			_, err := p.ParseExpr(target.Expr)
			assert.NilError(t, err, "panel %q: %s", panel.Title, target.Expr)
			served.check(t, "panel "+strconv.Quote(panel.Title), target.Expr)
		}
	}
}

// metricsDoc is docs/operating.md, whose table lists the metrics the driver
// serves (a test of the driver keeps that table equal to what it serves).
type metricsDoc string

func servedMetrics(t *testing.T) metricsDoc {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	assert.NilError(t, err)
	return metricsDoc(raw)
}

var metricName = regexp.MustCompile(`per_node_[a-z_]+`)

// check fails t for each per_node_ metric expr reads that the table lacks.
func (doc metricsDoc) check(t *testing.T, what, expr string) {
	t.Helper()
	for _, m := range metricName.FindAllString(expr, -1) {
		base := m
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			base = strings.TrimSuffix(base, suffix)
		}
		ok := strings.Contains(string(doc), "`"+base+"`")
		if !ok && strings.HasPrefix(base, "per_node_workqueue_") {
			ok = strings.Contains(string(doc), "`_"+strings.TrimPrefix(base, "per_node_workqueue_")+"`")
		}
		assert.Check(t, ok, "%s reads %s, which docs/operating.md does not list as served", what, m)
	}
}
