// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

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
	_, err := kubeClients("")
	assert.ErrorContains(t, err, "--standalone")
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

// docs/operating.md's flags table is the driver's own flags, generated
// (UPDATE=1 go test ./driver -run FlagsTable rewrites it).
func TestOperatingDocFlagsTable(t *testing.T) {
	const start, end = "<!-- flags: generated from driver/main.go by TestOperatingDocFlagsTable -->\n", "<!-- end of flags -->"
	fs := flag.NewFlagSet("per-node", flag.ContinueOnError)
	var o options
	registerFlags(fs, &o)
	var b strings.Builder
	b.WriteString("| flag | default | what |\n|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s |\n", f.Name, def, f.Usage)
	})
	b.WriteString("\nAnd klog's and the logging configuration's: `--v`, `--vmodule`, `--logging-format` (`text` or `json`).\n")
	const path = "../docs/operating.md"
	doc, err := os.ReadFile(path)
	assert.NilError(t, err)
	before, rest, ok := strings.Cut(string(doc), start)
	assert.Assert(t, ok, "docs/operating.md has no line %q", start)
	_, after, ok := strings.Cut(rest, end)
	assert.Assert(t, ok, "docs/operating.md has no line %q", end)
	want := before + start + b.String() + end + after
	if os.Getenv("UPDATE") != "" {
		assert.NilError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, string(doc), want, "docs/operating.md's flags table is stale: run UPDATE=1 go test ./driver -run FlagsTable")
}
