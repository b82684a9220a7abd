// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/client-go/rest"

	"liken.sh/per-node/driver/internal/metrics"
)

func TestHealthzNamesTheFirstFailingCheck(t *testing.T) {
	var regErr, reclaimErr error
	h := endpoints([]check{
		{"kubelet registration", func() error { return regErr }},
		{"reclaim controller", func() error { return reclaimErr }},
	}, nil, http.NotFoundHandler())
	for _, tc := range []struct {
		name        string
		reg, rec    error
		code        int
		bodyContain string
	}{
		{"all pass", nil, nil, http.StatusOK, "ok"},
		{"registration lost", errors.New("no socket"), nil, http.StatusServiceUnavailable, "kubelet registration: no socket"},
		{"reclaim stopped", nil, errors.New("stopped"), http.StatusServiceUnavailable, "reclaim controller: stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regErr, reclaimErr = tc.reg, tc.rec
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			assert.Equal(t, rec.Code, tc.code)
			assert.Assert(t, strings.Contains(rec.Body.String(), tc.bodyContain), "body %q", rec.Body.String())
		})
	}
}

// The driver's pod is ready only once kubelet has registered the driver
// (a DaemonSet rollout then moves to the next node only when this one can
// mount), and never while it is not healthy.
func TestReadyzWaitsForRegistration(t *testing.T) {
	var healthErr, regErr error
	h := endpoints([]check{{"CSI socket", func() error { return healthErr }}},
		[]check{{"kubelet registration accepted", func() error { return regErr }}}, http.NotFoundHandler())
	for _, tc := range []struct {
		name         string
		health, reg  error
		healthz      int
		readyz       int
		readyzSaying string
	}{
		{"registered", nil, nil, http.StatusOK, http.StatusOK, "ok"},
		{"not registered yet", nil, errors.New("not yet"), http.StatusOK, http.StatusServiceUnavailable, "kubelet registration accepted: not yet"},
		{"unhealthy", errors.New("gone"), nil, http.StatusServiceUnavailable, http.StatusServiceUnavailable, "CSI socket: gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			healthErr, regErr = tc.health, tc.reg
			for path, want := range map[string]int{"/healthz": tc.healthz, "/readyz": tc.readyz} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				assert.Equal(t, rec.Code, want, "%s: %s", path, rec.Body.String())
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			assert.Assert(t, strings.Contains(rec.Body.String(), tc.readyzSaying), "body %q", rec.Body.String())
		})
	}
}

// Missing credentials are an error, never a silent standalone run.
func TestNoClusterIsAnErrorWithoutStandalone(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := kubeClients("", "", apiLimits{})
	assert.ErrorContains(t, err, "--standalone")
}

// Each kind of API request gets the rate limit its flags give, defaults
// included; a limit of no requests (or of none) is refused before the
// driver touches anything.
func TestAPIRateLimitsAreTheFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	assert.NilError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	for _, tc := range []struct {
		args []string
		want apiLimits
	}{
		{nil, apiLimits{mounts: rateLimit{20, 40}, removals: rateLimit{10, 20}, events: rateLimit{5, 10}, nodes: rateLimit{5, 10}}},
		{[]string{"--api-qps-removals=25", "--api-burst-removals=50", "--api-qps-nodes=2.5"},
			apiLimits{mounts: rateLimit{20, 40}, removals: rateLimit{25, 50}, events: rateLimit{5, 10}, nodes: rateLimit{2.5, 10}}},
	} {
		var o options
		fs := flag.NewFlagSet("per-node", flag.ContinueOnError)
		registerFlags(fs, &o)
		assert.NilError(t, fs.Parse(tc.args))
		assert.Equal(t, o.limits, tc.want, "flags %v", tc.args)
		c, err := kubeClients(kubeconfig, "", o.limits)
		assert.NilError(t, err)
		for kind, got := range map[string]struct {
			client any
			want   rateLimit
		}{"mounts": {c.publish, tc.want.mounts}, "removals": {c.reclaim, tc.want.removals}, "events": {c.events, tc.want.events}} {
			qps := got.client.(interface{ GetClient() rest.Interface }).GetClient().GetRateLimiter().QPS()
			assert.Equal(t, float64(qps), got.want.qps, "%s with flags %v", kind, tc.args)
		}
	}
	for _, bad := range []string{"--api-qps-mounts=0", "--api-burst-events=0", "--api-qps-nodes=-1"} {
		var o options
		fs := flag.NewFlagSet("per-node", flag.ContinueOnError)
		registerFlags(fs, &o)
		assert.NilError(t, fs.Parse([]string{"--node-id=n", "--standalone", "--root=" + t.TempDir(), bad}))
		err := run(context.Background(), o)
		assert.ErrorContains(t, err, strings.SplitN(strings.TrimPrefix(bad, "--"), "=", 2)[0], "flag %s", bad)
	}
}

// /metrics is served on the health port, in the Prometheus text format.
func TestMetricsAreServedBesideHealth(t *testing.T) {
	m := metrics.New()
	m.Refused(metrics.RefusedHeld)
	h := endpoints(nil, nil, m.Handler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, rec.Code, http.StatusOK)
	assert.Assert(t, strings.Contains(rec.Body.String(), `per_node_mount_refusals_total{reason="held"} 1`), "body:\n%s", rec.Body.String())
}

// driverFlags are the driver's own flags, as registerFlags defines them.
func driverFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("per-node", flag.ContinueOnError)
	var o options
	registerFlags(fs, &o)
	return fs
}

// generatedIn checks that the text of the document at path between the
// lines start and end is body; UPDATE=1 rewrites it.
func generatedIn(t *testing.T, path, start, end, body string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	assert.NilError(t, err)
	before, rest, ok := strings.Cut(string(doc), start)
	assert.Assert(t, ok, "%s has no line %q", path, start)
	_, after, ok := strings.Cut(rest, end)
	assert.Assert(t, ok, "%s has no line %q", path, end)
	want := before + start + body + end + after
	if os.Getenv("UPDATE") != "" {
		assert.NilError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, string(doc), want, "%s's generated part is stale: run UPDATE=1 go test ./driver -run 'FlagsTable|FlagsThatStay'", path)
}

// docs/operating.md's flags table is the driver's own flags, generated
// (UPDATE=1 go test ./driver -run FlagsTable rewrites it).
func TestOperatingDocFlagsTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| flag | default | what |\n|---|---|---|\n")
	driverFlags().VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s |\n", f.Name, def, f.Usage)
	})
	b.WriteString("\nAnd klog's and the logging configuration's: `--v`, `--vmodule`, `--logging-format` (`text` or `json`).\n")
	generatedIn(t, "../docs/operating.md", "<!-- flags: generated from driver/main.go by TestOperatingDocFlagsTable -->\n", "<!-- end of flags -->", b.String())
}

// docs/upgrading.md's list of what stays the same names every flag of the
// driver (UPDATE=1 go test ./driver -run FlagsThatStay rewrites it).
func TestUpgradingDocFlagsThatStay(t *testing.T) {
	var names []string
	driverFlags().VisitAll(func(f *flag.Flag) { names = append(names, "`--"+f.Name+"`") })
	body := "  " + strings.Join(names, ", ") + ", and klog's `--v`, `--vmodule`, `--logging-format`;\n"
	generatedIn(t, "../docs/upgrading.md", "  <!-- flags: generated from driver/main.go by TestUpgradingDocFlagsThatStay -->\n", "  <!-- end of flags -->", body)
}
